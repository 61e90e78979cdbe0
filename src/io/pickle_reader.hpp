// A reader for Python pickles that runs nothing. A pickle is a program for a stack machine whose
// GLOBAL, REDUCE and BUILD instructions import and call arbitrary Python; this reader executes the
// data instructions only and turns every call into a plain record ("an object of class
// torch.Size built from these arguments"), after checking the class against the caller's
// allow-list. What it cannot represent it refuses, naming the byte offset. See docs/checkpoints.md
// section 2.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/tensor/memory_budget.hpp"

namespace meshsim {

// The values a container or call refers to, by index: up to three in place (calls, small tuples,
// globals), more on the heap, so a graph of millions of small values costs no allocation each.
class PickleItems {
 public:
  PickleItems() = default;
  PickleItems(std::initializer_list<uint32_t> items) { append(items.begin(), items.end()); }
  PickleItems(const PickleItems& other) { append(other.begin(), other.end()); }
  PickleItems& operator=(const PickleItems& other) {
    if (this != &other) {
      size_ = 0;
      append(other.begin(), other.end());
    }
    return *this;
  }
  ~PickleItems() {
    if (capacity_ > kInline) delete[] heap_;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const uint32_t* begin() const { return capacity_ > kInline ? heap_ : inline_; }
  const uint32_t* end() const { return begin() + size_; }
  uint32_t operator[](size_t i) const { return begin()[i]; }
  void push_back(uint32_t item) { append(&item, &item + 1); }
  void append(const uint32_t* first, const uint32_t* last) {
    const size_t count = static_cast<size_t>(last - first);
    if (size_ + count > capacity_) grow(size_ + count);
    uint32_t* data = capacity_ > kInline ? heap_ : inline_;
    std::copy(first, last, data + size_);
    size_ += static_cast<uint32_t>(count);
  }

 private:
  static constexpr uint32_t kInline = 3;
  void grow(size_t needed) {
    const size_t capacity = std::max<size_t>(needed, size_t{capacity_} * 2);
    auto* data = new uint32_t[capacity];
    std::copy(begin(), end(), data);
    if (capacity_ > kInline) delete[] heap_;
    heap_ = data;
    capacity_ = static_cast<uint32_t>(capacity);
  }
  uint32_t size_ = 0;
  uint32_t capacity_ = kInline;
  union {
    uint32_t inline_[kInline];
    uint32_t* heap_;
  };
};

// One value of the unpickled graph. Containers and objects refer to other values by their index
// in PickleDocument::values, so a value shared through the memo (or a list that contains itself)
// is one node, and mutating it (APPEND after BINGET) is seen by every reference.
struct PickleValue {
  enum class Kind : uint8_t {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,  // UTF-8, checked
    kBytes,
    kTuple,
    kList,
    kDict,    // items alternate key, value, in insertion order
    kSet,     // set and frozenset, in pickle order
    kGlobal,  // an allow-listed class or function: `items` is {module, name}, two kString
    // A call the pickle asked for (REDUCE, NEWOBJ), not made: `items` is {callable, args} and,
    // once BUILD ran, the state as a third item.
    kObject,
    // BINPERSID: `items` is {the persistent id}; torch.save's storages are referenced so.
    kPersistentId,
  };
  Kind kind = Kind::kNone;
  uint32_t offset = 0;  // of the opcode that made it, for messages
  union {
    int64_t integer = 0;  // kBool (0/1), kInt
    double real;          // kFloat
  };
  std::string_view text;  // kString, kBytes: a view into PickleDocument::bytes
  PickleItems items;
};

// A class the pickle may name, by module and qualified name.
struct PickleGlobalName {
  std::string_view module;
  std::string_view name;
};

struct PickleLimits {
  // How deeply MARKs may nest; nesting is not needed by any format read here beyond a few levels.
  uint32_t max_mark_depth = 64;
  // Strings and bytes longer than this are refused (the checkpoint formats keep names short).
  uint64_t max_string_bytes = uint64_t{1} << 24;
  // Inputs longer than this are refused before a byte is read (offsets are 32-bit).
  uint64_t max_input_bytes = uint64_t{1} << 31;
};

// The unpickled graph. Every value is reachable from `root`; strings are views into `bytes`, which
// the document owns (so it may be moved, not copied).
class PickleDocument {
 public:
  // Held through a pointer so that moving the document keeps the views valid.
  std::unique_ptr<const std::string> bytes;
  std::deque<PickleValue> values;  // grows without moving: a large pickle is never copied
  uint32_t root = 0;
  int protocol = 0;               // from PROTO; 0 when absent
  MemoryReservation reservation;  // the graph's memory, counted against the budget

  const PickleValue& at(uint32_t index) const { return values[index]; }
};

// Reads a whole pickle (it must end at STOP, with nothing after it). Throws meshsim::Error
// (ValueError) naming `what` and the byte offset for an opcode it does not run (text-mode
// protocol 0, extension registry, out-of-band buffers), a global not in `allowed`, a REDUCE or
// NEWOBJ whose callable is not such a global, malformed or truncated input, invalid UTF-8, a memo
// index never stored, and an integer wider than 64 bits. Memory is linear in the input size: each
// opcode makes at most one value and moves at most the values earlier opcodes made; it is counted
// against the MemoryBudget (MemoryError when the graph would pass it).
PickleDocument read_pickle(std::string bytes, std::span<const PickleGlobalName> allowed,
                           std::string_view what, PickleLimits limits = {});

// Whether value `index` is the global module.name (a class or function the pickle named).
bool is_pickle_global(const PickleDocument& document, uint32_t index, std::string_view module,
                      std::string_view name);
// "module.name" of a kGlobal value.
std::string pickle_global_name(const PickleDocument& document, const PickleValue& value);
// Short human-readable rendering of a value, at most `max_depth` levels deep and `max_chars` long
// (cycles and large graphs are cut with "..."), for messages and `ckpt inspect`.
std::string describe_pickle_value(const PickleDocument& document, uint32_t index, int max_depth = 4,
                                  size_t max_chars = 200);

}  // namespace meshsim
