#include "src/io/world_checkpoint.hpp"

#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/dtensor/local_shard.hpp"
#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/checkpoint_plan.hpp"
#include "src/io/dtensor_record.hpp"
#include "src/io/record_archive.hpp"
#include "src/io/xxh3_stream.hpp"
#include "src/printable.hpp"

namespace meshsim {

namespace {

constexpr uint64_t kMaxMetadataBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxShardBytes = uint64_t{16} << 30;
// Empty chunks one tensor's metadata may list (version 2; each costs memory but no elements).
constexpr int64_t kMaxEmptyChunks = int64_t{1} << 20;
// Pairs of runs one chunk-to-shard copy may intersect: past this the layouts are too fragmented
// to copy run by run.
constexpr int64_t kMaxRunPairs = int64_t{1} << 22;

std::string metadata_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "metadata.ckpt").string();
}
std::string shard_path(const std::string& dir, int64_t rank) {
  return (std::filesystem::path(dir) / fmt::format("shard-{}.ckpt", rank)).string();
}

// One piece of a dim where a source and a target index list meet: `length` indices at
// `source` in the source's order and `target` in the target's.
struct Segment {
  int64_t source, target, length;
};

std::vector<Segment> meet(const IndexRuns& source, const IndexRuns& target) {
  if (checked_mul(static_cast<int64_t>(source.runs().size()),
                  static_cast<int64_t>(target.runs().size()))
          .value_or(kMaxRunPairs + 1) > kMaxRunPairs) {
    throw runtime_error("the saved and target layouts are too fragmented to reshard run by run");
  }
  std::vector<Segment> out;
  int64_t s_pos = 0;
  for (const IndexRuns::Run& s : source.runs()) {
    int64_t t_pos = 0;
    for (const IndexRuns::Run& t : target.runs()) {
      const int64_t lo = std::max(s.start, t.start), hi = std::min(s.stop, t.stop);
      if (lo < hi) out.push_back({s_pos + (lo - s.start), t_pos + (lo - t.start), hi - lo});
      t_pos += t.stop - t.start;
    }
    s_pos += s.stop - s.start;
  }
  return out;
}

int64_t covered(const std::vector<Segment>& segments) {
  int64_t n = 0;
  for (const Segment& s : segments) n += s.length;
  return n;
}

// Visits the element runs where a source chunk meets the target shard, as (source offset,
// target offset, length) in elements: an odometer over the segments of every dim but the last,
// whose segments are contiguous in both.
template <typename Visit>
void for_each_meeting(const std::vector<std::vector<Segment>>& dims,
                      std::span<const int64_t> source_shape, std::span<const int64_t> target_shape,
                      Visit&& visit) {
  const size_t n = dims.size();
  if (n == 0) {
    visit(int64_t{0}, int64_t{0}, int64_t{1});
    return;
  }
  std::vector<int64_t> s_stride(n, 1), t_stride(n, 1);
  for (size_t d = n - 1; d-- > 0;) {
    s_stride[d] = s_stride[d + 1] * source_shape[d + 1];
    t_stride[d] = t_stride[d + 1] * target_shape[d + 1];
  }
  // Position of the odometer: per outer dim, a segment and an offset inside it.
  std::vector<size_t> seg(n, 0);
  std::vector<int64_t> off(n, 0);
  while (true) {
    int64_t s_base = 0, t_base = 0;
    for (size_t d = 0; d + 1 < n; ++d) {
      const Segment& g = dims[d][seg[d]];
      s_base += (g.source + off[d]) * s_stride[d];
      t_base += (g.target + off[d]) * t_stride[d];
    }
    for (const Segment& g : dims[n - 1]) visit(s_base + g.source, t_base + g.target, g.length);
    size_t d = n - 1;
    while (d-- > 0) {
      if (++off[d] < dims[d][seg[d]].length) break;
      off[d] = 0;
      if (++seg[d] < dims[d].size()) break;
      seg[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

// Version 2's chunks of one tensor: each chunk's file rank, and for each chunk and dim the number
// of runs followed by their bounds.
void append_chunks(const std::vector<CheckpointChunk>& chunks, std::vector<int64_t>& file_ranks,
                   std::vector<int64_t>& runs) {
  for (const CheckpointChunk& c : chunks) {
    file_ranks.push_back(c.file_rank);
    for (const IndexRuns& d : c.indices) {
      runs.push_back(static_cast<int64_t>(d.runs().size()));
      for (const IndexRuns::Run& r : d.runs()) runs.insert(runs.end(), {r.start, r.stop});
    }
  }
}

}  // namespace

uint64_t checkpoint_save_id(const CheckpointMetadata& plan, std::string_view checkpoint_name,
                            uint64_t values_digest) {
  Xxh3Stream hash;
  hash.add(&values_digest, sizeof values_digest);
  const auto add_text = [&](std::string_view text) {
    const uint64_t size = text.size();
    hash.add(&size, sizeof size);
    hash.add(text.data(), text.size());
  };
  const auto add_ints = [&](std::span<const int64_t> values) {
    const uint64_t size = values.size();
    hash.add(&size, sizeof size);
    hash.add(values.data(), values.size_bytes());
  };
  add_text(checkpoint_name);
  for (const CheckpointTensor& t : plan.tensors) {
    add_text(t.name);
    add_text(dtype_name(t.dtype));
    add_ints(t.shape);
    std::vector<int64_t> file_ranks, runs;
    append_chunks(t.chunks, file_ranks, runs);
    add_ints(file_ranks);
    add_ints(runs);
  }
  const uint64_t id = hash.digest();
  return id == 0 ? 1 : id;
}

namespace {

RecordObject metadata_record(const CheckpointMetadata& m) {
  std::vector<RecordObject> tensors;
  for (const CheckpointTensor& t : m.tensors) {
    std::vector<RecordObject> placements;
    for (const Placement& p : t.placements) placements.push_back(placement_to_record(p));
    std::vector<int64_t> file_ranks, runs;
    append_chunks(t.chunks, file_ranks, runs);
    tensors.push_back(RecordObject{"TensorEntry", {}}
                          .set("name", RecordValue::of(t.name))
                          .set("dtype", RecordValue::of(std::string(dtype_name(t.dtype))))
                          .set("shape", RecordValue::of(t.shape))
                          .set("placements", RecordValue::of(std::move(placements)))
                          .set("mesh_shape", RecordValue::of(t.mesh_shape))
                          .set("chunk_file_ranks", RecordValue::of(std::move(file_ranks)))
                          .set("chunk_runs", RecordValue::of(std::move(runs))));
  }
  return RecordObject{"CheckpointMetadata", {}}
      .set("save_id", RecordValue::of(static_cast<int64_t>(m.save_id)))
      .set("tensors", RecordValue::of(std::move(tensors)));
}

// One dim of a chunk read back from its run bounds (pairs): runs within [0, dim_size), never
// overlapping each other (in any order, as a strided shard's are). Errors name `path`.
IndexRuns runs_from(std::span<const int64_t> bounds, int64_t dim_size, const std::string& path) {
  if (bounds.size() % 2 != 0) throw runtime_error(fmt::format("{} is not pairs", path));
  IndexRuns runs;
  std::set<std::pair<int64_t, int64_t>> seen;
  for (size_t i = 0; i < bounds.size(); i += 2) {
    const int64_t start = bounds[i], stop = bounds[i + 1];
    if (start < 0 || stop <= start || stop > dim_size) {
      throw runtime_error(
          fmt::format("{} has [{}, {}) outside [0, {})", path, start, stop, dim_size));
    }
    const auto next = seen.lower_bound({start, start});
    if ((next != seen.end() && next->first < stop) ||
        (next != seen.begin() && std::prev(next)->second > start)) {
      throw runtime_error(fmt::format("{} overlap at [{}, {})", path, start, stop));
    }
    seen.emplace(start, stop);
    runs.append({start, stop});
  }
  return runs;
}

// Ranks are below 2^40: no world meshsim runs is larger.
void check_file_rank(int64_t rank, const std::string& path) {
  if (rank < 0 || rank >= (int64_t{1} << 40))
    throw runtime_error(fmt::format("{} {} is not a rank", path, rank));
}

// Version 1: an object per chunk.
CheckpointChunk chunk_from(const RecordReader& r, std::span<const int64_t> shape) {
  r.expect_type("Chunk").require({"file_rank", "dims"});
  CheckpointChunk c;
  c.file_rank = r.integer("file_rank");
  check_file_rank(c.file_rank, r.path() + ".file_rank");
  const std::vector<RecordReader> dims = r.objects("dims");
  if (dims.size() != shape.size()) {
    throw runtime_error(
        fmt::format("{} has {} dims, the tensor {}", r.path(), dims.size(), shape.size()));
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    const std::vector<int64_t>& bounds =
        dims[d].expect_type("Dim").require({"runs"}).integers("runs");
    c.indices.push_back(runs_from(bounds, shape[d], dims[d].path() + ".runs"));
    dims[d].finish();
  }
  r.finish();
  return c;
}

// Version 2: each chunk's file rank, and per chunk and dim a run count and the runs' bounds.
std::vector<CheckpointChunk> chunks_from(const RecordReader& t, std::span<const int64_t> shape) {
  const std::vector<int64_t>& file_ranks = t.integers("chunk_file_ranks");
  const std::vector<int64_t>& runs = t.integers("chunk_runs");
  std::vector<CheckpointChunk> out;
  const int64_t numel = *checked_product(shape);  // the shape is checked before
  int64_t total = 0, empty = 0;
  size_t at = 0;
  for (size_t c = 0; c < file_ranks.size(); ++c) {
    check_file_rank(file_ranks[c], fmt::format("{}.chunk_file_ranks[{}]", t.path(), c));
    CheckpointChunk chunk{file_ranks[c], {}};
    for (size_t d = 0; d < shape.size(); ++d) {
      const std::string path = fmt::format("{}.chunk_runs (chunk {}, dim {})", t.path(), c, d);
      if (at == runs.size()) throw runtime_error(fmt::format("{} is missing", path));
      const int64_t n = runs[at++];  // 0 for an empty shard's dim
      if (n < 0 || static_cast<uint64_t>(n) > (runs.size() - at) / 2) {
        throw runtime_error(
            fmt::format("{} counts {} runs where {} numbers are left", path, n, runs.size() - at));
      }
      const size_t length = 2 * static_cast<size_t>(n);
      chunk.indices.push_back(runs_from({runs.data() + at, length}, shape[d], path));
      at += length;
    }
    // Bounded by what a valid record holds, before the next chunk is built: chunks that hold
    // elements hold at most the tensor's, and DCP lists an empty chunk once per layout of the
    // other dims, which a valid world keeps well under kMaxEmptyChunks.
    const int64_t held = chunk_volume(chunk.indices);
    if (held == 0 && ++empty > kMaxEmptyChunks) {
      throw runtime_error(
          fmt::format("{} lists more than {} empty chunks", t.path(), kMaxEmptyChunks));
    }
    total = checked_add(total, held).value_or(INT64_MAX);
    if (total > numel) {
      throw runtime_error(
          fmt::format("the chunks of {} hold more than its {} elements", t.path(), numel));
    }
    out.push_back(std::move(chunk));
  }
  if (at != runs.size()) {
    throw runtime_error(
        fmt::format("{}.chunk_runs has {} numbers past its chunks", t.path(), runs.size() - at));
  }
  return out;
}

CheckpointMetadata metadata_from(const RecordObject& root, uint32_t version) {
  const RecordReader r(root, "CheckpointMetadata", true);
  r.expect_type("CheckpointMetadata").require({"tensors"});
  CheckpointMetadata m;
  if (version >= 3) m.save_id = static_cast<uint64_t>(r.require({"save_id"}).integer("save_id"));
  std::set<std::string> names;
  for (const RecordReader& t : r.objects("tensors")) {
    t.expect_type("TensorEntry").require({"name", "dtype", "shape", "placements", "mesh_shape"});
    t.require(version == 1
                  ? std::initializer_list<std::string_view>{"chunks"}
                  : std::initializer_list<std::string_view>{"chunk_file_ranks", "chunk_runs"});
    CheckpointTensor e;
    e.name = t.str("name");
    e.save_id = m.save_id;
    if (!names.insert(e.name).second)
      throw runtime_error(fmt::format("tensor '{}' is listed twice", printable(e.name)));
    const std::optional<DType> dtype = parse_dtype(t.str("dtype"));
    if (!dtype)
      throw runtime_error(
          fmt::format("{}.dtype '{}' is not a dtype", t.path(), printable(t.str("dtype"))));
    e.dtype = *dtype;
    e.shape = t.integers("shape");
    try {
      Tensor::byte_size(e.shape, e.dtype);
    } catch (const Error& err) {
      throw runtime_error(fmt::format("{}.shape: {}", t.path(), err.what()));
    }
    for (const RecordReader& p : t.objects("placements"))
      e.placements.push_back(placement_from_record(p));
    e.mesh_shape = t.integers("mesh_shape");
    if (version == 1) {
      for (const RecordReader& c : t.objects("chunks")) e.chunks.push_back(chunk_from(c, e.shape));
    } else {
      e.chunks = chunks_from(t, e.shape);
    }
    // The chunks must hold as many elements as the tensor; whether they overlap is checked
    // where it matters, for each shard a load fills.
    std::optional<int64_t> total = 0;
    for (const CheckpointChunk& c : e.chunks) {
      total = checked_add(total.value_or(INT64_MAX), chunk_volume(c.indices));
      if (!total)
        throw runtime_error(fmt::format("the chunks of '{}' hold more than 2^63 elements", e.name));
    }
    const int64_t numel = *checked_product(e.shape);
    if (*total != numel) {
      throw runtime_error(
          fmt::format("the chunks of '{}' hold {} elements, the tensor {}", e.name, *total, numel));
    }
    t.finish();
    m.tensors.push_back(std::move(e));
  }
  r.finish();
  return m;
}

// A shard file mapped whole. Its chunks' data are views into the mapping (binary archives) or
// into the record read from it (text and XML); both stay put for the ShardFile's life.
struct ShardFile {
  std::unique_ptr<const MappedFile> file;
  CheckpointShard shard;
};

ShardFile read_shard(const std::string& path) {
  ShardFile out;
  out.file = std::make_unique<const MappedFile>(path, kMaxShardBytes);
  out.shard = open_checkpoint_shard(out.file->bytes());
  return out;
}

}  // namespace

CheckpointMetadata save_world_checkpoint(
    const std::string& dir, const std::vector<std::vector<StateDictEntry>>& state_dicts,
    ArchiveFormat format) {
  std::vector<LocalSavePlan> plans;
  for (size_t r = 0; r < state_dicts.size(); ++r)
    plans.push_back(plan_local_save(static_cast<int64_t>(r), state_dicts[r]));
  GlobalSavePlan global = plan_global_save(plans);
  std::filesystem::path name(dir);
  if (name.filename().empty()) name = name.parent_path();  // "dir/"
  global.metadata.save_id =
      checkpoint_save_id(global.metadata, name.filename().string(), global.values_digest);
  std::vector<std::string> files;
  for (size_t p = 0; p < plans.size(); ++p) {
    files.push_back(save_checkpoint_shard(dir, plans[p], global.metadata, global.writes[p], format,
                                          Durability::kByCaller));
  }
  make_durable(files, std::span<const std::string>(&dir, 1));
  save_checkpoint_metadata(dir, global.metadata, format);
  return std::move(global.metadata);
}

void save_checkpoint_metadata(const std::string& dir, const CheckpointMetadata& plan,
                              ArchiveFormat format, Durability durability) {
  write_file_atomically(metadata_path(dir),
                        seal_record(RecordKind::kCheckpointMetadata, kCheckpointMetadataVersion,
                                    metadata_record(plan), format),
                        nullptr, durability);
}

std::string save_checkpoint_shard(const std::string& dir, const LocalSavePlan& mine,
                                  const CheckpointMetadata& plan,
                                  std::span<const PlannedWrite> writes, ArchiveFormat format,
                                  Durability durability) {
  std::vector<RecordObject> chunks;
  for (const PlannedWrite& w : writes) {
    const SaveItem& item = mine.items.at(w.item);
    MESHSIM_ASSERT(plan.tensors.at(w.tensor).chunks.at(w.chunk).file_rank == mine.rank,
                   "a rank writes a chunk the plan gives another");
    // Borrowed: the tensor outlives the record, which is written before this returns.
    const std::span<const std::byte> bytes = item.data->bytes();
    chunks.push_back(
        RecordObject{"ChunkData", {}}
            .set("tensor", RecordValue::of(item.name))
            .set("chunk", RecordValue::of(static_cast<int64_t>(w.chunk)))
            .set("data", RecordValue::borrowed_bytes(std::string_view(
                             reinterpret_cast<const char*>(bytes.data()), bytes.size()))));
  }
  const RecordObject shard =
      RecordObject{"ShardFile", {}}
          .set("save_id", RecordValue::of(static_cast<int64_t>(plan.save_id)))
          .set("chunks", RecordValue::of(std::move(chunks)));
  const SealedRecord sealed =
      seal_record_in_pieces(RecordKind::kShard, kCheckpointShardVersion, shard, format);
  std::string path = shard_path(dir, mine.rank);
  write_file_atomically(path, sealed.pieces(), nullptr, durability);
  return path;
}

CheckpointShard open_checkpoint_shard(std::string_view file) {
  CheckpointShard out;
  out.record = std::make_unique<const OpenedRecord>(
      open_record(file, RecordKind::kShard, kCheckpointShardVersion, BytesOut::kBorrow));
  const RecordReader r(out.record->root, "ShardFile", true);
  r.expect_type("ShardFile").require({"chunks"});
  if (out.record->record_version >= 2) {
    out.save_id = static_cast<uint64_t>(r.require({"save_id"}).integer("save_id"));
  }
  for (const RecordReader& c : r.objects("chunks")) {
    c.expect_type("ChunkData").require({"tensor", "chunk", "data"});
    if (!out.chunks.emplace(std::pair{c.str("tensor"), c.integer("chunk")}, c.bytes("data"))
             .second) {
      throw runtime_error(fmt::format("{} holds chunk {} of '{}' twice", c.path(),
                                      c.integer("chunk"), printable(c.str("tensor"))));
    }
    c.finish();
  }
  r.finish();
  return out;
}

CheckpointMetadata open_checkpoint_metadata(std::string_view file) {
  const OpenedRecord record =
      open_record(file, RecordKind::kCheckpointMetadata, kCheckpointMetadataVersion);
  return metadata_from(record.root, record.record_version);
}

CheckpointMetadata load_checkpoint_metadata(const std::string& dir) {
  const std::string path = metadata_path(dir);
  const std::string bytes = read_file_bounded(path, kMaxMetadataBytes);
  try {
    return open_checkpoint_metadata(bytes);
  } catch (const Error& e) {
    throw runtime_error(fmt::format("cannot load {}: {}", path, e.what()));
  }
}

int64_t chunk_volume(const std::vector<IndexRuns>& indices) {
  int64_t n = 1;
  for (const IndexRuns& d : indices) n *= d.size();
  return n;
}

const CheckpointTensor* find_tensor(const CheckpointMetadata& metadata, const std::string& name) {
  const auto entry = std::find_if(metadata.tensors.begin(), metadata.tensors.end(),
                                  [&](const CheckpointTensor& t) { return t.name == name; });
  return entry == metadata.tensors.end() ? nullptr : &*entry;
}

namespace {

// The shard of `local_shape` whose elements are the global indices `mine` of the saved tensor
// `entry`, read from the saved chunks that meet it. Every chunk's data is found in its shard file
// before the shard is allocated, so a small metadata file claiming a huge tensor costs nothing.
Tensor read_from_chunks(const std::string& dir, const CheckpointTensor& entry,
                        const ChunkLookup& lookup, const std::vector<IndexRuns>& mine,
                        const std::vector<int64_t>& local_shape) {
  const std::string& name = entry.name;
  const size_t element = dtype_size(entry.dtype);
  for (size_t d = 0; d < mine.size(); ++d) {
    MESHSIM_ASSERT(mine[d].size() == local_shape[d],
                   "owned_indices and the local shape disagree about a shard");
  }
  // The saved chunks that meet this shard, where, and (once found) their bytes.
  struct Meeting {
    size_t chunk;
    std::vector<std::vector<Segment>> dims;
    int64_t elements;
    std::vector<int64_t> chunk_shape;  // the saved chunk's own shape
    const std::byte* data = nullptr;
  };
  std::vector<Meeting> meetings;
  int64_t met = 0;
  for (size_t c : lookup.candidates(mine)) {
    Meeting m{c, {}, 1, {}};
    for (size_t d = 0; d < mine.size(); ++d) {
      m.dims.push_back(meet(entry.chunks[c].indices[d], mine[d]));
      m.elements *= covered(m.dims.back());  // within this shard's numel
    }
    if (m.elements == 0) continue;
    for (const IndexRuns& d : entry.chunks[c].indices) m.chunk_shape.push_back(d.size());
    met = checked_add(met, m.elements).value_or(INT64_MAX);
    meetings.push_back(std::move(m));
  }
  const int64_t numel = *checked_product(local_shape);  // a shard of a tensor that fits
  // The chunks must cover the shard exactly once. One chunk that meets all of it does; otherwise
  // every element is marked as it is claimed, so overlapping chunks are caught, not copied twice.
  const auto refuse = [&](std::string_view why) {
    throw runtime_error(fmt::format("cannot load '{}' from {}: {}", name, dir, why));
  };
  if (met != numel) {
    refuse(fmt::format("its chunks cover {} of this rank's {} elements", met, numel));
  }
  std::map<int64_t, ShardFile> files;
  for (Meeting& m : meetings) {
    const CheckpointChunk& chunk = entry.chunks[m.chunk];
    auto file = files.find(chunk.file_rank);
    if (file == files.end()) {
      const std::string path = shard_path(dir, chunk.file_rank);
      try {
        file = files.emplace(chunk.file_rank, read_shard(path)).first;
      } catch (const Error& e) {
        throw runtime_error(fmt::format("cannot load {}: {}", path, e.what()));
      }
      if (file->second.shard.save_id != entry.save_id) {
        throw runtime_error(fmt::format(
            "cannot load '{}': shard-{}.ckpt was written by another save (id {:016x}) than "
            "metadata.ckpt (id {:016x}): the directory mixes the files of two saves",
            name, chunk.file_rank, file->second.shard.save_id, entry.save_id));
      }
    }
    const auto data = file->second.shard.chunks.find({name, static_cast<int64_t>(m.chunk)});
    const uint64_t expected = static_cast<uint64_t>(chunk_volume(chunk.indices)) * element;
    if (data == file->second.shard.chunks.end() || data->second.size() != expected) {
      throw runtime_error(fmt::format(
          "cannot load '{}': shard-{}.ckpt does not hold chunk {} as the metadata lists it", name,
          chunk.file_rank, m.chunk));
    }
    m.data = reinterpret_cast<const std::byte*>(data->second.data());
  }
  // The files hold at least the shard's bytes now: what follows is sized by data that exists.
  if (meetings.size() > 1) {
    std::vector<uint8_t> claimed(static_cast<size_t>(numel), 0);
    for (const Meeting& m : meetings) {
      for_each_meeting(m.dims, m.chunk_shape, local_shape,
                       [&](int64_t, int64_t at, int64_t length) {
                         uint8_t* begin = claimed.data() + at;
                         if (std::find(begin, begin + length, uint8_t{1}) != begin + length)
                           refuse("its chunks overlap");
                         std::fill(begin, begin + length, uint8_t{1});
                       });
    }
  }
  Tensor local(local_shape, entry.dtype);
  std::byte* target = local.mutable_bytes().data();
  for (const Meeting& m : meetings) {
    for_each_meeting(m.dims, m.chunk_shape, local_shape,
                     [&](int64_t from, int64_t to, int64_t length) {
                       std::memcpy(target + static_cast<size_t>(to) * element,
                                   m.data + static_cast<size_t>(from) * element,
                                   static_cast<size_t>(length) * element);
                     });
  }
  return local;
}

}  // namespace

ChunkLookup chunk_lookup(const CheckpointTensor& entry) {
  std::vector<const std::vector<IndexRuns>*> chunks;
  chunks.reserve(entry.chunks.size());
  for (const CheckpointChunk& c : entry.chunks) chunks.push_back(&c.indices);
  return ChunkLookup(chunks);
}

DTensor load_world_tensor(const std::string& dir, const CheckpointTensor& entry,
                          const DeviceMesh& mesh, std::vector<Placement> placements,
                          const ChunkLookup* lookup) {
  // The shard's layout first (no storage), then storage this function alone owns.
  const DTensor layout = DTensor::zeros(
      DTensorSpec{mesh, std::move(placements), entry.shape, entry.dtype}, Tensor::Storage::kMeta);
  if (!layout.participates()) return DTensor::zeros(layout.spec());
  const DTensorSpec& spec = layout.spec();
  const std::optional<ChunkLookup> own =
      lookup == nullptr ? std::optional<ChunkLookup>(chunk_lookup(entry)) : std::nullopt;
  Tensor local = read_from_chunks(
      dir, entry, lookup != nullptr ? *lookup : *own,
      owned_indices(spec.shape, spec.mesh.shape(), *spec.mesh.coordinate(), spec.placements),
      layout.local().shape());
  return DTensor::from_local_shard(layout.spec(), std::move(local));
}

Tensor load_whole_tensor(const std::string& dir, const CheckpointTensor& entry) {
  std::vector<IndexRuns> all;
  for (int64_t n : entry.shape) all.push_back(IndexRuns::range(n));
  return read_from_chunks(dir, entry, chunk_lookup(entry), all, entry.shape);
}

DTensor load_world_tensor(const std::string& dir, const std::string& name, const DeviceMesh& mesh,
                          std::vector<Placement> placements) {
  const CheckpointMetadata metadata = load_checkpoint_metadata(dir);
  const CheckpointTensor* entry = find_tensor(metadata, name);
  if (entry == nullptr)
    throw runtime_error(fmt::format("the checkpoint in {} has no tensor '{}'", dir, name));
  return load_world_tensor(dir, *entry, mesh, std::move(placements));
}

}  // namespace meshsim
