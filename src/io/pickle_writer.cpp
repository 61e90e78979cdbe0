#include "src/io/pickle_writer.hpp"

#include <utility>

#include "src/error.hpp"

namespace meshsim {

namespace {

// The opcodes this writer emits (the names are pickletools').
enum Op : uint8_t {
  kProto = 0x80,
  kStop = '.',
  kNone = 'N',
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kBinInt = 'J',
  kLong1 = 0x8a,
  kBinUnicode = 'X',
  kGlobal = 'c',
  kEmptyTuple = ')',
  kEmptyList = ']',
  kEmptyDict = '}',
  kMark = '(',
  kTuple = 't',
  kTuple1 = 0x85,
  kAppends = 'e',
  kSetItems = 'u',
  kReduce = 'R',
  kNewObj = 0x81,
  kBuild = 'b',
  kBinPersId = 'Q',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kBinGet = 'h',
  kLongBinGet = 'j',
};

}  // namespace

PickleWriter::PickleWriter() {
  op(kProto);
  op(2);
}

void PickleWriter::little_endian(uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void PickleWriter::none() {
  op(kNone);
}
void PickleWriter::boolean(bool value) {
  op(value ? kNewTrue : kNewFalse);
}

void PickleWriter::integer(int64_t value) {
  if (value >= 0 && value <= 0xff) {
    op(kBinInt1);
    little_endian(static_cast<uint64_t>(value), 1);
  } else if (value >= 0 && value <= 0xffff) {
    op(kBinInt2);
    little_endian(static_cast<uint64_t>(value), 2);
  } else if (value >= INT32_MIN && value <= INT32_MAX) {
    op(kBinInt);
    little_endian(static_cast<uint64_t>(value), 4);
  } else {
    // Two's complement, little-endian, 8 bytes: always enough for an int64.
    op(kLong1);
    op(8);
    little_endian(static_cast<uint64_t>(value), 8);
  }
}

void PickleWriter::string(std::string_view utf8) {
  MESHSIM_ASSERT(utf8.size() <= UINT32_MAX, "a pickled string longer than 4 GiB");
  op(kBinUnicode);
  little_endian(utf8.size(), 4);
  out_.append(utf8);
}

void PickleWriter::global(std::string_view module, std::string_view name) {
  // GLOBAL reads two lines: the names may not hold a newline.
  MESHSIM_ASSERT(
      module.find('\n') == std::string_view::npos && name.find('\n') == std::string_view::npos,
      "a newline in a pickled global's name");
  op(kGlobal);
  out_.append(module);
  out_.push_back('\n');
  out_.append(name);
  out_.push_back('\n');
}

void PickleWriter::empty_tuple() {
  op(kEmptyTuple);
}
void PickleWriter::empty_list() {
  op(kEmptyList);
}
void PickleWriter::empty_dict() {
  op(kEmptyDict);
}

void PickleWriter::int_tuple(std::span<const int64_t> values) {
  if (values.empty()) {
    empty_tuple();
    return;
  }
  mark();
  for (int64_t v : values) integer(v);
  tuple_from_mark();
}

void PickleWriter::memo_put(uint32_t index) {
  op(index < 256 ? kBinPut : kLongBinPut);
  little_endian(index, index < 256 ? 1 : 4);
}

void PickleWriter::memo_get(uint32_t index) {
  op(index < 256 ? kBinGet : kLongBinGet);
  little_endian(index, index < 256 ? 1 : 4);
}

void PickleWriter::mark() {
  op(kMark);
}
void PickleWriter::tuple_from_mark() {
  op(kTuple);
}
void PickleWriter::append_from_mark() {
  op(kAppends);
}
void PickleWriter::set_items_from_mark() {
  op(kSetItems);
}
void PickleWriter::tuple1() {
  op(kTuple1);
}
void PickleWriter::reduce() {
  op(kReduce);
}
void PickleWriter::new_object() {
  op(kNewObj);
}
void PickleWriter::build() {
  op(kBuild);
}
void PickleWriter::persistent_id() {
  op(kBinPersId);
}

std::string PickleWriter::finish() {
  op(kStop);
  return std::exchange(out_, std::string());
}

}  // namespace meshsim
