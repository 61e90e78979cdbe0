#include "src/io/rng_record.hpp"

#include <sstream>

#include <fmt/format.h>
#include <boost/archive/archive_exception.hpp>
#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/archive/text_iarchive.hpp>
#include <boost/archive/text_oarchive.hpp>
#include <boost/archive/xml_iarchive.hpp>
#include <boost/archive/xml_oarchive.hpp>
#include <boost/serialization/nvp.hpp>

#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/xml_guard.hpp"

namespace meshsim {

namespace {

// The record's fields, as plain integers: nothing here is sized by its input.
struct RngFields {
  uint32_t profile = 0;
  uint64_t default_seed = 0, default_offset = 0;
  // Flags as bytes: Boost's binary reader copies a bool's byte as is, and a byte that is neither
  // 0 nor 1 in a bool is undefined behaviour.
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

// Archives without Boost's own header: the envelope says what the payload is, and an XML
// reader with a header reads its closing tags in its destructor, which ends the process when a
// damaged document makes that throw.
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

template <typename IArchive>
RngFields read_archive(std::string_view payload) {
  std::istringstream in{std::string(payload)};
  RngFields fields;
  IArchive ar(in, kArchiveFlags);
  ar >> boost::serialization::make_nvp("rng_state", fields);
  return fields;
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
  RngFields f;
  // Boost trusts its input; the envelope vouched for the bytes, but not for their writer.
  try {
    switch (opened.header.format) {
      case ArchiveFormat::kBinary:
        f = read_archive<boost::archive::binary_iarchive>(opened.payload);
        break;
      case ArchiveFormat::kText:
        f = read_archive<boost::archive::text_iarchive>(opened.payload);
        break;
      case ArchiveFormat::kXml:
        check_xml_tags(opened.payload, write_archive<boost::archive::xml_oarchive>(RngFields{}),
                       "RNG state");
        f = read_archive<boost::archive::xml_iarchive>(opened.payload);
        break;
    }
  } catch (const Error&) {
    throw;
  } catch (const boost::archive::archive_exception& e) {
    throw runtime_error(fmt::format("corrupt RNG state record ({} archive): {}",
                                    archive_format_name(opened.header.format), e.what()));
  } catch (const std::exception& e) {
    throw runtime_error(fmt::format("corrupt RNG state record ({} archive): {}",
                                    archive_format_name(opened.header.format), e.what()));
  }
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
