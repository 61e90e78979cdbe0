// The simulated collective backend: ranks rendezvous per (group, sequence number), signatures are
// compared the moment ranks meet, results are computed exactly from real or meta tensors, and
// every rank's virtual clock advances by a latency + bytes/bandwidth cost model.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/runtime/faults.hpp"
#include "sim/runtime/rank_activity.hpp"
#include "sim/runtime/trace.hpp"
#include "sim/runtime/world.hpp"
#include "src/comm/collective.hpp"
#include "src/comm/group_batch.hpp"

namespace meshsim::sim {

struct CostModel {
  double latency_s = 5e-6;
  double bandwidth_bytes_per_s = 100e9;
  // NCCL's watchdog: a rank that waits longer than this (virtual) fails.
  double timeout_s = 600.0;
};

// What one rank brings to, or gets from, a collective.
struct Payload {
  Payload() = default;
  Payload(std::vector<Tensor> t, std::vector<std::string> o = {}, SharedGroupBatch groups = nullptr)
      : tensors(std::move(t)), objects(std::move(o)), new_groups(std::move(groups)) {}

  std::vector<Tensor> tensors;
  std::vector<std::string> objects;
  // new_group: the groups this rank asked for (shared, so equal requests are the same pointer).
  SharedGroupBatch new_groups;
};

// A collective whose participants disagree on the signature.
struct DesyncRecord {
  std::string group;
  int64_t seq = 0;
  std::vector<int64_t> members;
  std::vector<std::pair<int64_t, Signature>> arrivals;  // in rank order
};

// A collective where some rank waited longer than the timeout.
struct TimeoutRecord {
  std::string group;
  int64_t seq = 0;
  Signature signature;
  std::vector<int64_t> timed_out;  // ranks whose watchdog fired
  std::vector<int64_t> late;       // ranks that arrived last
  double waited_s = 0.0;
};

class SimCollectives {
 public:
  SimCollectives(World& world, std::vector<RankActivity>& activity, CostModel cost);
  ~SimCollectives();

  // Rank `rank` enters `signature` on `group` with `in`; parks until every member has arrived,
  // then returns its share of the result. Throws meshsim::Error (RuntimeError) for a rank outside
  // the group, a detected desync, or a watchdog timeout; RankAborted when the world aborts it.
  Payload collective(int64_t rank, const Group& group, const Signature& signature, Payload in);
  // Blocking send/recv between `rank` and `peer` (global ranks) within `group`.
  void send(int64_t rank, int64_t peer, const Group& group, const Tensor& tensor);
  Tensor recv(int64_t rank, int64_t peer, const Group& group, const Tensor& like);

  // Faults to inject when a rank enters its k-th collective (send and recv count too).
  void set_faults(const std::vector<Fault>* faults) { faults_ = faults; }
  // Records every completed collective into `trace` (null: no tracing).
  void set_trace(Trace* trace) { trace_ = trace; }

  const std::optional<DesyncRecord>& desync() const { return desync_; }
  const std::optional<TimeoutRecord>& timeout() const { return timeout_; }
  // Things that did not stop the run but are almost certainly bugs (groups created with
  // different members on different ranks), in the order they happened.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // A collective some rank is parked in: who arrived (with what) and who has not.
  struct OpenWait {
    std::string group;
    RankList members;
    int64_t seq = 0;
    Signature signature;  // of the lowest arrived rank
    std::vector<int64_t> arrived;
    std::vector<int64_t> missing;
  };
  // Every collective with a parked rank, ordered by its lowest parked rank; `wait_of[r]` is the
  // index of rank r's entry, or -1.
  std::vector<OpenWait> open_waits(std::vector<int64_t>& wait_of) const;

 private:
  struct Rendezvous;
  Rendezvous& enter(int64_t rank, const std::string& key, const Group& group,
                    const Signature& signature, Payload in, int64_t seq,
                    std::optional<int64_t> peer);
  Payload await(int64_t rank, const std::string& key);
  // Counts the call and fires the faults due at it: stall (clock), crash or backend error (throw).
  void inject_faults(int64_t rank, const Signature& signature);
  // Every member has arrived: compute the results (or the one error all members get), then
  // advance virtual time, fire the watchdog and wake the members.
  void complete(Rendezvous& r);
  void compute_results(Rendezvous& r);
  // Throws MemoryError when n results for each of n members would not fit the budget.
  static void check_fan_out(const Signature& sig, size_t n);
  void finish(Rendezvous& r, const Signature& sig, const std::vector<int64_t>& members, size_t n);
  // send and recv: a rendezvous of the pair, sequenced per direction (src > dst) within `group`.
  Payload point_to_point(int64_t rank, int64_t src, int64_t dst, const Group& group,
                         const Signature& signature, Payload in);
  // Position of `rank` in a (pooled) member list, or -1; O(1) after the list's first lookup.
  int64_t position_of(const RankList& members, int64_t rank);

  World& world_;
  std::vector<RankActivity>& activity_;
  CostModel cost_;
  std::vector<std::map<std::string, int64_t>> seq_;  // per rank: next seq per group or pair
  std::map<std::string, std::unique_ptr<Rendezvous>> open_;
  std::vector<std::string> waiting_on_;  // per rank: key of the rendezvous it is parked in
  std::vector<int64_t> calls_;           // per rank: collectives entered so far
  const std::vector<Fault>* faults_ = nullptr;
  Trace* trace_ = nullptr;
  std::optional<DesyncRecord> desync_;
  std::optional<TimeoutRecord> timeout_;
  std::vector<std::string> warnings_;
  std::shared_ptr<RankListPool> rank_lists_ = std::make_shared<RankListPool>();
  struct Positions {
    RankList keep;  // holds the list alive, so its address stays a unique key
    std::unordered_map<int64_t, int64_t> of;
  };
  std::unordered_map<const std::vector<int64_t>*, Positions> positions_;
};

}  // namespace meshsim::sim
