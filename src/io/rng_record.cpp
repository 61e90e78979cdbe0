#include "src/io/rng_record.hpp"

#include <sstream>

#include <fmt/format.h>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/archive/text_oarchive.hpp>
#include <boost/archive/xml_oarchive.hpp>
#include <boost/serialization/nvp.hpp>

#include "src/error.hpp"
#include "src/io/archive_reader.hpp"
#include "src/io/atomic_file.hpp"

namespace meshsim {

namespace {

// The record's fields, as plain integers: nothing here is sized by its input.
struct RngFields {
  uint32_t profile = 0;
  uint64_t default_seed = 0, default_offset = 0;
  // Flags as bytes (what the archives hold), checked to be 0 or 1 before they become bools.
  uint8_t has_tracker = 0;
  uint64_t tracker_seed = 0, tracker_offset = 0;
  uint8_t distribute_region = 1;

  template <typename Archive>
  void serialize(Archive& ar, unsigned /*version*/) {
    ar& boost::serialization::make_nvp("profile", profile);
    ar& boost::serialization::make_nvp("default_seed", default_seed);
    ar& boost::serialization::make_nvp("default_offset", default_offset);
    ar& boost::serialization::make_nvp("has_tracker", has_tracker);
    ar& boost::serialization::make_nvp("tracker_seed", tracker_seed);
    ar& boost::serialization::make_nvp("tracker_offset", tracker_offset);
    ar& boost::serialization::make_nvp("distribute_region", distribute_region);
  }
};

// A record file holds one state of at most a few hundred bytes.
constexpr uint64_t kMaxFileBytes = 1 << 16;

// Archives without Boost's own header: the envelope says what the payload is.
constexpr unsigned kArchiveFlags = boost::archive::no_header;

template <typename OArchive>
std::string write_archive(RngFields fields) {
  std::ostringstream out;
  {
    OArchive ar(out, kArchiveFlags);
    ar << boost::serialization::make_nvp("rng_state", fields);
  }
  return std::move(out).str();
}

// The fields as the writer wrote them, read strictly (every value in range, nothing after).
RngFields read_fields(std::string_view payload, ArchiveFormat format) {
  ArchiveReader in(payload, format, "RNG state", kEnvelopeHeaderSize);
  RngFields f;
  in.open_class("rng_state");
  f.profile = static_cast<uint32_t>(in.read_unsigned("profile", 4));
  f.default_seed = in.read_unsigned("default_seed", 8);
  f.default_offset = in.read_unsigned("default_offset", 8);
  f.has_tracker = static_cast<uint8_t>(in.read_unsigned("has_tracker", 1));
  f.tracker_seed = in.read_unsigned("tracker_seed", 8);
  f.tracker_offset = in.read_unsigned("tracker_offset", 8);
  f.distribute_region = static_cast<uint8_t>(in.read_unsigned("distribute_region", 1));
  in.close_class("rng_state");
  in.finish();
  return f;
}

bool checked_flag(uint8_t value, std::string_view name) {
  if (value > 1) {
    throw runtime_error(
        fmt::format("corrupt RNG state record: {} is {}, not 0 or 1", name, unsigned{value}));
  }
  return value == 1;
}

PhiloxState checked_state(uint64_t seed, uint64_t offset, std::string_view which) {
  if (offset % 4 != 0) {
    throw runtime_error(
        fmt::format("corrupt RNG state record: the {} generator's offset {} is not a multiple of 4",
                    which, offset));
  }
  return PhiloxState{seed, offset};
}

}  // namespace

std::string seal_rng_state(const RankRng::Snapshot& state, ArchiveFormat format) {
  RngFields f;
  f.profile = state.profile == RngProfile::kLatest ? 1 : 2;
  f.default_seed = state.default_generator.seed;
  f.default_offset = state.default_generator.offset;
  f.has_tracker = state.has_tracker;
  f.tracker_seed = state.tracker_state.seed;
  f.tracker_offset = state.tracker_state.offset;
  f.distribute_region = state.distribute_region;
  std::string payload;
  switch (format) {
    case ArchiveFormat::kBinary:
      payload = write_archive<boost::archive::binary_oarchive>(f);
      break;
    case ArchiveFormat::kText:
      payload = write_archive<boost::archive::text_oarchive>(f);
      break;
    case ArchiveFormat::kXml:
      payload = write_archive<boost::archive::xml_oarchive>(f);
      break;
  }
  return seal_envelope({RecordKind::kRngState, format, kRngRecordVersion, payload.size()}, payload);
}

RankRng::Snapshot open_rng_state(std::string_view file) {
  const OpenedEnvelope opened = open_envelope(file);
  if (opened.header.kind != RecordKind::kRngState) {
    throw runtime_error(fmt::format("expected an RNG state record, found a {} record",
                                    record_kind_name(opened.header.kind)));
  }
  if (opened.header.record_version == 0 || opened.header.record_version > kRngRecordVersion) {
    throw runtime_error(
        fmt::format("RNG state record version {} is not one this meshsim reads (versions 1 to {})",
                    opened.header.record_version, kRngRecordVersion));
  }
  const RngFields f = read_fields(opened.payload, opened.header.format);
  if (f.profile != 1 && f.profile != 2)
    throw runtime_error(fmt::format("corrupt RNG state record: unknown profile {}", f.profile));
  RankRng::Snapshot s;
  s.profile = f.profile == 1 ? RngProfile::kLatest : RngProfile::kTorch26;
  s.default_generator = checked_state(f.default_seed, f.default_offset, "default");
  s.has_tracker = checked_flag(f.has_tracker, "has_tracker");
  s.tracker_state = checked_state(f.tracker_seed, f.tracker_offset, "tracker's");
  s.distribute_region = checked_flag(f.distribute_region, "distribute_region");
  return s;
}

void save_rng_state(const std::string& path, const RankRng::Snapshot& state, ArchiveFormat format) {
  write_file_atomically(path, seal_rng_state(state, format));
}

RankRng::Snapshot load_rng_state(const std::string& path) {
  const std::string bytes = read_file_bounded(path, kMaxFileBytes);
  try {
    return open_rng_state(bytes);
  } catch (const Error& e) {
    throw runtime_error(fmt::format("cannot load {}: {}", path, e.what()));
  }
}

}  // namespace meshsim
