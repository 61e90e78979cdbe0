// A strict reader of the archives meshsim's records are written in with Boost.Serialization (no
// header; unsigned and signed integers and binary objects only): binary (little-endian values,
// raw bytes), text (decimal tokens, base64 blobs) and XML (one element per value, strings
// escaped, base64 blobs). Boost's own readers take a flag of 512 as 0, -1 as 2^64 - 1 and an
// '=' inside base64 as a shift of every later byte, answer damage in their own words, and parse
// XML at 25 times the file's size; this one reads exactly what the writers write, in linear time
// and no memory of its own, and names the value and the byte offset of anything else. See
// docs/mesh.md 4.4.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/io/envelope.hpp"

namespace meshsim {

class ArchiveReader {
 public:
  // `what`: the record kind, for messages ("corrupt DeviceMesh record (text archive): ...");
  // `base_offset`: where the payload starts in its file, so messages give the file's offsets.
  ArchiveReader(std::string_view payload, ArchiveFormat format, std::string_view what,
                size_t base_offset = 0);

  // An unsigned integer of `width` bytes (1, 4 or 8; binary archives store that many), refused
  // when it does not fit.
  uint64_t read_unsigned(std::string_view tag, int width);
  // A signed 64-bit integer.
  int64_t read_signed(std::string_view tag);
  // A binary object of exactly `length` bytes, into `out`: raw in binary archives, base64 (exactly
  // 4 * ceil(length / 3) digits, '=' only as the closing padding) in the others.
  void read_bytes(std::string_view tag, uint64_t length, std::string& out);
  // Binary archives only: the next `length` raw bytes, where they lie.
  std::string_view borrow_bytes(std::string_view tag, uint64_t length);
  // XML archives only: a string element of exactly `length` bytes once its entities are decoded.
  void read_xml_string(std::string_view tag, uint64_t length, std::string& out);

  // The preamble Boost writes before a class's fields (tracking level and class version, both 0
  // for meshsim's records) and, in XML, the element around them.
  void open_class(std::string_view tag);
  void close_class(std::string_view tag);

  // Nothing but whitespace may follow the record (binary archives: nothing at all).
  void finish();

  size_t remaining() const { return in_.size() - pos_; }
  size_t position() const { return pos_; }
  ArchiveFormat format() const { return format_; }

  // RuntimeError "corrupt <what> record (<format> archive): byte N: <message>".
  [[noreturn]] void fail(size_t at, std::string_view message) const;

 private:
  void skip_space();
  // Text and XML: the digits of one integer, as written.
  std::string_view token(std::string_view tag);
  // XML: `<tag>` (after any whitespace) and `</tag>` (right here).
  void open_element(std::string_view tag);
  void close_element(std::string_view tag);
  // Text and XML: base64 digits for `length` bytes, whitespace between them allowed.
  void read_base64(std::string_view tag, uint64_t length, std::string& out);

  std::string_view in_;
  size_t pos_ = 0;
  ArchiveFormat format_;
  std::string_view what_;
  size_t base_;
};

}  // namespace meshsim
