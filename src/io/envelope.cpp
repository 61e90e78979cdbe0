#include "src/io/envelope.hpp"

#include <cstring>

#include <fmt/format.h>
#include <xxhash.h>

#include "src/enum_names.hpp"
#include "src/error.hpp"
#include "src/io/xxh3_stream.hpp"

namespace meshsim {

namespace {

constexpr char kMagic[8] = {'M', 'S', 'I', 'M', 'C', 'K', 'P', 'T'};
constexpr size_t kHashedHeader = kEnvelopeHeaderSize - 8;

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(std::string_view bytes, size_t at, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i)
    v = (v << 8) | static_cast<uint8_t>(bytes[at + static_cast<size_t>(i)]);
  return v;
}

uint64_t checksum(std::string_view bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

bool known_kind(uint32_t k) {
  return k >= 1 && k <= 5;
}
bool known_format(uint32_t f) {
  return f >= 1 && f <= 3;
}

}  // namespace

constexpr EnumName<RecordKind> kRecordKindNames[] = {
    {RecordKind::kDeviceMesh, "DeviceMesh"},
    {RecordKind::kDTensor, "DTensor"},
    {RecordKind::kRngState, "RNG state"},
    {RecordKind::kCheckpointMetadata, "checkpoint metadata"},
    {RecordKind::kShard, "shard"},
};

std::string_view record_kind_name(RecordKind kind) {
  return name_in(kRecordKindNames, kind);
}

std::string_view archive_format_name(ArchiveFormat format) {
  return name_in(kArchiveFormatNames, format);
}

std::string seal_envelope(const EnvelopeHeader& header, std::string_view payload) {
  std::string out = envelope_header(header, std::span<const std::string_view>(&payload, 1));
  out.reserve(kEnvelopeHeaderSize + payload.size());
  out.append(payload);
  return out;
}

std::string envelope_header(EnvelopeHeader header, std::span<const std::string_view> payload) {
  Xxh3Stream hash;
  uint64_t size = 0;
  for (const std::string_view piece : payload) {
    hash.add(piece.data(), piece.size());
    size += piece.size();
  }
  const uint64_t payload_hash = hash.digest();
  std::string out(kMagic, sizeof kMagic);
  put_u32(out, kEnvelopeVersion);
  put_u32(out, static_cast<uint32_t>(header.kind));
  put_u32(out, static_cast<uint32_t>(header.format));
  put_u32(out, header.record_version);
  put_u64(out, size);
  put_u64(out, payload_hash);
  put_u64(out, checksum(out));
  return out;
}

OpenedEnvelope open_envelope(std::string_view bytes) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw runtime_error("not a meshsim checkpoint: the file does not start with MSIMCKPT");
  if (bytes.size() < kEnvelopeHeaderSize) {
    throw runtime_error(
        fmt::format("truncated checkpoint: {} bytes, shorter than the {}-byte header", bytes.size(),
                    kEnvelopeHeaderSize));
  }
  // The version first: a later envelope may lay its header out differently.
  const auto envelope_version = static_cast<uint32_t>(get_le(bytes, 8, 4));
  if (envelope_version != kEnvelopeVersion) {
    throw runtime_error(fmt::format(
        "checkpoint envelope version {} is not one this meshsim reads (it reads version {}): the "
        "file is newer than this meshsim, or damaged",
        envelope_version, kEnvelopeVersion));
  }
  if (checksum(bytes.substr(0, kHashedHeader)) != get_le(bytes, kHashedHeader, 8)) {
    throw runtime_error("corrupt checkpoint: the header's checksum does not match");
  }
  const auto kind = static_cast<uint32_t>(get_le(bytes, 12, 4));
  const auto format = static_cast<uint32_t>(get_le(bytes, 16, 4));
  if (!known_kind(kind))
    throw runtime_error(fmt::format("unknown checkpoint record kind {}", kind));
  if (!known_format(format))
    throw runtime_error(fmt::format("unknown checkpoint archive format {}", format));
  OpenedEnvelope out;
  out.header.kind = static_cast<RecordKind>(kind);
  out.header.format = static_cast<ArchiveFormat>(format);
  out.header.record_version = static_cast<uint32_t>(get_le(bytes, 20, 4));
  out.header.payload_size = get_le(bytes, 24, 8);
  const uint64_t present = bytes.size() - kEnvelopeHeaderSize;
  if (out.header.payload_size != present) {
    throw runtime_error(fmt::format(
        "corrupt checkpoint: the header promises {} payload bytes, the file holds {}{}",
        out.header.payload_size, present, present < out.header.payload_size ? " (truncated)" : ""));
  }
  out.payload = bytes.substr(kEnvelopeHeaderSize);
  if (checksum(out.payload) != get_le(bytes, 32, 8))
    throw runtime_error("corrupt checkpoint: the payload's checksum does not match");
  return out;
}

}  // namespace meshsim
