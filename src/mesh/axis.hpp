// One mesh dimension as a CuTe-style layout: modes of (size : stride) over rank-table positions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace meshsim {

struct Mode {
  int64_t size;
  int64_t stride;
  friend bool operator==(const Mode&, const Mode&) = default;
};

// An axis in canonical form: no size-1 modes and no two neighbours that coalesce. The empty
// axis `():()` has numel 1. Canonical form makes equality of axes equality of the maps they denote.
class Axis {
 public:
  Axis() = default;

  // Drops size-1 modes, then merges neighbours (s_i:d_i),(s_j:d_j) into (s_i*s_j : d_j) whenever
  // d_i == s_j*d_j, left to right. Throws meshsim::Error (ValueError) on sizes < 1 or strides < 0.
  static Axis canonical(std::vector<Mode> modes);
  static Axis single(int64_t size, int64_t stride) { return canonical({{size, stride}}); }

  // Parses the shape:stride notation, nesting allowed: "(3,2):(2,1)", "(6:1)", "6:1",
  // "((7,(5,3)),2):((30,(6,2)),1)". Throws meshsim::Error (ValueError) naming the column.
  static Axis parse(std::string_view text);

  const std::vector<Mode>& modes() const { return modes_; }
  int64_t numel() const;
  // One past the largest offset.
  int64_t cosize() const;
  // Offsets of every coordinate, enumerated lexicographically with the last mode fastest.
  std::vector<int64_t> codomain() const;

  // Sorted by descending stride, each stride is a multiple of the next mode's span.
  bool is_orthogonal() const;
  // Strides never ascending (PyTorch's check_sorted, which slicing requires of the merged dims).
  bool is_non_increasing() const;

  // The axis that, combined with this one, tiles [0, world); modes ordered by descending stride
  // so that its codomain is ascending.
  Axis complement(int64_t world) const;

  // Composition with a row-major layout of `sizes`: one axis per size, outermost first.
  // Throws meshsim::Error (ValueError) when the product differs from numel() or the sizes cut a
  // mode unevenly.
  std::vector<Axis> split(std::span<const int64_t> sizes) const;

  // "(6:1)" for one mode, "(2,2):(4,1)" for several, "():()" when empty.
  std::string to_string() const;

  friend bool operator==(const Axis&, const Axis&) = default;

 private:
  explicit Axis(std::vector<Mode> modes) : modes_(std::move(modes)) {}
  std::vector<Mode> modes_;
};

// Lexicographic offsets (last mode fastest) of the modes as given, without canonicalizing.
std::vector<int64_t> enumerate_offsets(std::span<const Mode> modes);

}  // namespace meshsim
