// A simulated rank's flight recorder as NCCL's dump: its own groups in pg_config, c10d's
// per-group counters, NCCL's profiling names, the tensors' sizes, states, times and the frame.
// That PyTorch's analyzer reads such dumps to the run's conclusion is tests/fr_dump_diff_test.py.
#include <catch2/catch.hpp>

#include "sim/report/fr_export.hpp"
#include "src/mesh/axis.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

CollectiveRecord call(int64_t group, CollectiveOp op, std::vector<int64_t> shape, int64_t peer = -1,
                      double at = 0.0,
                      CollectiveRecord::State state = CollectiveRecord::State::kCompleted) {
  const Tensor t(shape, DType::kBFloat16);
  CollectiveRecord r;
  r.group_id = group;
  r.peer = peer;
  r.signature = Signature::of(op, &t);
  r.site.line = 12;
  r.entered_at = at;
  r.state = state;
  return r;
}

}  // namespace

TEST_CASE("fr export: a rank's recorder as the dump NCCL writes", "[sim][report][fr_dump]") {
  GroupTable groups(4);
  // A 2x2 mesh's tp dim: groups 1 = [0, 1] and 2 = [2, 3]; then new_group([1, 3]).
  const std::vector<int64_t> table{0, 1, 2, 3};
  groups.define(1, groups.axis_groups(Axis::single(2, 1), groups.rank_map(table)), 0, "world.tp");
  groups.define(3, groups.explicit_group(std::vector<int64_t>{1, 3}), 1, "new_group");
  FlightRecorder recorder = FlightRecorder::for_dump(16);
  for (const CollectiveRecord& c :
       {call(0, CollectiveOp::kAllReduce, {4}), call(0, CollectiveOp::kSend, {2}, 3, 0.5),
        call(3, CollectiveOp::kAllGatherIntoTensor, {4, 2}, -1, 1.0),
        call(0, CollectiveOp::kRecv, {2}, 3), call(0, CollectiveOp::kBarrier, {}),
        call(3, CollectiveOp::kReduceScatter, {4}, -1, 2.0, CollectiveRecord::State::kWaiting)}) {
    recorder.make_room();
    recorder.enter(c);
  }
  const FrDump d = rank_fr_dump(1, recorder, groups, "train.toml");
  CHECK(d.version == "2.10");
  // Rank 1's own groups: WORLD, its tp pair, the explicit group.
  REQUIRE(d.pg_config.size() == 3);
  CHECK(d.pg_config.at("0").desc == "default_pg");
  CHECK(d.pg_config.at("1").desc == "mesh_tp");
  CHECK(d.pg_config.at("1").ranks == std::vector<int64_t>{0, 1});
  CHECK(d.pg_config.at("3").desc == "undefined");
  CHECK(!d.pg_config.contains("2"));
  REQUIRE(d.entries.size() == 6);
  const FrEntry& all_reduce = d.entries[0];
  CHECK(all_reduce.profiling_name == "nccl:all_reduce");
  CHECK(all_reduce.pg_id == 0);
  CHECK(all_reduce.input_dtypes == std::vector<std::string>{"BFloat16"});
  CHECK(all_reduce.state == "completed");
  CHECK(all_reduce.retired);
  CHECK(all_reduce.time_created_ns == kFrDumpEpochNs);
  REQUIRE(all_reduce.frames.size() == 1);
  CHECK(all_reduce.frames[0].filename == "train.toml");
  CHECK(all_reduce.frames[0].line == 12);
  CHECK(all_reduce.frames[0].name == "all_reduce");
  // A send counts among the group's sends and recvs, carrying its collective count.
  const FrEntry& send = d.entries[1];
  CHECK(send.profiling_name == "nccl:send 1->3");
  CHECK(send.is_p2p);
  CHECK((send.collective_seq_id == 1 && send.p2p_seq_id == 1 && send.op_id == 2));
  CHECK(send.time_created_ns == kFrDumpEpochNs + 500'000'000);
  // On group 3 = [1, 3], rank 1 is group rank 0; an all-gather's output is the members' rows.
  const FrEntry& gather = d.entries[2];
  CHECK(gather.pg_name == "3");
  CHECK(gather.pg_id == 2);
  CHECK(gather.profiling_name == "nccl:_all_gather_base");
  CHECK(gather.input_sizes == std::vector<std::vector<int64_t>>{{4, 2}});
  CHECK(gather.output_sizes == std::vector<std::vector<int64_t>>{{8, 2}});
  CHECK(d.entries[3].profiling_name == "nccl:recv 1<-3");
  CHECK(d.entries[3].p2p_seq_id == 2);
  const FrEntry& barrier = d.entries[4];
  CHECK(barrier.profiling_name == "nccl:all_reduce_barrier");
  CHECK(barrier.input_sizes == std::vector<std::vector<int64_t>>{{1}});
  CHECK(barrier.input_dtypes == std::vector<std::string>{"Float"});
  CHECK((barrier.collective_seq_id == 2 && barrier.p2p_seq_id == 2 && barrier.op_id == 4));
  // The call it waits in: launched, not finished; the group's status says so.
  const FrEntry& scatter = d.entries[5];
  CHECK(scatter.profiling_name == "nccl:_reduce_scatter_base");
  CHECK(scatter.output_sizes == std::vector<std::vector<int64_t>>{{2}});
  CHECK(scatter.state == "started");
  CHECK(!scatter.retired);
  CHECK(scatter.collective_seq_id == 2);
  CHECK(d.pg_status.at("2").last_enqueued == 2);
  CHECK(d.pg_status.at("2").last_completed == 1);
  CHECK(d.pg_status.at("0").last_completed == 2);
  CHECK(d.pg_status.at("1").last_enqueued == -1);
}

TEST_CASE("fr export: a wrapped ring keeps the newest calls and their numbers",
          "[sim][report][fr_dump]") {
  GroupTable groups(2);
  FlightRecorder recorder = FlightRecorder::for_dump(3);
  for (int i = 0; i < 5; ++i) {
    recorder.make_room();
    recorder.enter(call(0, CollectiveOp::kAllReduce, {4}));
  }
  const FrDump d = rank_fr_dump(0, recorder, groups, "t.toml");
  REQUIRE(d.entries.size() == 3);
  CHECK(d.entries.front().record_id == 2);
  CHECK(d.entries.front().collective_seq_id == 3);
  CHECK(d.entries.back().collective_seq_id == 5);
  CHECK(d.pg_status.at("0").last_completed == 5);
}
