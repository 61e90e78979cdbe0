#include "sim/runtime/sim_collectives.hpp"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "sim/runtime/fiber_stack.hpp"
#include "src/error.hpp"
#include "src/tensor/memory_budget.hpp"

namespace meshsim::sim {

std::string_view state_name(RankActivity::State state) {
  switch (state) {
    case RankActivity::State::kRunning:
      return "running";
    case RankActivity::State::kBlocked:
      return "blocked";
    case RankActivity::State::kFinished:
      return "finished";
    case RankActivity::State::kFailed:
      return "failed";
    case RankActivity::State::kAborted:
      return "aborted";
  }
  return "?";
}

// One collective (or send/recv pair) being met; everything is indexed by group position.
struct SimCollectives::Rendezvous {
  std::string group;
  int64_t seq = 0;
  RankList members;
  std::vector<std::shared_ptr<const Signature>> signatures;  // equal ones share the first's
  std::vector<Payload> inputs;
  std::vector<Payload> outputs;
  std::vector<double> arrived_at;
  std::vector<std::string> errors;
  std::exception_ptr failure;  // computing the result failed: rethrown on every member
  size_t arrived = 0;
  size_t first = 0;  // position of the first arrival
  size_t collected = 0;
  bool done = false;
  bool desynced = false;
};

SimCollectives::SimCollectives(World& world, std::vector<RankActivity>& activity, CostModel cost)
    : world_(world),
      activity_(activity),
      cost_(cost),
      seq_(static_cast<size_t>(world.size())),
      waiting_on_(static_cast<size_t>(world.size())),
      calls_(static_cast<size_t>(world.size()), 0) {}

void SimCollectives::inject_faults(int64_t rank, const Signature& signature) {
  const int64_t k = ++calls_[static_cast<size_t>(rank)];
  if (faults_ == nullptr) return;
  for (const Fault* f : faults_at(*faults_, rank, Fault::Trigger::kCollective, k)) {
    switch (f->kind) {
      case Fault::Kind::kStall:
        activity_[static_cast<size_t>(rank)].clock += f->seconds;
        break;
      case Fault::Kind::kCrash:
        throw InjectedCrash{fmt::format("injected crash entering {} ({}, {})", signature.describe(),
                                        f->describe(), f->where.to_string())};
      case Fault::Kind::kStackOverflow:
        overflow_fiber_stack();
      case Fault::Kind::kBackendError:
        throw runtime_error(fmt::format(
            "DistBackendError: NCCL error in {}: unhandled system error (injected: {}, {})",
            signature.describe(), f->describe(), f->where.to_string()));
    }
  }
}

SimCollectives::~SimCollectives() = default;

namespace {

// Point-to-point partners only agree on the tensor; collectives on everything.
bool compatible(const Signature& a, const Signature& b) {
  const bool p2p = (a.op == CollectiveOp::kSend || a.op == CollectiveOp::kRecv) &&
                   (b.op == CollectiveOp::kSend || b.op == CollectiveOp::kRecv);
  if (p2p) return a.op != b.op && a.dtype == b.dtype && a.shapes == b.shapes;
  return a == b;
}

}  // namespace

int64_t SimCollectives::position_of(const RankList& members, int64_t rank) {
  Positions& p = positions_[members.get()];
  if (!p.keep) {
    p.keep = members;
    p.of.reserve(members->size());
    for (size_t i = 0; i < members->size(); ++i)
      p.of.emplace((*members)[i], static_cast<int64_t>(i));
  }
  const auto it = p.of.find(rank);
  return it == p.of.end() ? -1 : it->second;
}

SimCollectives::Rendezvous& SimCollectives::enter(int64_t rank, const std::string& key,
                                                  const Group& group, const Signature& signature,
                                                  Payload in, int64_t seq,
                                                  std::optional<int64_t> peer) {
  auto& slot = open_[key];
  if (!slot) {
    slot = std::make_unique<Rendezvous>();
    slot->group = group.name;
    slot->seq = seq;
    const std::vector<int64_t> pair{std::min(rank, peer.value_or(0)),
                                    std::max(rank, peer.value_or(0))};
    slot->members = peer ? rank_lists_->intern(pair) : group.ranks;
    const size_t n = slot->members->size();
    slot->signatures.resize(n);
    slot->inputs.resize(n);
    slot->outputs.resize(n);
    slot->arrived_at.resize(n);
    slot->errors.resize(n);
  }
  Rendezvous& r = *slot;
  const auto pos = static_cast<size_t>(position_of(r.members, rank));
  RankActivity& me = activity_[static_cast<size_t>(rank)];
  if (r.arrived == 0) {
    r.first = pos;
    r.signatures[pos] = std::make_shared<const Signature>(signature);
  } else if (*r.signatures[r.first] == signature) {
    r.signatures[pos] = r.signatures[r.first];
  } else {
    r.desynced = r.desynced || !compatible(*r.signatures[r.first], signature);
    r.signatures[pos] = std::make_shared<const Signature>(signature);
  }
  r.inputs[pos] = std::move(in);
  r.arrived_at[pos] = me.clock;
  ++r.arrived;
  if (r.desynced && (!desync_ || (desync_->group == r.group && desync_->seq == r.seq))) {
    desync_ = DesyncRecord{r.group, r.seq, *r.members, {}};
    for (size_t i = 0; i < r.signatures.size(); ++i) {
      if (r.signatures[i]) desync_->arrivals.emplace_back((*r.members)[i], *r.signatures[i]);
    }
    std::sort(desync_->arrivals.begin(), desync_->arrivals.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  me.wait = WaitInfo{group.name, r.members, seq, r.signatures[pos], peer};
  waiting_on_[static_cast<size_t>(rank)] = key;
  if (!r.desynced && r.arrived == r.members->size()) complete(r);
  return r;
}

void SimCollectives::complete(Rendezvous& r) {
  const std::vector<int64_t>& members = *r.members;
  const size_t n = members.size();
  const Signature& sig = *r.signatures[r.first];
  // An error while computing the result (out of memory, sizes that do not fit) belongs to the
  // collective: every member gets it, as every rank of a failed NCCL call would.
  try {
    compute_results(r);
  } catch (...) {
    forget_unwound_frames();
    r.failure = std::current_exception();
  }
  finish(r, sig, members, n);
}

void SimCollectives::compute_results(Rendezvous& r) {
  const std::vector<int64_t>& members = *r.members;
  const size_t n = members.size();
  const Signature& sig = *r.signatures[r.first];
  std::vector<const Tensor*> firsts;
  if (sig.op != CollectiveOp::kBarrier && sig.op != CollectiveOp::kNewGroup &&
      sig.op != CollectiveOp::kRecv && sig.op != CollectiveOp::kSend &&
      sig.op != CollectiveOp::kBroadcastObjectList && sig.op != CollectiveOp::kAllGatherObject) {
    for (const Payload& p : r.inputs) firsts.push_back(&p.tensors.at(0));
  }
  // Each result is computed once and shared out; only all_gather and all_to_all are per rank.
  if (sig.op == CollectiveOp::kAllGather || sig.op == CollectiveOp::kAllToAll ||
      sig.op == CollectiveOp::kAllGatherObject) {
    check_fan_out(sig, n);
  }
  switch (sig.op) {
    case CollectiveOp::kAllReduce: {
      const Tensor reduced = reduce_tensors(firsts, *sig.reduce_op);
      for (Payload& out : r.outputs) out.tensors = {reduced};
      break;
    }
    case CollectiveOp::kAllGather:
      for (Payload& out : r.outputs) {
        for (const Payload& p : r.inputs) out.tensors.push_back(p.tensors.at(0));
      }
      break;
    case CollectiveOp::kAllGatherIntoTensor: {
      const Tensor joined = concat_dim0(firsts);
      for (Payload& out : r.outputs) out.tensors = {joined};
      break;
    }
    case CollectiveOp::kReduceScatter: {
      const Tensor reduced = reduce_tensors(firsts, *sig.reduce_op);
      for (size_t i = 0; i < n; ++i) {
        r.outputs[i].tensors = {
            chunk_dim0(reduced, static_cast<int64_t>(n), static_cast<int64_t>(i))};
      }
      break;
    }
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kBroadcastObjectList: {
      const int64_t root = position_of(r.members, *sig.root);
      if (root < 0) {
        for (std::string& e : r.errors) {
          e = fmt::format("broadcast root {} is not in group {}", *sig.root,
                          display_group(r.group));
        }
        break;
      }
      for (Payload& out : r.outputs) out = r.inputs[static_cast<size_t>(root)];
      break;
    }
    case CollectiveOp::kAllToAll:
      for (size_t i = 0; i < n; ++i) {
        for (const Payload& p : r.inputs) r.outputs[i].tensors.push_back(p.tensors.at(i));
      }
      break;
    case CollectiveOp::kAllGatherObject: {
      std::vector<std::string> all;
      for (const Payload& p : r.inputs) all.push_back(p.objects.at(0));
      for (Payload& out : r.outputs) out.objects = all;
      break;
    }
    case CollectiveOp::kSend:
    case CollectiveOp::kRecv:
      // The receiver gets the sender's tensor; the sender gets nothing.
      for (size_t i = 0; i < n; ++i) {
        if (r.signatures[i]->op == CollectiveOp::kSend)
          r.outputs[1 - i].tensors = r.inputs[i].tensors;
      }
      break;
    case CollectiveOp::kBarrier:
      break;
    case CollectiveOp::kNewGroup: {
      const GroupBatch& asked = *r.inputs[0].new_groups;
      const bool agree = std::all_of(r.inputs.begin(), r.inputs.end(), [&](const Payload& p) {
        return p.new_groups->same_groups(asked);
      });
      if (!agree) {
        std::map<std::string, std::vector<int64_t>> by_request;
        for (size_t i = 0; i < n; ++i)
          by_request[r.inputs[i].new_groups->describe()].push_back(members[i]);
        std::vector<std::string> parts;
        for (const auto& [wanted, who] : by_request) {
          parts.push_back(fmt::format("rank(s) {} passed {}", fmt::join(who, ", "), wanted));
        }
        warnings_.push_back(fmt::format("new_group #{} was created with different ranks: {}", r.seq,
                                        fmt::join(parts, "; ")));
      }
      break;
    }
  }
}

void SimCollectives::check_fan_out(const Signature& sig, size_t n) {
  // Every member ends up holding n results (each a named tensor or string on the rank): n * n
  // entries in all. The data is shared, the entries are not, so they must fit the budget too.
  constexpr double kBytesPerEntry = 128;
  const double bytes = static_cast<double>(n) * static_cast<double>(n) * kBytesPerEntry;
  const uint64_t limit = MemoryBudget::limit();
  const uint64_t in_use = MemoryBudget::in_use();
  if (bytes > static_cast<double>(limit - std::min(limit, in_use))) {
    throw memory_error(fmt::format(
        "{} over {} ranks gives every rank {} results, {} entries in all (about {}), more than "
        "the memory budget leaves (--max-memory {}); all_gather_into_tensor or reduce_scatter "
        "keep one result per rank",
        collective_op_name(sig.op), n, n, n * n, format_bytes(static_cast<uint64_t>(bytes)),
        format_bytes(limit)));
  }
}

void SimCollectives::finish(Rendezvous& r, const Signature& sig,
                            const std::vector<int64_t>& members, size_t n) {
  // Virtual time: everyone leaves together once the last rank has arrived and the data moved.
  // Bytes are counted in double: meta tensors may hold more than int64 can sum.
  double start = 0.0;
  double bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    start = std::max(start, r.arrived_at[i]);
    double mine = 0;
    for (const Tensor& t : r.inputs[i].tensors) mine += static_cast<double>(t.nbytes());
    bytes = std::max(bytes, mine);
  }
  const double end = start + cost_.latency_s + bytes / cost_.bandwidth_bytes_per_s;
  std::vector<int64_t> timed_out, late;
  double waited = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double w = start - r.arrived_at[i];
    if (w > cost_.timeout_s) timed_out.push_back(members[i]);
    if (r.arrived_at[i] == start) late.push_back(members[i]);
    waited = std::max(waited, w);
    activity_[static_cast<size_t>(members[i])].clock = end;
  }
  if (!timed_out.empty()) {
    std::sort(timed_out.begin(), timed_out.end());
    std::sort(late.begin(), late.end());
    if (!timeout_) timeout_ = TimeoutRecord{r.group, r.seq, sig, timed_out, late, waited};
    for (size_t i = 0; i < n; ++i) {
      const bool fired = std::binary_search(timed_out.begin(), timed_out.end(), members[i]);
      r.errors[i] =
          fired ? fmt::format(
                      "Watchdog caught collective operation timeout: {} on group {} seq {} "
                      "waited {:.3f} s for rank(s) {} (timeout {} s)",
                      sig.describe(), display_group(r.group), r.seq, start - r.arrived_at[i],
                      fmt::join(late, ", "), cost_.timeout_s)
                : fmt::format(
                      "NCCL communicator of group {} was aborted: the watchdog of rank(s) "
                      "{} timed out in {} seq {}",
                      display_group(r.group), fmt::join(timed_out, ", "), sig.describe(), r.seq);
    }
  }
  if (trace_ != nullptr) {
    trace_->collective(
        members,
        fmt::format("{} {} #{}", collective_op_name(sig.op), display_group(r.group), r.seq),
        r.arrived_at, end,
        {{"signature", sig.describe()},
         {"group", display_group(r.group)},
         {"seq", r.seq},
         {"group_size", n}});
  }
  r.done = true;
  for (int64_t m : members) {
    if (world_.is_parked(m)) world_.wake(m);
  }
}

Payload SimCollectives::await(int64_t rank, const std::string& key) {
  RankActivity& me = activity_[static_cast<size_t>(rank)];
  Rendezvous* r = open_.at(key).get();
  if (!r->done) {
    me.state = RankActivity::State::kBlocked;
    world_.park(rank);  // throws RankAborted when the world gives up on this rank
    me.state = RankActivity::State::kRunning;
    r = open_.at(key).get();
  }
  me.wait.reset();
  waiting_on_[static_cast<size_t>(rank)].clear();
  const auto pos = static_cast<size_t>(position_of(r->members, rank));
  Payload out = std::move(r->outputs[pos]);
  std::string failure = std::move(r->errors[pos]);
  const std::exception_ptr shared_failure = r->failure;
  if (++r->collected == r->members->size()) open_.erase(key);
  if (shared_failure) std::rethrow_exception(shared_failure);
  if (!failure.empty()) throw runtime_error(failure);
  return out;
}

Payload SimCollectives::collective(int64_t rank, const Group& group, const Signature& signature,
                                   Payload in) {
  if (position_of(group.ranks, rank) < 0) {
    throw runtime_error(fmt::format("rank {} called {} on group {} ({}) without being a member",
                                    rank, collective_op_name(signature.op), group.name,
                                    fmt::join(*group.ranks, ", ")));
  }
  inject_faults(rank, signature);
  const int64_t seq = ++seq_[static_cast<size_t>(rank)][group.name];
  const std::string key = fmt::format("c:{}#{}", group.name, seq);
  enter(rank, key, group, signature, std::move(in), seq, std::nullopt);
  return await(rank, key);
}

Payload SimCollectives::point_to_point(int64_t rank, int64_t src, int64_t dst, const Group& group,
                                       const Signature& signature, Payload in) {
  if (position_of(group.ranks, src) < 0 || position_of(group.ranks, dst) < 0) {
    throw runtime_error(fmt::format("{} between ranks {} and {}: both must be in group {}",
                                    collective_op_name(signature.op), src, dst,
                                    display_group(group.name)));
  }
  inject_faults(rank, signature);
  // Both sides count the messages of one direction, so the n-th send meets the n-th recv.
  const std::string direction = fmt::format("p:{}:{}>{}", group.name, src, dst);
  const int64_t seq = ++seq_[static_cast<size_t>(rank)][direction];
  const std::string key = fmt::format("{}#{}", direction, seq);
  const int64_t peer = rank == src ? dst : src;
  enter(rank, key, group, signature, std::move(in), seq, peer);
  return await(rank, key);
}

void SimCollectives::send(int64_t rank, int64_t peer, const Group& group, const Tensor& tensor) {
  const Signature sig{
      CollectiveOp::kSend, tensor.dtype(), {tensor.shape()}, peer, std::nullopt, {}};
  point_to_point(rank, rank, peer, group, sig, Payload{{tensor}});
}

Tensor SimCollectives::recv(int64_t rank, int64_t peer, const Group& group, const Tensor& like) {
  const Signature sig{CollectiveOp::kRecv, like.dtype(), {like.shape()}, peer, std::nullopt, {}};
  return point_to_point(rank, peer, rank, group, sig, Payload{}).tensors.at(0);
}

std::vector<SimCollectives::OpenWait> SimCollectives::open_waits(
    std::vector<int64_t>& wait_of) const {
  wait_of.assign(static_cast<size_t>(world_.size()), -1);
  std::vector<OpenWait> out;
  std::map<std::string, int64_t> index_of_key;
  for (int64_t rank = 0; rank < world_.size(); ++rank) {
    const std::string& key = waiting_on_[static_cast<size_t>(rank)];
    if (key.empty() || !world_.is_parked(rank)) continue;
    auto [it, fresh] = index_of_key.emplace(key, static_cast<int64_t>(out.size()));
    if (fresh) {
      const Rendezvous& r = *open_.at(key);
      // The signature of the lowest parked rank (ranks are visited in order).
      OpenWait w{r.group, r.members, r.seq, *activity_[static_cast<size_t>(rank)].wait->signature,
                 {},      {}};
      for (size_t i = 0; i < r.members->size(); ++i) {
        (r.signatures[i] ? w.arrived : w.missing).push_back((*r.members)[i]);
      }
      std::sort(w.arrived.begin(), w.arrived.end());
      std::sort(w.missing.begin(), w.missing.end());
      out.push_back(std::move(w));
    }
    wait_of[static_cast<size_t>(rank)] = it->second;
  }
  return out;
}

}  // namespace meshsim::sim
