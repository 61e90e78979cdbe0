// The view step: a tensor made from another by basic indexing, permute and .contiguous(), sharing
// its storage as PyTorch's views do.
#include <fmt/format.h>

#include "sim/run/rank_state.hpp"
#include "sim/scenario/index_text.hpp"
#include "sim/steps/step_kinds.hpp"

namespace meshsim::sim {

namespace {

class ViewStep final : public Step {
 public:
  void run(RankState& rank) const override {
    ViewLayout layout = rank.layout(of_);
    if (index_) layout = index_view(layout, index_->evaluate(rank), index_->is_tuple());
    if (!permute_.empty()) {
      std::vector<int64_t> dims;
      for (const Expression& d : permute_) dims.push_back(d.evaluate(rank));
      layout = permute_view(layout, dims);
    }
    rank.set_view(name_, of_, layout);
    // .contiguous() returns the tensor itself when it already is, and a copy otherwise.
    if (contiguous_ && !layout.is_contiguous()) {
      Tensor copy = rank.tensor(name_);
      rank.set_tensor(name_, std::move(copy));
    }
  }

  std::string name_;
  std::string of_;
  std::optional<IndexText> index_;
  std::vector<Expression> permute_;
  bool contiguous_ = false;
};

IndexText index_of(const toml::node& node, const LoadContext& ctx) {
  const std::string text = ctx.string_of(node, "index");
  try {
    IndexText index = IndexText::parse(text);
    index.check(ctx);
    return index;
  } catch (const ExpressionError& e) {
    SourceLocation where = ctx.at(node);
    where.column += 1 + static_cast<int64_t>(e.offset());
    throw InputError(where, fmt::format("index \"{}\": {}", text, e.what()));
  }
}

}  // namespace

void register_view_step(StepRegistry& r) {
  r.add("view", "{ name, of, index = \"[:, ::2]\", permute = [1, 0], contiguous }",
        "a view of a tensor (t[index].permute(dims), then .contiguous() if asked) sharing its "
        "storage",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          const toml::table* t = value.as_table();
          if (t == nullptr) ctx.fail(value, "view must be a table { name, of, index, permute }");
          ctx.only_keys(*t, {"name", "of", "index", "permute", "contiguous"}, "view");
          auto step = std::make_unique<ViewStep>();
          step->of_ = ctx.tensor_name(*t, "of", "view");
          if (const toml::node* i = t->get("index")) step->index_ = index_of(*i, ctx);
          if (const toml::node* p = t->get("permute")) {
            const toml::array* dims = p->as_array();
            if (dims == nullptr) ctx.fail(*p, "permute must be an array of dims, such as [1, 0]");
            for (const toml::node& d : *dims)
              step->permute_.push_back(ctx.expression_of(d, "a dim"));
          }
          if (const toml::node* c = t->get("contiguous")) {
            step->contiguous_ = ctx.boolean_of(*c, "contiguous");
          }
          step->name_ = ctx.string_of(ctx.require(*t, "name", "view"), "name");
          ctx.declare_tensor(step->name_);
          return step;
        });
}

}  // namespace meshsim::sim
