// What the zip reader and writer share: the records' signatures, the extra-field ids, and the
// CRC-32 stored for each entry (IEEE 802.3, reflected), fed in pieces so that large entries are
// never copied.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace meshsim {

inline constexpr uint32_t kZipLocalHeader = 0x04034b50;
inline constexpr uint32_t kZipDirectoryEntry = 0x02014b50;
inline constexpr uint32_t kZip64EndOfDirectory = 0x06064b50;
inline constexpr uint32_t kZip64Locator = 0x07064b50;
inline constexpr uint32_t kZipEndOfDirectory = 0x06054b50;
inline constexpr uint16_t kZip64ExtraField = 0x0001;

namespace zip_crc32_detail {
constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}
inline constexpr std::array<uint32_t, 256> kTable = make_table();
}  // namespace zip_crc32_detail

class ZipCrc32 {
 public:
  void update(std::string_view bytes) {
    for (char byte : bytes)
      state_ =
          zip_crc32_detail::kTable[(state_ ^ static_cast<uint8_t>(byte)) & 0xff] ^ (state_ >> 8);
  }
  uint32_t value() const { return state_ ^ 0xffffffffu; }

 private:
  uint32_t state_ = 0xffffffffu;
};

inline uint32_t zip_crc32(std::string_view bytes) {
  ZipCrc32 crc;
  crc.update(bytes);
  return crc.value();
}

}  // namespace meshsim
