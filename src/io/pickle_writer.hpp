// A writer of Python pickles (protocol 2) for the files meshsim writes in PyTorch's formats: DCP's
// .metadata, torch.save's data.pkl and Flight Recorder dumps. It emits opcodes one by one, as the
// caller walks the object it describes; it memoizes only where the caller asks (memo_put and
// memo_get), so every other value is written where it is used.
// Python's pickle.load and torch.load(weights_only=True) read what it writes. See
// docs/checkpoints.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace meshsim {

class PickleWriter {
 public:
  PickleWriter();  // writes the protocol header

  // Values pushed on the unpickler's stack.
  void none();
  void boolean(bool value);
  void integer(int64_t value);
  void string(std::string_view utf8);
  // The class or function module.name (GLOBAL).
  void global(std::string_view module, std::string_view name);
  void empty_tuple();
  void empty_list();
  void empty_dict();
  // The value on top of the stack kept in the unpickler's memo under `index` / pushed again from
  // it (for a value written many times, such as a dict key).
  void memo_put(uint32_t index);
  void memo_get(uint32_t index);
  // A tuple of integers (a shape, strides).
  void int_tuple(std::span<const int64_t> values);

  // MARK, then what follows up to one of these, becomes a tuple / list items / dict items.
  void mark();
  void tuple_from_mark();
  void append_from_mark();     // APPENDS onto the list below the mark
  void set_items_from_mark();  // SETITEMS onto the dict below the mark: key, value, key, ...
  // Wraps the value on top of the stack in a 1-tuple.
  void tuple1();

  // callable args -> callable(*args)
  void reduce();
  // class args -> class.__new__(class, *args)
  void new_object();
  // object state -> the object, its state set (dict update, or __setstate__(state))
  void build();
  // id -> the object the loader's persistent_load makes of id (torch.save's storages)
  void persistent_id();

  // STOP; the pickle's bytes. The writer is spent: write each pickle with a new one.
  std::string finish();

 private:
  void op(uint8_t code) { out_.push_back(static_cast<char>(code)); }
  void little_endian(uint64_t value, int bytes);
  std::string out_;
};

}  // namespace meshsim
