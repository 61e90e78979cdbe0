// The pieces a backend is built from, each on its own: the rendezvous with a test executor, the
// decorators around the simulated backend, and group creation through the store barrier.
#include <catch2/catch.hpp>

#include "sim/run/backend_factory.hpp"
#include "sim/runtime/backend_decorators.hpp"
#include "sim/runtime/fiber_stack.hpp"
#include "sim/runtime/hang_report.hpp"
#include "src/error.hpp"
#include "src/mesh/axis.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

// Records what the rendezvous hands over; throws when told to.
class RecordingExecutor final : public Executor {
 public:
  struct Seen {
    std::string group;
    int64_t seq;
    size_t arrived;
    std::vector<int64_t> members;
  };
  void execute(Meeting& m) override {
    seen.push_back({m.group, m.seq, m.arrived, *m.members});
    if (fail_at_seq == m.seq) throw value_error("executor refused seq " + std::to_string(m.seq));
    for (Exchange& e : m.exchanges) {
      if (e.output != nullptr) *e.output = Tensor::full({1}, m.seq, DType::kInt64);
    }
  }
  std::vector<Seen> seen;
  int64_t fail_at_seq = -1;
};

// Runs `body(rank)` on n ranks; records each rank's error ("" when it returned).
template <typename F>
std::vector<std::string> run_ranks(World& world, std::vector<RankActivity>& activity, F&& body) {
  std::vector<std::string> errors(static_cast<size_t>(world.size()));
  world.run(
      [&](int64_t r) {
        try {
          body(r);
        } catch (const Error& e) {
          forget_unwound_frames();
          errors[static_cast<size_t>(r)] = e.what();
        } catch (const RankAborted& a) {
          forget_unwound_frames();
          errors[static_cast<size_t>(r)] = "aborted: " + a.reason;
        } catch (const InjectedCrash& c) {
          forget_unwound_frames();
          errors[static_cast<size_t>(r)] = c.what;
        }
        activity[static_cast<size_t>(r)].state = RankActivity::State::kFinished;
      },
      [&] {
        std::vector<std::optional<std::string>> aborts(activity.size());
        for (size_t r = 0; r < activity.size(); ++r) {
          if (activity[r].state == RankActivity::State::kBlocked) aborts[r] = "stalled";
        }
        return aborts;
      });
  return errors;
}

Group world_of(int64_t n, int64_t holder) {
  std::vector<int64_t> ranks;
  for (int64_t i = 0; i < n; ++i) ranks.push_back(i);
  return Group{"0", ranks, holder};
}

}  // namespace

TEST_CASE("rendezvous: an executor runs once per meeting, after every member has arrived",
          "[sim][rendezvous]") {
  World world(3, {SchedulePolicy::kRandom, 5});
  std::vector<RankActivity> activity(3);
  Rendezvous rendezvous(world, activity);
  RecordingExecutor executor;
  std::vector<int64_t> got(3);
  const auto errors = run_ranks(world, activity, [&](int64_t r) {
    const Group g = world_of(3, r);
    for (int round = 0; round < 2; ++round) {
      Tensor in = Tensor::full({1}, r, DType::kInt64), out;
      rendezvous.meet(r, g, Signature::of(CollectiveOp::kAllReduce, &in),
                      CallBuffers{.input = &in, .output = &out}, executor);
      got[static_cast<size_t>(r)] += out.get_int(0);
    }
  });
  CHECK(errors == std::vector<std::string>(3));
  REQUIRE(executor.seen.size() == 2);
  for (int64_t seq = 1; seq <= 2; ++seq) {
    const auto& s = executor.seen[static_cast<size_t>(seq - 1)];
    CHECK(s.group == "0");
    CHECK(s.seq == seq);
    CHECK(s.arrived == 3);
    CHECK(s.members == std::vector<int64_t>{0, 1, 2});
  }
  CHECK(got == std::vector<int64_t>{3, 3, 3});  // seq 1 + seq 2 on every rank
}

TEST_CASE("rendezvous: an error from the executor reaches every member, the same",
          "[sim][rendezvous]") {
  World world(4);
  std::vector<RankActivity> activity(4);
  Rendezvous rendezvous(world, activity);
  RecordingExecutor executor;
  executor.fail_at_seq = 1;
  const auto errors = run_ranks(world, activity, [&](int64_t r) {
    rendezvous.meet(r, world_of(4, r), Signature::of(CollectiveOp::kBarrier), {}, executor);
  });
  CHECK(errors == std::vector<std::string>(4, "executor refused seq 1"));
  CHECK(rendezvous.desyncs().empty());
}

TEST_CASE("rendezvous: reduce_scatter that cannot split fails every member, not a deadlock",
          "[sim][rendezvous][backend]") {
  World world(2);
  std::vector<RankActivity> activity(2);
  BackendFactory factory(world, activity, {});
  const auto errors = run_ranks(world, activity, [&](int64_t r) {
    factory.backend(r)->reduce_scatter(Tensor::arange(3, DType::kInt64), ReduceOp::kSum,
                                       world_of(2, r));
  });
  REQUIRE_FALSE(errors[0].empty());
  CHECK(errors[0] == errors[1]);
  CHECK(errors[0].find("3") != std::string::npos);
}

TEST_CASE("rendezvous: members that see one group name with other members cannot meet",
          "[sim][rendezvous][errors]") {
  World world(3);
  std::vector<RankActivity> activity(3);
  Rendezvous rendezvous(world, activity);
  RecordingExecutor executor;
  const auto errors = run_ranks(world, activity, [&](int64_t r) {
    if (r == 2) return;
    const Group g{"5", r == 0 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{1, 2}, r};
    rendezvous.meet(r, g, Signature::of(CollectiveOp::kBarrier), {}, executor);
  });
  CHECK(errors[1] ==
        "group 5 has members [1, 2] on this rank but [0, 1] on the ranks that used "
        "it first");
}

TEST_CASE("backend decorators: faults fire at the rank's k-th call", "[sim][faults]") {
  World world(2);
  std::vector<RankActivity> activity(2);
  BackendOptions options;
  Fault stall{Fault::Kind::kStall, 0, Fault::Trigger::kCollective, 1, 30.0, {}};
  Fault crash{Fault::Kind::kCrash, 1, Fault::Trigger::kCollective, 2, 0.0, {}};
  options.faults = {stall, crash};
  BackendFactory factory(world, activity, options);
  const auto errors = run_ranks(world, activity, [&](int64_t r) {
    const auto b = factory.backend(r);
    b->barrier(world_of(2, r));
    b->barrier(world_of(2, r));
  });
  CHECK(errors[1].rfind("injected crash entering barrier()", 0) == 0);
  CHECK(errors[0].rfind("aborted", 0) == 0);  // its partner never came to the second barrier
  CHECK(activity[1].clock >= 30.0);           // the first barrier waited for rank 0's stall
}

TEST_CASE("backend decorators: tracing gives a slice per member and arrows per collective",
          "[sim][trace]") {
  World world(3);
  std::vector<RankActivity> activity(3);
  Trace trace;
  BackendOptions options;
  options.trace = &trace;
  BackendFactory factory(world, activity, options);
  const auto errors = run_ranks(world, activity, [&](int64_t r) {
    const auto b = factory.backend(r);
    Tensor t = Tensor::full({4}, r, DType::kFloat32);
    b->all_reduce(t, ReduceOp::kSum, world_of(3, r));
    if (r == 0) b->send(t, 2, world_of(3, r));
    if (r == 2) b->recv(t, 0, world_of(3, r));
  });
  CHECK(errors == std::vector<std::string>(3));
  const nlohmann::json events = trace.events(0, "t", 3);
  int slices = 0, starts = 0, ends = 0;
  for (const auto& e : events) {
    slices += e["ph"] == "X";
    starts += e["ph"] == "s";
    ends += e["ph"] == "f";
  }
  CHECK(slices == 5);  // 3 members of the all_reduce, 2 of the send/recv pair
  CHECK(starts == 3);  // 2 arrows for the all_reduce, 1 for the pair
  CHECK(ends == 3);
}

TEST_CASE("store group creator: a mesh dim's groups are one store barrier over WORLD",
          "[sim][groups]") {
  World world(4);
  std::vector<RankActivity> activity(4);
  BackendFactory factory(world, activity, {});
  std::vector<std::optional<std::string>> names(4);
  const auto errors = run_ranks(world, activity, [&](int64_t r) {
    const auto groups = factory.group_creator(r);
    const SharedRankMap map = groups->table().identity_map(4);
    // Rows of a [2, 2] mesh, then (on rank 3 only) other members under the next name.
    names[static_cast<size_t>(r)] = groups->new_groups(Axis::single(2, 1), map);
    const std::vector<int64_t> asked =
        r == 3 ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{0, 1};
    groups->new_group(asked);
  });
  CHECK(errors == std::vector<std::string>(4));
  CHECK(names == std::vector<std::optional<std::string>>{"1", "1", "2", "2"});
  REQUIRE(factory.warnings().size() == 1);
  CHECK(factory.warnings()[0] ==
        "new_group 3 was created with different ranks: rank(s) 0, 1, 2 passed [0, 1]; rank(s) 3 "
        "passed [1, 3]");
  // Every rank sees the name with the members it asked for.
  CHECK(*factory.group_creator(0)->table().members(3, 0) == std::vector<int64_t>{0, 1});
  CHECK(*factory.group_creator(3)->table().members(3, 3) == std::vector<int64_t>{1, 3});
}

TEST_CASE("store group creator: ranks that create other numbers of groups desync",
          "[sim][groups][hang]") {
  World world(4);
  std::vector<RankActivity> activity(4);
  BackendFactory factory(world, activity, {});
  const auto errors = run_ranks(world, activity, [&](int64_t r) {
    const auto groups = factory.group_creator(r);
    const SharedRankMap map = groups->table().identity_map(4);
    // Ranks 0-2 create the rows of [2, 2]; rank 3 the single group of all four.
    if (r == 3) {
      groups->new_group(std::vector<int64_t>{0, 1, 2, 3});
    } else {
      groups->new_groups(Axis::single(2, 1), map);
    }
  });
  REQUIRE(factory.rendezvous().desyncs().size() == 1);
  const auto& arrivals = factory.rendezvous().desyncs()[0].arrivals;
  REQUIRE(arrivals.size() == 4);
  CHECK(arrivals[0].second.describe() == "new_group(groups=2)");
  CHECK(arrivals[3].second.describe() == "new_group()");
  CHECK(errors[0].rfind("aborted", 0) == 0);
}

TEST_CASE("store group creator: requests that differ past what a message shows stay apart",
          "[sim][groups]") {
  World world(32);
  std::vector<RankActivity> activity(32);
  BackendFactory factory(world, activity, {});
  run_ranks(world, activity, [&](int64_t r) {
    // Sixteen members each; rank 31 swaps one in the middle.
    std::vector<int64_t> asked;
    for (int64_t i = 0; i < 16; ++i) asked.push_back(i);
    if (r == 31) asked[8] = 20;
    factory.group_creator(r)->new_group(asked);
  });
  REQUIRE(factory.warnings().size() == 1);
  CHECK(factory.warnings()[0].find("rank(s) 31 passed") != std::string::npos);
}

TEST_CASE("store group creator: the barrier takes virtual time, and the watchdog watches it",
          "[sim][groups][hang]") {
  World world(3);
  std::vector<RankActivity> activity(3);
  BackendFactory factory(world, activity, {});
  const auto errors = run_ranks(world, activity, [&](int64_t r) {
    if (r == 1) activity[1].clock += 700.0;  // past the 600 s watchdog
    factory.group_creator(r)->new_group(std::vector<int64_t>{0, 1, 2});
  });
  REQUIRE(factory.timeout());
  CHECK(factory.timeout()->late == std::vector<int64_t>{1});
  CHECK(errors[0].find("Watchdog caught collective operation timeout: new_group()") == 0);
  CHECK(activity[0].clock > 700.0);
}

TEST_CASE("store group creator: a hang names what new_group creates, and only new_group",
          "[sim][groups][hang]") {
  // Meetings are recycled across channels: a collective's must not show an earlier store
  // barrier's request, and a store barrier after collectives must show its own.
  for (const bool group_first : {true, false}) {
    CAPTURE(group_first);
    World world(2);
    std::vector<RankActivity> activity(2);
    BackendFactory factory(world, activity, {});
    std::optional<HangReport> hang;
    world.run(
        [&](int64_t r) {
          try {
            const auto groups = factory.group_creator(r);
            const auto backend = factory.backend(r);
            const Group all = world_of(2, r);
            if (group_first) {
              groups->new_group(std::vector<int64_t>{0, 1});
              if (r == 0) backend->barrier(all);  // rank 1 never joins
            } else {
              backend->barrier(all);
              backend->barrier(all);
              if (r == 0) groups->new_group(std::vector<int64_t>{0, 1});
            }
          } catch (const RankAborted&) {
            forget_unwound_frames();
          }
          activity[static_cast<size_t>(r)].state = RankActivity::State::kFinished;
        },
        [&] {
          hang = analyze_hang(activity, factory.rendezvous(), factory.timeout());
          return std::vector<std::optional<std::string>>{"stalled", std::nullopt};
        });
    REQUIRE(hang);
    REQUIRE(hang->waits.size() == 1);
    if (group_first) {
      CHECK(hang->waits[0].creating.empty());
    } else {
      CHECK(hang->waits[0].creating == "new_group [0, 1]");
    }
  }
}

TEST_CASE("backend decorators: a call refused before it met anyone leaves no trace",
          "[sim][trace]") {
  World world(2);
  std::vector<RankActivity> activity(2);
  Trace trace;
  BackendOptions options;
  options.trace = &trace;
  BackendFactory factory(world, activity, options);
  const auto errors = run_ranks(world, activity, [&](int64_t r) {
    const auto b = factory.backend(r);
    if (r == 0) {
      try {
        b->all_to_all({Tensor({1}, DType::kFloat32)}, world_of(2, r));  // one input, not two
        FAIL("all_to_all took the wrong number of inputs");
      } catch (const Error&) {
      }
    }
    b->barrier(world_of(2, r));
  });
  CHECK(errors == std::vector<std::string>(2));
  int slices = 0;
  for (const auto& e : trace.events(0, "t", 2)) {
    if (e["ph"] == "X") {
      ++slices;
      CHECK(e["name"] == "barrier WORLD #1");
    }
  }
  CHECK(slices == 2);
}
