#include "src/dtensor/placement.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

std::string placement_name(const Placement& p) {
  struct Namer {
    std::string operator()(const Shard& s) const { return fmt::format("Shard({})", s.dim); }
    std::string operator()(const Replicate&) const { return "Replicate()"; }
    std::string operator()(const Partial& q) const {
      return fmt::format("Partial({})", reduce_op_name(q.op));
    }
    std::string operator()(const StridedShard& s) const {
      return fmt::format("_StridedShard({}, sf={})", s.dim, s.split_factor);
    }
  };
  return std::visit(Namer{}, p);
}

std::string placement_repr(const Placement& p) {
  if (const auto* s = std::get_if<Shard>(&p)) return fmt::format("Shard(dim={})", s->dim);
  if (const auto* s = std::get_if<StridedShard>(&p))
    return fmt::format("_StridedShard(dim={}, sf={})", s->dim, s->split_factor);
  return placement_name(p);
}

std::string placements_repr(std::span<const Placement> placements) {
  std::vector<std::string> parts;
  for (const Placement& p : placements) parts.push_back(placement_repr(p));
  return fmt::format("({}{})", fmt::join(parts, ", "), parts.size() == 1 ? "," : "");
}

int64_t sharded_dim(const Placement& p) {
  if (const auto* s = std::get_if<Shard>(&p)) return s->dim;
  if (const auto* s = std::get_if<StridedShard>(&p)) return s->dim;
  return -1;
}

std::string placement_str(const Placement& p) {
  struct Str {
    std::string operator()(const Shard& s) const { return fmt::format("S({})", s.dim); }
    std::string operator()(const Replicate&) const { return "R"; }
    std::string operator()(const Partial& q) const {
      return fmt::format("P({})", reduce_op_name(q.op));
    }
    std::string operator()(const StridedShard& s) const {
      return fmt::format("_S({}, {})", s.dim, s.split_factor);
    }
  };
  return std::visit(Str{}, p);
}

std::string placements_str(std::span<const Placement> placements) {
  std::vector<std::string> parts;
  for (const Placement& p : placements) parts.push_back(placement_str(p));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

void check_no_mixed_partials(const std::vector<Placement>& placements) {
  std::set<std::string_view> ops;
  for (const Placement& p : placements) {
    if (const auto* q = std::get_if<Partial>(&p)) ops.insert(reduce_op_name(q->op));
  }
  // sum and avg commute, so PyTorch lets them mix.
  if (ops.size() <= 1 || (ops.size() == 2 && ops.contains("sum") && ops.contains("avg"))) return;
  std::vector<std::string> quoted;
  for (std::string_view op : ops) quoted.push_back(fmt::format("'{}'", op));
  throw value_error(fmt::format(
      "Mixed Partial reduce types are not supported in the same placement list. Found reduce "
      "ops: {{{}}}. Please ensure all Partial placements use the same reduce operation.",
      fmt::join(quoted, ", ")));
}

Placement with_dim_normalized(Placement p, int64_t tensor_ndim) {
  if (auto* s = std::get_if<Shard>(&p); s != nullptr && s->dim < 0) s->dim += tensor_ndim;
  if (auto* s = std::get_if<StridedShard>(&p); s != nullptr && s->dim < 0) s->dim += tensor_ndim;
  return p;
}

namespace {

class PlacementReader {
 public:
  explicit PlacementReader(std::string_view text) : text_(text) {}

  Placement read() {
    const std::string name = word();
    std::vector<Arg> args;
    skip_space();
    if (peek() == '(') {
      ++pos_;
      skip_space();
      while (peek() != ')') {
        size_t at = pos_;
        std::string first = word();
        skip_space();
        if (peek() == '=') {
          ++pos_;
          skip_space();
          at = pos_;
          args.push_back({first, word(), at});
        } else {
          args.push_back({"", first, at});
        }
        skip_space();
        if (peek() == ',') {
          ++pos_;
          skip_space();
        } else if (peek() != ')') {
          fail("',' or ')'");
        }
      }
      ++pos_;
    }
    skip_space();
    if (pos_ != text_.size()) fail("the end of the placement");
    return build(name, args);
  }

 private:
  // One argument: its keyword ("" when positional), its text, and where its text starts.
  struct Arg {
    std::string keyword;
    std::string value;
    size_t at;
  };

  // Refuses arguments `params` (in order) does not name: one too many, an unknown keyword, or a
  // parameter given twice.
  void only_params(const std::string& name, const std::vector<Arg>& args,
                   std::vector<std::string_view> params) const {
    std::vector<bool> given(params.size(), false);
    for (size_t i = 0; i < args.size(); ++i) {
      const Arg& a = args[i];
      size_t index = i;
      if (!a.keyword.empty()) {
        index = static_cast<size_t>(
            std::find(params.begin(), params.end(), std::string_view(a.keyword)) - params.begin());
      }
      if (index >= params.size()) {
        fail(params.empty()
                 ? fmt::format("no arguments to {}", name)
                 : fmt::format("only {} as the arguments of {}", fmt::join(params, ", "), name),
             a.at);
      }
      if (given[index]) fail(fmt::format("{} given once", params[index]), a.at);
      given[index] = true;
    }
  }

  Placement build(const std::string& name, const std::vector<Arg>& args) {
    auto arg = [&](size_t index, std::string_view keyword) -> const Arg* {
      for (const Arg& a : args) {
        if (a.keyword == keyword) return &a;
      }
      if (index < args.size() && args[index].keyword.empty()) return &args[index];
      return nullptr;
    };
    auto integer = [&](const Arg* a, std::string_view what) -> int64_t {
      if (a == nullptr) fail(fmt::format("the {} argument", what));
      try {
        size_t used = 0;
        const int64_t n = std::stoll(a->value, &used);
        if (used == a->value.size()) return n;
      } catch (const std::exception&) {
      }
      fail(fmt::format("an integer {} (got \"{}\")", what, a->value), a->at);
    };
    if (name == "Shard" || name == "S") {
      only_params(name, args, {"dim"});
      return Shard{integer(arg(0, "dim"), "dim")};
    }
    if (name == "Replicate" || name == "R") {
      only_params(name, args, {});
      return Replicate{};
    }
    if (name == "Partial" || name == "P") {
      only_params(name, args, {"reduce_op"});
      const Arg* op = arg(0, "reduce_op");
      return Partial{op ? parse_reduce_op(op->value) : ReduceOp::kSum};
    }
    if (name == "_StridedShard" || name == "StridedShard") {
      // "sf" is how PyTorch prints it: _StridedShard(dim=0, sf=2).
      const bool short_name =
          std::any_of(args.begin(), args.end(), [](const Arg& a) { return a.keyword == "sf"; });
      only_params(name, args, {"dim", short_name ? "sf" : "split_factor"});
      const int64_t dim = integer(arg(0, "dim"), "dim");
      // _StridedShard(0, 2) is a TypeError in PyTorch: its split_factor is keyword-only.
      if (args.size() > 1 && args[1].keyword.empty()) {
        throw Error(PyErrorType::kTypeError,
                    fmt::format("placement \"{}\": split_factor is keyword-only (write "
                                "_StridedShard({}, split_factor={})) at column {}",
                                text_, args[0].value, args[1].value, args[1].at + 1));
      }
      const Arg* sf = arg(1, "split_factor");
      if (sf == nullptr) sf = arg(1, "sf");
      const int64_t factor = integer(sf, "split_factor");
      if (factor < 1) fail("a split_factor >= 1", sf->at);
      return StridedShard{dim, factor};
    }
    throw value_error(fmt::format(
        "unknown placement \"{}\" in \"{}\" (expected Shard(d), Replicate(), Partial(op) or "
        "_StridedShard(d, split_factor=n))",
        name, text_));
  }

  std::string word() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_' ||
            text_[pos_] == '-' || text_[pos_] == '"' || text_[pos_] == '\'')) {
      ++pos_;
    }
    if (start == pos_) fail("a name or a number");
    std::string w(text_.substr(start, pos_ - start));
    std::erase_if(w, [](char c) { return c == '"' || c == '\''; });
    return w;
  }
  void skip_space() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  [[noreturn]] void fail(const std::string& what) const { fail(what, pos_); }
  [[noreturn]] void fail(const std::string& what, size_t at) const {
    throw value_error(
        fmt::format("placement \"{}\": expected {} at column {}", text_, what, at + 1));
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

Placement parse_placement(std::string_view text) {
  return PlacementReader(text).read();
}

}  // namespace meshsim
