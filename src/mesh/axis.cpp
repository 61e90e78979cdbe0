#include "src/mesh/axis.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/error.hpp"

namespace meshsim {

Axis Axis::canonical(std::vector<Mode> modes) {
  std::vector<Mode> out;
  for (const Mode& m : modes) {
    if (m.size < 1) throw value_error(fmt::format("layout mode size must be >= 1, got {}", m.size));
    if (m.stride < 0) {
      throw value_error(fmt::format("layout mode stride must be >= 0, got {}", m.stride));
    }
    if (m.size == 1) continue;
    // A span or a merged size past int64 is no layout (only parsed text can ask for one).
    const std::optional<int64_t> span = checked_mul(m.size, m.stride);
    if (!span)
      throw value_error(fmt::format("layout mode {}:{} spans more than int64", m.size, m.stride));
    if (!out.empty() && out.back().stride == *span) {
      const std::optional<int64_t> merged = checked_mul(out.back().size, m.size);
      if (!merged) throw value_error("layout sizes multiply past int64");
      out.back() = {*merged, m.stride};
    } else {
      out.push_back(m);
    }
  }
  return Axis(std::move(out));
}

int64_t Axis::numel() const {
  int64_t n = 1;
  for (const Mode& m : modes_) n *= m.size;
  return n;
}

int64_t Axis::cosize() const {
  int64_t last = 0;
  for (const Mode& m : modes_) last += (m.size - 1) * m.stride;
  return last + 1;
}

std::vector<int64_t> enumerate_offsets(std::span<const Mode> modes) {
  std::vector<int64_t> out{0};
  for (const Mode& m : modes) {
    std::vector<int64_t> next;
    next.reserve(out.size() * static_cast<size_t>(m.size));
    for (int64_t base : out) {
      for (int64_t i = 0; i < m.size; ++i) next.push_back(base + i * m.stride);
    }
    out = std::move(next);
  }
  return out;
}

std::vector<int64_t> Axis::codomain() const {
  return enumerate_offsets(modes_);
}

namespace {
std::vector<Mode> by_descending_stride(std::vector<Mode> modes) {
  std::stable_sort(modes.begin(), modes.end(),
                   [](const Mode& a, const Mode& b) { return a.stride > b.stride; });
  return modes;
}
}  // namespace

bool Axis::is_orthogonal() const {
  const std::vector<Mode> sorted = by_descending_stride(modes_);
  for (size_t i = 0; i + 1 < sorted.size(); ++i) {
    const int64_t inner_span = sorted[i + 1].stride * sorted[i + 1].size;
    if (inner_span == 0 || sorted[i].stride % inner_span != 0) return false;
  }
  return true;
}

bool Axis::is_non_increasing() const {
  for (size_t i = 0; i + 1 < modes_.size(); ++i) {
    if (modes_[i].stride < modes_[i + 1].stride) return false;
  }
  return true;
}

Axis Axis::complement(int64_t world) const {
  std::vector<Mode> ascending;
  for (const Mode& m : modes_) {
    if (m.size > 1 && m.stride > 0) ascending.push_back(m);
  }
  std::stable_sort(ascending.begin(), ascending.end(),
                   [](const Mode& a, const Mode& b) { return a.stride < b.stride; });
  std::vector<Mode> gaps;
  int64_t covered = 1;
  for (const Mode& m : ascending) {
    if (m.stride % covered != 0) {
      throw value_error(
          fmt::format("layout {} has no complement: stride {} is not a multiple of {}", to_string(),
                      m.stride, covered));
    }
    gaps.push_back({m.stride / covered, covered});
    covered = m.stride * m.size;
  }
  gaps.push_back({(world + covered - 1) / covered, covered});
  // Canonicalize after ordering so that neighbours that tile each other coalesce.
  return canonical(by_descending_stride(std::move(gaps)));
}

std::vector<Axis> Axis::split(std::span<const int64_t> sizes) const {
  for (int64_t s : sizes) {
    if (s < 1) throw value_error(fmt::format("unflatten sizes must be >= 1, got {}", s));
  }
  if (checked_product(sizes) != numel()) {
    throw value_error(fmt::format("the product of sizes [{}] is not the size {} of the axis {}",
                                  fmt::join(sizes, ", "), numel(), to_string()));
  }
  // Row-major: the new dim k steps over `inner` positions of this axis' domain.
  std::vector<Axis> out(sizes.size());
  int64_t inner = 1;
  for (size_t k = sizes.size(); k-- > 0;) {
    int64_t skip = inner;  // positions to step over, consumed from the innermost mode
    int64_t remaining = sizes[k];
    std::vector<Mode> taken;  // innermost first
    for (size_t i = modes_.size(); i-- > 0 && remaining > 1;) {
      Mode m = modes_[i];
      if (skip > 1) {
        if (skip % m.size == 0) {
          skip /= m.size;
          continue;
        }
        if (m.size % skip != 0) {
          throw value_error(
              fmt::format("sizes cut mode ({}:{}) of {} unevenly", m.size, m.stride, to_string()));
        }
        m = {m.size / skip, m.stride * skip};
        skip = 1;
      }
      if (remaining % m.size == 0) {
        taken.push_back(m);
        remaining /= m.size;
      } else if (m.size % remaining == 0) {
        taken.push_back({remaining, m.stride});
        remaining = 1;
      } else {
        throw value_error(
            fmt::format("sizes cut mode ({}:{}) of {} unevenly", m.size, m.stride, to_string()));
      }
    }
    std::reverse(taken.begin(), taken.end());
    out[k] = canonical(std::move(taken));
    inner *= sizes[k];
  }
  return out;
}

std::string Axis::to_string() const {
  if (modes_.empty()) return "():()";
  if (modes_.size() == 1) return fmt::format("({}:{})", modes_[0].size, modes_[0].stride);
  std::string shape, stride;
  for (const Mode& m : modes_) {
    shape += (shape.empty() ? "" : ",") + std::to_string(m.size);
    stride += (stride.empty() ? "" : ",") + std::to_string(m.stride);
  }
  return "(" + shape + "):(" + stride + ")";
}

namespace {

// Reads a nested integer tuple "(a,(b,c))" or a bare integer and appends its leaves in order.
class IntTupleReader {
 public:
  IntTupleReader(std::string_view text, size_t pos) : text_(text), pos_(pos) {}

  // Nesting deeper than this is refused: no layout needs it, and parsing recurses once per level.
  static constexpr size_t kMaxNesting = 32;

  void read(std::vector<int64_t>& leaves, size_t depth = 0) {
    skip_space();
    if (peek() == '(') {
      if (depth >= kMaxNesting) fail(fmt::format("at most {} levels of parentheses", kMaxNesting));
      ++pos_;
      skip_space();
      if (peek() == ')') fail("an empty tuple");
      for (;;) {
        read(leaves, depth + 1);
        skip_space();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        if (peek() == ')') {
          ++pos_;
          return;
        }
        fail("',' or ')'");
      }
    }
    if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("an integer or '('");
    int64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      if (v > (INT64_MAX - 9) / 10) fail("a smaller integer");
      v = v * 10 + (text_[pos_++] - '0');
    }
    leaves.push_back(v);
  }

  // A top-level "(a:b)" holds both halves in one pair of parentheses.
  bool at_single_mode_form() const {
    size_t p = pos_;
    while (p < text_.size() && text_[p] == ' ') ++p;
    if (p >= text_.size() || text_[p] != '(') return false;
    for (size_t i = p + 1; i < text_.size(); ++i) {
      if (text_[i] == ':') return true;
      if (!std::isdigit(static_cast<unsigned char>(text_[i])) && text_[i] != ' ') return false;
    }
    return false;
  }

  void skip_space() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(fmt::format("'{}'", c));
    ++pos_;
  }
  void advance() { ++pos_; }
  bool at_end() {
    skip_space();
    return pos_ >= text_.size();
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw value_error(
        fmt::format("layout \"{}\": expected {} at column {}", text_, what, pos_ + 1));
  }

 private:
  std::string_view text_;
  size_t pos_;
};

}  // namespace

Axis Axis::parse(std::string_view text) {
  IntTupleReader reader(text, 0);
  std::vector<int64_t> sizes, strides;
  if (reader.at_single_mode_form()) {
    reader.expect('(');
    reader.read(sizes);
    reader.expect(':');
    reader.read(strides);
    reader.expect(')');
  } else {
    reader.read(sizes);
    reader.expect(':');
    reader.read(strides);
  }
  if (!reader.at_end()) reader.fail("the end of the layout");
  if (sizes.size() != strides.size()) {
    throw value_error(
        fmt::format("layout \"{}\": {} sizes but {} strides", text, sizes.size(), strides.size()));
  }
  std::vector<Mode> modes;
  for (size_t i = 0; i < sizes.size(); ++i) modes.push_back({sizes[i], strides[i]});
  return canonical(std::move(modes));
}

}  // namespace meshsim
