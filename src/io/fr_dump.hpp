// One rank's Flight Recorder dump, as PyTorch 2.15 writes it (schema version "2.10"): the pickle
// of _dump_fr_trace (what a job writes on a timeout, TORCH_FR_BUFFER_SIZE > 0) or the JSON of
// _dump_fr_trace_json. Both encodings decode to the same record; what they differ in (JSON has no
// stack frames, gives pg_status counters as strings and unset times as 0) is evened out here.
// See docs/flight-recorder.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meshsim {

struct FrFrame {
  std::string name;
  std::string filename;
  int64_t line = 0;
};

// One recorded call.
struct FrEntry {
  int64_t record_id = 0;
  int64_t pg_id = 0;
  std::string pg_name;  // process_group[0]: c10d's name of the group ("0", "3")
  std::string pg_desc;  // process_group[1]: "default_pg", "undefined", a mesh dim's description
  int64_t collective_seq_id = 0;
  int64_t p2p_seq_id = 0;
  int64_t op_id = 0;
  std::string profiling_name;  // "nccl:all_reduce", "gloo:all_gather", "nccl:send 0->1"
  std::vector<std::vector<int64_t>> input_sizes, output_sizes;
  std::vector<std::string> input_dtypes, output_dtypes;  // "Float", "BFloat16", ...
  std::string state;  // "scheduled", "started" or "completed" (Gloo records "scheduled" only)
  bool retired = false;
  bool is_p2p = false;
  int64_t timeout_ms = 0;
  std::optional<int64_t> time_created_ns, time_started_ns, time_completed_ns;
  std::vector<FrFrame> frames;  // innermost first; empty in JSON dumps
  std::string thread_name, thread_id;
};

// A process group as the recorder names it (pg_config). Gloo's recorder keeps one entry under an
// empty name whatever the groups, so a reader must not take these as the only groups.
struct FrGroupConfig {
  std::string name, desc;
  std::vector<int64_t> ranks;
};

struct FrGroupStatus {
  int64_t last_enqueued = -1, last_started = -1, last_completed = -1;
};

// The most ranks a recorded mesh may hold.
inline constexpr int64_t kMaxFrRngMesh = int64_t{1} << 22;

// A seeding or DTensor random op the recorder saw on a rank (meshsim's extension), in the rank's
// order. See docs/recording.md.
struct FrRngCall {
  // torch.manual_seed; DTensor's manual_seed(seed, mesh); a random op through DTensor's
  // dispatcher (uniform_, normal_, native_dropout, ...).
  enum class Kind { kTorchManualSeed, kManualSeed, kRandomOp };
  Kind kind = Kind::kTorchManualSeed;
  uint64_t seed = 0;
  // The mesh (manual_seed, random ops): its shape and its ranks in row-major order, and this
  // rank's coordinate (nullopt: outside it).
  std::vector<int64_t> mesh_shape, mesh_ranks;
  std::optional<std::vector<int64_t>> coordinate;
  // Random ops: ATen's name and overload, the number arguments by schema name, the DTensor's
  // placements (meshsim's spelling), global shape and dtype, and its local shard.
  std::string op, overload;
  std::vector<std::pair<std::string, double>> arguments;
  // The parameter drawn into, by its name in the outermost module on the stack that holds it
  // ("layers.0.attention.wq.weight"); empty for anything else.
  std::string parameter;
  std::vector<std::string> placements;
  std::vector<int64_t> shape;
  std::string dtype;
  int64_t local_numel = 0;
  bool meta = false;             // a meta local tensor draws nothing
  bool region = true;            // DTensor's distribute region was enabled
  bool tracker_created = false;  // the op made the tracker (and broadcast rank 0's state)
  bool user_generator = false;   // the op drew from a generator the program passed
  // torch.distributed.tensor.rand / randn ("rand", "randn"): outside the distribute region it
  // draws from the generator's state and puts it back.
  bool factory = false;
  std::vector<FrFrame> frames;  // innermost first
};

// What meshsim_record (the Python recorder, python/) adds to the dumps it writes: each is a rank's
// whole history, in which every call finished at once, and how the rank's program ended.
struct FrRecorded {
  std::string torch_version;
  std::string command;
  std::string status;  // "ok", "raised", "exit" or "crashed"
  std::string error;   // "ValueError: ..." when the program raised
  std::string at;      // the user's line it raised at ("train.py:30"), when known
  std::vector<FrRngCall> rng;
};

struct FrDump {
  std::string version;  // "2.10"
  std::string comm_lib_version;
  std::map<std::string, FrGroupConfig> pg_config;  // by the config's key
  std::map<std::string, FrGroupStatus> pg_status;  // by pg_id, as text
  std::vector<FrEntry> entries;                    // oldest first
  std::optional<FrRecorded> recorded;              // a recorder's whole history
};

// Limits on what one dump may hold, so that a hostile file costs bounded time and memory.
struct FrDumpLimits {
  uint64_t max_bytes = uint64_t{64} << 20;
  size_t max_entries = 1 << 20;
  size_t max_depth = 16;  // of nested containers
};

// Decodes a dump of either encoding (a pickle starts with the PROTO byte 0x80, JSON with '{').
// The pickle is read without running anything: no class or function is allowed, so an import or
// a call is refused with its byte offset. Throws meshsim::Error (ValueError) naming `what` and
// the place (byte offset in a pickle, line:column in JSON, or the field, as entries[3].state) for
// anything that is not a dump of schema 2.x; fields PyTorch may add later are ignored.
FrDump read_fr_dump(std::string bytes, std::string_view what, FrDumpLimits limits = {});

}  // namespace meshsim
