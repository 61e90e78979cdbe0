// The layout of a whole device mesh: one Axis per mesh dim over a shared rank table.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "src/mesh/axis.hpp"

namespace meshsim {

// A nested list of ranks: shape plus row-major values.
struct RankTensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> values;
  friend bool operator==(const RankTensor&, const RankTensor&) = default;
};

// As Python prints the nested list (tensor.tolist()): [[0, 1], [2, 3]].
std::string py_nested_list(const RankTensor& t);

class MeshLayout {
 public:
  MeshLayout() = default;
  explicit MeshLayout(std::vector<Axis> axes) : axes_(std::move(axes)) {}

  // One single-mode axis per size; strides default to row-major suffix products.
  static MeshLayout from_sizes_strides(std::span<const int64_t> sizes,
                                       std::span<const int64_t> strides = {});

  const std::vector<Axis>& axes() const { return axes_; }
  const Axis& operator[](size_t dim) const { return axes_.at(dim); }
  size_t ndim() const { return axes_.size(); }
  // Per-dim numel.
  std::vector<int64_t> shape() const;
  int64_t numel() const;
  int64_t cosize() const;

  // All axes merged into one, canonical.
  Axis collapse() const;
  // Offsets of every mesh coordinate (row-major over mesh dims).
  std::vector<int64_t> positions() const;
  // Start offsets of every replica of this layout inside a rank table of `table_size` entries.
  std::vector<int64_t> replica_offsets(int64_t table_size) const;

  // `(num_replicas, *shape)` tensor of ranks: entry = rank_map[offset + position].
  RankTensor full_mesh_tensor(std::span<const int64_t> rank_map) const;

  // Replaces axes [begin, end) with `replacement`.
  MeshLayout splice(size_t begin, size_t end, const std::vector<Axis>& replacement) const;

  std::string to_string() const;
  friend bool operator==(const MeshLayout&, const MeshLayout&) = default;

 private:
  std::vector<Axis> axes_;
};

// Every replica group of `axis` in a rank table: for each offset of the complement (ascending),
// the ranks at offset + codomain(axis). Groups partition the table when the axis tiles it.
std::vector<std::vector<int64_t>> global_ranks(const Axis& axis, std::span<const int64_t> rank_map);

}  // namespace meshsim
