// RNG state records: a resumed run continues the same streams, files from this version keep
// loading, and damaged or foreign records are refused with a reason.
#include "src/io/rng_record.hpp"

#include <filesystem>

#include <catch2/catch.hpp>

#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
#include "tests/support/splitmix.hpp"

using meshsim::ArchiveFormat;
using meshsim::RankRng;
using meshsim::RngProfile;

namespace {

const meshsim::GpuProfile kH200 = *meshsim::find_gpu("H200");
const meshsim::RandomOp kRand{meshsim::RandomOp::Kind::kUniform, 0.0, 1.0, {}};

meshsim::Tensor draw(RankRng& rng) {
  meshsim::Tensor t({37}, meshsim::DType::kFloat32);
  rng.random_(t, kRand);
  return t;
}

std::string open_error(std::string_view bytes) {
  try {
    meshsim::open_rng_state(bytes);
  } catch (const meshsim::Error& e) {
    return e.what();
  }
  return "(opened)";
}

const std::string kData = std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/";

// The payload of an RNG state record in `format`, with `from` replaced by `to` once.
std::string rng_file_with(ArchiveFormat format, std::string_view from, std::string_view to) {
  const meshsim::RankRng::Snapshot state{
      meshsim::RngProfile::kLatest, {1234, 36}, true, {77, 128}, false};
  std::string payload = meshsim::seal_rng_state(state, format).substr(meshsim::kEnvelopeHeaderSize);
  const size_t at = payload.find(from);
  REQUIRE(at != std::string::npos);
  payload.replace(at, from.size(), to);
  return meshsim::seal_envelope({meshsim::RecordKind::kRngState, format, 1, 0}, payload);
}

}  // namespace

TEST_CASE("rng record: draw, save, draw; load, draw: the last two draws are equal",
          "[io][rng_record]") {
  for (ArchiveFormat format : {ArchiveFormat::kBinary, ArchiveFormat::kText, ArchiveFormat::kXml}) {
    for (RngProfile profile : {RngProfile::kLatest, RngProfile::kTorch26}) {
      INFO(meshsim::archive_format_name(format) << " " << meshsim::rng_profile_name(profile));
      RankRng rng(profile, kH200);
      rng.manual_seed(2024);
      draw(rng);
      const RankRng::Snapshot saved = rng.snapshot();
      const std::string file = meshsim::seal_rng_state(saved, format);
      const meshsim::Tensor after_save = draw(rng);
      RankRng resumed(profile, kH200);
      resumed.restore(meshsim::open_rng_state(file));
      CHECK(resumed.snapshot() == saved);
      CHECK(draw(resumed).same_as(after_save));
      CHECK(resumed.default_generator() == rng.default_generator());
    }
  }
}

TEST_CASE("rng record: files of record version 1 keep loading", "[io][rng_record]") {
  // Written by this version (see tests/io/data/README.md): seed 1234, offset 36; a 2.6 tracker
  // at (77, 128) with the distribute region off.
  const RankRng::Snapshot expected{RngProfile::kTorch26, {1234, 36}, true, {77, 128}, false};
  for (const char* name : {"rng_state_v1.bin", "rng_state_v1.txt", "rng_state_v1.xml"}) {
    INFO(name);
    CHECK(meshsim::load_rng_state(kData + name) == expected);
  }
}

TEST_CASE("rng record: damaged, foreign and newer records are refused with a reason",
          "[io][rng_record]") {
  const RankRng::Snapshot state{RngProfile::kLatest, {5, 8}, true, {0, 0}, true};
  for (ArchiveFormat format : {ArchiveFormat::kBinary, ArchiveFormat::kText, ArchiveFormat::kXml}) {
    const std::string file = meshsim::seal_rng_state(state, format);
    for (size_t i = 0; i < file.size(); ++i) {
      std::string damaged = file;
      damaged[i] = static_cast<char>(damaged[i] ^ 0x20);
      INFO(meshsim::archive_format_name(format) << " byte " << i);
      CHECK(open_error(damaged) != "(opened)");
      CHECK(open_error(std::string_view(file).substr(0, i)) != "(opened)");
    }
  }
  // A payload that passed the envelope but is not a valid archive (a writer's bug, or a forged
  // checksum): refused as a corrupt record, for every format.
  meshsim::testing::SplitMix rng{7};
  for (int i = 0; i < 300; ++i) {
    const auto format = static_cast<ArchiveFormat>(1 + i % 3);
    std::string payload =
        meshsim::seal_rng_state(state, format).substr(meshsim::kEnvelopeHeaderSize);
    const size_t cut = static_cast<size_t>(rng.below(payload.size() + 1));
    payload = payload.substr(0, cut);
    if (i % 2 == 0 && !payload.empty())
      payload[static_cast<size_t>(rng.below(payload.size()))] = static_cast<char>(rng.next());
    const std::string forged = meshsim::seal_envelope(
        {meshsim::RecordKind::kRngState, format, meshsim::kRngRecordVersion, 0}, payload);
    try {
      const RankRng::Snapshot got = meshsim::open_rng_state(forged);
      CHECK(got.default_generator.offset % 4 == 0);  // what parses is still a valid state
    } catch (const meshsim::Error& e) {
      CHECK_THAT(e.what(), Catch::StartsWith("corrupt RNG state record"));
    }
  }
  // libFuzzer's find: a closing tag longer than its name made Boost's XML reader read past the
  // name it compares with (AddressSanitizer: global-buffer-overflow). Raw bytes are escaped.
  std::string xml =
      meshsim::seal_rng_state(state, ArchiveFormat::kXml).substr(meshsim::kEnvelopeHeaderSize);
  xml.replace(xml.find("</default_offset>"), 17, "</default_off" + std::string(60, '\xf5'));
  CHECK_THAT(open_error(meshsim::seal_envelope(
                 {meshsim::RecordKind::kRngState, ArchiveFormat::kXml, 1, 0}, xml)),
             Catch::StartsWith("corrupt RNG state record (xml archive): byte 176: expected "
                               "</default_offset>, found '</default_off\\xf5\\xf5"));
  // A flag byte that is neither 0 nor 1 (Boost's binary reader would put it in a bool as is).
  const RankRng::Snapshot marked{RngProfile::kLatest, {1, 0x4141414141414140}, true, {0, 0}, true};
  std::string binary =
      meshsim::seal_rng_state(marked, ArchiveFormat::kBinary).substr(meshsim::kEnvelopeHeaderSize);
  const size_t offset_at = binary.find(std::string(1, '\x40') + std::string(7, '\x41'));
  REQUIRE(offset_at != std::string::npos);
  binary[offset_at + 8] = '\xff';  // has_tracker follows the default generator's offset
  CHECK(open_error(meshsim::seal_envelope(
            {meshsim::RecordKind::kRngState, ArchiveFormat::kBinary, 1, 0}, binary)) ==
        "corrupt RNG state record: has_tracker is 255, not 0 or 1");
  // ... and a known name in the wrong place.
  std::string swapped =
      meshsim::seal_rng_state(state, ArchiveFormat::kXml).substr(meshsim::kEnvelopeHeaderSize);
  swapped.replace(swapped.find("</profile>"), 10, "</default_seed>");
  CHECK(open_error(meshsim::seal_envelope(
            {meshsim::RecordKind::kRngState, ArchiveFormat::kXml, 1, 0}, swapped)) ==
        "corrupt RNG state record (xml archive): byte 115: expected </profile>, found "
        "'</default_seed>\\x0a\\x09<defaul...'");
  const std::string payload =
      meshsim::seal_rng_state(state, ArchiveFormat::kText).substr(meshsim::kEnvelopeHeaderSize);
  CHECK(open_error(meshsim::seal_envelope(
            {meshsim::RecordKind::kDTensor, ArchiveFormat::kText, 1, 0}, payload)) ==
        "expected an RNG state record, found a DTensor record");
  CHECK(open_error(meshsim::seal_envelope(
            {meshsim::RecordKind::kRngState, ArchiveFormat::kText, 2, 0}, payload)) ==
        "RNG state record version 2 is not one this meshsim reads (versions 1 to 1)");
  RankRng other(RngProfile::kTorch26, kH200);
  CHECK_THROWS_WITH(other.restore(state),
                    "the RNG state was saved with the torch latest profile "
                    "and cannot resume under torch 2.6");
}

TEST_CASE("rng record: files are saved atomically and load errors name the file",
          "[io][rng_record]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "meshsim_rng_record";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "rng.ckpt").string();
  const RankRng::Snapshot state{RngProfile::kLatest, {9, 4}, false, {0, 0}, true};
  meshsim::save_rng_state(path, state, ArchiveFormat::kXml);
  CHECK(meshsim::load_rng_state(path) == state);
  meshsim::write_file_atomically(path,
                                 "not a checkpoint at all: a config file, or a log that "
                                 "was written where the checkpoint belongs");
  CHECK_THROWS_WITH(
      meshsim::load_rng_state(path),
      "cannot load " + path + ": not a meshsim checkpoint: the file does not start with MSIMCKPT");
  std::filesystem::remove_all(dir);
}

TEST_CASE("rng record: flags and unsigned fields out of range are refused", "[io][rng_record]") {
  // The text payload is "0 0 1 1234 36 1 77 128 0": preamble, profile, seeds, offsets, flags.
  CHECK(open_error(rng_file_with(ArchiveFormat::kText, " 36 1 ", " 36 512 ")) ==
        "corrupt RNG state record (text archive): byte 62: the has_tracker '512' does not fit in "
        "8 bits");
  CHECK(open_error(rng_file_with(ArchiveFormat::kText, " 36 1 ", " 36 257 ")) ==
        "corrupt RNG state record (text archive): byte 62: the has_tracker '257' does not fit in "
        "8 bits");
  CHECK(open_error(rng_file_with(ArchiveFormat::kText, " 1234 ", " -1 ")) ==
        "corrupt RNG state record (text archive): byte 54: the default_seed '-1' is not an "
        "unsigned decimal number");
  CHECK(open_error(rng_file_with(ArchiveFormat::kXml, "<has_tracker>1<", "<has_tracker>256<")) ==
        "corrupt RNG state record (xml archive): byte 212: the has_tracker '256' does not fit "
        "in 8 bits");
  CHECK_THAT(open_error(rng_file_with(ArchiveFormat::kXml, "<profile>1<", "<profile>+1<")),
             Catch::Contains("the profile '+1' is not an unsigned decimal number"));
  CHECK_THAT(open_error(rng_file_with(ArchiveFormat::kText, " 1234 ", " 18446744073709551616 ")),
             Catch::Contains("the default_seed '18446744073709551616' does not fit in 64 bits"));
}
