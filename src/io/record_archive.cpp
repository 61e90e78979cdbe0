#include "src/io/record_archive.hpp"

#include <istream>
#include <ostream>
#include <sstream>
#include <streambuf>

#include <fmt/format.h>
#include <boost/archive/archive_exception.hpp>
#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/archive/text_iarchive.hpp>
#include <boost/archive/text_oarchive.hpp>
#include <boost/archive/xml_iarchive.hpp>
#include <boost/archive/xml_oarchive.hpp>
#include <boost/serialization/binary_object.hpp>
#include <boost/serialization/nvp.hpp>
#include <boost/serialization/string.hpp>

#include "src/error.hpp"
#include "src/io/xml_guard.hpp"

namespace meshsim {

namespace {

using boost::serialization::make_binary_object;
using boost::serialization::make_nvp;

// Archives without Boost's own header (the envelope says what the payload is; an XML reader with
// a header reads its closing tag in its destructor, which ends the process when that throws).
constexpr unsigned kWriteFlags = boost::archive::no_header;
// Boost 1.74's XML tag check reads past the expected name when the file's is longer; the reader
// skips it and compares the whole tag sequence itself afterwards.
constexpr unsigned kXmlReadFlags = boost::archive::no_header | boost::archive::no_xml_tag_checking;

// Reads a payload in place: no copy into a string stream.
class ViewStreambuf : public std::streambuf {
 public:
  explicit ViewStreambuf(std::string_view bytes) {
    char* begin = const_cast<char*>(bytes.data());  // never written: no put area
    setg(begin, begin, begin + bytes.size());
  }
  std::string_view remaining() const { return {gptr(), static_cast<size_t>(egptr() - gptr())}; }
};

template <typename Archive>
constexpr bool kIsXml = std::is_same_v<Archive, boost::archive::xml_oarchive> ||
                        std::is_same_v<Archive, boost::archive::xml_iarchive>;
template <typename Archive>
constexpr bool kIsBinary = std::is_same_v<Archive, boost::archive::binary_oarchive> ||
                           std::is_same_v<Archive, boost::archive::binary_iarchive>;

template <typename Archive>
class TreeWriter {
 public:
  explicit TreeWriter(Archive& ar) : ar_(ar) {}

  // Trees meshsim builds are shallow; the reader refuses deep ones.
  void object(const RecordObject& object, size_t depth) {
    text(object.type, "type");
    uint64_t count = object.fields.size();
    ar_ << make_nvp("fields", count);
    for (const auto& [key, value] : object.fields) {
      text(key, "key");
      this->value(value, depth);
    }
  }

 private:
  void value(const RecordValue& v, size_t depth) {
    auto kind = static_cast<uint32_t>(v.kind);
    ar_ << make_nvp("kind", kind);
    switch (v.kind) {
      case RecordValue::Kind::kNone:
        break;
      case RecordValue::Kind::kInt:
        ar_ << make_nvp("int", v.integer);
        break;
      case RecordValue::Kind::kStr:
        text(v.text, "str");
        break;
      case RecordValue::Kind::kBytes:
        bytes(v.text);
        break;
      case RecordValue::Kind::kInts: {
        uint64_t count = v.integers.size();
        ar_ << make_nvp("count", count);
        for (int64_t i : v.integers) ar_ << make_nvp("i", i);
        break;
      }
      case RecordValue::Kind::kStrs: {
        uint64_t count = v.strings.size();
        ar_ << make_nvp("count", count);
        for (const std::string& s : v.strings) text(s, "s");
        break;
      }
      case RecordValue::Kind::kObject:
        object(v.objects.front(), depth + 1);
        break;
      case RecordValue::Kind::kObjects: {
        uint64_t count = v.objects.size();
        ar_ << make_nvp("count", count);
        for (const RecordObject& o : v.objects) object(o, depth + 1);
        break;
      }
    }
  }

  // Strings carry their length first so the reader can bound it before reading them. XML keeps
  // them readable (its parser stops at the next tag anyway); the other formats store raw bytes.
  void text(const std::string& s, const char* tag) {
    uint64_t length = s.size();
    ar_ << make_nvp("len", length);
    if constexpr (kIsXml<Archive>) {
      ar_ << make_nvp(tag, s);
    } else {
      ar_ << make_nvp(tag, make_binary_object(s.data(), s.size()));
    }
  }

  void bytes(const std::string& s) {
    uint64_t length = s.size();
    ar_ << make_nvp("len", length);
    ar_ << make_nvp("bytes", make_binary_object(s.data(), s.size()));
  }

  Archive& ar_;
};

template <typename Archive>
class TreeReader {
 public:
  TreeReader(Archive& ar, const ViewStreambuf& source, std::string_view what, size_t payload_size)
      : ar_(ar),
        source_(source),
        what_(what),
        // Twice the payload plus a little: every element costs at least one payload byte, and the
        // charges below are the in-memory sizes.
        budget_(2 * payload_size + (64 << 10)) {}

  void object(RecordObject& out, size_t depth) {
    if (depth > kMaxRecordDepth) {
      fail(fmt::format("objects nested more than {} deep", kMaxRecordDepth));
    }
    charge(1, sizeof(RecordObject));
    text(out.type, "type");
    const uint64_t count = read_count("fields", sizeof(std::pair<std::string, RecordValue>));
    out.fields.resize(count);
    for (auto& [key, v] : out.fields) {
      text(key, "key");
      value(v, depth);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw runtime_error(fmt::format("corrupt {} record: {}", what_, why));
  }

  // Charges `count` elements of `each` bytes against the budget; each needs at least one payload
  // byte, so a count past what is left cannot be real.
  void charge(uint64_t count, uint64_t each) {
    if (count > source_.remaining().size() + 1) {
      fail(fmt::format("a count of {} with {} payload bytes left", count,
                       source_.remaining().size()));
    }
    const uint64_t cost = count * each;  // both bounded: no overflow
    if (cost > budget_) fail(fmt::format("it needs more memory than its size allows"));
    budget_ -= cost;
  }

  uint64_t read_count(const char* tag, uint64_t each) {
    uint64_t count = 0;
    ar_ >> make_nvp(tag, count);
    charge(count, each);
    return count;
  }

  void value(RecordValue& v, size_t depth) {
    uint32_t kind = 0;
    ar_ >> make_nvp("kind", kind);
    if (kind > static_cast<uint32_t>(RecordValue::Kind::kObjects)) {
      fail(fmt::format("unknown value kind {}", kind));
    }
    v.kind = static_cast<RecordValue::Kind>(kind);
    switch (v.kind) {
      case RecordValue::Kind::kNone:
        break;
      case RecordValue::Kind::kInt:
        ar_ >> make_nvp("int", v.integer);
        break;
      case RecordValue::Kind::kStr:
        text(v.text, "str");
        break;
      case RecordValue::Kind::kBytes:
        raw(v.text, "bytes");
        break;
      case RecordValue::Kind::kInts:
        v.integers.resize(read_count("count", sizeof(int64_t)));
        for (int64_t& i : v.integers) ar_ >> make_nvp("i", i);
        break;
      case RecordValue::Kind::kStrs:
        v.strings.resize(read_count("count", sizeof(std::string)));
        for (std::string& s : v.strings) text(s, "s");
        break;
      case RecordValue::Kind::kObject:
        v.objects.resize(1);
        object(v.objects.front(), depth + 1);
        break;
      case RecordValue::Kind::kObjects:
        v.objects.resize(read_count("count", sizeof(RecordObject)));
        for (RecordObject& o : v.objects) object(o, depth + 1);
        break;
    }
  }

  void text(std::string& s, const char* tag) {
    if constexpr (kIsXml<Archive>) {
      const uint64_t length = read_count("len", 1);
      ar_ >> make_nvp(tag, s);
      if (s.size() != length) {
        fail(fmt::format("a string of {} bytes where its length says {}", s.size(), length));
      }
    } else {
      raw(s, tag);
    }
  }

  void raw(std::string& s, const char* tag) {
    const uint64_t length = read_count("len", 1);
    if constexpr (!kIsBinary<Archive>) require_base64(length);
    s.resize(length);
    ar_ >> make_nvp(tag, make_binary_object(s.data(), s.size()));
  }

  // Boost's base64 decoder reads past the end of the stream when the text runs out; make sure
  // the characters are there first, padding included (whitespace between them is skipped, as
  // the decoder does).
  void require_base64(uint64_t length) const {
    uint64_t needed = 4 * (length / 3 + (length % 3 != 0 ? 1 : 0));
    for (char c : source_.remaining()) {
      if (needed == 0) return;
      const bool digit = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                         (c >= '0' && c <= '9') || c == '+' || c == '/' || c == '=';
      if (digit) {
        --needed;
      } else if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
        return;  // the decoder stops here with its own error
      }
    }
    if (needed > 0) fail(fmt::format("{} bytes of base64 data are cut short", length));
  }

  Archive& ar_;
  const ViewStreambuf& source_;
  std::string_view what_;
  uint64_t budget_;
};

template <typename OArchive>
std::string write_with(const RecordObject& root) {
  std::ostringstream out;
  {
    OArchive ar(out, kWriteFlags);
    TreeWriter<OArchive>(ar).object(root, 1);
  }
  return std::move(out).str();
}

template <typename IArchive>
RecordObject read_with(std::string_view payload, std::string_view what, unsigned flags) {
  ViewStreambuf source(payload);
  std::istream in(&source);
  RecordObject root;
  {
    IArchive ar(in, flags);
    TreeReader<IArchive>(ar, source, what, payload.size()).object(root, 1);
  }
  // Binary archives end exactly; the text formats may end with a newline.
  for (char c : source.remaining()) {
    if (c != '\n' && c != ' ' && c != '\r' && c != '\t') {
      throw runtime_error(fmt::format("corrupt {} record: {} bytes follow the record", what,
                                      source.remaining().size()));
    }
  }
  return root;
}

}  // namespace

std::string write_record_payload(const RecordObject& root, ArchiveFormat format) {
  switch (format) {
    case ArchiveFormat::kBinary:
      return write_with<boost::archive::binary_oarchive>(root);
    case ArchiveFormat::kText:
      return write_with<boost::archive::text_oarchive>(root);
    case ArchiveFormat::kXml:
      return write_with<boost::archive::xml_oarchive>(root);
  }
  MESHSIM_ASSERT(false, "unknown archive format");
}

RecordObject read_record_payload(std::string_view payload, ArchiveFormat format,
                                 std::string_view what) {
  const std::string_view format_name = archive_format_name(format);
  try {
    switch (format) {
      case ArchiveFormat::kBinary:
        return read_with<boost::archive::binary_iarchive>(payload, what, kWriteFlags);
      case ArchiveFormat::kText:
        return read_with<boost::archive::text_iarchive>(payload, what, kWriteFlags);
      case ArchiveFormat::kXml: {
        RecordObject root = read_with<boost::archive::xml_iarchive>(payload, what, kXmlReadFlags);
        // The tags Boost skipped must be exactly those the writer would write for this tree.
        check_xml_tags(payload, write_with<boost::archive::xml_oarchive>(root), what);
        return root;
      }
    }
  } catch (const Error& e) {
    throw runtime_error(fmt::format("{} ({} archive)", e.what(), format_name));
  } catch (const std::exception& e) {  // archive_exception, bad_alloc, dataflow errors, ...
    throw runtime_error(
        fmt::format("corrupt {} record ({} archive): {}", what, format_name, e.what()));
  }
  throw runtime_error(fmt::format("unknown archive format {}", static_cast<uint32_t>(format)));
}

std::string seal_record(RecordKind kind, uint32_t record_version, const RecordObject& root,
                        ArchiveFormat format) {
  const std::string payload = write_record_payload(root, format);
  return seal_envelope({kind, format, record_version, payload.size()}, payload);
}

OpenedRecord open_record(std::string_view file, RecordKind kind, uint32_t newest_version) {
  const OpenedEnvelope opened = open_envelope(file);
  const std::string_view what = record_kind_name(kind);
  if (opened.header.kind != kind) {
    const auto article = [](RecordKind k) { return k == RecordKind::kRngState ? "an" : "a"; };
    throw runtime_error(fmt::format("expected {} {} record, found {} {} record", article(kind),
                                    what, article(opened.header.kind),
                                    record_kind_name(opened.header.kind)));
  }
  if (opened.header.record_version == 0 || opened.header.record_version > newest_version) {
    throw runtime_error(
        fmt::format("{} record version {} is not one this meshsim reads (versions 1 to {})", what,
                    opened.header.record_version, newest_version));
  }
  return {opened.header.record_version, opened.header.format,
          read_record_payload(opened.payload, opened.header.format, what)};
}

}  // namespace meshsim
