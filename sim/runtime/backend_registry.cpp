#include "sim/runtime/backend_registry.hpp"

#include <algorithm>

namespace meshsim::sim {

void BackendRegistry::add(BackendEntry entry) {
  const auto same = std::find_if(entries_.begin(), entries_.end(),
                                 [&](const BackendEntry& e) { return e.name == entry.name; });
  if (same != entries_.end()) {
    *same = std::move(entry);
  } else {
    entries_.push_back(std::move(entry));
  }
}

const BackendEntry* BackendRegistry::find(std::string_view name) const {
  const auto it = std::find_if(entries_.begin(), entries_.end(),
                               [&](const BackendEntry& e) { return e.name == name; });
  return it == entries_.end() ? nullptr : &*it;
}

}  // namespace meshsim::sim
