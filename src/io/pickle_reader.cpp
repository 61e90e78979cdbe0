#include "src/io/pickle_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_map>
#include <utility>

#include "src/error.hpp"

namespace meshsim {
namespace {

using Kind = PickleValue::Kind;

// Every opcode of pickle protocols 0-5, for messages; the ones the machine runs are the cases of
// its switch.
struct OpcodeName {
  uint8_t code;
  std::string_view name;
};
constexpr OpcodeName kOpcodeNames[] = {
    {'(', "MARK"},
    {'.', "STOP"},
    {'0', "POP"},
    {'1', "POP_MARK"},
    {'2', "DUP"},
    {'F', "FLOAT"},
    {'I', "INT"},
    {'J', "BININT"},
    {'K', "BININT1"},
    {'L', "LONG"},
    {'M', "BININT2"},
    {'N', "NONE"},
    {'P', "PERSID"},
    {'Q', "BINPERSID"},
    {'R', "REDUCE"},
    {'S', "STRING"},
    {'T', "BINSTRING"},
    {'U', "SHORT_BINSTRING"},
    {'V', "UNICODE"},
    {'X', "BINUNICODE"},
    {'a', "APPEND"},
    {'b', "BUILD"},
    {'c', "GLOBAL"},
    {'d', "DICT"},
    {'}', "EMPTY_DICT"},
    {'e', "APPENDS"},
    {'g', "GET"},
    {'h', "BINGET"},
    {'i', "INST"},
    {'j', "LONG_BINGET"},
    {'l', "LIST"},
    {']', "EMPTY_LIST"},
    {'o', "OBJ"},
    {'p', "PUT"},
    {'q', "BINPUT"},
    {'r', "LONG_BINPUT"},
    {'s', "SETITEM"},
    {'t', "TUPLE"},
    {')', "EMPTY_TUPLE"},
    {'u', "SETITEMS"},
    {'G', "BINFLOAT"},
    {0x80, "PROTO"},
    {0x81, "NEWOBJ"},
    {0x82, "EXT1"},
    {0x83, "EXT2"},
    {0x84, "EXT4"},
    {0x85, "TUPLE1"},
    {0x86, "TUPLE2"},
    {0x87, "TUPLE3"},
    {0x88, "NEWTRUE"},
    {0x89, "NEWFALSE"},
    {0x8a, "LONG1"},
    {0x8b, "LONG4"},
    {'B', "BINBYTES"},
    {'C', "SHORT_BINBYTES"},
    {0x8c, "SHORT_BINUNICODE"},
    {0x8d, "BINUNICODE8"},
    {0x8e, "BINBYTES8"},
    {0x8f, "EMPTY_SET"},
    {0x90, "ADDITEMS"},
    {0x91, "FROZENSET"},
    {0x92, "NEWOBJ_EX"},
    {0x93, "STACK_GLOBAL"},
    {0x94, "MEMOIZE"},
    {0x95, "FRAME"},
    {0x96, "BYTEARRAY8"},
    {0x97, "NEXT_BUFFER"},
    {0x98, "READONLY_BUFFER"},
};

std::string opcode_label(uint8_t code) {
  for (const OpcodeName& op : kOpcodeNames) {
    if (op.code == code) return fmt::format("{} (0x{:02x})", op.name, code);
  }
  return fmt::format("0x{:02x}", code);
}

// UTF-8 as Python's pickler writes it ('surrogatepass': lone surrogates are encoded as usual).
bool is_pickle_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<uint8_t>(text[i]);
    int extra = 0;
    uint32_t code = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xe0) == 0xc0) {
      extra = 1, code = lead & 0x1f;
    } else if ((lead & 0xf0) == 0xe0) {
      extra = 2, code = lead & 0x0f;
    } else if ((lead & 0xf8) == 0xf0) {
      extra = 3, code = lead & 0x07;
    } else {
      return false;
    }
    if (text.size() - i <= static_cast<size_t>(extra)) return false;
    for (int k = 1; k <= extra; ++k) {
      const auto next = static_cast<uint8_t>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    constexpr uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[extra] || code > 0x10ffff) return false;  // overlong or out of range
    i += extra + 1;
  }
  return true;
}

// Values 0, 1, 2 and 3 of every document: None, False, True and () are immutable, so every
// opcode that makes one reuses these instead of growing the graph.
constexpr uint32_t kNoneValue = 0;
constexpr uint32_t kFalseValue = 1;
constexpr uint32_t kTrueValue = 2;
constexpr uint32_t kEmptyTupleValue = 3;

class Machine {
 public:
  Machine(PickleDocument& document, std::span<const PickleGlobalName> allowed,
          std::string_view what, PickleLimits limits)
      : document_(document),
        in_(*document.bytes),
        allowed_(allowed),
        what_(what),
        limits_(limits) {}

  void run() {
    if (in_.size() > limits_.max_input_bytes) {
      throw value_error(fmt::format("{}: {} bytes is larger than the {} a pickle may have", what_,
                                    in_.size(), limits_.max_input_bytes));
    }
    make(Kind::kNone);
    make(Kind::kBool).integer = 0;
    make(Kind::kBool).integer = 1;
    make(Kind::kTuple);
    while (true) {
      op_at_ = pos_;
      if (pos_ >= in_.size()) fail_at(pos_, "the pickle ends before its STOP opcode");
      op_ = read_u8();
      if (op_ == '.') break;
      step();
    }
    if (!marks_.empty()) fail("STOP inside a MARK that was never closed");
    if (stack_.empty()) fail("STOP with nothing on the stack");
    document_.root = stack_.back();
    if (pos_ != in_.size()) {
      fail_at(pos_, fmt::format("{} bytes follow the pickle's STOP opcode", in_.size() - pos_));
    }
  }

 private:
  [[noreturn]] void fail_at(uint64_t at, std::string_view message) const {
    throw value_error(fmt::format("{}: byte {}: {}", what_, at, message));
  }
  // About the opcode being run.
  [[noreturn]] void fail(std::string_view message) const {
    fail_at(op_at_, fmt::format("{}: {}", opcode_label(op_), message));
  }

  uint8_t read_u8() {
    if (pos_ >= in_.size()) fail_at(pos_, "truncated: the pickle ends inside an opcode");
    return static_cast<uint8_t>(in_[pos_++]);
  }
  std::string_view read_bytes(uint64_t count) {
    if (count > in_.size() - pos_) {
      fail(fmt::format("its argument of {} bytes runs past the end of the pickle ({} left)", count,
                       in_.size() - pos_));
    }
    const std::string_view out = in_.substr(pos_, count);
    pos_ += count;
    return out;
  }
  uint64_t read_le(int width) {
    const std::string_view raw = read_bytes(width);
    uint64_t out = 0;
    for (int i = width - 1; i >= 0; --i) out = (out << 8) | static_cast<uint8_t>(raw[i]);
    return out;
  }

  PickleValue& make(Kind kind) {
    charge(sizeof(PickleValue));
    PickleValue& value = document_.values.emplace_back();
    value.kind = kind;
    value.offset = static_cast<uint32_t>(op_at_);
    return value;
  }
  // Counts `bytes` more of the reader's memory (values, their items, the stack and memo, each as
  // it grows and never given back before the end) against the budget, refreshing the
  // reservation a quarter at a time.
  void charge(uint64_t bytes) {
    used_bytes_ += bytes;
    if (used_bytes_ <= reserved_bytes_) return;
    reserved_bytes_ = std::max<uint64_t>(used_bytes_ + used_bytes_ / 4, uint64_t{1} << 16);
    document_.reservation = MemoryReservation();
    document_.reservation =
        MemoryReservation(reserved_bytes_, fmt::format("{}: the unpickled values", what_));
  }
  uint32_t last_index() const { return static_cast<uint32_t>(document_.values.size() - 1); }
  void push_new(Kind kind) {
    make(kind);
    stack_.push_back(last_index());
  }
  PickleValue& value(uint32_t index) { return document_.values[index]; }

  size_t stack_floor() const { return marks_.empty() ? 0 : marks_.back(); }
  uint32_t pop() {
    if (stack_.size() <= stack_floor()) fail("the stack is empty (above the last MARK)");
    const uint32_t out = stack_.back();
    stack_.pop_back();
    return out;
  }
  uint32_t top() {
    if (stack_.size() <= stack_floor()) fail("the stack is empty (above the last MARK)");
    return stack_.back();
  }
  std::vector<uint32_t> pop_to_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    std::vector<uint32_t> out(stack_.begin() + static_cast<ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return out;
  }
  uint32_t top_of_kind(Kind kind, std::string_view kind_name) {
    const uint32_t index = top();
    if (value(index).kind != kind) {
      fail(fmt::format("it needs a {} below its arguments, not {}", kind_name,
                       describe_pickle_value(document_, index, 1, 60)));
    }
    return index;
  }
  void push_tuple(std::vector<uint32_t> items) {
    if (items.empty()) {
      stack_.push_back(kEmptyTupleValue);
      return;
    }
    make(Kind::kTuple);
    add_items(last_index(), items);
    stack_.push_back(last_index());
  }
  void push_text(Kind kind, uint64_t size) {
    if (size > limits_.max_string_bytes) {
      fail(fmt::format("a string of {} bytes is longer than the {} allowed", size,
                       limits_.max_string_bytes));
    }
    const std::string_view text = read_bytes(size);
    if (kind == Kind::kString && !is_pickle_utf8(text)) fail("the string is not valid UTF-8");
    make(kind).text = text;
    stack_.push_back(last_index());
  }
  void push_int(int64_t integer) {
    make(Kind::kInt).integer = integer;
    stack_.push_back(last_index());
  }
  // LONG1/LONG4: little-endian two's complement of `size` bytes.
  void push_long(int64_t size) {
    if (size < 0) fail("a negative byte count");
    if (size > 8) fail(fmt::format("an integer of {} bytes is wider than 64 bits", size));
    const std::string_view raw = read_bytes(static_cast<uint64_t>(size));
    uint64_t bits = 0;
    for (int64_t i = size - 1; i >= 0; --i) bits = (bits << 8) | static_cast<uint8_t>(raw[i]);
    if (size > 0 && size < 8 && (static_cast<uint8_t>(raw[size - 1]) & 0x80) != 0) {
      bits |= ~uint64_t{0} << (8 * size);  // sign-extend
    }
    push_int(static_cast<int64_t>(bits));
  }
  // Pickler memo ids are dense (MEMOIZE numbers them in order; BINPUT as CPython writes it too),
  // so they index a vector; an id far past the end goes to a map instead of growing it.
  static constexpr uint32_t kNoMemo = UINT32_MAX;
  void store_memo(uint64_t index) {
    const uint32_t value = top();
    // Dense while ids stay near the count stored (a far id must not grow the vector by much).
    if (index < std::max<uint64_t>(1024, 2 * memo_count_) && !sparse_memo_.contains(index)) {
      if (index >= dense_memo_.size()) {
        charge((index + 1 - dense_memo_.size()) * sizeof(uint32_t));
        dense_memo_.resize(index + 1, kNoMemo);
      }
      if (dense_memo_[index] == kNoMemo) ++memo_count_;
      dense_memo_[index] = value;
      return;
    }
    charge(4 * sizeof(uint64_t));
    if (sparse_memo_.insert_or_assign(index, value).second) ++memo_count_;
  }
  void load_memo(uint64_t index) {
    if (index < dense_memo_.size() && dense_memo_[index] != kNoMemo) {
      stack_.push_back(dense_memo_[index]);
      return;
    }
    const auto found = sparse_memo_.find(index);
    if (found == sparse_memo_.end()) fail(fmt::format("memo entry {} was never stored", index));
    stack_.push_back(found->second);
  }
  void push_global(uint32_t module, uint32_t name) {
    const std::string_view module_text = value(module).text;
    const std::string_view name_text = value(name).text;
    const bool allowed = std::any_of(allowed_.begin(), allowed_.end(), [&](const auto& g) {
      return g.module == module_text && g.name == name_text;
    });
    if (!allowed) {
      fail(fmt::format("{}.{} is not one of the classes this file may name", module_text,
                       name_text));
    }
    make(Kind::kGlobal).items = {module, name};
    stack_.push_back(last_index());
  }
  // REDUCE and NEWOBJ: the call is recorded, never made.
  void push_object(uint32_t callable, uint32_t args) {
    if (value(callable).kind != Kind::kGlobal) {
      fail(fmt::format("it may only call an allowed class, not {}",
                       describe_pickle_value(document_, callable, 1, 60)));
    }
    if (value(args).kind != Kind::kTuple) fail("its arguments are not a tuple");
    if (is_pickle_global(document_, callable, "collections", "OrderedDict") &&
        value(args).items.empty()) {
      push_new(Kind::kDict);  // a dict that remembers order, as every dict here does
      return;
    }
    make(Kind::kObject).items = {callable, args};
    stack_.push_back(last_index());
  }
  void add_items(uint32_t target, std::span<const uint32_t> items) {
    charge(2 * sizeof(uint32_t) * items.size());  // with the slack of doubling
    value(target).items.append(items.data(), items.data() + items.size());
  }

  void step() {
    charge(sizeof(uint32_t));  // the stack slot this opcode may push
    switch (op_) {
      case 0x80: {  // PROTO
        const int protocol = read_u8();
        if (protocol > 5) fail(fmt::format("protocol {} is newer than 5", protocol));
        document_.protocol = protocol;
        return;
      }
      case 0x95:  // FRAME: a length prefix for buffered reading; the whole input is here anyway
        read_le(8);
        return;
      case '(':
        if (marks_.size() >= limits_.max_mark_depth) {
          fail(fmt::format("MARKs nest deeper than {}", limits_.max_mark_depth));
        }
        marks_.push_back(stack_.size());
        return;
      case '0':  // POP: an empty stack above a mark pops the mark (as Python does)
        if (stack_.size() > stack_floor()) {
          stack_.pop_back();
        } else {
          pop_to_mark();
        }
        return;
      case '1':
        pop_to_mark();
        return;
      case '2':
        stack_.push_back(top());
        return;
      case 'N':
        stack_.push_back(kNoneValue);
        return;
      case 0x88:
        stack_.push_back(kTrueValue);
        return;
      case 0x89:
        stack_.push_back(kFalseValue);
        return;
      case 'J':
        push_int(static_cast<int32_t>(static_cast<uint32_t>(read_le(4))));
        return;
      case 'K':
        push_int(static_cast<int64_t>(read_le(1)));
        return;
      case 'M':
        push_int(static_cast<int64_t>(read_le(2)));
        return;
      case 0x8a:
        push_long(static_cast<int64_t>(read_le(1)));
        return;
      case 0x8b:
        push_long(static_cast<int32_t>(static_cast<uint32_t>(read_le(4))));
        return;
      case 'G': {
        uint64_t bits = 0;
        for (char c : read_bytes(8)) bits = (bits << 8) | static_cast<uint8_t>(c);
        make(Kind::kFloat).real = std::bit_cast<double>(bits);
        stack_.push_back(last_index());
        return;
      }
      case 0x8c:
        push_text(Kind::kString, read_le(1));
        return;
      case 'X':
        push_text(Kind::kString, read_le(4));
        return;
      case 0x8d:
        push_text(Kind::kString, read_le(8));
        return;
      case 'C':
        push_text(Kind::kBytes, read_le(1));
        return;
      case 'B':
        push_text(Kind::kBytes, read_le(4));
        return;
      case 0x8e:
      case 0x96:
        push_text(Kind::kBytes, read_le(8));
        return;
      case ')':
        stack_.push_back(kEmptyTupleValue);
        return;
      case 't':
        push_tuple(pop_to_mark());
        return;
      case 0x85:
      case 0x86:
      case 0x87: {
        std::vector<uint32_t> items(op_ - 0x84);
        for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        push_tuple(std::move(items));
        return;
      }
      case ']':
        push_new(Kind::kList);
        return;
      case 'l': {
        const std::vector<uint32_t> items = pop_to_mark();
        push_new(Kind::kList);
        add_items(stack_.back(), items);
        return;
      }
      case 'a': {
        const uint32_t item = pop();
        add_items(top_of_kind(Kind::kList, "list"), std::span(&item, 1));
        return;
      }
      case 'e': {
        const std::vector<uint32_t> items = pop_to_mark();
        add_items(top_of_kind(Kind::kList, "list"), items);
        return;
      }
      case '}':
        push_new(Kind::kDict);
        return;
      case 'd': {
        const std::vector<uint32_t> items = pop_to_mark();
        if (items.size() % 2 != 0) fail("an odd number of items for keys and values");
        push_new(Kind::kDict);
        add_items(stack_.back(), items);
        return;
      }
      case 's': {
        const uint32_t item = pop();
        const uint32_t key = pop();
        const uint32_t pair[] = {key, item};
        add_items(top_of_kind(Kind::kDict, "dict"), pair);
        return;
      }
      case 'u': {
        const std::vector<uint32_t> items = pop_to_mark();
        if (items.size() % 2 != 0) fail("an odd number of items for keys and values");
        add_items(top_of_kind(Kind::kDict, "dict"), items);
        return;
      }
      case 0x8f:
        push_new(Kind::kSet);
        return;
      case 0x90: {
        const std::vector<uint32_t> items = pop_to_mark();
        add_items(top_of_kind(Kind::kSet, "set"), items);
        return;
      }
      case 0x91: {
        const std::vector<uint32_t> items = pop_to_mark();
        push_new(Kind::kSet);
        add_items(stack_.back(), items);
        return;
      }
      case 'q':
        store_memo(read_le(1));
        return;
      case 'r':
        store_memo(read_le(4));
        return;
      case 0x94:
        store_memo(memo_count_);
        return;
      case 'h':
        load_memo(read_le(1));
        return;
      case 'j':
        load_memo(read_le(4));
        return;
      case 'c': {
        const uint32_t module = read_line_string();
        const uint32_t name = read_line_string();
        push_global(module, name);
        return;
      }
      case 0x93: {
        const uint32_t name = pop();
        const uint32_t module = pop();
        if (value(module).kind != Kind::kString || value(name).kind != Kind::kString) {
          fail("its module and name are not strings");
        }
        push_global(module, name);
        return;
      }
      case 'R': {
        const uint32_t args = pop();
        const uint32_t callable = pop();
        push_object(callable, args);
        return;
      }
      case 0x81: {
        const uint32_t args = pop();
        const uint32_t cls = pop();
        push_object(cls, args);
        return;
      }
      case 0x92: {
        const uint32_t kwargs = pop();
        const uint32_t args = pop();
        const uint32_t cls = pop();
        if (value(kwargs).kind != Kind::kDict || !value(kwargs).items.empty()) {
          fail("keyword arguments are not supported");
        }
        push_object(cls, args);
        return;
      }
      case 'b': {
        const uint32_t state = pop();
        PickleValue& object = value(top_of_kind(Kind::kObject, "object"));
        if (object.items.size() != 2) fail("the object was built before");
        object.items.push_back(state);
        return;
      }
      case 'Q': {
        const uint32_t id = pop();
        make(Kind::kPersistentId).items = {id};
        stack_.push_back(last_index());
        return;
      }
      default:
        fail("this opcode is not allowed here (only the data opcodes of protocols 2-5 are)");
    }
  }

  // GLOBAL's text arguments: one line each.
  uint32_t read_line_string() {
    const size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos) fail("its name is not ended by a newline");
    if (end - pos_ > 1024) fail("its module or class name is longer than 1024 bytes");
    const std::string_view text = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    if (!is_pickle_utf8(text)) fail("its name is not valid UTF-8");
    make(Kind::kString).text = text;
    return last_index();
  }

  PickleDocument& document_;
  std::string_view in_;
  std::span<const PickleGlobalName> allowed_;
  std::string_view what_;
  PickleLimits limits_;
  uint64_t pos_ = 0;
  uint64_t op_at_ = 0;
  uint8_t op_ = 0;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::vector<uint32_t> dense_memo_;
  std::unordered_map<uint64_t, uint32_t> sparse_memo_;
  uint64_t memo_count_ = 0;  // entries stored: MEMOIZE's next id
  uint64_t used_bytes_ = 0;
  uint64_t reserved_bytes_ = 0;
};

std::string quoted(std::string_view text, size_t max_chars) {
  std::string out = "'";
  for (char c : text.substr(0, max_chars)) {
    const auto byte = static_cast<uint8_t>(c);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  if (text.size() > max_chars) out += "...";
  return out + "'";
}

void describe_into(const PickleDocument& document, uint32_t index, int depth, size_t max_chars,
                   std::string& out) {
  if (out.size() >= max_chars) return;
  const PickleValue& value = document.at(index);
  const auto list = [&](std::string_view open, std::string_view close, size_t from,
                        std::string_view separator) {
    out += open;
    if (depth <= 0 && value.items.size() > from) {
      out += "...";
    } else {
      for (size_t i = from; i < value.items.size(); ++i) {
        if (i > from) out += separator;
        if (out.size() >= max_chars) {
          out += "...";
          break;
        }
        describe_into(document, value.items[i], depth - 1, max_chars, out);
      }
    }
    out += close;
  };
  switch (value.kind) {
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += value.integer != 0 ? "True" : "False";
      return;
    case Kind::kInt:
      out += std::to_string(value.integer);
      return;
    case Kind::kFloat:
      out += fmt::format("{}", value.real);
      return;
    case Kind::kString:
      out += quoted(value.text, 80);
      return;
    case Kind::kBytes:
      out += "b" + quoted(value.text, 32);
      return;
    case Kind::kTuple:
      list("(", value.items.size() == 1 ? ",)" : ")", 0, ", ");
      return;
    case Kind::kList:
      list("[", "]", 0, ", ");
      return;
    case Kind::kSet:
      list("{", "}", 0, ", ");
      return;
    case Kind::kDict:
      out += "{";
      for (size_t i = 0; i + 1 < value.items.size(); i += 2) {
        if (i > 0) out += ", ";
        if (depth <= 0 || out.size() >= max_chars) {
          out += "...";
          break;
        }
        describe_into(document, value.items[i], depth - 1, max_chars, out);
        out += ": ";
        describe_into(document, value.items[i + 1], depth - 1, max_chars, out);
      }
      out += "}";
      return;
    case Kind::kGlobal:
      out += pickle_global_name(document, value);
      return;
    case Kind::kObject:
      out += pickle_global_name(document, document.at(value.items[0]));
      describe_into(document, value.items[1], depth - 1, max_chars, out);
      if (value.items.size() > 2) {
        out += ".__setstate__(";
        describe_into(document, value.items[2], depth - 1, max_chars, out);
        out += ")";
      }
      return;
    case Kind::kPersistentId:
      out += "persistent_id(";
      describe_into(document, value.items[0], depth - 1, max_chars, out);
      out += ")";
      return;
  }
}

}  // namespace

PickleDocument read_pickle(std::string bytes, std::span<const PickleGlobalName> allowed,
                           std::string_view what, PickleLimits limits) {
  PickleDocument document;
  document.bytes = std::make_unique<const std::string>(std::move(bytes));
  Machine(document, allowed, what, limits).run();
  return document;
}

bool is_pickle_global(const PickleDocument& document, uint32_t index, std::string_view module,
                      std::string_view name) {
  const PickleValue& value = document.at(index);
  return value.kind == Kind::kGlobal && document.at(value.items[0]).text == module &&
         document.at(value.items[1]).text == name;
}

std::string pickle_global_name(const PickleDocument& document, const PickleValue& value) {
  if (value.kind != Kind::kGlobal) return "<not a global>";
  return fmt::format("{}.{}", document.at(value.items[0]).text, document.at(value.items[1]).text);
}

std::string describe_pickle_value(const PickleDocument& document, uint32_t index, int max_depth,
                                  size_t max_chars) {
  std::string out;
  describe_into(document, index, max_depth, max_chars, out);
  if (out.size() > max_chars) {
    out.resize(max_chars);
    out += "...";
  }
  return out;
}

}  // namespace meshsim
