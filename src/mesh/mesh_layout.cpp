#include "src/mesh/mesh_layout.hpp"

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

std::string py_nested_list(const RankTensor& t) {
  // Iterative: the bracket of dim d encloses span[d] elements; element i closes and reopens the
  // brackets whose span starts at i.
  const size_t n = t.shape.size();
  std::vector<int64_t> span(n, 1);
  for (size_t d = n; d-- > 0;) span[d] = t.shape[d] * (d + 1 < n ? span[d + 1] : 1);
  const auto starts_at = [&](size_t i) {
    size_t count = 0;
    for (int64_t s : span) count += s > 0 && static_cast<int64_t>(i) % s == 0;
    return count;
  };
  std::string out(n, '[');
  for (size_t i = 0; i < t.values.size(); ++i) {
    if (i > 0) {
      const size_t reopen = starts_at(i);
      out += std::string(reopen, ']') + ", " + std::string(reopen, '[');
    }
    out += std::to_string(t.values[i]);
  }
  return out + std::string(n, ']');
}

MeshLayout MeshLayout::from_sizes_strides(std::span<const int64_t> sizes,
                                          std::span<const int64_t> strides) {
  if (!strides.empty() && strides.size() != sizes.size()) {
    throw value_error(fmt::format("{} sizes but {} strides", sizes.size(), strides.size()));
  }
  std::vector<Axis> axes(sizes.size());
  int64_t suffix = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    axes[i] = Axis::single(sizes[i], strides.empty() ? suffix : strides[i]);
    suffix *= sizes[i];
  }
  return MeshLayout(std::move(axes));
}

std::vector<int64_t> MeshLayout::shape() const {
  std::vector<int64_t> out;
  for (const Axis& a : axes_) out.push_back(a.numel());
  return out;
}

int64_t MeshLayout::numel() const {
  int64_t n = 1;
  for (const Axis& a : axes_) n *= a.numel();
  return n;
}

int64_t MeshLayout::cosize() const {
  return collapse().cosize();
}

Axis MeshLayout::collapse() const {
  std::vector<Mode> modes;
  for (const Axis& a : axes_) modes.insert(modes.end(), a.modes().begin(), a.modes().end());
  return Axis::canonical(std::move(modes));
}

std::vector<int64_t> MeshLayout::positions() const {
  std::vector<Mode> modes;
  for (const Axis& a : axes_) modes.insert(modes.end(), a.modes().begin(), a.modes().end());
  return enumerate_offsets(modes);
}

std::vector<int64_t> MeshLayout::replica_offsets(int64_t table_size) const {
  return collapse().complement(table_size).codomain();
}

RankTensor MeshLayout::full_mesh_tensor(std::span<const int64_t> rank_map) const {
  const auto table_size = static_cast<int64_t>(rank_map.size());
  const std::vector<int64_t> offsets = replica_offsets(table_size);
  const std::vector<int64_t> pos = positions();
  RankTensor out;
  out.shape.push_back(static_cast<int64_t>(offsets.size()));
  for (int64_t s : shape()) out.shape.push_back(s);
  out.values.reserve(offsets.size() * pos.size());
  for (int64_t o : offsets) {
    for (int64_t p : pos) {
      MESHSIM_ASSERT(
          o + p < table_size,
          fmt::format("layout {} leaves the rank table of {} entries", to_string(), table_size));
      out.values.push_back(rank_map[static_cast<size_t>(o + p)]);
    }
  }
  return out;
}

MeshLayout MeshLayout::splice(size_t begin, size_t end,
                              const std::vector<Axis>& replacement) const {
  std::vector<Axis> axes(axes_.begin(), axes_.begin() + static_cast<ptrdiff_t>(begin));
  axes.insert(axes.end(), replacement.begin(), replacement.end());
  axes.insert(axes.end(), axes_.begin() + static_cast<ptrdiff_t>(end), axes_.end());
  return MeshLayout(std::move(axes));
}

std::string MeshLayout::to_string() const {
  std::string out = "[";
  for (size_t i = 0; i < axes_.size(); ++i) out += (i ? ", " : "") + axes_[i].to_string();
  return out + "]";
}

std::vector<std::vector<int64_t>> global_ranks(const Axis& axis,
                                               std::span<const int64_t> rank_map) {
  const auto table_size = static_cast<int64_t>(rank_map.size());
  const std::vector<int64_t> members = axis.codomain();
  std::vector<std::vector<int64_t>> groups;
  for (int64_t o : axis.complement(table_size).codomain()) {
    std::vector<int64_t> group;
    for (int64_t p : members) {
      // A complement rounds up to whole replicas; a last replica past the table does not exist.
      if (o + p >= table_size) {
        group.clear();
        break;
      }
      group.push_back(rank_map[static_cast<size_t>(o + p)]);
    }
    if (!group.empty()) groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace meshsim
