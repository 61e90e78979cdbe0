#include "sim/report/fr_export.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "src/printable.hpp"

namespace meshsim::sim {

namespace {

// NCCL's default collective timeout (TORCH_NCCL timeout of init_process_group).
constexpr int64_t kTimeoutMs = 600'000;

// What c10d's NCCL backend calls the collective in a record ("nccl:<this>"). A barrier is an
// all-reduce of one float; an object collective is recorded by its first call, the exchange of
// the objects' sizes (its payload, pickled bytes meshsim does not make, is left out).
std::string_view nccl_op(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "all_reduce";
    case CollectiveOp::kAllGather:
    case CollectiveOp::kAllGatherObject:
      return "all_gather";
    case CollectiveOp::kAllGatherIntoTensor:
      return "_all_gather_base";
    case CollectiveOp::kReduceScatter:
      return "_reduce_scatter_base";
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kBroadcastObjectList:
      return "broadcast";
    case CollectiveOp::kAllToAll:
      return "all_to_all";
    case CollectiveOp::kBarrier:
      return "all_reduce_barrier";
    case CollectiveOp::kSend:
      return "send";
    case CollectiveOp::kRecv:
      return "recv";
    case CollectiveOp::kNewGroup:
      break;
  }
  return "unknown";
}

// c10d's description of a group: the default group, a DeviceMesh dim's ("mesh_tp"), or what
// new_group gives one without a description.
std::string group_desc(const GroupTable& groups, int64_t id, int64_t rank) {
  if (id == 0) return "default_pg";
  const std::optional<std::string> dim = groups.mesh_dim(id, rank);
  return dim ? "mesh_" + *dim : "undefined";
}

// Input and output sizes and dtypes of one call, as the NCCL backend records its tensors (the
// signature holds an all-to-all's first chunk).
void fill_tensors(const CollectiveRecord& c, int64_t group_size, FrEntry& e) {
  std::vector<int64_t> in(c.signature.shape.view().begin(), c.signature.shape.view().end());
  const std::string dtype(scalar_type_name(c.signature.dtype));
  std::vector<std::vector<int64_t>> out{in};
  std::string in_dtype = dtype;
  switch (c.signature.op) {
    case CollectiveOp::kAllGatherIntoTensor:
      if (out[0].empty()) out[0].push_back(1);
      out[0][0] *= group_size;
      break;
    case CollectiveOp::kAllGather:  // one flat output of every member's tensor
      out[0].insert(out[0].begin(), group_size);
      break;
    case CollectiveOp::kReduceScatter:
      if (!out[0].empty()) out[0][0] /= group_size;
      break;
    case CollectiveOp::kBarrier:
      in = {1};
      out = {{1}};
      in_dtype = "Float";
      break;
    case CollectiveOp::kBroadcastObjectList:  // the objects' sizes, one per object
      in = {in.empty() ? 1 : in[0]};
      out = {in};
      in_dtype = "Long";
      break;
    case CollectiveOp::kAllGatherObject:  // this rank's size in, every member's out (flat)
      in = {1};
      out = {{group_size, 1}};
      in_dtype = "Long";
      break;
    case CollectiveOp::kAllToAll:  // a chunk to and from each member: the lists' tensors
      e.input_sizes.assign(static_cast<size_t>(group_size), in);
      e.input_dtypes.assign(static_cast<size_t>(group_size), dtype);
      e.output_sizes = e.input_sizes;
      e.output_dtypes = e.input_dtypes;
      return;
    default:
      break;
  }
  e.input_sizes = {in};
  e.input_dtypes = {in_dtype};
  e.output_sizes = out;
  e.output_dtypes.assign(out.size(), in_dtype);
}

// The scenario's path as a frame's file name: text that is not UTF-8 would stop Python reading
// the pickle, so such a path is written escaped.
std::string frame_file(const std::string& path) {
  return valid_utf8(path) ? path : printable(path, 4096);
}

}  // namespace

FrDump rank_fr_dump(int64_t rank, const FlightRecorder& recorder, const GroupTable& groups,
                    const std::string& scenario_file) {
  FrDump dump;
  dump.version = "2.10";
  // The process's own groups, numbered in the order it created them (pg_id).
  std::map<int64_t, int64_t> pg_id;
  for (const int64_t id : groups.groups_of(rank)) {
    const RankList members = groups.members(id, rank);
    const std::string name = std::to_string(id);
    pg_id.emplace(id, static_cast<int64_t>(pg_id.size()));
    dump.pg_config[name] = {name, group_desc(groups, id, rank),
                            members ? *members : std::vector<int64_t>{}};
  }
  const std::vector<CollectiveRecord> records = recorder.records();
  const uint64_t first_id = recorder.total() - records.size();
  // Each kept call's numbers on its group, this one included: the recorder counts every call,
  // and the ring holds the newest, so walking back from the totals numbers them.
  std::map<int64_t, FlightRecorder::GroupCalls> totals;
  for (const FlightRecorder::GroupCalls& c : recorder.group_calls()) totals[c.group_id] = c;
  std::vector<FlightRecorder::GroupCalls> numbers(records.size());
  std::map<int64_t, FlightRecorder::GroupCalls> running_of = totals;
  for (size_t i = records.size(); i-- > 0;) {
    FlightRecorder::GroupCalls& running = running_of[records[i].group_id];
    numbers[i] = running;
    --(records[i].peer >= 0 ? running.p2p : running.collectives);
  }
  const std::string file = frame_file(scenario_file);
  for (size_t i = 0; i < records.size(); ++i) {
    const CollectiveRecord& c = records[i];
    const RankList members = groups.members(c.group_id, rank);
    const Group group(std::to_string(c.group_id),
                      members ? members : std::make_shared<const std::vector<int64_t>>(), rank);
    const auto group_rank = [&](int64_t global) {
      const int64_t g = group.group_rank(global);
      return g < 0 ? global : g;  // a group the rank's table lost: its global rank
    };
    FrEntry e;
    e.record_id = static_cast<int64_t>(first_id + i);
    const auto id = pg_id.find(c.group_id);
    e.pg_id = id == pg_id.end() ? -1 : id->second;
    e.pg_name = std::to_string(c.group_id);
    e.pg_desc = group_desc(groups, c.group_id, rank);
    e.is_p2p = c.peer >= 0;
    e.collective_seq_id = numbers[i].collectives;
    e.p2p_seq_id = numbers[i].p2p;
    e.op_id = numbers[i].collectives + numbers[i].p2p;
    const std::string_view op = nccl_op(c.signature.op);
    if (!e.is_p2p) {
      e.profiling_name = fmt::format("nccl:{}", op);
    } else if (c.signature.op == CollectiveOp::kSend) {
      e.profiling_name = fmt::format("nccl:send {}->{}", group_rank(rank), group_rank(c.peer));
    } else {
      e.profiling_name = fmt::format("nccl:recv {}<-{}", group_rank(rank), group_rank(c.peer));
    }
    fill_tensors(c, std::max<int64_t>(group.size(), 1), e);
    // Calls block in a simulation: a call not completed was launched, and waits on its peers.
    const bool done = c.state == CollectiveRecord::State::kCompleted;
    e.state = done ? "completed" : "started";
    e.retired = done;
    e.timeout_ms = kTimeoutMs;
    // Virtual clocks add up (long sleeps in long loops): past int64 the time saturates.
    constexpr double kLatest = static_cast<double>(INT64_MAX - kFrDumpEpochNs) - 1024;
    e.time_created_ns = kFrDumpEpochNs + std::llround(std::clamp(c.entered_at * 1e9, 0.0, kLatest));
    e.thread_name = "meshsim";
    e.thread_id = std::to_string(rank);
    const std::string loops = c.site.iterations_text();
    e.frames.push_back({loops.empty()
                            ? std::string(collective_op_name(c.signature.op))
                            : fmt::format("{} ({})", collective_op_name(c.signature.op), loops),
                        file, c.site.line});
    dump.entries.push_back(std::move(e));
  }
  // Counters as c10d keeps them (-1 before the first): calls block, so only the newest call can
  // be enqueued and not completed.
  const bool open = !records.empty() && records.back().state != CollectiveRecord::State::kCompleted;
  for (const auto& [group, id] : pg_id) {
    const auto total = totals.find(group);
    const int64_t n = total == totals.end() ? 0 : total->second.collectives;
    const bool open_here = open && records.back().group_id == group && records.back().peer < 0;
    const auto seq = [](int64_t count) { return count > 0 ? count : -1; };
    dump.pg_status[std::to_string(id)] = {seq(n), seq(n), seq(open_here ? n - 1 : n)};
  }
  return dump;
}

}  // namespace meshsim::sim
