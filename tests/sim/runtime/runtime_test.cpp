#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "sim/report/hang_render.hpp"
#include "sim/run/backend_factory.hpp"
#include "sim/runtime/fiber_stack.hpp"
#include "sim/runtime/hang_report.hpp"
#include "sim/runtime/world.hpp"
#include "src/error.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

// Runs `body(rank, backend)` on n fiber ranks; returns the hang report of the first stall.
struct Harness {
  explicit Harness(int64_t n, WorldOptions options = {}, BackendOptions backend = {})
      : world(n, options), activity(static_cast<size_t>(n)), factory(world, activity, backend) {}

  template <typename F>
  std::optional<HangReport> run(F&& body) {
    std::optional<HangReport> hang;
    world.run(
        [&](int64_t r) {
          RankActivity& me = activity[static_cast<size_t>(r)];
          try {
            const std::unique_ptr<Backend> backend = factory.backend(r);
            body(r, *backend);
            me.state = RankActivity::State::kFinished;
          } catch (const RankAborted& a) {
            forget_unwound_frames();
            me.state = RankActivity::State::kAborted;
            me.error = a.reason;
          } catch (const Error& e) {
            forget_unwound_frames();
            me.state = RankActivity::State::kFailed;
            me.error = e.what();
          } catch (const InjectedCrash& c) {
            forget_unwound_frames();
            me.state = RankActivity::State::kFailed;
            me.error = c.what;
          }
        },
        [&] {
          if (!hang) hang = analyze_hang(activity, factory.rendezvous(), factory.timeout());
          std::vector<std::optional<std::string>> aborts(activity.size());
          for (size_t r = 0; r < activity.size(); ++r) {
            if (activity[r].state == RankActivity::State::kBlocked) aborts[r] = "test abort";
          }
          return aborts;
        });
    return hang;
  }

  // WORLD as rank `r` holds it.
  Group world_group(int64_t r) const {
    std::vector<int64_t> ranks;
    for (int64_t i = 0; i < world.size(); ++i) ranks.push_back(i);
    return Group{"0", ranks, r};
  }

  World world;
  std::vector<RankActivity> activity;
  BackendFactory factory;
};

}  // namespace

TEST_CASE("runtime: FIFO runs ranks in order; a seed fixes a random permutation",
          "[sim][runtime]") {
  auto order_for = [](WorldOptions options) {
    std::vector<int64_t> order;
    World w(6, options);
    w.run([&](int64_t r) { order.push_back(r); },
          [] { return std::vector<std::optional<std::string>>(6); });
    return std::pair(order, w.schedule().digest);
  };
  CHECK(order_for({}).first == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  const auto a = order_for({SchedulePolicy::kRandom, 42, kDefaultStackBytes});
  const auto b = order_for({SchedulePolicy::kRandom, 42, kDefaultStackBytes});
  CHECK(a == b);
  std::set<std::vector<int64_t>> distinct;
  for (uint64_t seed = 0; seed < 8; ++seed)
    distinct.insert(order_for({SchedulePolicy::kRandom, seed, kDefaultStackBytes}).first);
  CHECK(distinct.size() > 1);
  for (const auto& order : distinct) {
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  }
}

TEST_CASE("runtime: the schedule digest is FNV-1a over each picked rank's eight bytes",
          "[sim][runtime]") {
  // The digest is printed in reports, so its fast path must not change its value.
  uint64_t state = 7;
  for (int i = 0; i < 2000; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    // Small ranks, ranks past 2^32, and every byte position set.
    const auto rank = static_cast<int64_t>(i % 3 == 0 ? state >> 1 : (state >> 40) >> (i % 24));
    ScheduleLog log;
    log.digest = state;
    log.record(rank);
    std::string bytes;
    for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<char>((rank >> (8 * b)) & 0xff));
    CHECK(log.digest == fnv1a(state, bytes));
    CHECK(log.decisions == 1);
  }
}

TEST_CASE("runtime: all_reduce gives known answers for every op and schedule", "[sim][runtime]") {
  // Rank r holds (r + 1) * (i + 1) at index i, so over 5 ranks the answers have closed forms:
  // sum 15 (i+1), avg 3 (i+1), min (i+1), max 5 (i+1), product 120 (i+1)^5.
  auto known = [](ReduceOp op, double x) {
    switch (op) {
      case ReduceOp::kSum:
        return 15 * x;
      case ReduceOp::kAvg:
        return 3 * x;
      case ReduceOp::kMin:
        return x;
      case ReduceOp::kMax:
        return 5 * x;
      case ReduceOp::kProduct:
        return 120 * x * x * x * x * x;
    }
    return 0.0;
  };
  for (DType dtype : {DType::kFloat64, DType::kInt64}) {
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      for (uint64_t seed : {0, 1, 2}) {
        Harness h(5, {seed == 0 ? SchedulePolicy::kFifo : SchedulePolicy::kRandom, seed,
                      kDefaultStackBytes});
        std::vector<Tensor> results(5);
        const auto hang = h.run([&](int64_t r, Backend& b) {
          Tensor t({7}, dtype);
          for (int64_t i = 0; i < 7; ++i) t.set_int(i, (r + 1) * (i + 1));
          b.all_reduce(t, op, h.world_group(r));
          results[static_cast<size_t>(r)] = t;
        });
        REQUIRE_FALSE(hang);
        for (const Tensor& t : results) {
          for (int64_t i = 0; i < 7; ++i) {
            INFO(dtype_name(dtype) << " " << reduce_op_name(op) << " seed " << seed << " i " << i);
            REQUIRE(t.get(i) == known(op, static_cast<double>(i + 1)));
          }
        }
      }
    }
  }
}

TEST_CASE("runtime: reductions accumulate float32 in double, in group-rank order",
          "[sim][runtime]") {
  // 1e8 + 1 - 1e8 is 1 in double but 0 in float32 arithmetic: meshsim's sum is exact here.
  Harness h(3);
  std::vector<Tensor> results(3);
  const double inputs[] = {1e8, 1, -1e8};
  h.run([&](int64_t r, Backend& b) {
    Tensor t({1}, DType::kFloat32);
    t.set(0, inputs[r]);
    b.all_reduce(t, ReduceOp::kSum, h.world_group(r));
    results[static_cast<size_t>(r)] = t;
  });
  for (const Tensor& t : results) CHECK(t.get(0) == 1.0);
  // Integers wrap at their width, as NCCL's integer sums do.
  Harness w(2);
  std::vector<Tensor> wrapped(2);
  w.run([&](int64_t r, Backend& b) {
    Tensor t({1}, DType::kInt32);
    t.set_int(0, INT32_MAX - 1 + r);
    b.all_reduce(t, ReduceOp::kSum, w.world_group(r));
    wrapped[static_cast<size_t>(r)] = t;
  });
  CHECK(wrapped[0].get_int(0) == -3);  // (2^31 - 2) + (2^31 - 1) wraps to -3
}

TEST_CASE("runtime: through the Backend interface, every collective moves the right data",
          "[sim][runtime][backend]") {
  Harness h(4);
  std::vector<std::vector<Tensor>> gathered(4), exchanged(4);
  std::vector<Tensor> joined(4), scattered(4), broadcast(4), received(4), reduced(4);
  std::vector<std::vector<std::string>> objects(4), gathered_objects(4);
  const auto hang = h.run([&](int64_t r, Backend& b) {
    const Group g = h.world_group(r);
    const Tensor mine = Tensor::full({2}, r, DType::kInt64);
    reduced[static_cast<size_t>(r)] = mine;
    b.all_reduce(reduced[static_cast<size_t>(r)], ReduceOp::kMax, g);
    gathered[static_cast<size_t>(r)] = b.all_gather(mine, g);
    joined[static_cast<size_t>(r)] = b.all_gather_into_tensor(mine, g);
    scattered[static_cast<size_t>(r)] =
        b.reduce_scatter(Tensor::arange(8, DType::kInt32), ReduceOp::kSum, g);
    broadcast[static_cast<size_t>(r)] = mine;
    b.broadcast(broadcast[static_cast<size_t>(r)], 3, g);
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < 4; ++i) parts.push_back(Tensor::full({1}, 10 * r + i, DType::kInt64));
    exchanged[static_cast<size_t>(r)] = b.all_to_all(parts, g);
    b.barrier(g);
    if (r == 0) b.send(Tensor::full({3}, 7, DType::kFloat32), 2, g);
    if (r == 2) received[2] = b.recv(Tensor({3}, DType::kFloat32), 0, g);
    objects[static_cast<size_t>(r)] = b.broadcast_object_list({std::to_string(r), "x"}, 1, g);
    gathered_objects[static_cast<size_t>(r)] = b.all_gather_object(std::to_string(r * r), g);
  });
  REQUIRE_FALSE(hang);
  for (int64_t r = 0; r < 4; ++r) {
    const auto i = static_cast<size_t>(r);
    CHECK(reduced[i].get(0) == 3);
    REQUIRE(gathered[i].size() == 4);
    for (int64_t k = 0; k < 4; ++k) CHECK(gathered[i][static_cast<size_t>(k)].get(1) == k);
    CHECK(joined[i].shape() == std::vector<int64_t>{8});
    CHECK(joined[i].get(5) == 2);
    CHECK(scattered[i].shape() == std::vector<int64_t>{2});
    CHECK(scattered[i].get(0) == 4 * (2 * r));
    CHECK(broadcast[i].get(0) == 3);
    for (int64_t j = 0; j < 4; ++j)
      CHECK(exchanged[i][static_cast<size_t>(j)].get(0) == 10 * j + r);
    CHECK(objects[i] == std::vector<std::string>{"1", "x"});
    CHECK(gathered_objects[i] == std::vector<std::string>{"0", "1", "4", "9"});
  }
  CHECK(received[2].get(2) == 7.0f);
}

TEST_CASE("runtime: a signature mismatch is a desync naming both sides", "[sim][runtime][hang]") {
  Harness h(3);
  const auto hang = h.run([&](int64_t r, Backend& b) {
    Tensor t({r == 1 ? 5 : 4}, DType::kFloat32);
    b.all_reduce(t, ReduceOp::kSum, h.world_group(r));
  });
  REQUIRE(hang);
  CHECK(hang->kind == HangKind::kDesync);
  CHECK(hang->cause == HangCause::kSignatureMismatch);
  REQUIRE(hang->desyncs.size() == 1);
  CHECK(hang->desyncs[0].arrivals.size() == 3);
  // The odd one out is singled out, before the others, on the report's second line.
  CHECK(hang->culprits == std::vector<int64_t>{1});
  const std::string text = hang_text(*hang);
  CHECK(
      text.starts_with("desync: signature mismatch\n  WORLD seq 1: rank 1 called "
                       "all_reduce(float32[5], op=sum) at (no step), unlike the others: ranks "
                       "0, 2 called all_reduce(float32[4], op=sum)"));
  for (const RankActivity& a : h.activity) CHECK(a.state == RankActivity::State::kAborted);
}

TEST_CASE("runtime: with three signatures, every rank outside the majority is odd",
          "[sim][runtime][hang]") {
  Harness h(8);
  const auto hang = h.run([&](int64_t r, Backend& b) {
    Tensor t({r == 0 ? 1 : r == 5 ? 3 : 2}, DType::kFloat32);
    b.all_reduce(t, ReduceOp::kSum, h.world_group(r));
  });
  REQUIRE(hang);
  CHECK(hang->culprits == std::vector<int64_t>{0, 5});
  CHECK(hang_text(*hang).find(
            "WORLD seq 1: rank 0 called all_reduce(float32[1], op=sum) at (no "
            "step); rank 5 called all_reduce(float32[3], op=sum) at (no step), "
            "unlike the others: ranks 1-4, 6-7 (6 ranks) called all_reduce(float32[2]") !=
        std::string::npos);
}

TEST_CASE("runtime: two sides of equal size are both blamed", "[sim][runtime][hang]") {
  Harness h(4);
  const auto hang = h.run([&](int64_t r, Backend& b) {
    Tensor t({r < 2 ? 1 : 2}, DType::kFloat32);
    b.all_reduce(t, ReduceOp::kSum, h.world_group(r));
  });
  REQUIRE(hang);
  CHECK(hang->culprits == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(hang_text(*hang).find("unlike the others") == std::string::npos);
}

TEST_CASE("runtime: deadlock classification", "[sim][runtime][hang]") {
  SECTION("a rank that exits early") {
    Harness h(3);
    const auto hang = h.run([&](int64_t r, Backend& b) {
      if (r != 2) b.barrier(h.world_group(r));
    });
    REQUIRE(hang);
    CHECK(hang->cause == HangCause::kRankExitedEarly);
    CHECK(hang->blocked() == std::vector<int64_t>{0, 1});
    CHECK(hang->missing() == std::vector<int64_t>{2});
    CHECK(hang_dot(*hang).find("r0 -> r2;") != std::string::npos);
  }
  SECTION("a rank that fails") {
    Harness h(2);
    const auto hang = h.run([&](int64_t r, Backend& b) {
      if (r == 1) throw runtime_error("boom");
      b.barrier(h.world_group(r));
    });
    REQUIRE(hang);
    CHECK(hang->cause == HangCause::kRankFailed);
    CHECK(hang_json(*hang)["ranks"][1]["error"] == "boom");
  }
  SECTION("two groups entered in opposite orders") {
    Harness h(4);
    const auto hang = h.run([&](int64_t r, Backend& backend) {
      if (r > 1) return;
      const Group a{"1", std::vector<int64_t>{0, 1}, r}, b{"2", std::vector<int64_t>{0, 1}, r};
      backend.barrier(r == 0 ? a : b);
      backend.barrier(r == 0 ? b : a);
    });
    REQUIRE(hang);
    CHECK(hang->cause == HangCause::kOrderInversion);
    CHECK(hang_json(*hang)["edges"] == nlohmann::json::parse("[[0,1],[1,0]]"));
    CHECK(hang->culprits == std::vector<int64_t>{0, 1});
    CHECK(hang->summary.at(0) ==
          "ranks 0, 1 wait for each other in a cycle, each in another "
          "collective:");
  }
}

TEST_CASE("runtime: point-to-point hangs say what was posted", "[sim][runtime][hang]") {
  SECTION("a peer that sent fewer messages than the receiver expects, then finished") {
    Harness h(2);
    const auto hang = h.run([&](int64_t r, Backend& b) {
      Tensor t({2}, DType::kFloat32);
      if (r == 1) b.send(t, 0, h.world_group(r));
      if (r == 0) {
        b.recv(t, 1, h.world_group(r));
        b.recv(t, 1, h.world_group(r));
      }
    });
    REQUIRE(hang);
    CHECK(hang->cause == HangCause::kUnmatchedPointToPoint);
    CHECK(hang->legacy_cause == HangCause::kRankExitedEarly);
    CHECK(hang->culprits == std::vector<int64_t>{1});
    CHECK(hang->summary.at(0).starts_with(
        "rank 0 waits in its 2nd recv from rank 1 (WORLD p2p 1→0 seq 2, at (no step)), but rank "
        "1 posted 1 send to rank 0 and then finished"));
    CHECK(hang_json(*hang)["cause_aliases"] == nlohmann::json::parse(R"(["rank exited early"])"));
  }
  SECTION("a peer parked in a collective after too few sends") {
    Harness h(3);
    const auto hang = h.run([&](int64_t r, Backend& b) {
      Tensor t({2}, DType::kFloat32);
      if (r == 0) b.recv(t, 1, h.world_group(r));
      if (r != 0) b.barrier(h.world_group(r));
    });
    REQUIRE(hang);
    CHECK(hang->cause == HangCause::kUnmatchedPointToPoint);
    CHECK(hang->culprits == std::vector<int64_t>{1});
    CHECK(hang->summary.at(0).find("but rank 1 posted 0 sends to rank 0 and waits in barrier() "
                                   "on WORLD seq 1") != std::string::npos);
  }
  SECTION("two ranks that send to each other first") {
    Harness h(2);
    const auto hang = h.run([&](int64_t r, Backend& b) {
      Tensor t({2}, DType::kFloat32);
      b.send(t, 1 - r, h.world_group(r));
      b.recv(t, 1 - r, h.world_group(r));
    });
    REQUIRE(hang);
    CHECK(hang->cause == HangCause::kHeadToHeadSend);
    CHECK(hang->culprits == std::vector<int64_t>{0, 1});
    CHECK(
        hang->summary.at(0).starts_with("ranks 0 and 1 both send to each other first (WORLD "
                                        "p2p 0→1 seq 1"));
  }
  SECTION("a recv from the wrong peer") {
    Harness h(3);
    const auto hang = h.run([&](int64_t r, Backend& b) {
      Tensor t({2}, DType::kFloat32);
      if (r == 0) b.recv(t, 1, h.world_group(r));  // meant 2
      if (r == 2) b.send(t, 0, h.world_group(r));
      if (r == 1) b.recv(t, 2, h.world_group(r));
    });
    REQUIRE(hang);
    CHECK(hang->cause == HangCause::kWrongPeer);
    CHECK(hang->culprits == std::vector<int64_t>{0});
    CHECK(hang->summary.at(0).starts_with("rank 0 receives from rank 1 (WORLD p2p 1→0 seq 1"));
    CHECK(hang->summary.at(0).find("but rank 2 sends to it (WORLD p2p 2→0 seq 1") !=
          std::string::npos);
  }
  SECTION("two ranks that receive from each other first") {
    Harness h(2);
    const auto hang = h.run([&](int64_t r, Backend& b) {
      Tensor t({2}, DType::kFloat32);
      b.recv(t, 1 - r, h.world_group(r));
      b.send(t, 1 - r, h.world_group(r));
    });
    REQUIRE(hang);
    CHECK(hang->cause == HangCause::kHeadToHeadRecv);
    CHECK(hang->legacy_cause == HangCause::kOrderInversion);
    CHECK(hang->culprits == std::vector<int64_t>{0, 1});
    CHECK(hang->summary.at(0).starts_with(
        "ranks 0 and 1 both receive from each other first (WORLD p2p 1→0 seq 1"));
  }
  for (const CollectiveOp first : {CollectiveOp::kSend, CollectiveOp::kRecv}) {
    DYNAMIC_SECTION("a ring of ranks that each "
                    << (first == CollectiveOp::kSend ? "send to the next" : "receive from the last")
                    << " first") {
      Harness h(5);
      const auto hang = h.run([&](int64_t r, Backend& b) {
        Tensor t({2}, DType::kFloat32);
        const int64_t next = (r + 1) % 5, last = (r + 4) % 5;
        if (first == CollectiveOp::kSend) b.send(t, next, h.world_group(r));
        b.recv(t, last, h.world_group(r));
        if (first == CollectiveOp::kRecv) b.send(t, next, h.world_group(r));
      });
      REQUIRE(hang);
      CHECK(hang->cause == HangCause::kPointToPointCycle);
      CHECK(hang->legacy_cause == HangCause::kOrderInversion);
      CHECK(hang->culprits == std::vector<int64_t>{0, 1, 2, 3, 4});
      CHECK(hang->summary.at(0).starts_with(
          "ranks 0-4 (5 ranks) wait for each other in a ring of blocking send/recv"));
      const std::string rank0 = first == CollectiveOp::kSend
                                    ? "  rank 0 waits in send(float32[2], dst=1) on WORLD p2p 0→1"
                                    : "  rank 0 waits in recv(float32[2], src=4) on WORLD p2p 4→0";
      CHECK(hang->summary.at(1).starts_with(rank0));
      CHECK(hang->summary.at(5) == "  ... and 1 more in the ring");
    }
  }
  SECTION("a pipeline of sends that ends in a collective is not a ring") {
    Harness h(3);
    const auto hang = h.run([&](int64_t r, Backend& b) {
      Tensor t({2}, DType::kFloat32);
      if (r < 2) b.send(t, r + 1, h.world_group(r));
      if (r == 2) b.barrier(h.world_group(r));
    });
    REQUIRE(hang);
    CHECK(hang->cause == HangCause::kUnmatchedPointToPoint);
    CHECK(hang->culprits == std::vector<int64_t>{2});
    CHECK(hang->summary.at(1) ==
          "also blocked: rank 0 in send(float32[2], dst=1) on WORLD p2p 0→1 seq 1");
  }
}

TEST_CASE("runtime: ranks blocked behind the culprits are told relative to their peer",
          "[sim][runtime][hang]") {
  // A pipeline of three stages of two ranks: stage 1 finishes without sending to stage 0 (the
  // culprits), and stage 2 waits on stage 0, which waits on stage 1.
  Harness h(6);
  const auto hang = h.run([&](int64_t r, Backend& b) {
    Tensor t({2}, DType::kFloat32);
    if (r < 2) b.recv(t, r + 2, h.world_group(r));
    if (r < 2) b.send(t, r + 4, h.world_group(r));
    if (r >= 4) b.recv(t, r - 4, h.world_group(r));
  });
  REQUIRE(hang);
  CHECK(hang->culprits == std::vector<int64_t>{2, 3});
  REQUIRE(hang->summary.size() == 2);
  CHECK(hang->summary[1] ==
        "also blocked: ranks 4, 5 in recv(float32[2], src=rank-4) on WORLD p2p seq 1");
  // One flight recorder per per-rank line: the culprits' first.
  const std::string text = hang_text(*hang);
  CHECK(text.find("last 1 collectives of rank 0, the first of ranks 0-1 (of 1, oldest first):\n"
                  "      WORLD p2p 2→0 seq 1: recv(float32[2], src=2) at no step, waiting") !=
        std::string::npos);
  CHECK(text.find("last 1 collectives of rank 4, the first of ranks 4-5") != std::string::npos);
}

TEST_CASE("runtime: a desync does not hide a rank that skipped a collective elsewhere",
          "[sim][runtime][hang]") {
  Harness h(4);
  const auto hang = h.run([&](int64_t r, Backend& b) {
    // Pair {0, 1} disagrees on the size; in pair {2, 3}, rank 3 never calls the barrier.
    const Group pair{r < 2 ? "1" : "2",
                     r < 2 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{2, 3}, r};
    Tensor t({r == 1 ? 8 : 4}, DType::kFloat32);
    if (r < 2) b.all_reduce(t, ReduceOp::kSum, pair);
    if (r == 2) b.barrier(pair);
  });
  REQUIRE(hang);
  CHECK(hang->kind == HangKind::kDesync);
  CHECK(hang->cause == HangCause::kSignatureMismatch);
  CHECK(hang->culprits == std::vector<int64_t>{0, 1, 3});
  REQUIRE(hang->summary.size() >= 3);
  CHECK(hang->summary.at(1).starts_with("rank 3 finished without calling barrier() on 2"));
  CHECK(hang->summary.at(2).starts_with("rank 2 waits for it there"));
}

TEST_CASE("runtime: every desync is reported, whatever the schedule", "[sim][runtime][hang]") {
  for (const SchedulePolicy policy : {SchedulePolicy::kFifo, SchedulePolicy::kRandom}) {
    for (uint64_t seed = 0; seed < 4; ++seed) {
      Harness h(4, {.policy = policy, .seed = seed});
      const auto hang = h.run([&](int64_t r, Backend& b) {
        // Two independent pairs, each with one odd rank.
        const Group pair{r < 2 ? "1" : "2",
                         r < 2 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{2, 3}, r};
        Tensor t({r == 1 || r == 3 ? 8 : 4}, DType::kFloat32);
        b.all_reduce(t, ReduceOp::kSum, pair);
      });
      REQUIRE(hang);
      INFO(hang_text(*hang));
      REQUIRE(hang->desyncs.size() == 2);
      std::set<std::string> groups{hang->desyncs[0].group_id, hang->desyncs[1].group_id};
      CHECK(groups == std::set<std::string>{"1", "2"});
      CHECK(hang_json(*hang)["desyncs"].size() == 2);
    }
  }
}

TEST_CASE("runtime: virtual time and the watchdog timeout", "[sim][runtime][hang]") {
  Harness h(3);
  const auto hang = h.run([&](int64_t r, Backend& b) {
    if (r == 2) h.activity[2].clock += 601.0;
    Tensor t({1}, DType::kFloat32);
    b.all_reduce(t, ReduceOp::kSum, h.world_group(r));
  });
  CHECK_FALSE(hang);  // nothing stalls: the ranks fail instead
  REQUIRE(h.factory.timeout());
  CHECK(h.factory.timeout()->timed_out == std::vector<int64_t>{0, 1});
  CHECK(h.factory.timeout()->late == std::vector<int64_t>{2});
  CHECK(h.activity[0].state == RankActivity::State::kFailed);
  CHECK(h.activity[0].error.find("Watchdog caught collective operation timeout") !=
        std::string::npos);
  CHECK(h.activity[1].clock > 601.0);
}

TEST_CASE("runtime: a rank outside the group cannot enter its collective",
          "[sim][runtime][errors]") {
  Harness h(2);
  h.run([&](int64_t r, Backend& b) {
    if (r == 1) b.barrier(Group{"1", std::vector<int64_t>{0}, r});
  });
  CHECK(h.activity[1].state == RankActivity::State::kFailed);
  CHECK(h.activity[1].error.find("without being a member") != std::string::npos);
}

TEST_CASE("runtime: flight recorders keep each rank's last collectives", "[sim][runtime][hang]") {
  Harness h(2);
  const auto hang = h.run([&](int64_t r, Backend& b) {
    for (int i = 0; i < 10; ++i) b.barrier(h.world_group(r));
    Tensor t({2}, DType::kFloat32);
    if (r == 0) b.all_reduce(t, ReduceOp::kSum, h.world_group(r));
  });
  REQUIRE(hang);
  const FlightRecorder& rank0 = hang->ranks[0].activity.history;
  CHECK(rank0.total() == 11);
  const std::vector<CollectiveRecord> records = rank0.records();
  REQUIRE(records.size() == FlightRecorder::kReportDepth);
  CHECK(records.front().seq == 4);  // the oldest kept: seqs 4 .. 11
  CHECK(records.back().seq == 11);
  CHECK(records.back().signature.op == CollectiveOp::kAllReduce);
  CHECK(records.back().state == CollectiveRecord::State::kWaiting);
  CHECK(records[6].state == CollectiveRecord::State::kCompleted);
  CHECK(hang_json(*hang)["ranks"][0]["history"].size() == FlightRecorder::kReportDepth);
  CHECK(hang_json(*hang)["ranks"][0]["history_total"] == 11);
  CHECK(hang_json(*hang)["ranks"][1]["history"].size() == FlightRecorder::kReportDepth);
}

TEST_CASE("runtime: a dump's flight recorder counts calls per group as c10d does, and wraps",
          "[sim][runtime][hang]") {
  FlightRecorder recorder = FlightRecorder::for_dump(10);
  auto call = [&](int64_t group, int64_t peer) {
    CollectiveRecord r;
    r.group_id = group;
    r.peer = peer;
    recorder.make_room();
    recorder.enter(r);
  };
  for (int i = 0; i < 12; ++i) call(0, -1);  // WORLD: 12 collectives, the ring wraps at 10
  call(0, 1);                                // WORLD: a send or recv
  call(5, -1);                               // group 5: a collective
  call(0, 2);                                // WORLD: a send or recv with another peer
  CHECK(recorder.total() == 15);
  const std::vector<CollectiveRecord> kept = recorder.records();
  REQUIRE(kept.size() == 10);  // the newest 10, oldest first
  CHECK(kept.back().peer == 2);
  CHECK(kept[kept.size() - 2].group_id == 5);
  const std::vector<FlightRecorder::GroupCalls> calls = recorder.group_calls();
  REQUIRE(calls.size() == 2);
  CHECK((calls[0].group_id == 0 && calls[0].collectives == 12 && calls[0].p2p == 2));
  CHECK((calls[1].group_id == 5 && calls[1].collectives == 1 && calls[1].p2p == 0));
  REQUIRE(recorder.records(1).size() == 1);
  recorder.settle(CollectiveRecord::State::kCompleted);
  CHECK(recorder.records(1)[0].state == CollectiveRecord::State::kCompleted);
  // A report's recorder (the default capacity) counts nothing.
  CHECK(FlightRecorder().group_calls().empty());
  // A copy (a hang report's) keeps the newest kReportDepth records, in order, of rings larger
  // and smaller than that.
  for (const size_t capacity : {size_t{3}, size_t{10}}) {
    FlightRecorder ring = FlightRecorder::for_dump(capacity);
    for (int64_t i = 0; i < 13; ++i) {
      CollectiveRecord r;
      r.seq = i;
      ring.make_room();
      ring.enter(r);
    }
    const FlightRecorder copy = ring;
    const std::vector<CollectiveRecord> copied = copy.records();
    REQUIRE(copied.size() == std::min(capacity, FlightRecorder::kReportDepth));
    CHECK(copied.back().seq == 12);
    CHECK(copied.front().seq == 13 - static_cast<int64_t>(copied.size()));
    CHECK(copy.total() == 13);
  }
}

TEST_CASE("runtime: messages over more directions than a rank keeps at hand arrive in order",
          "[sim][runtime]") {
  // Rank 0 sends to six peers and receives from them in turn, round after round: each rank's few
  // recent directions are evicted and found again, and every message meets its own receive.
  Harness h(7);
  std::vector<std::vector<double>> got(7);
  std::vector<double> back;
  const auto hang = h.run([&](int64_t r, Backend& b) {
    const Group g = h.world_group(r);
    for (int round = 0; round < 5; ++round) {
      if (r == 0) {
        for (int64_t peer = 1; peer < 7; ++peer)
          b.send(Tensor::full({1}, 100 * round + peer, DType::kFloat64), peer, g);
        for (int64_t peer = 6; peer >= 1; --peer)
          back.push_back(b.recv(Tensor({1}, DType::kFloat64), peer, g).get(0));
      } else {
        got[static_cast<size_t>(r)].push_back(b.recv(Tensor({1}, DType::kFloat64), 0, g).get(0));
        b.send(Tensor::full({1}, -(100 * round + r), DType::kFloat64), 0, g);
      }
    }
  });
  REQUIRE_FALSE(hang);
  for (int64_t r = 1; r < 7; ++r) {
    REQUIRE(got[static_cast<size_t>(r)].size() == 5);
    for (int round = 0; round < 5; ++round)
      CHECK(got[static_cast<size_t>(r)][static_cast<size_t>(round)] == 100 * round + r);
  }
  REQUIRE(back.size() == 30);
  for (int round = 0; round < 5; ++round) {
    for (int64_t k = 0; k < 6; ++k)
      CHECK(back[static_cast<size_t>(6 * round + k)] == -(100 * round + 6 - k));
  }
}

TEST_CASE("runtime: a flight recorder keeps how each call ended, through wraps and copies",
          "[sim][runtime][hang]") {
  // Only calls that did not complete write their slot a second time; the rest read as completed
  // once a newer call exists, and the newest reads as it was settled.
  using State = CollectiveRecord::State;
  const std::vector<State> ends{State::kCompleted, State::kFailed,    State::kCompleted,
                                State::kAborted,   State::kCompleted, State::kFailed,
                                State::kCompleted, State::kCompleted, State::kFailed,
                                State::kCompleted, State::kCompleted};
  for (const size_t capacity : {size_t{3}, size_t{4}, size_t{64}}) {
    FlightRecorder recorder = FlightRecorder::for_dump(capacity);
    const Tensor t({2}, DType::kFloat32);
    const SharedSignature shared(Signature::of(CollectiveOp::kAllReduce, &t));
    for (size_t i = 0; i < ends.size(); ++i) {
      recorder.make_room();
      recorder.enter(0, static_cast<int64_t>(i), -1, shared, CallSite{}, 0.0);
      CHECK(recorder.records(1)[0].state == State::kWaiting);
      recorder.settle(ends[i]);
      const std::vector<CollectiveRecord> kept = recorder.records();
      const FlightRecorder copy = recorder;
      const std::vector<CollectiveRecord> copied = copy.records();
      REQUIRE(kept.size() == std::min(capacity, i + 1));
      for (size_t k = 0; k < kept.size(); ++k) {
        const size_t call = i + 1 - kept.size() + k;
        CHECK(kept[k].seq == static_cast<int64_t>(call));
        CHECK(kept[k].state == ends[call]);
        CHECK(kept[k].signature == *shared);
      }
      REQUIRE(copied.size() == std::min(kept.size(), FlightRecorder::kReportDepth));
      for (size_t k = 0; k < copied.size(); ++k) {
        const CollectiveRecord& same = kept[kept.size() - copied.size() + k];
        CHECK((copied[k].seq == same.seq && copied[k].state == same.state));
      }
    }
  }
}

TEST_CASE("runtime: the first divergence is where members called from different places",
          "[sim][runtime][hang]") {
  Harness h(3);
  const auto hang = h.run([&](int64_t r, Backend& b) {
    Tensor t({2}, DType::kFloat32);
    RankActivity& me = h.activity[static_cast<size_t>(r)];
    me.site.line = r == 2 ? 20 : 10;
    b.all_reduce(t, ReduceOp::kSum, h.world_group(r));  // same signature, other line on rank 2
    me.site.line = 30;
    if (r == 2) b.all_reduce(t, ReduceOp::kSum, h.world_group(r));
    if (r != 2) b.barrier(h.world_group(r));
  });
  REQUIRE(hang);
  REQUIRE(hang->first_divergence);
  const SiteDivergence& d = hang->divergences.at(*hang->first_divergence);
  CHECK(d.group_id == 0);
  CHECK(d.seq == 1);
  CHECK(d.complete);
  REQUIRE(d.sites.size() == 2);
  CHECK(d.sites[0].second == std::vector<int64_t>{2});
  CHECK(d.sites[0].first.line == 20);
  // Before the hang's own sentence (the desync at seq 2): it is where the ranks parted.
  CHECK(hang->summary.at(0) ==
        "first divergence: rank 2 reached WORLD seq 1 (all_reduce) from line 20; ranks 0, 1 from "
        "line 10: rank 2 went another way than the other 2 (line 10)");
  CHECK(hang->culprits == std::vector<int64_t>{2});
  CHECK(hang_json(*hang)["first_divergence"]["seq"] == 1);
}

TEST_CASE("runtime: a wall-clock report taken while members are leaving shows their own sites",
          "[sim][runtime][hang]") {
  // Rank 2 arrives last and runs on while ranks 0 and 1 are woken but not yet resumed: the
  // report it takes must show them where they called from, not where rank 2 went next.
  Harness h(3);
  std::optional<HangReport> report;
  h.run([&](int64_t r, Backend& b) {
    Tensor t({2}, DType::kFloat32);
    RankActivity& me = h.activity[static_cast<size_t>(r)];
    me.site.line = r == 2 ? 20 : 10;
    b.all_reduce(t, ReduceOp::kSum, h.world_group(r));
    me.site.line = 30;
    if (r == 2) report = wall_clock_report(h.activity, h.factory.rendezvous(), 1.0);
  });
  REQUIRE(report);
  REQUIRE(report->divergences.size() == 1);
  const SiteDivergence& d = report->divergences[0];
  REQUIRE(d.sites.size() == 2);
  CHECK(d.sites[0].first.line == 20);
  CHECK(d.sites[0].second == std::vector<int64_t>{2});
  CHECK(d.sites[1].first.line == 10);
  CHECK(d.sites[1].second == std::vector<int64_t>{0, 1});
  REQUIRE(report->waits.size() == 1);
  CHECK(report->waits[0].site.line == 10);
  CHECK(report->waits[0].arrived == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("runtime: a divergence thousands of collectives before the hang is still found",
          "[sim][runtime][hang]") {
  // The flight recorders only keep the last 8; the rendezvous compares call sites as ranks meet.
  const LoopScope loop{"i", nullptr, 1};
  Harness h(4);
  const auto hang = h.run([&](int64_t r, Backend& b) {
    RankActivity& me = h.activity[static_cast<size_t>(r)];
    const int64_t skip_at = 14;  // rank 3 skips its call in i=14: later ones shift by one
    int64_t seen = 0;
    for (int64_t i = 0; i < 3000; ++i) {
      if (r == 3 && i == skip_at) continue;
      const std::vector<std::pair<std::string, int64_t>> loops{{"i", i}};
      me.site = CallSite::at(0, 12, 3, &loop, loops);
      b.barrier(h.world_group(r));
      ++seen;
    }
    me.site = CallSite{40, 1};
    if (seen == 3000) b.barrier(h.world_group(r));
  });
  REQUIRE(hang);
  REQUIRE(hang->first_divergence);
  const SiteDivergence& d = hang->divergences.at(*hang->first_divergence);
  CHECK(d.seq == 15);
  REQUIRE(d.sites.size() == 2);
  CHECK(d.sites[0].second == std::vector<int64_t>{3});
  CHECK(d.sites[0].first.text() == "line 12 (i=15)");
  CHECK(d.sites[1].first.text() == "line 12 (i=14)");
  CHECK(hang->culprits == std::vector<int64_t>{3});
  CHECK(hang->summary.at(0).starts_with(
      "first divergence: rank 3 reached WORLD seq 15 (barrier) from line 12 (i=15); ranks 0-2 "
      "from line 12 (i=14)"));
}

TEST_CASE("runtime: in a tie, the member that skipped the other's call is the culprit",
          "[sim][runtime][hang]") {
  // Two tp ranks: rank 1's `when` skips its all_reduce in w=2, so it meets rank 0's w=2 call
  // with its w=3 one. Nothing but the skip tells which of the two went wrong.
  const LoopScope loop{"w", nullptr, 1};
  Harness h(2);
  const auto hang = h.run([&](int64_t r, Backend& b) {
    RankActivity& me = h.activity[static_cast<size_t>(r)];
    Tensor t({2}, DType::kFloat32);
    for (int64_t w = 0; w < 4; ++w) {
      const std::vector<std::pair<std::string, int64_t>> loops{{"w", w}};
      me.site = CallSite::at(5, 19, 3, &loop, loops);
      if (r == 1 && w == 2) {
        me.skipped.add({CollectiveOp::kAllReduce, 0, -1}, me.site, me.calls.count());
        continue;
      }
      me.skipped.ran(me.site);
      b.all_reduce(t, ReduceOp::kSum, h.world_group(r));
    }
  });
  REQUIRE(hang);
  CHECK(hang->culprits == std::vector<int64_t>{1});
  CHECK(hang->summary.at(0) ==
        "first divergence: rank 0 reached WORLD seq 3 (all_reduce) from line 19 (w=2); rank 1 "
        "from line 19 (w=3): rank 1 skipped the all_reduce at line 19 (w=2) (`when` false)");
  const auto j = hang_json(*hang);
  CHECK(j["first_divergence"]["calls"][1]["call_site"] == "line 19 (w=3)");
  CHECK(j["blamed_earlier"] == true);
}

TEST_CASE("runtime: call sites name their loop iterations", "[sim][runtime][hang]") {
  const LoopScope outer{"step", nullptr, 1};
  const LoopScope inner{"mb", &outer, 2};
  const std::vector<std::pair<std::string, int64_t>> loops{{"step", 3}, {"mb", 7}};
  const CallSite site = CallSite::at(2, 40, 5, &inner, loops);
  CHECK(site.text() == "line 40 (step=3, mb=7)");
  CHECK(site.iterations_text() == "step=3, mb=7");
  CHECK(site == CallSite::at(9, 40, 5, &inner, loops));
  CHECK_FALSE(site ==
              CallSite::at(2, 40, 5, &inner,
                           std::vector<std::pair<std::string, int64_t>>{{"step", 3}, {"mb", 6}}));
  CHECK(site.same_step(CallSite{40, 5}));
  CHECK(CallSite{7, 1}.text() == "line 7");
  CHECK(CallSite{}.text() == "no step");
  // Deeper than four loops: the outer ones are elided, but still tell sites apart.
  const LoopScope a{"a", nullptr, 1}, b{"b", &a, 2}, c{"c", &b, 3}, d{"d", &c, 4}, e{"e", &d, 5};
  const std::vector<std::pair<std::string, int64_t>> deep{
      {"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}, {"e", 5}};
  std::vector<std::pair<std::string, int64_t>> other = deep;
  other[0].second = 9;
  CHECK(CallSite::at(0, 3, 1, &e, deep).text() == "line 3 (..., b=2, c=3, d=4, e=5)");
  CHECK_FALSE(CallSite::at(0, 3, 1, &e, deep) == CallSite::at(0, 3, 1, &e, other));
}
