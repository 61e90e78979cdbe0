// Steps that talk: named tensors, the collectives of the backend interface, send/recv, object
// collectives and virtual sleep.
#include <fmt/format.h>

#include "sim/run/rank_state.hpp"
#include "sim/scenario/tensor_literal.hpp"
#include "sim/scenario/tensor_spec.hpp"
#include "sim/steps/group_operand.hpp"
#include "sim/steps/step_kinds.hpp"
#include "src/comm/strided_input.hpp"

namespace meshsim::sim {

namespace {

// A tensor operand: a name set by an earlier step, or a constructor such as "ones(4)".
struct TensorOperand {
  std::string name;
  std::optional<TensorSpec> spec;
  std::optional<TensorLiteral> literal;
  Tensor get(const RankState& rank) const {
    if (literal) return literal->make(rank);
    return spec ? spec->make(rank) : rank.tensor(name);
  }
  // A plain tensor's: its dims where the constructor, the literal or the named tensor tells them.
  LoadContext::TensorFacts facts(const LoadContext& ctx) const {
    if (literal) return {literal->ndim(), ""};
    return {spec ? std::optional<size_t>(spec->ndim()) : ctx.tensor_facts(name).ndim, ""};
  }
};

// A tensor set earlier, a constructor ("ones(4)"), or a nested list of values.
TensorOperand tensor_operand(const toml::node& node, LoadContext& ctx, std::string_view what,
                             std::optional<DType> dtype = std::nullopt) {
  if (node.is_array()) return {"", std::nullopt, TensorLiteral::parse(node, ctx, dtype)};
  const std::string text = ctx.string_of(node, what);
  if (ctx.has_tensor(text)) return {text, std::nullopt, std::nullopt};
  try {
    TensorSpec spec = TensorSpec::parse(text);
    spec.check(ctx);
    try {
      spec.check_size(ctx.ranks_running_entry());
    } catch (const ExpressionError& e) {
      ctx.fail(node, e.what());
    }
    return {"", std::move(spec), std::nullopt};
  } catch (const ExpressionError& e) {
    SourceLocation where = ctx.at(node);
    where.column += 1 + static_cast<int64_t>(e.offset());
    throw InputError(where, fmt::format("{} \"{}\" is neither a tensor set earlier nor a "
                                        "constructor: {}",
                                        what, text, e.what()));
  }
}

// Which places of the tensor `name` a collective reads and writes: its elements, or what the
// process-group backend moves for a view that is not row-major.
RankState::Places places_moved(RankState& rank, const std::string& name, CollectiveOp op) {
  if (name.empty() || !rank.is_view(name)) return RankState::Places::kElements;
  const StridedInput how = strided_input(
      rank.device_type() == "cuda" ? ProcessGroupKind::kNccl : ProcessGroupKind::kGloo, op,
      rank.layout(name), name);
  if (!how.warning.empty()) rank.warn(how.warning);
  return how.memory_run ? RankState::Places::kMemoryRun : RankState::Places::kElements;
}

class CollectiveStep final : public Step {
 public:
  void run(RankState& rank) const override {
    const Group group = rank.group(group_.mesh, group_.dim);
    Backend& b = rank.backend();
    const RankState::Places places = places_moved(rank, tensor_.name, op_);
    auto input = [&] {
      return places == RankState::Places::kMemoryRun ? rank.memory_run(tensor_.name)
                                                     : tensor_.get(rank);
    };
    // all_reduce, broadcast and recv write into their tensor when out is its name.
    auto store = [&](Tensor result) {
      if (out_ != tensor_.name) {
        rank.set_tensor(out_, std::move(result));
      } else {
        rank.write_in_place(out_, result, places);
      }
    };
    switch (op_) {
      case CollectiveOp::kBarrier:
        b.barrier(group);
        return;
      case CollectiveOp::kSend:
        b.send(input(), peer_of(rank, group), group);
        return;
      case CollectiveOp::kRecv:
        store(b.recv(input(), peer_of(rank, group), group));
        return;
      case CollectiveOp::kBroadcastObjectList:
      case CollectiveOp::kAllGatherObject: {
        // Objects are integers here, serialized as text and read back into an int64 tensor.
        std::vector<std::string> objects;
        for (const Expression& v : values_) objects.push_back(std::to_string(v.evaluate(rank)));
        const std::vector<std::string> got =
            op_ == CollectiveOp::kBroadcastObjectList
                ? b.broadcast_object_list(std::move(objects), peer_of(rank, group), group)
                : b.all_gather_object(objects.at(0), group);
        Tensor t({static_cast<int64_t>(got.size())}, DType::kInt64);
        for (size_t i = 0; i < got.size(); ++i)
          t.set_int(static_cast<int64_t>(i), std::stoll(got[i]));
        rank.set_tensor(out_, std::move(t));
        return;
      }
      case CollectiveOp::kAllGather: {
        const std::vector<Tensor> parts = b.all_gather(input(), group);
        for (size_t i = 0; i < parts.size(); ++i)
          rank.set_tensor(fmt::format("{}.{}", out_, i), parts[i]);
        return;
      }
      case CollectiveOp::kAllToAll: {
        // Chunks of dim 0 go to each group rank; what comes back is concatenated again.
        const Tensor whole = input();
        std::vector<Tensor> chunks;
        for (int64_t i = 0; i < group.size(); ++i)
          chunks.push_back(chunk_dim0(whole, group.size(), i));
        const std::vector<Tensor> got = b.all_to_all(chunks, group);
        std::vector<const Tensor*> parts;
        for (const Tensor& t : got) parts.push_back(&t);
        rank.set_tensor(out_, concat_dim0(parts));
        return;
      }
      case CollectiveOp::kAllGatherIntoTensor:
        rank.set_tensor(out_, b.all_gather_into_tensor(input(), group));
        return;
      case CollectiveOp::kReduceScatter:
        rank.set_tensor(out_, b.reduce_scatter(input(), *reduce_op_, group));
        return;
      case CollectiveOp::kAllReduce:
      case CollectiveOp::kBroadcast: {
        Tensor t = input();
        if (op_ == CollectiveOp::kAllReduce) {
          b.all_reduce(t, *reduce_op_, group);
        } else {
          b.broadcast(t, peer_of(rank, group), group);
        }
        store(std::move(t));
        return;
      }
      case CollectiveOp::kNewGroup:
        break;
    }
  }

  bool communicates() const override { return true; }
  std::optional<PlannedCall> planned_call(const RankState& rank) const override {
    PlannedCall call{op_, -1, -1};
    // A skipped step's operands may not be valid on this rank (a stage 0 recv from rank - 8):
    // what cannot be worked out stays unknown.
    try {
      call.group_id = rank.group(group_.mesh, group_.dim).id;
    } catch (const std::exception&) {
    }
    if (op_ == CollectiveOp::kSend || op_ == CollectiveOp::kRecv) {
      try {
        const int64_t peer = peer_of(rank, rank.group(group_.mesh, group_.dim));
        if (peer >= 0 && peer < rank.world_size()) call.peer = peer;
      } catch (const std::exception&) {
      }
    }
    return call;
  }

  CollectiveOp op_ = CollectiveOp::kBarrier;
  TensorOperand tensor_;
  GroupOperand group_;
  std::optional<ReduceOp> reduce_op_;
  // The global rank of the peer or root: `peer_` itself, or with group_src / group_dst the
  // group's member at that group rank, as PyTorch's get_global_rank maps it.
  int64_t peer_of(const RankState& rank, const Group& group) const {
    const int64_t peer = peer_->evaluate(rank);
    if (!peer_in_group_) return peer;
    if (peer < 0 || peer >= group.size())
      throw value_error(fmt::format("group rank {} is not part of group {} (it has {} ranks)", peer,
                                    group.name, group.size()));
    return (*group.ranks)[static_cast<size_t>(peer)];
  }

  std::optional<Expression> peer_;  // src, dst or root
  bool peer_in_group_ = false;      // peer_ is a group rank (group_src, group_dst)
  std::vector<Expression> values_;  // object collectives
  std::string out_;
};

// Builds the parser of one collective step kind.
// The key naming a collective's peer or root: send's dst, recv's and the broadcasts' src.
const char* peer_key_of(CollectiveOp op) {
  if (op == CollectiveOp::kSend) return "dst";
  if (op == CollectiveOp::kRecv || op == CollectiveOp::kBroadcast ||
      op == CollectiveOp::kBroadcastObjectList) {
    return "src";
  }
  return nullptr;
}

// The keys a collective's table takes, in the order `meshsim steps` lists them.
std::vector<std::string_view> collective_keys(CollectiveOp op) {
  std::vector<std::string_view> keys;
  if (op == CollectiveOp::kRecv) keys.push_back("like");
  if (op != CollectiveOp::kBarrier && op != CollectiveOp::kBroadcastObjectList &&
      op != CollectiveOp::kAllGatherObject && op != CollectiveOp::kRecv) {
    keys.push_back("tensor");
  }
  if (op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter) keys.push_back("op");
  if (const char* peer = peer_key_of(op)) {
    keys.push_back(peer);
    keys.push_back(op == CollectiveOp::kSend ? "group_dst" : "group_src");
  }
  if (op == CollectiveOp::kBroadcastObjectList) keys.push_back("values");
  if (op == CollectiveOp::kAllGatherObject) keys.push_back("value");
  keys.push_back("group");
  if (op != CollectiveOp::kBarrier && op != CollectiveOp::kSend) keys.push_back("out");
  return keys;
}

StepParser collective_parser(CollectiveOp op) {
  return [op](const toml::node& value, const toml::table&,
              LoadContext& ctx) -> std::unique_ptr<Step> {
    auto step = std::make_unique<CollectiveStep>();
    step->op_ = op;
    const std::string_view name = collective_op_name(op);
    if (op == CollectiveOp::kBarrier && value.is_string()) {
      toml::table args;
      args.insert("group", *value.as_string());
      step->group_ = group_operand(args, ctx);
      return step;
    }
    const toml::table* args = value.as_table();
    if (args == nullptr) ctx.fail(value, fmt::format("{} must be a table of arguments", name));
    const bool takes_tensor = op != CollectiveOp::kBarrier &&
                              op != CollectiveOp::kBroadcastObjectList &&
                              op != CollectiveOp::kAllGatherObject;
    const bool reduces = op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter;
    const char* peer_key = peer_key_of(op);
    const std::vector<std::string_view> keys = collective_keys(op);
    for (const auto& [k, v] : *args) {
      if (std::find(keys.begin(), keys.end(), k.str()) == keys.end()) {
        throw InputError(ctx.at(k.source()), fmt::format("unknown key \"{}\" in {} (expected: {})",
                                                         k.str(), name, fmt::join(keys, ", ")));
      }
    }
    step->group_ = group_operand(*args, ctx);
    if (takes_tensor) {
      const char* key = op == CollectiveOp::kRecv ? "like" : "tensor";
      step->tensor_ = tensor_operand(ctx.require(*args, key, name), ctx, key);
    }
    if (reduces) {
      step->reduce_op_ = ReduceOp::kSum;
      if (const toml::node* o = args->get("op")) {
        try {
          step->reduce_op_ = parse_reduce_op(ctx.string_of(*o, "op"));
        } catch (const Error& e) {
          ctx.fail(*o, e.what());
        }
      }
    }
    if (peer_key) {
      // A global rank, or (PyTorch's group_src / group_dst) a rank of the group.
      const std::string group_key = fmt::format("group_{}", peer_key);
      const toml::node* global = args->get(peer_key);
      const toml::node* in_group = args->get(group_key);
      if ((global == nullptr) == (in_group == nullptr))
        ctx.fail(*args, fmt::format("{} needs exactly one of {} (a global rank) and {} (a rank of "
                                    "the group)",
                                    name, peer_key, group_key));
      step->peer_in_group_ = in_group != nullptr;
      step->peer_ = ctx.expression_of(global ? *global : *in_group,
                                      global ? std::string_view(peer_key) : group_key);
    }
    if (op == CollectiveOp::kBroadcastObjectList) {
      const toml::node& v = ctx.require(*args, "values", name);
      const toml::array* items = v.as_array();
      if (items == nullptr || items->empty())
        ctx.fail(v, "values must be a non-empty array of expressions");
      for (const toml::node& item : *items)
        step->values_.push_back(ctx.expression_of(item, "a value"));
    }
    if (op == CollectiveOp::kAllGatherObject)
      step->values_.push_back(ctx.expression_of(ctx.require(*args, "value", name), "value"));
    if (const toml::node* out = args->get("out")) {
      step->out_ = ctx.string_of(*out, "out");
    } else if (op == CollectiveOp::kAllReduce || op == CollectiveOp::kBroadcast) {
      step->out_ = step->tensor_.name;  // in place on a named tensor
    } else if (op != CollectiveOp::kBarrier && op != CollectiveOp::kSend) {
      ctx.fail(*args, fmt::format("{} needs out = \"name\" for its result", name));
    }
    if (op == CollectiveOp::kAllGather) {
      ctx.declare_tensor_per_rank(step->out_);  // out.0, out.1, ...: one per group member
    } else if (!step->out_.empty()) {
      const bool keeps_shape = op == CollectiveOp::kAllReduce || op == CollectiveOp::kBroadcast ||
                               op == CollectiveOp::kRecv;
      ctx.declare_tensor(step->out_,
                         keeps_shape ? step->tensor_.facts(ctx) : LoadContext::TensorFacts{});
    }
    return step;
  };
}

class TensorStep final : public Step {
 public:
  void run(RankState& rank) const override { rank.set_tensor(name_, value_.get(rank)); }
  std::string name_;
  TensorOperand value_;
};

class SleepStep final : public Step {
 public:
  void run(RankState& rank) const override { rank.activity().clock += seconds_; }
  double seconds_ = 0;
};

// `count_collectives = "start"` ... `"stop"`: what `with CommDebugMode():` counts, read by the
// `collectives` query.
class CountCollectivesStep final : public Step {
 public:
  void run(RankState& rank) const override {
    RankActivity& activity = rank.activity();
    if (start_) activity.issued.start();
    activity.counting = start_;
  }
  bool start_ = true;
};

}  // namespace

void register_collective_steps(StepRegistry& r) {
  r.add("tensor", "{ name = \"x\", value = \"ones(4)\" | [[1, 2], [3, 4]], dtype }",
        "set a named tensor",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          const toml::table* t = value.as_table();
          if (t == nullptr) ctx.fail(value, "tensor must be a table { name, value }");
          ctx.only_keys(*t, {"name", "value", "dtype"}, "tensor");
          auto step = std::make_unique<TensorStep>();
          const toml::node& v = ctx.require(*t, "value", "tensor");
          std::optional<DType> dtype;
          if (const toml::node* d = t->get("dtype")) {
            // A constructor names its dtype inside ("ones(4, dtype=float64)").
            if (!v.is_array()) ctx.fail(*d, "dtype goes with a list of values");
            const std::string text = ctx.string_of(*d, "dtype");
            dtype = parse_dtype(text);
            if (!dtype) ctx.fail(*d, fmt::format("unknown dtype \"{}\"", text));
          }
          step->value_ = tensor_operand(v, ctx, "value", dtype);
          step->name_ = ctx.string_of(ctx.require(*t, "name", "tensor"), "name");
          ctx.declare_tensor(step->name_, step->value_.facts(ctx));
          return step;
        });
  for (CollectiveOp op :
       {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kAllGatherIntoTensor,
        CollectiveOp::kReduceScatter, CollectiveOp::kBroadcast, CollectiveOp::kAllToAll,
        CollectiveOp::kBarrier, CollectiveOp::kSend, CollectiveOp::kRecv,
        CollectiveOp::kBroadcastObjectList, CollectiveOp::kAllGatherObject}) {
    const std::vector<std::string_view> keys = collective_keys(op);
    r.add(std::string(collective_op_name(op)),
          op == CollectiveOp::kBarrier ? "\"WORLD\" | \"mesh\" | { group }"
                                       : fmt::format("{{ {} }}", fmt::join(keys, ", ")),
          op == CollectiveOp::kSend || op == CollectiveOp::kRecv
              ? fmt::format("blocking {} (group: the group the peer is in)", collective_op_name(op))
              : fmt::format("the {} collective", collective_op_name(op)),
          collective_parser(op));
  }
  r.add("count_collectives", "\"start\" | \"stop\"",
        "count the collectives this rank issues from here (CommDebugMode), for the collectives "
        "query",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          const std::string what = ctx.string_of(value, "count_collectives");
          if (what != "start" && what != "stop")
            ctx.fail(value, "count_collectives is \"start\" (a fresh count) or \"stop\"");
          auto step = std::make_unique<CountCollectivesStep>();
          step->start_ = what == "start";
          return step;
        });
  r.add("sleep", "seconds", "advance this rank's virtual clock",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          auto step = std::make_unique<SleepStep>();
          step->seconds_ = ctx.seconds_of(value, "sleep (seconds)", LoadContext::Zero::kAllowed);
          return step;
        });
}

}  // namespace meshsim::sim
