// A checkpoint record as a tree of typed objects with named fields: the only shapes a meshsim
// archive holds. It plays the part pickle plays for torch.save, without running any code: every
// object names its type, so a strict loader can refuse types it does not know, and a reader of a
// typed record (a DeviceMesh, a DTensor) checks keys and field kinds with errors that name the
// path.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meshsim {

struct RecordObject;

// One field's value. A tagged struct rather than a variant: the archive code reads and writes
// the members the kind names, and nothing else.
struct RecordValue {
  // Numbers are part of the file format: never reuse one.
  enum class Kind : uint32_t {
    kNone = 0,
    kInt = 1,
    kStr = 2,
    kInts = 3,
    kStrs = 4,
    kBytes = 5,
    kObject = 6,   // objects holds exactly one
    kObjects = 7,  // a list of objects
  };
  Kind kind = Kind::kNone;
  int64_t integer = 0;
  std::string text;  // kStr and kBytes
  // kBytes held elsewhere instead of in `text`: a tensor's storage being saved, or the bytes of
  // a file being read (which must outlive the value). Large shards move without a copy.
  std::string_view borrowed;
  bool is_borrowed = false;
  std::vector<int64_t> integers;
  std::vector<std::string> strings;
  std::vector<RecordObject> objects;

  // Defined where RecordObject is complete: `objects` holds that type.
  RecordValue();
  ~RecordValue();
  RecordValue(const RecordValue&);
  RecordValue(RecordValue&&) noexcept;
  RecordValue& operator=(const RecordValue&);
  RecordValue& operator=(RecordValue&&) noexcept;

  static RecordValue none() { return {}; }
  static RecordValue of(int64_t v);
  static RecordValue of(std::string v);
  static RecordValue of(std::vector<int64_t> v);
  static RecordValue of(std::vector<std::string> v);
  static RecordValue bytes(std::string v);
  static RecordValue borrowed_bytes(std::string_view v);
  // kBytes' bytes, wherever they are held.
  std::string_view byte_view() const { return is_borrowed ? borrowed : std::string_view(text); }
  static RecordValue of(RecordObject v);
  static RecordValue of(std::vector<RecordObject> v);

  friend bool operator==(const RecordValue&, const RecordValue&);
};

std::string_view value_kind_name(RecordValue::Kind kind);

struct RecordObject {
  std::string type;
  std::vector<std::pair<std::string, RecordValue>> fields;  // in the order written

  RecordObject& set(std::string key, RecordValue value);
  const RecordValue* find(std::string_view key) const;

  friend bool operator==(const RecordObject&, const RecordObject&) = default;
};

// Walks a whole tree (no recursion: an explicit stack) and throws RuntimeError naming the path
// of the first object whose type is not in `allowed`: the strict loader's check.
void check_record_types(const RecordObject& root, const std::set<std::string, std::less<>>& allowed,
                        std::string_view what);

// Reads one typed object: checks its type, that the required keys are there (PyTorch's
// ValueError "state_dict is missing required keys: {...}"), and each field's kind. Errors name
// `path` ("DTensor._spec.mesh"). A strict reader also refuses keys it was not asked for.
class RecordReader {
 public:
  RecordReader(const RecordObject& object, std::string path, bool strict);

  // Throws RuntimeError unless the object has this type.
  const RecordReader& expect_type(std::string_view type) const;
  // ValueError listing every missing key, sorted, in Python's set syntax.
  const RecordReader& require(std::initializer_list<std::string_view> keys) const;
  // Strict readers: RuntimeError naming the first field no getter asked for. Call last.
  void finish() const;

  bool has(std::string_view key) const;
  bool is_none(std::string_view key) const;
  int64_t integer(std::string_view key) const;
  bool flag(std::string_view key) const;  // an integer that must be 0 or 1
  const std::string& str(std::string_view key) const;
  std::string_view bytes(std::string_view key) const;
  const std::vector<int64_t>& integers(std::string_view key) const;
  const std::vector<std::string>& strings(std::string_view key) const;
  RecordReader object(std::string_view key) const;
  std::vector<RecordReader> objects(std::string_view key) const;

  const RecordObject& raw() const { return *object_; }
  const std::string& path() const { return path_; }
  bool strict() const { return strict_; }

 private:
  const RecordValue& field(std::string_view key, RecordValue::Kind kind) const;
  const RecordObject* object_;
  std::string path_;
  bool strict_;
  mutable std::set<std::string, std::less<>> read_;
};

}  // namespace meshsim
