// One table per enum: every value with the name meshsim prints and parses (PyTorch's spelling
// where it has one). The name function and the parser of an enum both read its table, so a value
// added to the enum needs one line, in one place.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meshsim {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// The first name `table` gives `value`; `unknown` when it has none. A table may list a value
// again under other names (aliases the parser accepts): the first is the one printed.
template <typename E, std::size_t N>
constexpr std::string_view name_in(const EnumName<E> (&table)[N], E value,
                                   std::string_view unknown = "?") {
  for (const EnumName<E>& e : table) {
    if (e.value == value) return e.name;
  }
  return unknown;
}

// The value `table` names `name`, or nullopt.
template <typename E, std::size_t N>
constexpr std::optional<E> value_in(const EnumName<E> (&table)[N], std::string_view name) {
  for (const EnumName<E>& e : table) {
    if (e.name == name) return e.value;
  }
  return std::nullopt;
}

// Every name in `table`, in its order (aliases too).
template <typename E, std::size_t N>
std::vector<std::string> names_of(const EnumName<E> (&table)[N]) {
  std::vector<std::string> out;
  for (const EnumName<E>& e : table) out.emplace_back(e.name);
  return out;
}

}  // namespace meshsim
