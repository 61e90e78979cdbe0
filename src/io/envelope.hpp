// The envelope every checkpoint file is wrapped in: a fixed 48-byte header saying what the
// payload is, how long it is and its checksum, so that a reader can refuse a damaged or foreign
// file before any archive parser (which trusts its input) reads a byte of it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "src/enum_names.hpp"

namespace meshsim {

// What the payload holds. Numbers are part of the file format: never reuse one.
enum class RecordKind : uint32_t {
  kDeviceMesh = 1,
  kDTensor = 2,
  kRngState = 3,
  kCheckpointMetadata = 4,
  kShard = 5,
};
// How the payload was written (Boost.Serialization archives).
enum class ArchiveFormat : uint32_t { kBinary = 1, kText = 2, kXml = 3 };

std::string_view record_kind_name(RecordKind kind);
std::string_view archive_format_name(ArchiveFormat format);
// Every value with its name, in the order lists of them are printed.
inline constexpr EnumName<ArchiveFormat> kArchiveFormatNames[] = {
    {ArchiveFormat::kBinary, "binary"},
    {ArchiveFormat::kText, "text"},
    {ArchiveFormat::kXml, "xml"},
};

struct EnvelopeHeader {
  RecordKind kind = RecordKind::kDeviceMesh;
  ArchiveFormat format = ArchiveFormat::kBinary;
  uint32_t record_version = 0;  // the layout of this kind of record, for loading older files
  uint64_t payload_size = 0;
};

// Layout, little endian: magic "MSIMCKPT", envelope version (u32), kind (u32), format (u32),
// record version (u32), payload size (u64), XXH3-64 of the payload (u64), XXH3-64 of the 40
// bytes before it (u64); then the payload.
inline constexpr size_t kEnvelopeHeaderSize = 48;
inline constexpr uint32_t kEnvelopeVersion = 1;

// The whole file: header then payload.
std::string seal_envelope(const EnvelopeHeader& header, std::string_view payload);
// The header alone, for a payload given as pieces in order (its payload_size is their total).
std::string envelope_header(EnvelopeHeader header, std::span<const std::string_view> payload);

struct OpenedEnvelope {
  EnvelopeHeader header;
  std::string_view payload;  // into the bytes given to open_envelope
};

// Checks everything the header promises before returning the payload: the magic, the envelope
// version, the header's own checksum, a known kind and format, that the payload is exactly
// payload_size bytes (no truncation, nothing appended) and its checksum. Throws meshsim::Error
// (RuntimeError) saying which check failed; never reads past `bytes`.
OpenedEnvelope open_envelope(std::string_view bytes);

}  // namespace meshsim
