// Record trees in archives: random trees round-trip in every format, and payloads a writer could
// not have produced (bogus counts, deep nesting, trailing bytes, cut base64) are refused before
// anything of their claimed size is allocated; so are the crafted ones Boost's own readers took
// ('=' inside base64, strings longer than their length field, entities the writer never writes),
// each naming the field and the byte.
#include "src/io/record_archive.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"
#include "tests/support/splitmix.hpp"

using meshsim::ArchiveFormat;
using meshsim::RecordObject;
using meshsim::RecordValue;

namespace {

// Names that XML must escape or could trim, and bytes of every value.
std::string random_text(meshsim::testing::SplitMix& rng, bool any_byte) {
  static const std::string kAwkward[] = {"", " lead", "trail ", "a<b>&\"c'", "dp_shard", "tp"};
  if (!any_byte) return kAwkward[rng.below(6)] + std::to_string(rng.below(100));
  std::string out(static_cast<size_t>(rng.below(300)), '\0');
  for (char& c : out) c = static_cast<char>(rng.below(256));
  return out;
}

RecordObject random_tree(meshsim::testing::SplitMix& rng, int depth) {
  RecordObject out{random_text(rng, false), {}};
  const int64_t fields = rng.below(5);
  for (int64_t f = 0; f < fields; ++f) {
    RecordValue v;
    switch (rng.below(depth > 3 ? 6 : 8)) {
      case 0:
        v = RecordValue::none();
        break;
      case 1:
        v = RecordValue::of(static_cast<int64_t>(rng.next()));
        break;
      case 2:
        v = RecordValue::of(random_text(rng, false));
        break;
      case 3: {
        std::vector<int64_t> ints(static_cast<size_t>(rng.below(20)));
        for (int64_t& i : ints) i = static_cast<int64_t>(rng.next()) >> rng.below(64);
        v = RecordValue::of(std::move(ints));
        break;
      }
      case 4:
        v = RecordValue::of(std::vector<std::string>{random_text(rng, false), "x"});
        break;
      case 5:
        v = RecordValue::bytes(random_text(rng, true));
        break;
      case 6:
        v = RecordValue::of(random_tree(rng, depth + 1));
        break;
      default: {
        std::vector<RecordObject> list(static_cast<size_t>(rng.below(3)));
        for (RecordObject& o : list) o = random_tree(rng, depth + 1);
        v = RecordValue::of(std::move(list));
      }
    }
    out.set(random_text(rng, false), std::move(v));
  }
  return out;
}

std::string read_error(std::string_view payload, ArchiveFormat format) {
  try {
    meshsim::read_record_payload(payload, format, "test");
  } catch (const meshsim::Error& e) {
    return e.what();
  }
  return "(read)";
}

// Binary archives of primitives are plain little-endian fields: enough to write payloads no
// writer would produce.
struct BinaryPayload {
  std::string bytes;
  BinaryPayload& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  BinaryPayload& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  BinaryPayload& text(std::string_view s) {
    u64(s.size());
    bytes += s;
    return *this;
  }
};

}  // namespace

TEST_CASE("record archive: random trees round-trip in every format", "[io][record_archive]") {
  meshsim::testing::SplitMix rng{20261130};
  for (int i = 0; i < 300; ++i) {
    const RecordObject tree = random_tree(rng, 1);
    for (const auto& [format, format_name] : meshsim::kArchiveFormatNames) {
      INFO("tree " << i << ", " << meshsim::archive_format_name(format));
      const std::string payload = meshsim::write_record_payload(tree, format);
      CHECK(meshsim::read_record_payload(payload, format, "test") == tree);
    }
  }
}

// The densest records a writer makes: objects of empty-named fields that hold nothing, lists of
// empty strings, of zeros and of empty objects. Whatever a valid record costs in memory per byte,
// the reader's budget allows it at any size (it once allowed a fixed multiple, which a whole-world
// checkpoint's metadata of 16,384 ranks exceeded).
TEST_CASE("record archive: the densest valid records read back at any size",
          "[io][record_archive]") {
  for (const int64_t n : {1, 1000, 200000}) {
    RecordObject tree{"", {}};
    for (int64_t i = 0; i < n; ++i) tree.fields.emplace_back("", RecordValue::none());
    RecordObject lists{"", {}};
    lists.set("s", RecordValue::of(std::vector<std::string>(static_cast<size_t>(n))));
    lists.set("i", RecordValue::of(std::vector<int64_t>(static_cast<size_t>(n))));
    std::vector<RecordObject> empties(static_cast<size_t>(n), RecordObject{"", {}});
    lists.set("o", RecordValue::of(std::move(empties)));
    for (const auto& [format, format_name] : meshsim::kArchiveFormatNames) {
      INFO(n << " elements, " << format_name);
      for (const RecordObject* t : {&tree, &lists}) {
        const std::string payload = meshsim::write_record_payload(*t, format);
        CHECK(meshsim::read_record_payload(payload, format, "test") == *t);
      }
    }
  }
}

TEST_CASE("record archive: XML keeps names readable", "[io][record_archive]") {
  const RecordObject tree = RecordObject{"DeviceMesh", {}}.set(
      "mesh_dim_names", RecordValue::of(std::vector<std::string>{"dp", "tp"}));
  const std::string xml = meshsim::write_record_payload(tree, ArchiveFormat::kXml);
  CHECK(xml.find("<type>DeviceMesh</type>") != std::string::npos);
  CHECK(xml.find("<s>tp</s>") != std::string::npos);
}

TEST_CASE("record archive: a bogus count is refused before it is allocated",
          "[io][record_archive]") {
  // The type name claims 2^40 bytes.
  BinaryPayload huge_name;
  huge_name.u64(uint64_t{1} << 40).bytes += "abc";
  CHECK(read_error(huge_name.bytes, ArchiveFormat::kBinary) ==
        "corrupt test record (binary archive): byte 0: a count of 1099511627776 with 3 payload "
        "bytes left");
  // A list of int claims 2^61 elements (2^64 bytes: the product must not wrap either).
  BinaryPayload huge_list;
  huge_list.text("T").u64(1).text("k").u32(3).u64(uint64_t{1} << 61);
  CHECK_THAT(read_error(huge_list.bytes, ArchiveFormat::kBinary),
             Catch::Contains("a count of 2305843009213693952"));
  // The same in text: "len" of a string past the payload.
  CHECK_THAT(read_error("99999999999 AAAA", ArchiveFormat::kText),
             Catch::Contains("a count of 99999999999"));
}

TEST_CASE("record archive: nesting deeper than the limit is refused", "[io][record_archive]") {
  RecordObject tree{"leaf", {}};
  for (size_t i = 0; i < meshsim::kMaxRecordDepth + 3; ++i) {
    tree = RecordObject{"node", {}}.set("child", RecordValue::of(std::move(tree)));
  }
  for (const auto& [format, format_name] : meshsim::kArchiveFormatNames) {
    INFO(meshsim::archive_format_name(format));
    CHECK_THAT(read_error(meshsim::write_record_payload(tree, format), format),
               Catch::Contains("objects nested more than 12 deep"));
  }
}

TEST_CASE("record archive: unknown kinds, trailing bytes and cut data are refused",
          "[io][record_archive]") {
  BinaryPayload unknown_kind;
  unknown_kind.text("T").u64(1).text("k").u32(9);
  CHECK_THAT(read_error(unknown_kind.bytes, ArchiveFormat::kBinary),
             Catch::Contains("unknown value kind 9"));

  const RecordObject tree =
      RecordObject{"T", {}}.set("b", RecordValue::bytes(std::string(100, 'x')));
  for (const auto& [format, format_name] : meshsim::kArchiveFormatNames) {
    INFO(meshsim::archive_format_name(format));
    const std::string payload = meshsim::write_record_payload(tree, format);
    CHECK_THAT(read_error(payload + "zz", format), Catch::Contains("corrupt test record"));
    // Every truncation fails with an error (never a crash, never a silent success).
    for (size_t cut = 0; cut < payload.size(); ++cut) {
      const std::string_view head(payload.data(), cut);
      const std::string error = read_error(head, format);
      INFO("cut at " << cut << ": " << error);
      // Trailing whitespace of a text archive is not part of the record.
      if (payload.find_first_not_of(" \n", cut) == std::string::npos) continue;
      CHECK(error != "(read)");
    }
  }
}

TEST_CASE("record archive: XML whose tags differ from the writer's is refused",
          "[io][record_archive]") {
  const RecordObject tree = RecordObject{"T", {}}.set("n", RecordValue::of(int64_t{7}));
  std::string xml = meshsim::write_record_payload(tree, ArchiveFormat::kXml);
  const size_t at = xml.find("<int>");
  REQUIRE(at != std::string::npos);
  xml.replace(at, 5, "<num>");
  xml.replace(xml.find("</int>"), 6, "</num>");
  CHECK(
      read_error(xml, ArchiveFormat::kXml) ==
      "corrupt test record (xml archive): byte 88: expected <int>, found '<num>7</num>\\x0a\\x0a'");
}

TEST_CASE("record archive: base64 is exactly as long as its length and padded at the end only",
          "[io][record_archive]") {
  const RecordObject tree = RecordObject{"T", {}}.set("b", RecordValue::bytes("abcdefgh"));
  const std::string text = meshsim::write_record_payload(tree, ArchiveFormat::kText);
  // "abcdefgh" is YWJjZGVmZ2g=; an '=' inside would shift every later byte.
  std::string inner = text;
  inner.replace(inner.find("YWJjZGVmZ2g="), 12, "YWJj=GVmZ2g=");
  CHECK_THAT(read_error(inner, ArchiveFormat::kText),
             Catch::Contains("the bytes (8 bytes) has '=' where base64 digit 5 of 12 must be"));
  std::string longer = text;
  longer.replace(longer.find("YWJjZGVmZ2g="), 12, "YWJjZGVmZ2hp");
  CHECK_THAT(read_error(longer, ArchiveFormat::kText),
             Catch::Contains("has 'p' where base64 digit 12 of 12 must be the padding '='"));
  std::string dirty_bits = text;
  dirty_bits.replace(dirty_bits.find("YWJjZGVmZ2g="), 12, "YWJjZGVmZ2h=");
  CHECK_THAT(read_error(dirty_bits, ArchiveFormat::kText),
             Catch::Contains("ends in base64 bits that are not zero"));
  // More digits than the length field says: they are not the next field (here, none).
  std::string trailing = text;
  trailing.replace(trailing.find("YWJjZGVmZ2g="), 12, "YWJjZGVmZ2g=QUJD");
  CHECK_THAT(read_error(trailing, ArchiveFormat::kText),
             Catch::Contains("5 bytes follow the record"));
}

TEST_CASE("record archive: XML strings match their length field and known entities",
          "[io][record_archive]") {
  const RecordObject tree = RecordObject{"T", {}}.set("s", RecordValue::of(std::string("a<b&c")));
  const std::string xml = meshsim::write_record_payload(tree, ArchiveFormat::kXml);
  REQUIRE(xml.find("<str>a&lt;b&amp;c</str>") != std::string::npos);
  std::string longer = xml;
  longer.replace(longer.find("<str>a&lt;b&amp;c</str>"), 23, "<str>a&lt;b&amp;cd</str>");
  CHECK_THAT(read_error(longer, ArchiveFormat::kXml),
             Catch::Contains("the str is longer than its length field's 5 bytes"));
  std::string shorter = xml;
  shorter.replace(shorter.find("<str>a&lt;b&amp;c</str>"), 23, "<str>a&lt;b</str>");
  CHECK_THAT(read_error(shorter, ArchiveFormat::kXml),
             Catch::Contains("the str holds 3 bytes where its length field says 5"));
  std::string entity = xml;
  entity.replace(entity.find("&amp;"), 5, "&#38;");
  CHECK_THAT(read_error(entity, ArchiveFormat::kXml),
             Catch::Contains("the str holds '&#38;', not one of the entities"));
}

TEST_CASE("record archive: every byte and character round-trips in every format",
          "[io][record_archive]") {
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes.push_back(static_cast<char>(i));
  for (size_t length = 0; length <= 200; length += 1 + length / 8) {
    const std::string bytes = all_bytes.substr(0, std::min<size_t>(length, 256));
    const RecordObject tree =
        RecordObject{"T<&>\"'", {}}
            .set("b", RecordValue::bytes(bytes))
            .set("s", RecordValue::of(std::string("x<y>&\"z'") + std::string(length % 7, 'q')))
            .set("i", RecordValue::of(std::vector<int64_t>{INT64_MIN, -1, 0, INT64_MAX}));
    for (const auto& [format, name] : meshsim::kArchiveFormatNames) {
      INFO(name << " with " << length << " bytes");
      const RecordObject back =
          meshsim::read_record_payload(meshsim::write_record_payload(tree, format), format, "test");
      CHECK(back == tree);
    }
  }
}
