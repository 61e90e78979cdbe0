#include "src/io/archive_reader.hpp"

#include <fmt/format.h>

#include <cstring>
#include <limits>

#include "src/error.hpp"
#include "src/printable.hpp"

namespace meshsim {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// The value of one base64 digit, or -1.
int base64_digit(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// A piece of the file quoted for a message.
std::string quoted(std::string_view text) {
  return "'" + printable(text, 24) + "'";
}

}  // namespace

ArchiveReader::ArchiveReader(std::string_view payload, ArchiveFormat format, std::string_view what,
                             size_t base_offset)
    : in_(payload), format_(format), what_(what), base_(base_offset) {}

void ArchiveReader::fail(size_t at, std::string_view message) const {
  throw runtime_error(fmt::format("corrupt {} record ({} archive): byte {}: {}", what_,
                                  archive_format_name(format_), base_ + at, message));
}

void ArchiveReader::skip_space() {
  while (pos_ < in_.size() && is_space(in_[pos_])) ++pos_;
}

std::string_view ArchiveReader::token(std::string_view tag) {
  skip_space();
  const size_t start = pos_;
  while (pos_ < in_.size() && !is_space(in_[pos_]) && in_[pos_] != '<') ++pos_;
  if (start == pos_) {
    fail(start, pos_ == in_.size() ? fmt::format("the record ends before its {}", tag)
                                   : fmt::format("expected the {} (a number), found {}", tag,
                                                 quoted(in_.substr(pos_))));
  }
  return in_.substr(start, pos_ - start);
}

void ArchiveReader::open_element(std::string_view tag) {
  skip_space();
  const size_t start = pos_;
  if (in_.substr(pos_, 1) != "<" || in_.substr(pos_ + 1, tag.size()) != tag ||
      in_.substr(pos_ + 1 + tag.size(), 1) != ">") {
    fail(start, fmt::format("expected <{}>, found {}", tag, quoted(in_.substr(pos_))));
  }
  pos_ += tag.size() + 2;
}

void ArchiveReader::close_element(std::string_view tag) {
  if (in_.substr(pos_, 2) != "</" || in_.substr(pos_ + 2, tag.size()) != tag ||
      in_.substr(pos_ + 2 + tag.size(), 1) != ">") {
    fail(pos_, fmt::format("expected </{}>, found {}", tag, quoted(in_.substr(pos_))));
  }
  pos_ += tag.size() + 3;
}

uint64_t ArchiveReader::read_unsigned(std::string_view tag, int width) {
  const uint64_t max =
      width == 8 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << (8 * width)) - 1;
  if (format_ == ArchiveFormat::kBinary) {
    if (remaining() < static_cast<size_t>(width)) {
      fail(pos_, fmt::format("the record ends inside its {}", tag));
    }
    uint64_t value = 0;
    for (int i = width; i-- > 0;) {
      value = value << 8 | static_cast<unsigned char>(in_[pos_ + static_cast<size_t>(i)]);
    }
    pos_ += static_cast<size_t>(width);
    return value;
  }
  if (format_ == ArchiveFormat::kXml) open_element(tag);
  const std::string_view digits = token(tag);
  const size_t at = pos_ - digits.size();
  // Exactly what the writer writes: decimal digits, no sign, no leading zero.
  if (digits.find_first_not_of("0123456789") != std::string_view::npos ||
      (digits.size() > 1 && digits[0] == '0')) {
    fail(at, fmt::format("the {} {} is not an unsigned decimal number", tag, quoted(digits)));
  }
  uint64_t value = 0;
  for (char c : digits) {
    const auto digit = static_cast<uint64_t>(c - '0');
    if (value > (max - digit) / 10) {
      fail(at, fmt::format("the {} {} does not fit in {} bits", tag, quoted(digits), 8 * width));
    }
    value = value * 10 + digit;
  }
  if (format_ == ArchiveFormat::kXml) close_element(tag);
  return value;
}

int64_t ArchiveReader::read_signed(std::string_view tag) {
  if (format_ == ArchiveFormat::kBinary) {
    const uint64_t bits = read_unsigned(tag, 8);
    int64_t value = 0;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  if (format_ == ArchiveFormat::kXml) open_element(tag);
  const std::string_view text = token(tag);
  const size_t at = pos_ - text.size();
  const bool negative = text[0] == '-';
  const std::string_view digits = text.substr(negative ? 1 : 0);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos ||
      (digits.size() > 1 && digits[0] == '0') || (negative && digits == "0")) {
    fail(at, fmt::format("the {} {} is not a decimal number", tag, quoted(text)));
  }
  // Accumulated as a magnitude: -2^63 has no positive counterpart.
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  uint64_t magnitude = 0;
  for (char c : digits) {
    const auto digit = static_cast<uint64_t>(c - '0');
    if (magnitude > (limit - digit) / 10) {
      fail(at, fmt::format("the {} {} does not fit in 64 bits", tag, quoted(text)));
    }
    magnitude = magnitude * 10 + digit;
  }
  if (format_ == ArchiveFormat::kXml) close_element(tag);
  return negative ? static_cast<int64_t>(~magnitude + 1) : static_cast<int64_t>(magnitude);
}

void ArchiveReader::read_base64(std::string_view tag, uint64_t length, std::string& out) {
  const uint64_t digits = 4 * (length / 3 + (length % 3 != 0 ? 1 : 0));
  const uint64_t padding = (3 - length % 3) % 3;
  const size_t start = out.size();
  out.resize(start + length);
  char* next = out.data() + start;
  uint32_t group = 0;
  uint64_t seen = 0;
  size_t last_digit = pos_;  // where the last digit that carries bits was
  skip_space();
  while (seen < digits) {
    if (pos_ == in_.size()) {
      fail(pos_, fmt::format("the {} ends after {} of its {} base64 digits", tag, seen, digits));
    }
    const char c = in_[pos_];
    if (is_space(c)) {
      ++pos_;
      continue;
    }
    const bool pad_place = seen >= digits - padding;
    const int value = base64_digit(c);
    if (pad_place ? c != '=' : value < 0) {
      fail(pos_, fmt::format("the {} ({} bytes) has {} where base64 digit {} of {} {}", tag, length,
                             quoted(std::string_view(&c, 1)), seen + 1, digits,
                             pad_place ? "must be the padding '='" : "must be"));
    }
    group = group << 6 | static_cast<uint32_t>(pad_place ? 0 : value);
    if (!pad_place) last_digit = pos_;
    ++seen;
    ++pos_;
    if (seen % 4 == 0) {
      const char bytes[3] = {static_cast<char>(group >> 16), static_cast<char>(group >> 8),
                             static_cast<char>(group)};
      const size_t keep = seen == digits ? 3 - padding : 3;
      // The bits the padding leaves over are zero in what the writer writes.
      if (keep < 3 && (group & ((1u << (8 * (3 - keep))) - 1)) != 0) {
        fail(last_digit, fmt::format("the {} ends in base64 bits that are not zero", tag));
      }
      std::memcpy(next, bytes, keep);
      next += keep;
      group = 0;
    }
  }
}

void ArchiveReader::read_bytes(std::string_view tag, uint64_t length, std::string& out) {
  switch (format_) {
    case ArchiveFormat::kBinary:
      out.append(borrow_bytes(tag, length));
      return;
    case ArchiveFormat::kText:
      read_base64(tag, length, out);
      return;
    case ArchiveFormat::kXml:
      open_element(tag);
      read_base64(tag, length, out);
      skip_space();
      close_element(tag);
      return;
  }
}

std::string_view ArchiveReader::borrow_bytes(std::string_view tag, uint64_t length) {
  MESHSIM_ASSERT(format_ == ArchiveFormat::kBinary, "raw bytes are in binary archives only");
  if (length > remaining()) {
    fail(pos_, fmt::format("the {} of {} bytes is cut short ({} left)", tag, length, remaining()));
  }
  const std::string_view out = in_.substr(pos_, length);
  pos_ += length;
  return out;
}

void ArchiveReader::read_xml_string(std::string_view tag, uint64_t length, std::string& out) {
  MESHSIM_ASSERT(format_ == ArchiveFormat::kXml, "escaped strings are in XML archives only");
  open_element(tag);
  const size_t start = pos_;
  const size_t end = in_.find('<', pos_);
  if (end == std::string_view::npos) fail(pos_, fmt::format("the {} is never closed", tag));
  // Boost escapes these five; nothing else is an entity in what it writes.
  static constexpr std::pair<std::string_view, char> kEntities[] = {
      {"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
  out.clear();
  while (pos_ < end) {
    if (out.size() == length) {
      fail(pos_, fmt::format("the {} is longer than its length field's {} bytes", tag, length));
    }
    if (in_[pos_] != '&') {
      out.push_back(in_[pos_++]);
      continue;
    }
    bool known = false;
    for (const auto& [entity, c] : kEntities) {
      if (in_.substr(pos_, entity.size()) == entity) {
        out.push_back(c);
        pos_ += entity.size();
        known = true;
        break;
      }
    }
    if (!known) {
      fail(pos_, fmt::format("the {} holds {}, not one of the entities &lt; &gt; &amp; &quot; "
                             "&apos;",
                             tag, quoted(in_.substr(pos_, in_.find(';', pos_) - pos_ + 1))));
    }
  }
  if (out.size() != length) {
    fail(start, fmt::format("the {} holds {} bytes where its length field says {}", tag, out.size(),
                            length));
  }
  close_element(tag);
}

void ArchiveReader::open_class(std::string_view tag) {
  switch (format_) {
    case ArchiveFormat::kBinary:
    case ArchiveFormat::kText: {
      const size_t at = pos_;
      const uint64_t tracking = read_unsigned("tracking level", 1);
      const uint64_t version = read_unsigned("class version", 4);
      if (tracking != 0 || version != 0) {
        fail(at, fmt::format("the {} has tracking level {} and class version {}, not 0 and 0", tag,
                             tracking, version));
      }
      return;
    }
    case ArchiveFormat::kXml: {
      const std::string expected =
          fmt::format("<{} class_id=\"0\" tracking_level=\"0\" version=\"0\">", tag);
      skip_space();
      if (in_.substr(pos_, expected.size()) != expected) {
        fail(pos_, fmt::format("expected {}, found {}", expected, quoted(in_.substr(pos_))));
      }
      pos_ += expected.size();
      return;
    }
  }
}

void ArchiveReader::close_class(std::string_view tag) {
  if (format_ != ArchiveFormat::kXml) return;
  skip_space();
  close_element(tag);
}

void ArchiveReader::finish() {
  if (format_ != ArchiveFormat::kBinary) skip_space();
  if (pos_ != in_.size()) {
    fail(pos_, fmt::format("{} bytes follow the record", in_.size() - pos_));
  }
}

}  // namespace meshsim
