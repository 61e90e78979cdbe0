#include "sim/scenario/tensor_spec.hpp"

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/error.hpp"
#include "src/tensor/memory_budget.hpp"

namespace meshsim::sim {

namespace {

struct Arg {
  std::string text;
  size_t offset;
};

// Splits "a, f(b, c), d" at top-level commas, keeping each piece's offset.
std::vector<Arg> split_args(std::string_view s, size_t base) {
  std::vector<Arg> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || (s[i] == ',' && depth == 0)) {
      // Leading spaces are dropped so errors quote the argument as written.
      size_t first = start;
      while (first < i && s[first] == ' ') ++first;
      out.push_back({std::string(s.substr(first, i - first)), base + first});
      start = i + 1;
    } else if (s[i] == '(') {
      ++depth;
    } else if (s[i] == ')') {
      --depth;
    }
  }
  return out;
}

Expression parse_at(const Arg& a) {
  try {
    return Expression::parse(a.text);
  } catch (const ExpressionError& e) {
    throw ExpressionError(a.offset + e.offset(), e.what());
  }
}

}  // namespace

TensorSpec TensorSpec::parse(std::string_view text) {
  TensorSpec spec;
  spec.text_ = std::string(text);
  const size_t open = text.find('(');
  if (open == std::string_view::npos || text.empty() || text.back() != ')') {
    throw ExpressionError(0,
                          "expected a tensor constructor like ones(4), zeros(2, 3), arange(8), "
                          "full(4, rank) or meta(1024, 1024)");
  }
  spec.kind_ = std::string(text.substr(0, open));
  if (spec.kind_ != "ones" && spec.kind_ != "zeros" && spec.kind_ != "arange" &&
      spec.kind_ != "full" && spec.kind_ != "meta") {
    throw ExpressionError(0, fmt::format("unknown tensor constructor '{}' (expected ones, zeros, "
                                         "arange, full or meta)",
                                         spec.kind_));
  }
  std::vector<Arg> args = split_args(text.substr(open + 1, text.size() - open - 2), open + 1);
  if (!args.empty()) {
    const Arg& last = args.back();
    const size_t eq = last.text.find("dtype");
    if (eq != std::string::npos && last.text.find('=') != std::string::npos) {
      std::string name = last.text.substr(last.text.find('=') + 1);
      std::erase_if(name, [](char c) { return c == ' ' || c == '"' || c == '\''; });
      const std::optional<DType> dtype = parse_dtype(name);
      if (!dtype) throw ExpressionError(last.offset, fmt::format("unknown dtype '{}'", name));
      spec.dtype_ = *dtype;
      args.pop_back();
    }
  }
  if (spec.kind_ == "full") {
    if (args.size() < 2)
      throw ExpressionError(open, "full(size..., value) needs sizes and a value");
    spec.fill_ = parse_at(args.back());
    args.pop_back();
  }
  if (args.empty() ||
      (args.size() == 1 && args[0].text.find_first_not_of(' ') == std::string::npos)) {
    throw ExpressionError(open + 1, fmt::format("{}() needs at least one size", spec.kind_));
  }
  if (spec.kind_ == "arange" && args.size() != 1)
    throw ExpressionError(open + 1, "arange takes one size");
  for (const Arg& a : args) spec.sizes_.push_back(parse_at(a));
  return spec;
}

void TensorSpec::check(const ExpressionSchema& schema) const {
  for (const Expression& e : sizes_) e.check(schema);
  if (fill_) fill_->check(schema);
}

void TensorSpec::check_size(int64_t ranks) const {
  std::vector<int64_t> shape;
  for (const Expression& e : sizes_) {
    const std::optional<int64_t> size = e.constant_value();
    if (!size) return;  // depends on the rank: checked when the tensor is made
    shape.push_back(*size);
  }
  int64_t bytes = 0;
  try {
    bytes = Tensor::byte_size(shape, dtype_);  // the errors the tensor itself would raise
  } catch (const meshsim::Error& e) {
    throw ExpressionError(0, fmt::format("{}: {}", text_, e.what()));
  }
  if (kind_ == "meta") return;
  const std::optional<int64_t> total = checked_mul(bytes, ranks);
  if (!total || static_cast<uint64_t>(*total) > MemoryBudget::limit()) {
    throw ExpressionError(
        0, fmt::format("{} takes {} per rank, {} on the {} rank(s) that run this step: more than "
                       "the {} memory budget (--max-memory)",
                       text_, format_bytes(static_cast<uint64_t>(bytes)),
                       total ? format_bytes(static_cast<uint64_t>(*total)) : "more than 8 EiB",
                       ranks, format_bytes(MemoryBudget::limit())));
  }
}

Tensor TensorSpec::make(const ExpressionEnv& env) const {
  std::vector<int64_t> shape;
  for (const Expression& e : sizes_) shape.push_back(e.evaluate(env));
  if (kind_ == "meta") return Tensor(shape, dtype_, Tensor::Storage::kMeta);
  if (kind_ == "arange") return Tensor::arange(shape.at(0), dtype_);
  const int64_t value = kind_ == "ones" ? 1 : kind_ == "full" ? fill_->evaluate(env) : 0;
  return Tensor::full(shape, value, dtype_);
}

}  // namespace meshsim::sim
