#include "src/dtensor/redistribute_planner.hpp"

#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <set>

#include <fmt/format.h>

#include "src/dtensor/local_shard.hpp"
#include "src/error.hpp"
#include "src/tensor/memory_budget.hpp"

namespace meshsim {

namespace {

// One node of the search: a layout and the order its cuts were made in.
struct State {
  std::vector<Placement> placements;
  ShardOrder order;  // by tensor dim; an empty list: the dim is not cut
};

// A total order on states, for the visited set and for merging duplicate neighbours.
std::vector<int64_t> key_of(const State& s) {
  std::vector<int64_t> key;
  for (const Placement& p : s.placements) {
    key.push_back(static_cast<int64_t>(p.index()));
    if (const auto* partial = std::get_if<Partial>(&p)) {
      key.push_back(static_cast<int64_t>(partial->op));
    } else {
      key.push_back(sharded_dim(p));
    }
  }
  for (const std::vector<size_t>& cuts : s.order) {
    key.push_back(static_cast<int64_t>(cuts.size()));
    for (const size_t m : cuts) key.push_back(static_cast<int64_t>(m));
  }
  return key;
}

// DTensor's per-mesh-dim link model: 87.7 GB/s and 0.6 us a hop within a host; once the mesh
// dims from the innermost out span more devices than a host holds, 0.22 of that bandwidth and
// 2.7 us a hop.
struct LinkModel {
  std::vector<int64_t> devices;
  std::vector<double> bandwidth;
  std::vector<double> latency;
};

LinkModel link_model(const DeviceMesh& mesh, int64_t devices_per_host) {
  LinkModel links{mesh.shape(), std::vector<double>(mesh.ndim(), 87.7),
                  std::vector<double>(mesh.ndim(), 0.6)};
  int64_t spanned = 1;
  for (size_t m = mesh.ndim(); m-- > 0;) {
    spanned *= mesh.size(m);  // at most the world size
    if (spanned > devices_per_host) {
      links.bandwidth[m] *= 0.22;
      links.latency[m] = 2.7;
    }
  }
  return links;
}

// Microseconds for a ring collective of `hops` hops moving `gigabytes` on mesh dim m.
double ring_cost(const LinkModel& links, size_t m, int64_t hops, double gigabytes) {
  const auto n = static_cast<double>(links.devices[m]);
  const double latency = 6.6 + static_cast<double>(hops) * links.latency[m];
  const double seconds = (gigabytes * static_cast<double>(hops) / n) / links.bandwidth[m];
  return latency + seconds * 1e6;
}

class Planner {
 public:
  Planner(const DTensorSpec& spec, const State& target, int64_t devices_per_host)
      : spec_(spec), target_(target), links_(link_model(spec.mesh, devices_per_host)) {
    for (const std::vector<Placement>* side : {&spec.placements, &target.placements}) {
      for (const Placement& p : *side)
        if (const auto* partial = std::get_if<Partial>(&p)) reduce_ops_.insert(partial->op);
    }
    bytes_ = static_cast<double>(dtype_size(spec.dtype));
    for (const int64_t n : spec.shape) bytes_ *= static_cast<double>(n);
  }

  std::vector<State> cheapest_path(const State& from) {
    // Nodes are kept with their parent; the queue orders them by cost, then by when they were
    // pushed (Python's heap of (cost, counter, ...)).
    struct Node {
      State state;
      double cost;
      size_t parent;
    };
    std::vector<Node> nodes{{from, 0.0, SIZE_MAX}};
    using Entry = std::pair<double, size_t>;  // (cost, node index = push counter)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
    queue.push({0.0, 0});
    std::set<std::vector<int64_t>> visited;
    std::vector<MemoryReservation> held;  // the nodes and visited keys, against the budget
    const std::vector<int64_t> goal = key_of(target_);
    while (!queue.empty()) {
      const size_t at = queue.top().second;
      queue.pop();
      const std::vector<int64_t> key = key_of(nodes[at].state);
      if (key == goal) {
        std::vector<State> path;
        for (size_t i = at; i != SIZE_MAX; i = nodes[i].parent) path.push_back(nodes[i].state);
        return {path.rbegin(), path.rend()};
      }
      if (!visited.insert(key).second) continue;
      for (auto& [next, step_cost] : neighbours(nodes[at].state)) {
        if (visited.contains(key_of(next))) continue;
        if (nodes.size() >= kMaxNodes) {
          throw runtime_error(fmt::format(
              "redistribute from {} to {}: the min-cost plan search (PyTorch's planner) queued "
              "{} states without reaching the target, meshsim's bound; the states grow "
              "exponentially with the mesh dims ({} here)",
              placements_str(nodes.front().state.placements), placements_str(target_.placements),
              kMaxNodes, spec_.mesh.ndim()));
        }
        if (nodes.size() % kNodesPerReservation == 0) {
          held.emplace_back(kNodesPerReservation * kBytesPerNode, "the redistribute plan search");
        }
        const double cost = nodes[at].cost + step_cost;
        nodes.push_back({std::move(next), cost, at});
        queue.push({cost, nodes.size() - 1});
      }
    }
    throw Error(PyErrorType::kAssertionError, "No path found from the source to the target state");
  }

 private:
  // Past the states a mesh of up to six dims queues (a 2^6 mesh moving a 3-d tensor between two
  // cut orders: 24,000); a bound, so that no input grows the search without end (a 2^8 mesh
  // would), held against the memory budget as it grows. meshsim's limit, not PyTorch's.
  static constexpr size_t kMaxNodes = 1 << 16;
  static constexpr size_t kNodesPerReservation = 4096;
  static constexpr uint64_t kBytesPerNode = 512;  // a state, its queue entry and visited key

  // DTensor's estimate for a step that changes one mesh dim (one_step_redistribute_cost).
  double step_cost(const State& from, const State& to) const {
    size_t m = 0;
    while (m < from.placements.size() && from.placements[m] == to.placements[m]) ++m;
    if (m == from.placements.size()) return 0.0;
    int64_t shards = 1;
    for (size_t i = 0; i < from.placements.size(); ++i)
      if (sharded_dim(from.placements[i]) >= 0) shards *= spec_.mesh.size(i);
    double gigabytes = bytes_ / static_cast<double>(shards) / 1024 / 1024 / 1024;
    const Placement& a = from.placements[m];
    const Placement& b = to.placements[m];
    const int64_t n = links_.devices[m];
    const bool a_shard = std::holds_alternative<Shard>(a);
    const bool b_shard = std::holds_alternative<Shard>(b);
    const bool a_partial = std::holds_alternative<Partial>(a);
    const bool b_partial = std::holds_alternative<Partial>(b);
    const bool b_replicate = std::holds_alternative<Replicate>(b);
    if (a_shard && b_replicate)
      return ring_cost(links_, m, n - 1, gigabytes * static_cast<double>(n));
    if (a_shard && b_shard) return ring_cost(links_, m, n - 1, gigabytes) + 1.0;  // all_to_all
    if (a_partial && b_replicate) return ring_cost(links_, m, 2 * (n - 1), gigabytes);
    if (a_partial && b_shard) return ring_cost(links_, m, n - 1, gigabytes);
    if ((a_shard || a_partial) && b_partial) return std::numeric_limits<double>::infinity();
    return 0.0;  // a local cut, or a Replicate made Partial
  }

  // The states one step away, in the order PyTorch generates them; a state reached twice keeps
  // its first place and its last cost (a Python dict updated in place).
  std::vector<std::pair<State, double>> neighbours(const State& s) const {
    std::vector<std::pair<State, double>> out;
    std::map<std::vector<int64_t>, size_t> where;
    const auto add = [&](State next, double cost) {
      const auto [it, fresh] = where.try_emplace(key_of(next), out.size());
      if (fresh) {
        out.emplace_back(std::move(next), cost);
      } else {
        out[it->second].second = cost;
      }
    };
    const auto with = [&](size_t m, Placement p, const ShardOrder& order) {
      State next{s.placements, order};
      next.placements[m] = std::move(p);
      return next;
    };
    const auto ndim = static_cast<int64_t>(spec_.shape.size());
    // A Shard moved to another tensor dim (all_to_all): the last cut of a dim only.
    for (size_t d = 0; d < s.order.size(); ++d) {
      if (s.order[d].empty()) continue;
      const size_t m = s.order[d].back();
      if (!std::holds_alternative<Shard>(s.placements[m])) continue;
      for (int64_t to = 0; to < ndim; ++to) {
        if (static_cast<size_t>(to) == d) continue;
        ShardOrder order = s.order;
        order[d].pop_back();
        order[static_cast<size_t>(to)].push_back(m);
        State next = with(m, Shard{to}, order);
        add(next, step_cost(s, next));
      }
    }
    // A dim's last cut gathered (all_gather).
    for (size_t d = 0; d < s.order.size(); ++d) {
      if (s.order[d].empty()) continue;
      const size_t m = s.order[d].back();
      if (!std::holds_alternative<Shard>(s.placements[m])) continue;
      ShardOrder order = s.order;
      order[d].pop_back();
      State next = with(m, Replicate{}, order);
      add(next, step_cost(s, next));
    }
    // A Partial reduced (all_reduce).
    for (size_t m = 0; m < s.placements.size(); ++m) {
      if (!std::holds_alternative<Partial>(s.placements[m])) continue;
      State next = with(m, Replicate{}, s.order);
      add(next, step_cost(s, next));
    }
    // A Replicate cut locally, then a Partial scattered (reduce_scatter), on any tensor dim.
    for (const bool from_partial : {false, true}) {
      for (size_t m = 0; m < s.placements.size(); ++m) {
        const bool partial = std::holds_alternative<Partial>(s.placements[m]);
        const bool replicate = std::holds_alternative<Replicate>(s.placements[m]);
        if (from_partial ? !partial : !replicate) continue;
        for (int64_t to = 0; to < ndim; ++to) {
          ShardOrder order = s.order;
          order[static_cast<size_t>(to)].push_back(m);
          State next = with(m, Shard{to}, order);
          add(next, step_cost(s, next));
        }
      }
    }
    // A Replicate made Partial, for the reduce ops either side holds (sum and avg may mix).
    for (size_t m = 0; m < s.placements.size(); ++m) {
      if (!std::holds_alternative<Replicate>(s.placements[m])) continue;
      for (const ReduceOp op : reduce_ops_) {
        State next = with(m, Partial{op}, s.order);
        std::set<ReduceOp> ops;
        for (const Placement& p : next.placements)
          if (const auto* partial = std::get_if<Partial>(&p)) ops.insert(partial->op);
        if (ops.size() > 1 && ops != std::set<ReduceOp>{ReduceOp::kSum, ReduceOp::kAvg}) continue;
        add(next, step_cost(s, next));
      }
    }
    // Toward a Partial(sum) target only: a dim's last cut kept in zeros, free.
    for (size_t d = 0; d < s.order.size(); ++d) {
      if (s.order[d].empty()) continue;
      const size_t m = s.order[d].back();
      const auto* target = std::get_if<Partial>(&target_.placements[m]);
      if (!std::holds_alternative<Shard>(s.placements[m]) || target == nullptr ||
          target->op != ReduceOp::kSum)
        continue;
      ShardOrder order = s.order;
      order[d].pop_back();
      add(with(m, *target, order), 0.0);
    }
    return out;
  }

  const DTensorSpec& spec_;
  const State& target_;
  LinkModel links_;
  std::set<ReduceOp> reduce_ops_;
  double bytes_ = 0;
};

// The search is the same on every rank (its costs use the global shape), and every rank of a
// world runs it: one rank's path serves the others, as PyTorch caches a planner per process.
// Bounded: the oldest paths go first. Per thread, as the ranks of one world share a thread.
const std::vector<State>& cheapest_path(const DTensorSpec& spec, const State& source,
                                        const State& target, int64_t devices_per_host) {
  constexpr size_t kCachedPaths = 64;
  struct Cached {
    std::vector<int64_t> key;
    std::vector<State> path;
    std::optional<Error> failure;  // a search past its bound fails the same way on every rank
  };
  thread_local std::deque<Cached> cache;
  // Sizes first, so that keys of different inputs cannot run into each other.
  std::vector<int64_t> key{static_cast<int64_t>(spec.mesh.ndim()),
                           static_cast<int64_t>(spec.shape.size())};
  const std::vector<int64_t> source_key = key_of(source);
  key.insert(key.end(), source_key.begin(), source_key.end());
  const std::vector<int64_t> target_key = key_of(target);
  key.insert(key.end(), target_key.begin(), target_key.end());
  key.push_back(devices_per_host);
  key.push_back(static_cast<int64_t>(spec.dtype));
  key.insert(key.end(), spec.shape.begin(), spec.shape.end());
  const std::vector<int64_t> mesh_shape = spec.mesh.shape();
  key.insert(key.end(), mesh_shape.begin(), mesh_shape.end());
  for (const Cached& c : cache) {
    if (c.key != key) continue;
    if (c.failure) throw *c.failure;
    return c.path;
  }
  if (cache.size() == kCachedPaths) cache.pop_front();
  std::vector<State> path;
  try {
    path = Planner(spec, target, devices_per_host).cheapest_path(source);
  } catch (const Error& e) {
    cache.push_back({std::move(key), {}, e});
    throw;
  }
  cache.push_back({std::move(key), std::move(path), std::nullopt});
  return cache.back().path;
}

}  // namespace

std::vector<int64_t> shape_after_cuts(const DTensorSpec& spec, const ShardOrder& order,
                                      std::optional<size_t> except) {
  std::vector<int64_t> shape = spec.shape;
  const std::vector<int64_t>& coordinate = *spec.mesh.coordinate();
  for (size_t d = 0; d < order.size(); ++d) {
    for (const size_t m : order[d]) {
      if (m == except) continue;
      shape[d] = chunk_range(shape[d], spec.mesh.size(m), coordinate[m]).second;
    }
  }
  return shape;
}

std::vector<RedistributeTransform> plan_min_cost(
    const DTensorSpec& spec, std::span<const Placement> from, const ShardOrder& from_order,
    std::span<const Placement> to, const ShardOrder& to_order, int64_t devices_per_host) {
  const State source{{from.begin(), from.end()}, from_order};
  const State target{{to.begin(), to.end()}, to_order};
  const std::vector<State>& path = cheapest_path(spec, source, target, devices_per_host);
  std::vector<RedistributeTransform> plan;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const State& a = path[i];
    const State& b = path[i + 1];
    for (size_t m = 0; m < a.placements.size(); ++m) {
      if (!(a.placements[m] == b.placements[m]))
        plan.push_back({m, a.placements[m], b.placements[m], shape_after_cuts(spec, a.order, m)});
    }
  }
  return plan;
}

}  // namespace meshsim
