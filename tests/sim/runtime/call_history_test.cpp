// Call histories and blame by symmetry, on their own: the rolling hash keeps checkpoints across
// the whole history in bounded memory, and the departure is found against histories built call by
// call with a planted skip.
#include <catch2/catch.hpp>

#include "sim/runtime/call_history.hpp"
#include "sim/runtime/history_departure.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

CallSite site(int32_t step, int32_t iteration) {
  static const LoopScope loop{"i", nullptr, 1};
  const std::vector<std::pair<std::string, int64_t>> loops{{"i", iteration}};
  return CallSite::at(step, 10 + step, 3, &loop, loops);
}

// `calls` calls of a two-step loop; `skip` (if not -1) is the call left out.
CallHistory history(uint64_t calls, int64_t skip = -1) {
  CallHistory h;
  for (uint64_t c = 0; c < calls; ++c) {
    if (static_cast<int64_t>(c) == skip) continue;
    h.add(site(static_cast<int32_t>(c % 2), static_cast<int32_t>(c / 2)), CollectiveOp::kAllReduce);
  }
  return h;
}

}  // namespace

TEST_CASE("call history: checkpoints cover the whole history as it grows", "[sim][history]") {
  for (const uint64_t calls : {1u, 31u, 32u, 33u, 64u, 65u, 1000u, 4097u}) {
    const CallHistory h = history(calls);
    CHECK(h.count() == calls);
    CHECK(h.hash_at(calls).has_value());
    // At most kCheckpoints hashes, evenly spaced, the last at most one stride before the end.
    CHECK(calls / h.stride() <= CallHistory::kCheckpoints);
    uint64_t held = 0;
    for (uint64_t c = 1; c <= calls; ++c) held += h.hash_at(c).has_value() ? 1 : 0;
    CHECK(held <= CallHistory::kCheckpoints + CallHistory::kRecent);
    CHECK(h.hash_at(calls - calls % h.stride()).has_value());
    // The same calls give the same hashes; a prefix of them, the hashes of the prefix.
    const CallHistory shorter = history(calls / 2 + 1);
    for (uint64_t c = h.stride(); c <= shorter.count(); c += h.stride()) {
      if (const auto a = shorter.hash_at(c)) CHECK(*a == *h.hash_at(c));
    }
  }
  // Nine calls with one left out are not the first nine.
  REQUIRE(history(10, 3).count() == 9);
  CHECK(history(10, 3).hash_at(9) != history(9).hash_at(9));
  CHECK(history(0).hash_at(1) == std::nullopt);
}

TEST_CASE("history departure: the member that left a call out, and where", "[sim][history]") {
  for (const int64_t skip : {0, 5, 31, 32, 700, 998}) {
    std::vector<CallHistory> h;
    for (int64_t r = 0; r < 4; ++r) h.push_back(history(1000, r == 2 ? skip : -1));
    const std::map<int64_t, std::vector<int64_t>> groups{{7, {0, 1, 2, 3}}};
    const auto all = history_departures(
        groups, [&](int64_t r) -> const CallHistory& { return h[static_cast<size_t>(r)]; });
    REQUIRE(all.size() == 1);
    const HistoryDeparture* d = &all.front();
    CHECK(d->group_id == 7);
    CHECK(d->odd == std::vector<int64_t>{2});
    CHECK(d->peers == std::vector<int64_t>{0, 1, 3});
    // The window holds the skip: every call before `agreed` was made alike.
    CHECK(d->agreed <= static_cast<uint64_t>(skip));
    CHECK(static_cast<uint64_t>(skip) < d->differ);
  }
}

TEST_CASE("history departure: no majority, too few members, or no departure: none",
          "[sim][history]") {
  // Four programs (a pipeline's stages): each rank's calls come from steps of its own.
  std::vector<CallHistory> h(4);
  for (int32_t r = 0; r < 4; ++r) {
    for (int32_t c = 0; c < 100; ++c)
      h[static_cast<size_t>(r)].add(site(r, c), CollectiveOp::kSend);
  }
  const auto of = [&](int64_t r) -> const CallHistory& { return h[static_cast<size_t>(r)]; };
  CHECK(history_departures({{0, {0, 1, 2, 3}}}, of).empty());  // all differ
  std::vector<CallHistory> two{history(100), history(100, 4)};
  CHECK(history_departures({{0, {0, 1}}}, [&](int64_t r) -> const CallHistory& {
          return two[static_cast<size_t>(r)];
        }).empty());  // two members: no majority
  std::vector<CallHistory> same{history(100), history(40), history(100)};
  CHECK(history_departures({{0, {0, 1, 2}}}, [&](int64_t r) -> const CallHistory& {
          return same[static_cast<size_t>(r)];
        }).empty());  // a member that stopped early agrees on what it did
  // One rank per pipeline stage: the middle stages agree, the first and last differ from them
  // and from each other.
  std::vector<CallHistory> stages{history(100, 0), history(100), history(100), history(100),
                                  history(100, 1)};
  CHECK(history_departures({{0, {0, 1, 2, 3, 4}}}, [&](int64_t r) -> const CallHistory& {
          return stages[static_cast<size_t>(r)];
        }).empty());
}
