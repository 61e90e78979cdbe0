#include "src/io/record_archive.hpp"

#include <ostream>
#include <sstream>
#include <streambuf>

#include <fmt/format.h>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/archive/text_oarchive.hpp>
#include <boost/archive/xml_oarchive.hpp>
#include <boost/serialization/binary_object.hpp>
#include <boost/serialization/nvp.hpp>
#include <boost/serialization/string.hpp>

#include "src/error.hpp"
#include "src/io/archive_reader.hpp"

namespace meshsim {

namespace {

using boost::serialization::make_binary_object;
using boost::serialization::make_nvp;

// Archives without Boost's own header: the envelope says what the payload is.
constexpr unsigned kWriteFlags = boost::archive::no_header;

// Collects an archive as pieces: the text written through the stream, and borrowed byte ranges
// put between them as they are (std::ostringstream would copy everything, twice).
class PieceSink : public std::streambuf {
 public:
  explicit PieceSink(size_t reserve) { current_.reserve(reserve); }

  // Ends the current text and puts `bytes` after it, without copying them.
  void borrow(std::string_view bytes) {
    close_text();
    pieces_.push_back(bytes);
  }
  // Hands the pieces over; `owned` receives the text they point into.
  std::vector<std::string_view> finish(std::deque<std::string>& owned) {
    close_text();
    owned = std::move(owned_);
    return std::move(pieces_);
  }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    current_.append(s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof()))
      current_.push_back(traits_type::to_char_type(c));
    return traits_type::not_eof(c);
  }

 private:
  void close_text() {
    if (current_.empty()) return;
    owned_.push_back(std::move(current_));  // a deque never moves its elements
    pieces_.push_back(owned_.back());
    current_ = std::string();
  }
  std::string current_;
  std::deque<std::string> owned_;
  std::vector<std::string_view> pieces_;
};

// About how many bytes a tree's archive takes, so the buffer is allocated once.
size_t size_estimate(const RecordObject& root) {
  size_t total = 64;
  std::vector<const RecordObject*> pending{&root};
  while (!pending.empty()) {
    const RecordObject* o = pending.back();
    pending.pop_back();
    total += 32 + o->type.size();
    for (const auto& [key, v] : o->fields) {
      total += 48 + key.size() + v.text.size() + v.borrowed.size() + 12 * v.integers.size();
      for (const std::string& str : v.strings) total += 16 + str.size();
      for (const RecordObject& child : v.objects) pending.push_back(&child);
    }
  }
  return total;
}

template <typename Archive>
constexpr bool kIsXml = std::is_same_v<Archive, boost::archive::xml_oarchive>;
template <typename Archive>
constexpr bool kIsBinary = std::is_same_v<Archive, boost::archive::binary_oarchive>;

template <typename Archive>
class TreeWriter {
 public:
  // `sink`: where a binary archive puts borrowed bytes without copying them.
  TreeWriter(Archive& ar, PieceSink& sink) : ar_(ar), sink_(sink) {}

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
        bytes(v.byte_view());
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
  // them readable (escaped text, checked against the length); the other formats store raw bytes.
  void text(const std::string& s, const char* tag) {
    uint64_t length = s.size();
    ar_ << make_nvp("len", length);
    if constexpr (kIsXml<Archive>) {
      ar_ << make_nvp(tag, s);
    } else {
      ar_ << make_nvp(tag, make_binary_object(s.data(), s.size()));
    }
  }

  void bytes(std::string_view s) {
    uint64_t length = s.size();
    ar_ << make_nvp("len", length);
    // A binary archive stores binary_object's bytes raw: the same file, without the copy.
    if constexpr (kIsBinary<Archive>) {
      sink_.borrow(s);
    } else {
      ar_ << make_nvp("bytes", make_binary_object(s.data(), s.size()));
    }
  }

  Archive& ar_;
  PieceSink& sink_;
};

// What one element of a record costs in memory, and the fewest payload bytes it can be written in:
// in binary, counts take 8 bytes and kinds 4; in text every number is at least a digit and a
// separator (XML's tags only add to that).
struct ElementCost {
  uint64_t memory;
  uint64_t binary_bytes;
  uint64_t text_bytes;
};
using Field = std::pair<std::string, RecordValue>;
constexpr ElementCost kByte{1, 1, 1};                       // of a string or bytes value
constexpr ElementCost kField{sizeof(Field), 8 + 4, 2 + 2};  // key length, kind
constexpr ElementCost kListedObject{sizeof(RecordObject), 8 + 8, 2 + 2};  // type length, fields
constexpr ElementCost kListedInt{sizeof(int64_t), 8, 2};
constexpr ElementCost kListedString{sizeof(std::string), 8, 2};  // its length
constexpr ElementCost kElements[] = {kByte, kField, kListedObject, kListedInt, kListedString};

// The most memory a payload byte can stand for in a valid record of `format`: the budget is this
// times the payload, so a record the writer made always fits, at any size, and a forged one
// allocates at most this multiple of its size.
uint64_t memory_per_payload_byte(ArchiveFormat format) {
  uint64_t most = 1;
  for (const ElementCost& e : kElements) {
    const uint64_t bytes = format == ArchiveFormat::kBinary ? e.binary_bytes : e.text_bytes;
    most = std::max(most, (e.memory + bytes - 1) / bytes);
  }
  return most;
}

// Reads a tree as TreeWriter writes it, through the strict ArchiveReader.
class TreeReader {
 public:
  TreeReader(ArchiveReader& in, BytesOut bytes_out)
      : in_(in),
        bytes_out_(bytes_out),
        budget_(memory_per_payload_byte(in.format()) * in.remaining() + (64 << 10)) {}

  // The root object; the others are charged as values.
  void root(RecordObject& out) {
    spend(sizeof(RecordObject), in_.position());
    object(out, 1);
  }

 private:
  void object(RecordObject& out, size_t depth) {
    if (depth > kMaxRecordDepth) {
      in_.fail(in_.position(), fmt::format("objects nested more than {} deep", kMaxRecordDepth));
    }
    text(out.type, "type");
    const uint64_t count = read_count("fields", kField);
    out.fields.resize(count);
    for (auto& [key, v] : out.fields) {
      text(key, "key");
      value(v, depth);
    }
  }

  // Charges `count` elements against the budget, after checking that what is left of the payload
  // can hold them: a count past that cannot be real.
  void charge(uint64_t count, const ElementCost& each, size_t at) {
    const uint64_t least =
        in_.format() == ArchiveFormat::kBinary ? each.binary_bytes : each.text_bytes;
    // Text's last number needs no separator after it.
    const uint64_t room = in_.remaining() + (in_.format() == ArchiveFormat::kBinary ? 0 : 1);
    if (count > room / least) {
      in_.fail(at, fmt::format("a count of {} with {} payload bytes left", count, in_.remaining()));
    }
    spend(count * each.memory, at);  // both bounded: no overflow
  }

  void spend(uint64_t memory, size_t at) {
    if (memory > budget_) in_.fail(at, "it needs more memory than its size allows");
    budget_ -= memory;
  }

  uint64_t read_count(const char* tag, const ElementCost& each) {
    const size_t at = in_.position();
    const uint64_t count = in_.read_unsigned(tag, 8);
    charge(count, each, at);
    return count;
  }

  void value(RecordValue& v, size_t depth) {
    const size_t at = in_.position();
    const auto kind = static_cast<uint32_t>(in_.read_unsigned("kind", 4));
    if (kind > static_cast<uint32_t>(RecordValue::Kind::kObjects)) {
      in_.fail(at, fmt::format("unknown value kind {}", kind));
    }
    v.kind = static_cast<RecordValue::Kind>(kind);
    switch (v.kind) {
      case RecordValue::Kind::kNone:
        break;
      case RecordValue::Kind::kInt:
        v.integer = in_.read_signed("int");
        break;
      case RecordValue::Kind::kStr:
        text(v.text, "str");
        break;
      case RecordValue::Kind::kBytes: {
        const uint64_t length = read_count("len", kByte);
        if (in_.format() == ArchiveFormat::kBinary && bytes_out_ == BytesOut::kBorrow) {
          v.borrowed = in_.borrow_bytes("bytes", length);
          v.is_borrowed = true;
        } else {
          in_.read_bytes("bytes", length, v.text);
        }
        break;
      }
      case RecordValue::Kind::kInts:
        v.integers.resize(read_count("count", kListedInt));
        for (int64_t& i : v.integers) i = in_.read_signed("i");
        break;
      case RecordValue::Kind::kStrs:
        v.strings.resize(read_count("count", kListedString));
        for (std::string& s : v.strings) text(s, "s");
        break;
      case RecordValue::Kind::kObject:
        charge(1, kListedObject, at);
        v.objects.resize(1);
        object(v.objects.front(), depth + 1);
        break;
      case RecordValue::Kind::kObjects:
        v.objects.resize(read_count("count", kListedObject));
        for (RecordObject& o : v.objects) object(o, depth + 1);
        break;
    }
  }

  // A string: its length, then its bytes (escaped text in XML, a binary object elsewhere).
  void text(std::string& s, const char* tag) {
    const uint64_t length = read_count("len", kByte);
    if (in_.format() == ArchiveFormat::kXml) {
      in_.read_xml_string(tag, length, s);
    } else {
      s.clear();
      in_.read_bytes(tag, length, s);
    }
  }

  ArchiveReader& in_;
  BytesOut bytes_out_;
  uint64_t budget_;
};

// The archive of `root` as pieces.
template <typename OArchive>
std::vector<std::string_view> write_with(const RecordObject& root, std::deque<std::string>& owned) {
  PieceSink sink(size_estimate(root));
  {
    std::ostream stream(&sink);
    OArchive ar(stream, kWriteFlags);
    TreeWriter<OArchive>(ar, sink).object(root, 1);
  }
  return sink.finish(owned);
}

std::string joined(std::span<const std::string_view> pieces) {
  size_t size = 0;
  for (std::string_view p : pieces) size += p.size();
  std::string out;
  out.reserve(size);
  for (std::string_view p : pieces) out.append(p);
  return out;
}

template <typename OArchive>
std::string write_with(const RecordObject& root) {
  std::deque<std::string> owned;
  return joined(write_with<OArchive>(root, owned));
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
                                 std::string_view what, BytesOut bytes_out, size_t base_offset) {
  ArchiveReader in(payload, format, what, base_offset);
  RecordObject root;
  TreeReader(in, bytes_out).root(root);
  in.finish();
  return root;
}

std::vector<std::string_view> SealedRecord::pieces() const {
  std::vector<std::string_view> out{header};
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

SealedRecord seal_record_in_pieces(RecordKind kind, uint32_t record_version,
                                   const RecordObject& root, ArchiveFormat format) {
  SealedRecord out;
  switch (format) {
    case ArchiveFormat::kBinary:
      out.payload = write_with<boost::archive::binary_oarchive>(root, out.owned);
      break;
    case ArchiveFormat::kText:
      out.payload = write_with<boost::archive::text_oarchive>(root, out.owned);
      break;
    case ArchiveFormat::kXml:
      out.payload = write_with<boost::archive::xml_oarchive>(root, out.owned);
      break;
  }
  out.header = envelope_header({kind, format, record_version, 0}, out.payload);
  return out;
}

std::string seal_record(RecordKind kind, uint32_t record_version, const RecordObject& root,
                        ArchiveFormat format) {
  return joined(seal_record_in_pieces(kind, record_version, root, format).pieces());
}

OpenedRecord open_record(std::string_view file, RecordKind kind, uint32_t newest_version,
                         BytesOut bytes_out) {
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
          read_record_payload(opened.payload, opened.header.format, what, bytes_out,
                              kEnvelopeHeaderSize)};
}

}  // namespace meshsim
