// Checkpoints of a whole world, laid out as Distributed Checkpoint lays them out
// (docs/mesh.md 4.3): each rank writes the chunks it is responsible for into shard-<rank>.ckpt,
// rank 0 writes metadata.ckpt listing every tensor's chunks (global indices per dim, and the file
// holding each), and a chunk several ranks hold (a replica) is written once, by the rank the plan
// (src/io/checkpoint_plan) picks. A load onto any mesh and placements reads, for each rank, the
// saved chunks that intersect its shard (resharding), and checks that they cover it exactly. No
// process group names are stored.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/dtensor/dtensor.hpp"
#include "src/dtensor/index_runs.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/chunk_lookup.hpp"
#include "src/io/envelope.hpp"
#include "src/io/record_archive.hpp"

namespace meshsim {

// The layouts this meshsim writes; it reads every version up to these. Metadata version 2 lists
// each tensor's chunks as two integer arrays (version 1: an object per chunk, whose in-memory
// tree outgrew the reader's bounds at a thousand ranks). Metadata version 3 and shard version 2
// carry the save's id, so that files of two saves are never read as one.
inline constexpr uint32_t kCheckpointMetadataVersion = 3;
inline constexpr uint32_t kCheckpointShardVersion = 2;

struct CheckpointChunk {
  int64_t file_rank = 0;           // shard-<file_rank>.ckpt holds its data
  std::vector<IndexRuns> indices;  // global indices per tensor dim, in the chunk's own order
};

struct CheckpointTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<Placement> placements;  // as saved (what a reader may want to know)
  std::vector<int64_t> mesh_shape;
  std::vector<CheckpointChunk> chunks;
  uint64_t save_id = 0;  // the save it belongs to (0: written before saves had ids)
};

struct CheckpointMetadata {
  std::vector<CheckpointTensor> tensors;
  // What ties the metadata to the shard files written with it: the checkpoint's name, plan and
  // values, hashed (checkpoint_save_id), so one scenario always writes the same bytes. 0 when
  // unknown.
  uint64_t save_id = 0;
};

// The id of a save of `plan` under `checkpoint_name` writing values whose digest is
// `values_digest` (GlobalSavePlan's): two saves of one plan with other values get other ids.
// Never 0.
uint64_t checkpoint_save_id(const CheckpointMetadata& plan, std::string_view checkpoint_name,
                            uint64_t values_digest);

// How many elements a chunk holds (its indices lie within a tensor: no overflow).
int64_t chunk_volume(const std::vector<IndexRuns>& indices);

struct LocalSavePlan;
struct StateDictEntry;

// One chunk a rank writes: the item of its local plan, and where the merged metadata lists it
// (tensor, then chunk, by position).
struct PlannedWrite {
  size_t item;
  size_t tensor;
  size_t chunk;
};

// What rank `mine.rank` writes: its shard file (always, possibly with no chunks), holding `writes`
// (the chunks of its local plan that `plan`, the merged metadata, assigns to it: GlobalSavePlan's
// writes) and the plan's save id. Errors name the file. Returns the file's path.
std::string save_checkpoint_shard(const std::string& dir, const LocalSavePlan& mine,
                                  const CheckpointMetadata& plan,
                                  std::span<const PlannedWrite> writes, ArchiveFormat format,
                                  Durability durability = Durability::kNow);
// What the coordinator writes once every shard is written: the plan as metadata. The metadata
// is what makes a checkpoint whole: a save whose shards are made durable by the caller writes it
// only after make_durable, so that a crash never leaves metadata naming shards a power cut lost.
void save_checkpoint_metadata(const std::string& dir, const CheckpointMetadata& plan,
                              ArchiveFormat format, Durability durability = Durability::kNow);
// A whole save for one process that plays every rank in turn (tests, benchmarks): `state_dicts`
// holds each rank's state dict, in rank order; the shards are made durable in one pass before the
// metadata is written. Returns the merged plan.
CheckpointMetadata save_world_checkpoint(
    const std::string& dir, const std::vector<std::vector<StateDictEntry>>& state_dicts,
    ArchiveFormat format);

// A shard file's chunks by (tensor, chunk index), and its save id (0 for version 1). The chunks'
// bytes are views into `file` (binary archives) or into `record` (text and XML). Throws
// RuntimeError for anything but a valid shard record, a chunk listed twice included.
struct CheckpointShard {
  std::unique_ptr<const OpenedRecord> record;
  uint64_t save_id = 0;
  std::map<std::pair<std::string, int64_t>, std::string_view> chunks;
};
CheckpointShard open_checkpoint_shard(std::string_view file);

// Reads the metadata (checked: kinds, bounds, chunks that hold exactly the tensor's elements)
// from a file's bytes, or from `dir`.
CheckpointMetadata open_checkpoint_metadata(std::string_view file);
CheckpointMetadata load_checkpoint_metadata(const std::string& dir);
// The entry `name`, or nullptr.
const CheckpointTensor* find_tensor(const CheckpointMetadata& metadata, const std::string& name);

// The saved tensor `entry` of the checkpoint in `dir` (an entry of its metadata: its global shape
// and dtype), laid out over `mesh` as `placements` on the calling rank. Throws RuntimeError naming
// the file and the problem when the checkpoint does not cover this rank's shard exactly, or a
// shard file does not match the metadata; what DTensor::zeros throws for placements that do not
// fit.
// `lookup` (of `entry`'s chunks, chunk_lookup) may be shared by the ranks of one load; without
// one, this call makes its own.
DTensor load_world_tensor(const std::string& dir, const CheckpointTensor& entry,
                          const DeviceMesh& mesh, std::vector<Placement> placements,
                          const ChunkLookup* lookup = nullptr);
// The lookup of `entry`'s chunks (src/io/chunk_lookup.hpp).
ChunkLookup chunk_lookup(const CheckpointTensor& entry);
// A plain tensor of the checkpoint, whole (every chunk read).
Tensor load_whole_tensor(const std::string& dir, const CheckpointTensor& entry);
// The tensor `name`, reading metadata.ckpt itself (tests, benchmarks); RuntimeError also when
// the checkpoint lacks the tensor.
DTensor load_world_tensor(const std::string& dir, const std::string& name, const DeviceMesh& mesh,
                          std::vector<Placement> placements);

}  // namespace meshsim
