#include "sim/runtime/store_group_creator.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace meshsim::sim {

void StoreBarrier::execute(Meeting& m) {
  const GroupBatch& asked = *m.exchanges[0].new_groups;
  const bool agree = std::all_of(m.exchanges.begin(), m.exchanges.end(), [&](const Exchange& e) {
    return e.new_groups->same_groups(asked);
  });
  if (agree) return;
  std::map<std::string, std::vector<int64_t>> by_request;
  for (size_t i = 0; i < m.size(); ++i)
    by_request[m.exchanges[i].new_groups->describe()].push_back((*m.members)[i]);
  std::vector<std::string> parts;
  for (const auto& [wanted, who] : by_request) {
    parts.push_back(fmt::format("rank(s) {} passed {}", fmt::join(who, ", "), wanted));
  }
  warnings_.push_back(fmt::format("new_group #{} was created with different ranks: {}", m.seq,
                                  fmt::join(parts, "; ")));
}

void StoreGroupCreator::store_barrier(const SharedGroupBatch& batch) {
  Signature sig;
  sig.op = CollectiveOp::kNewGroup;
  sig.dtype = DType::kInt64;
  const int64_t count[] = {static_cast<int64_t>(batch->count())};
  sig.shape = InlineShape::of(count);
  const Group store("store", world_ranks(), rank());
  rendezvous_.meet(rank(), store, sig, {.new_groups = batch.get()}, barrier_);
}

}  // namespace meshsim::sim
