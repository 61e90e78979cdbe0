#include "sim/runtime/store_group_creator.hpp"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "sim/runtime/fiber_stack.hpp"
#include "src/error.hpp"

namespace meshsim::sim {

namespace {

// "5" for one group, "5-12" for a batch.
std::string names_of(int64_t first, size_t count) {
  if (count <= 1) return std::to_string(first);
  return fmt::format("{}-{}", first, first + static_cast<int64_t>(count) - 1);
}

}  // namespace

void StoreBarrier::execute(Meeting& m) {
  const std::vector<int64_t>& members = *m.members;
  MESHSIM_ASSERT(m.new_groups.size() == m.size(),
                 "every member of a store barrier asks for groups");
  const int64_t first = m.new_groups[0]->first_group;
  // Ranks that asked for the same groups, by request, in the order of their lowest rank.
  std::vector<GroupRequest> requests;
  for (size_t i = 0; i < m.size(); ++i) {
    const NewGroupRequest& asked = *m.new_groups[i];
    MESHSIM_ASSERT(asked.first_group == first,
                   fmt::format("rank {} names its groups from {}, rank {} from {}", members[i],
                               asked.first_group, members[0], first));
    auto it = std::find_if(requests.begin(), requests.end(), [&](const GroupRequest& r) {
      return r.batch == *asked.batch || r.batch->same_groups(**asked.batch);
    });
    if (it == requests.end()) {
      requests.push_back({*asked.batch, {}, asked.origin ? *asked.origin : std::string()});
      it = std::prev(requests.end());
    }
    it->ranks.push_back(members[i]);
  }
  // The lowest rank's request names the groups for everyone who agrees with it. A failure (the
  // table outgrew the memory budget) or a listener's (a communicator NCCL could not create)
  // belongs to the barrier: every rank gets it, and time still passes.
  std::exception_ptr failure;
  try {
    for (const GroupRequest& request : requests) {
      for (int64_t rank : request.ranks) groups_.define(first, request.batch, rank, request.origin);
    }
  } catch (...) {
    forget_unwound_frames();
    failure = std::current_exception();
  }
  if (requests.size() > 1) {
    std::vector<std::string> parts;
    for (const GroupRequest& request : requests) {
      parts.push_back(fmt::format("rank(s) {} passed {}", fmt::join(request.ranks, ", "),
                                  request.batch->describe()));
    }
    warnings_.push_back(fmt::format("new_group {} was created with different ranks: {}",
                                    names_of(first, requests.front().batch->count()),
                                    fmt::join(parts, "; ")));
  }
  if (listener_ != nullptr && !failure) {
    try {
      listener_->groups_defined(first, requests);
    } catch (...) {
      forget_unwound_frames();
      failure = std::current_exception();
    }
  }
  time_.advance(m);
  if (failure) std::rethrow_exception(failure);
}

void StoreGroupCreator::store_barrier(const SharedGroupBatch& batch, int64_t first) {
  Signature sig;
  sig.op = CollectiveOp::kNewGroup;
  sig.dtype = DType::kInt64;
  const int64_t count[] = {static_cast<int64_t>(batch->count())};
  sig.shape = InlineShape::of(count);
  const Group store("store", world_ranks(), rank());
  const double entered_at = activity_.clock;
  const NewGroupRequest request{&batch, first, &creating(), &operation()};
  rendezvous_.meet_store(rank(), store, sig, request, barrier_);
  if (trace_ != nullptr) {
    trace_->meeting(rank(), activity_.site, sig, kStoreGroupId, store.size(), activity_.last_seq,
                    entered_at, activity_.clock);
  }
}

}  // namespace meshsim::sim
