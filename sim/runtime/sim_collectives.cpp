#include "sim/runtime/sim_collectives.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "src/error.hpp"

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

struct SimCollectives::Rendezvous {
  std::string group;
  int64_t seq = 0;
  std::vector<int64_t> members;
  std::map<int64_t, Signature> signatures;
  std::map<int64_t, Payload> inputs;
  std::map<int64_t, double> arrived_at;
  std::map<int64_t, Payload> outputs;
  std::map<int64_t, std::string> errors;
  bool done = false;
  bool desynced = false;
  size_t collected = 0;
};

SimCollectives::SimCollectives(World& world, std::vector<RankActivity>& activity, CostModel cost)
    : world_(world),
      activity_(activity),
      cost_(cost),
      seq_(static_cast<size_t>(world.size())),
      waiting_on_(static_cast<size_t>(world.size())) {}

SimCollectives::~SimCollectives() = default;

namespace {

// Point-to-point partners only agree on the tensor; collectives on everything.
bool compatible(const Signature& a, const Signature& b) {
  const bool p2p = (a.op == CollectiveOp::kSend || a.op == CollectiveOp::kRecv) &&
                   (b.op == CollectiveOp::kSend || b.op == CollectiveOp::kRecv);
  if (p2p) return a.op != b.op && a.dtype == b.dtype && a.shapes == b.shapes;
  return a == b;
}

std::vector<const Tensor*> first_tensors(const std::vector<const Payload*>& in) {
  std::vector<const Tensor*> out;
  for (const Payload* p : in) out.push_back(&p->tensors.at(0));
  return out;
}

}  // namespace

SimCollectives::Rendezvous& SimCollectives::enter(int64_t rank, const std::string& key,
                                                  const Group& group, const Signature& signature,
                                                  Payload in, int64_t seq,
                                                  std::optional<int64_t> peer) {
  auto& slot = open_[key];
  if (!slot) {
    slot = std::make_unique<Rendezvous>();
    slot->group = group.name;
    slot->seq = seq;
    slot->members =
        peer ? std::vector<int64_t>{std::min(rank, *peer), std::max(rank, *peer)} : group.ranks;
  }
  Rendezvous& r = *slot;
  RankActivity& me = activity_[static_cast<size_t>(rank)];
  if (!r.signatures.empty() && !compatible(r.signatures.begin()->second, signature)) {
    r.desynced = true;
  }
  r.signatures[rank] = signature;
  r.inputs[rank] = std::move(in);
  r.arrived_at[rank] = me.clock;
  if (r.desynced && (!desync_ || (desync_->group == r.group && desync_->seq == r.seq))) {
    desync_ = DesyncRecord{r.group, r.seq, r.members, {}};
    for (const auto& [who, sig] : r.signatures) desync_->arrivals.emplace_back(who, sig);
  }
  me.wait = WaitInfo{group.name, r.members, seq, signature, peer};
  waiting_on_[static_cast<size_t>(rank)] = key;
  if (!r.desynced && r.signatures.size() == r.members.size()) complete(r);
  return r;
}

void SimCollectives::complete(Rendezvous& r) {
  std::vector<const Payload*> in;
  for (int64_t m : r.members) in.push_back(&r.inputs.at(m));
  const Signature& sig = r.signatures.at(r.members.front());
  const auto n = static_cast<int64_t>(r.members.size());
  for (int64_t i = 0; i < n; ++i) {
    Payload& out = r.outputs[r.members[static_cast<size_t>(i)]];
    switch (sig.op) {
      case CollectiveOp::kAllReduce:
        out.tensors = {reduce_tensors(first_tensors(in), *sig.reduce_op)};
        break;
      case CollectiveOp::kAllGather:
        for (const Payload* p : in) out.tensors.push_back(p->tensors.at(0));
        break;
      case CollectiveOp::kAllGatherIntoTensor:
        out.tensors = {concat_dim0(first_tensors(in))};
        break;
      case CollectiveOp::kReduceScatter:
        out.tensors = {chunk_dim0(reduce_tensors(first_tensors(in), *sig.reduce_op), n, i)};
        break;
      case CollectiveOp::kBroadcast:
      case CollectiveOp::kBroadcastObjectList:
        out = r.inputs.at(*sig.root);
        break;
      case CollectiveOp::kAllToAll:
        for (const Payload* p : in) out.tensors.push_back(p->tensors.at(static_cast<size_t>(i)));
        break;
      case CollectiveOp::kAllGatherObject:
        for (const Payload* p : in) out.objects.push_back(p->objects.at(0));
        break;
      case CollectiveOp::kSend:
      case CollectiveOp::kRecv:
        // The receiver gets the sender's tensor; the sender gets nothing.
        for (const auto& [who, s] : r.signatures) {
          if (s.op == CollectiveOp::kSend && who != r.members[static_cast<size_t>(i)]) {
            out.tensors = r.inputs.at(who).tensors;
          }
        }
        break;
      case CollectiveOp::kBarrier:
      case CollectiveOp::kNewGroup:
        break;
    }
  }
  if (sig.op == CollectiveOp::kNewGroup) {
    std::map<std::string, std::vector<int64_t>> by_members;
    for (int64_t m : r.members) by_members[r.inputs.at(m).objects.at(0)].push_back(m);
    if (by_members.size() > 1) {
      std::vector<std::string> parts;
      for (const auto& [members, who] : by_members) {
        parts.push_back(fmt::format("rank(s) {} passed {}", fmt::join(who, ", "), members));
      }
      warnings_.push_back(fmt::format("new_group #{} was created with different ranks: {}", r.seq,
                                      fmt::join(parts, "; ")));
    }
  }
  // Virtual time: everyone leaves together once the last rank has arrived and the data moved.
  double start = 0.0;
  int64_t bytes = 0;
  for (int64_t m : r.members) {
    start = std::max(start, r.arrived_at.at(m));
    int64_t mine = 0;
    for (const Tensor& t : r.inputs.at(m).tensors) mine += static_cast<int64_t>(t.nbytes());
    bytes = std::max(bytes, mine);
  }
  const double end =
      start + cost_.latency_s + static_cast<double>(bytes) / cost_.bandwidth_bytes_per_s;
  std::vector<int64_t> timed_out, late;
  double waited = 0.0;
  for (int64_t m : r.members) {
    const double w = start - r.arrived_at.at(m);
    if (w > cost_.timeout_s) timed_out.push_back(m);
    if (r.arrived_at.at(m) == start) late.push_back(m);
    waited = std::max(waited, w);
    activity_[static_cast<size_t>(m)].clock = end;
  }
  if (!timed_out.empty()) {
    if (!timeout_) timeout_ = TimeoutRecord{r.group, r.seq, sig, timed_out, late, waited};
    for (int64_t m : r.members) {
      const bool fired = std::find(timed_out.begin(), timed_out.end(), m) != timed_out.end();
      r.errors[m] = fired
                        ? fmt::format(
                              "Watchdog caught collective operation timeout: {} on group {} seq {} "
                              "waited {:.3f} s for rank(s) {} (timeout {} s)",
                              sig.describe(), r.group, r.seq, start - r.arrived_at.at(m),
                              fmt::join(late, ", "), cost_.timeout_s)
                        : fmt::format(
                              "NCCL communicator of group {} was aborted: the watchdog of rank(s) "
                              "{} timed out in {} seq {}",
                              r.group, fmt::join(timed_out, ", "), sig.describe(), r.seq);
    }
  }
  r.done = true;
  for (int64_t m : r.members) {
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
  Payload out = std::move(r->outputs[rank]);
  const auto error = r->errors.find(rank);
  const std::optional<std::string> failure =
      error == r->errors.end() ? std::nullopt : std::optional<std::string>(error->second);
  if (++r->collected == r->members.size()) open_.erase(key);
  if (failure) throw runtime_error(*failure);
  return out;
}

Payload SimCollectives::collective(int64_t rank, const Group& group, const Signature& signature,
                                   Payload in) {
  if (group.group_rank(rank) < 0) {
    throw runtime_error(fmt::format("rank {} called {} on group {} ({}) without being a member",
                                    rank, collective_op_name(signature.op), group.name,
                                    fmt::join(group.ranks, ", ")));
  }
  const int64_t seq = ++seq_[static_cast<size_t>(rank)][group.name];
  const std::string key = fmt::format("c:{}#{}", group.name, seq);
  enter(rank, key, group, signature, std::move(in), seq, std::nullopt);
  return await(rank, key);
}

void SimCollectives::send(int64_t rank, int64_t peer, const Group& group, const Tensor& tensor) {
  if (group.group_rank(peer) < 0 || group.group_rank(rank) < 0) {
    throw runtime_error(
        fmt::format("send from {} to {}: both must be in group {}", rank, peer, group.name));
  }
  const std::string pair = fmt::format("{}>{}", rank, peer);
  const int64_t seq = ++seq_[static_cast<size_t>(rank)]["p:" + group.name + ":" + pair];
  const std::string key = fmt::format("p:{}:{}#{}", group.name, pair, seq);
  Signature sig{CollectiveOp::kSend, tensor.dtype(), {tensor.shape()}, peer, std::nullopt, {}};
  enter(rank, key, group, sig, Payload{{tensor}, {}}, seq, peer);
  await(rank, key);
}

Tensor SimCollectives::recv(int64_t rank, int64_t peer, const Group& group, const Tensor& like) {
  if (group.group_rank(peer) < 0 || group.group_rank(rank) < 0) {
    throw runtime_error(
        fmt::format("recv on {} from {}: both must be in group {}", rank, peer, group.name));
  }
  const std::string pair = fmt::format("{}>{}", peer, rank);
  const int64_t seq = ++seq_[static_cast<size_t>(rank)]["p:" + group.name + ":" + pair];
  const std::string key = fmt::format("p:{}:{}#{}", group.name, pair, seq);
  Signature sig{CollectiveOp::kRecv, like.dtype(), {like.shape()}, peer, std::nullopt, {}};
  enter(rank, key, group, sig, Payload{}, seq, peer);
  return await(rank, key).tensors.at(0);
}

std::vector<int64_t> SimCollectives::missing_for(int64_t rank) const {
  const std::string& key = waiting_on_[static_cast<size_t>(rank)];
  std::vector<int64_t> out;
  if (key.empty()) return out;
  const Rendezvous& r = *open_.at(key);
  for (int64_t m : r.members) {
    if (!r.signatures.count(m)) out.push_back(m);
  }
  return out;
}

}  // namespace meshsim::sim
