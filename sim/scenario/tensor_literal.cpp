#include "sim/scenario/tensor_literal.hpp"

#include <fmt/format.h>

namespace meshsim::sim {

TensorLiteral TensorLiteral::parse(const toml::node& node, LoadContext& ctx,
                                   std::optional<DType> dtype) {
  TensorLiteral out;
  bool any_float = false;
  // Depth-first without recursion: the nodes still to read, each with its depth.
  std::vector<std::pair<const toml::node*, size_t>> pending{{&node, 0}};
  while (!pending.empty()) {
    const auto [n, depth] = pending.back();
    pending.pop_back();
    if (const toml::array* array = n->as_array()) {
      if (depth >= Tensor::kMaxDims)
        ctx.fail(*n, fmt::format("a tensor has at most {} dims", Tensor::kMaxDims));
      if (out.shape_.size() == depth) {
        if (!out.entries_.empty()) ctx.fail(*n, "values is ragged: a list where a number belongs");
        out.shape_.push_back(static_cast<int64_t>(array->size()));
      }
      if (out.shape_[depth] != static_cast<int64_t>(array->size())) {
        ctx.fail(*n, fmt::format("values is ragged: expected {} entries at depth {}, found {}",
                                 out.shape_[depth], depth + 1, array->size()));
      }
      if (array->empty() && depth + 1 < out.shape_.size())
        ctx.fail(*n, "values is ragged: an empty list among lists");
      for (size_t i = array->size(); i-- > 0;) pending.emplace_back(array->get(i), depth + 1);
      continue;
    }
    if (depth != out.shape_.size()) ctx.fail(*n, "values is ragged: a number where a list belongs");
    if (const auto* f = n->as_floating_point()) {
      any_float = true;
      out.entries_.emplace_back(f->get());
    } else if (const auto* i = n->as_integer()) {
      out.entries_.emplace_back(static_cast<double>(i->get()));
      if (static_cast<int64_t>(static_cast<double>(i->get())) != i->get())
        out.entries_.back() = ctx.expression_of(*n, "a value");  // exact past 2^53
    } else {
      out.entries_.emplace_back(ctx.expression_of(*n, "a value"));
    }
    if (!is_floating(dtype.value_or(DType::kFloat32)) && any_float) {
      ctx.fail(*n, fmt::format("a {} tensor holds integers, not {}", dtype_name(*dtype),
                               n->as_floating_point()->get()));
    }
  }
  // torch.tensor([]) is float32 too.
  out.dtype_ = dtype.value_or(any_float || out.entries_.empty() ? DType::kFloat32 : DType::kInt64);
  return out;
}

Tensor TensorLiteral::make(const ExpressionEnv& env) const {
  Tensor t(shape_, dtype_);
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto index = static_cast<int64_t>(i);
    if (const auto* e = std::get_if<Expression>(&entries_[i])) {
      t.set_int(index, e->evaluate(env));
    } else {
      t.set(index, std::get<double>(entries_[i]));
    }
  }
  return t;
}

}  // namespace meshsim::sim
