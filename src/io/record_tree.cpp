#include "src/io/record_tree.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "src/enum_names.hpp"
#include "src/error.hpp"
#include "src/printable.hpp"

namespace meshsim {

RecordValue::RecordValue() = default;
RecordValue::~RecordValue() = default;
RecordValue::RecordValue(const RecordValue&) = default;
RecordValue::RecordValue(RecordValue&&) noexcept = default;
RecordValue& RecordValue::operator=(const RecordValue&) = default;
RecordValue& RecordValue::operator=(RecordValue&&) noexcept = default;

RecordValue RecordValue::of(int64_t v) {
  RecordValue out;
  out.kind = Kind::kInt;
  out.integer = v;
  return out;
}

RecordValue RecordValue::of(std::string v) {
  RecordValue out;
  out.kind = Kind::kStr;
  out.text = std::move(v);
  return out;
}

RecordValue RecordValue::of(std::vector<int64_t> v) {
  RecordValue out;
  out.kind = Kind::kInts;
  out.integers = std::move(v);
  return out;
}

RecordValue RecordValue::of(std::vector<std::string> v) {
  RecordValue out;
  out.kind = Kind::kStrs;
  out.strings = std::move(v);
  return out;
}

RecordValue RecordValue::bytes(std::string v) {
  RecordValue out;
  out.kind = Kind::kBytes;
  out.text = std::move(v);
  return out;
}

RecordValue RecordValue::borrowed_bytes(std::string_view v) {
  RecordValue out;
  out.kind = Kind::kBytes;
  out.borrowed = v;
  out.is_borrowed = true;
  return out;
}

RecordValue RecordValue::of(RecordObject v) {
  RecordValue out;
  out.kind = Kind::kObject;
  out.objects.push_back(std::move(v));
  return out;
}

RecordValue RecordValue::of(std::vector<RecordObject> v) {
  RecordValue out;
  out.kind = Kind::kObjects;
  out.objects = std::move(v);
  return out;
}

constexpr EnumName<RecordValue::Kind> kRecordValueKindNames[] = {
    {RecordValue::Kind::kNone, "None"},          {RecordValue::Kind::kInt, "an int"},
    {RecordValue::Kind::kStr, "a str"},          {RecordValue::Kind::kInts, "a list of int"},
    {RecordValue::Kind::kStrs, "a list of str"}, {RecordValue::Kind::kBytes, "bytes"},
    {RecordValue::Kind::kObject, "an object"},   {RecordValue::Kind::kObjects, "a list of objects"},
};

std::string_view value_kind_name(RecordValue::Kind kind) {
  return name_in(kRecordValueKindNames, kind, "an unknown kind");
}

// Spelled out: clang 14 crashes on a defaulted comparison defined out of line.
bool operator==(const RecordValue& a, const RecordValue& b) {
  const bool same_text =
      a.kind == RecordValue::Kind::kBytes ? a.byte_view() == b.byte_view() : a.text == b.text;
  return a.kind == b.kind && a.integer == b.integer && same_text && a.integers == b.integers &&
         a.strings == b.strings && a.objects == b.objects;
}

RecordObject& RecordObject::set(std::string key, RecordValue value) {
  fields.emplace_back(std::move(key), std::move(value));
  return *this;
}

const RecordValue* RecordObject::find(std::string_view key) const {
  const auto it = std::find_if(fields.begin(), fields.end(),
                               [&](const auto& field) { return field.first == key; });
  return it == fields.end() ? nullptr : &it->second;
}

void check_record_types(const RecordObject& root, const std::set<std::string, std::less<>>& allowed,
                        std::string_view what) {
  std::vector<std::pair<const RecordObject*, std::string>> pending{{&root, printable(root.type)}};
  while (!pending.empty()) {
    auto [object, path] = std::move(pending.back());
    pending.pop_back();
    if (!allowed.contains(object->type)) {
      std::string names;
      for (const std::string& name : allowed) names += (names.empty() ? "" : ", ") + name;
      throw runtime_error(fmt::format(
          "strict load of {} refused type '{}' at {}: only {} are allowed (load without strict "
          "to read other types)",
          what, printable(object->type), path, names));
    }
    for (const auto& [key, value] : object->fields) {
      for (size_t i = 0; i < value.objects.size(); ++i) {
        pending.emplace_back(&value.objects[i],
                             value.kind == RecordValue::Kind::kObjects
                                 ? fmt::format("{}.{}[{}]", path, printable(key), i)
                                 : fmt::format("{}.{}", path, printable(key)));
      }
    }
  }
}

RecordReader::RecordReader(const RecordObject& object, std::string path, bool strict)
    : object_(&object), path_(std::move(path)), strict_(strict) {}

const RecordReader& RecordReader::expect_type(std::string_view type) const {
  if (object_->type != type) {
    throw runtime_error(
        fmt::format("{} holds a '{}' where a '{}' belongs", path_, printable(object_->type), type));
  }
  return *this;
}

const RecordReader& RecordReader::require(std::initializer_list<std::string_view> keys) const {
  std::vector<std::string_view> missing;
  for (std::string_view key : keys) {
    if (!object_->find(key)) missing.push_back(key);
  }
  if (missing.empty()) return *this;
  std::sort(missing.begin(), missing.end());
  std::string listed;
  for (std::string_view key : missing)
    listed += fmt::format("{}'{}'", listed.empty() ? "" : ", ", key);
  throw value_error(
      fmt::format("state_dict is missing required keys: {{{}}} (in {})", listed, path_));
}

void RecordReader::finish() const {
  if (!strict_) return;
  std::set<std::string_view> keys;
  for (const auto& [key, value] : object_->fields) {
    if (!keys.insert(key).second) {
      throw runtime_error(fmt::format("strict load refused field '{}' of {}: it appears twice",
                                      printable(key), path_));
    }
    if (!read_.contains(key)) {
      throw runtime_error(
          fmt::format("strict load refused unknown field '{}' of {} (a newer meshsim's record?)",
                      printable(key), path_));
    }
  }
}

bool RecordReader::has(std::string_view key) const {
  return object_->find(key) != nullptr;
}

bool RecordReader::is_none(std::string_view key) const {
  const RecordValue* value = object_->find(key);
  read_.emplace(key);
  return value == nullptr || value->kind == RecordValue::Kind::kNone;
}

const RecordValue& RecordReader::field(std::string_view key, RecordValue::Kind kind) const {
  const RecordValue* value = object_->find(key);
  if (value == nullptr) {
    throw value_error(
        fmt::format("state_dict is missing required keys: {{'{}'}} (in {})", key, path_));
  }
  if (value->kind != kind) {
    throw runtime_error(fmt::format("{}.{} is {}, expected {}", path_, key,
                                    value_kind_name(value->kind), value_kind_name(kind)));
  }
  read_.emplace(key);
  return *value;
}

int64_t RecordReader::integer(std::string_view key) const {
  return field(key, RecordValue::Kind::kInt).integer;
}

bool RecordReader::flag(std::string_view key) const {
  const int64_t value = integer(key);
  if (value != 0 && value != 1) {
    throw runtime_error(fmt::format("{}.{} is {}, not 0 or 1", path_, key, value));
  }
  return value == 1;
}

const std::string& RecordReader::str(std::string_view key) const {
  return field(key, RecordValue::Kind::kStr).text;
}

std::string_view RecordReader::bytes(std::string_view key) const {
  return field(key, RecordValue::Kind::kBytes).byte_view();
}

const std::vector<int64_t>& RecordReader::integers(std::string_view key) const {
  return field(key, RecordValue::Kind::kInts).integers;
}

const std::vector<std::string>& RecordReader::strings(std::string_view key) const {
  return field(key, RecordValue::Kind::kStrs).strings;
}

RecordReader RecordReader::object(std::string_view key) const {
  return RecordReader(field(key, RecordValue::Kind::kObject).objects.front(),
                      fmt::format("{}.{}", path_, key), strict_);
}

std::vector<RecordReader> RecordReader::objects(std::string_view key) const {
  const RecordValue& value = field(key, RecordValue::Kind::kObjects);
  std::vector<RecordReader> out;
  for (size_t i = 0; i < value.objects.size(); ++i) {
    out.emplace_back(value.objects[i], fmt::format("{}.{}[{}]", path_, key, i), strict_);
  }
  return out;
}

}  // namespace meshsim
