// The checkpoint envelope: a sealed record opens to its payload, and every damaged variant is
// refused before any parser sees it.
#include "src/io/envelope.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"
#include "tests/support/splitmix.hpp"

using meshsim::ArchiveFormat;
using meshsim::EnvelopeHeader;
using meshsim::RecordKind;

namespace {

std::string sample() {
  std::string payload;
  for (int i = 0; i < 300; ++i) payload.push_back(static_cast<char>(i * 7 + 3));
  return meshsim::seal_envelope({RecordKind::kDTensor, ArchiveFormat::kBinary, 1, 0}, payload);
}

std::string open_error(std::string_view bytes) {
  try {
    meshsim::open_envelope(bytes);
  } catch (const meshsim::Error& e) {
    CHECK(e.type() == meshsim::PyErrorType::kRuntimeError);
    return e.what();
  }
  return "(opened)";
}

}  // namespace

TEST_CASE("envelope: a sealed payload opens with its header", "[io][envelope]") {
  const std::string file = sample();
  REQUIRE(file.size() == meshsim::kEnvelopeHeaderSize + 300);
  CHECK(file.substr(0, 8) == "MSIMCKPT");
  const meshsim::OpenedEnvelope opened = meshsim::open_envelope(file);
  CHECK(opened.header.kind == RecordKind::kDTensor);
  CHECK(opened.header.format == ArchiveFormat::kBinary);
  CHECK(opened.header.record_version == 1);
  CHECK(opened.header.payload_size == 300);
  CHECK(opened.payload == std::string_view(file).substr(meshsim::kEnvelopeHeaderSize));
  // An empty payload is a valid record too.
  const std::string empty =
      meshsim::seal_envelope({RecordKind::kRngState, ArchiveFormat::kXml, 3, 0}, "");
  CHECK(meshsim::open_envelope(empty).payload.empty());
}

TEST_CASE("envelope: every single-byte change and every truncation is refused", "[io][envelope]") {
  const std::string file = sample();
  for (size_t i = 0; i < file.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = file;
      damaged[i] = static_cast<char>(damaged[i] ^ (1 << bit));
      INFO("byte " << i << " bit " << bit);
      CHECK(open_error(damaged) != "(opened)");
    }
    std::string replaced = file;
    replaced[i] = static_cast<char>(replaced[i] + 101);
    CHECK(open_error(replaced) != "(opened)");
  }
  for (size_t n = 0; n < file.size(); ++n) {
    INFO("truncated to " << n);
    CHECK(open_error(std::string_view(file).substr(0, n)) != "(opened)");
  }
  CHECK(open_error(file + "x") ==
        "corrupt checkpoint: the header promises 300 payload bytes, the file holds 301");
  CHECK(
      open_error(file.substr(0, file.size() - 1)) ==
      "corrupt checkpoint: the header promises 300 payload bytes, the file holds 299 (truncated)");
  CHECK(open_error(file.substr(0, 10)) ==
        "truncated checkpoint: 10 bytes, shorter than the 48-byte header");
  CHECK(open_error(file.substr(0, 5)) ==
        "not a meshsim checkpoint: the file does not start with MSIMCKPT");
}

TEST_CASE("envelope: garbage, foreign files and newer versions say what they are",
          "[io][envelope]") {
  meshsim::testing::SplitMix rng{99};
  for (int i = 0; i < 2000; ++i) {
    std::string garbage(static_cast<size_t>(rng.below(200)), '\0');
    for (char& c : garbage) c = static_cast<char>(rng.next());
    if (i % 2 == 0 && garbage.size() >= 8) garbage.replace(0, 8, "MSIMCKPT");
    CHECK(open_error(garbage) != "(opened)");
  }
  CHECK(open_error(std::string(100, 'P')) ==
        "not a meshsim checkpoint: the file does not start with MSIMCKPT");
  std::string newer = sample();
  newer[8] = 2;  // envelope version 2
  CHECK(open_error(newer) ==
        "checkpoint envelope version 2 is not one this meshsim reads (it reads version 1): the "
        "file is newer than this meshsim, or damaged");
  std::string header_flip = sample();
  header_flip[20] ^= 1;  // the record version, under the header checksum
  CHECK(open_error(header_flip) == "corrupt checkpoint: the header's checksum does not match");
  std::string payload_flip = sample();
  payload_flip[100] ^= 1;
  CHECK(open_error(payload_flip) == "corrupt checkpoint: the payload's checksum does not match");
}
