// Checkpoints in scenarios: `save` and `load` of DeviceMesh, DTensor and RNG state records and of
// whole-world checkpoints in the run's checkpoint directory, the `decouple_backend_at_save`
// switch, `from_local`, `reassign_mesh` and `rebind_groups` (what a user does with a loaded
// DTensor or mesh), and `corrupt_file` (a flipped byte or a cut file, to test what a load says).
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "sim/run/query.hpp"
#include "sim/run/rank_state.hpp"
#include "sim/runtime/fiber_stack.hpp"
#include "sim/steps/checkpoint_step_support.hpp"
#include "sim/steps/step_kinds.hpp"
#include "src/enum_names.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/dtensor_record.hpp"
#include "src/io/mesh_record.hpp"
#include "src/io/rng_record.hpp"
#include "src/io/torch_saved_dtensor.hpp"

namespace meshsim::sim {

namespace {

using SavedFile = LoadContext::SavedFile;

// Files this large are refused before they are read: a DTensor record holds one rank's shard (16
// GiB is no test), a mesh or RNG record a few bytes per rank.
constexpr uint64_t kMaxCheckpointFileBytes = uint64_t{16} << 30;
constexpr uint64_t kMaxSmallRecordBytes = uint64_t{256} << 20;

// "x-{rank}.ckpt": one file name inside the run's checkpoint directory, `{rank}` for the rank.
std::string path_pattern_of(const toml::node& node, const LoadContext& ctx) {
  const std::string path = ctx.string_of(node, "path");
  if (!plain_relative_path(path, false)) {
    ctx.fail(node,
             "a checkpoint path is a file name of letters, digits, '.', '_' and '-' (at most 200), "
             "with {rank} for the rank: it lives in the run's checkpoint directory");
  }
  return path;
}

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// A mesh or DTensor file: one of meshsim's own records, or what torch.save wrote (a zip archive,
// read by its own allow-list, which is as strict as a strict record load).
constexpr std::string_view kTorchSaveFile = "a torch.save file";

DeviceMesh open_mesh_file(std::string_view bytes, int64_t world_size, bool strict) {
  if (looks_like_zip_archive(bytes)) {
    return open_torch_saved_mesh(bytes, kTorchSaveFile, world_size);
  }
  return open_mesh(bytes, world_size, strict);
}

DTensor open_dtensor_file(std::string_view bytes, int64_t world_size, bool strict) {
  if (looks_like_zip_archive(bytes)) {
    return open_torch_saved_dtensor(bytes, kTorchSaveFile, world_size);
  }
  return open_dtensor(bytes, world_size, strict);
}

// What a save or load step works on: exactly one of tensor, mesh and rng.
struct Subject {
  SavedFile::Kind kind = SavedFile::Kind::kTensor;
  std::string name;  // tensor or mesh name
};

Subject subject_of(const toml::table& args, const LoadContext& ctx, std::string_view what) {
  std::vector<std::string_view> given;
  for (std::string_view key : {"tensor", "mesh", "rng"}) {
    if (args.get(key)) given.push_back(key);
  }
  if (given.size() != 1) {
    throw InputError(
        ctx.at(args.source()),
        fmt::format("{} takes exactly one of tensor, mesh and rng{}", what,
                    given.empty() ? "" : fmt::format(" (found {})", fmt::join(given, ", "))));
  }
  Subject s;
  const toml::node& node = *args.get(given.front());
  if (given.front() == "rng") {
    if (!ctx.boolean_of(node, "rng")) ctx.fail(node, "rng = true names this rank's generators");
    s.kind = SavedFile::Kind::kRng;
    return s;
  }
  s.kind = given.front() == "mesh" ? SavedFile::Kind::kMesh : SavedFile::Kind::kTensor;
  s.name = ctx.string_of(node, given.front());
  return s;
}

std::optional<SavePoint> save_point_of(const toml::node& node, const LoadContext& ctx) {
  const std::string text = ctx.string_of(node, "fail_at");
  if (const std::optional<SavePoint> point = value_in(kSavePointNames, text)) return *point;
  ctx.fail(node, fmt::format("unknown save point \"{}\" (open, write, fsync, close, rename, "
                             "fsync of the directory)",
                             text));
}

class DecoupleStep final : public Step {
 public:
  void run(RankState& rank) const override { rank.set_decouple_backend_at_save(on_); }
  bool on_ = false;
};

// PyTorch's text for shape= without stride= (or the reverse): its RuntimeError carries two
// arguments, so it reads as their tuple.
std::string shape_without_stride(const std::optional<std::vector<int64_t>>& shape,
                                 const std::optional<std::vector<int64_t>>& stride) {
  auto listed = [](const std::optional<std::vector<int64_t>>& v) {
    if (!v) return std::string("None");
    return v->size() == 1 ? fmt::format("({},)", (*v)[0])
                          : fmt::format("({})", fmt::join(*v, ", "));
  };
  return fmt::format(
      "('Found shape:{}, stride:{}.', 'Please pass both shape and stride at the same time.')",
      listed(shape), listed(stride));
}

// `from_local = { name, local, mesh, placements, requires_grad, run_check, shape, stride }`:
// DTensor.from_local(local, mesh, placements), the global shape given or inferred from the local
// one (every rank's, a rank outside the mesh too, which then holds an empty local tensor).
class FromLocalStep final : public Step {
 public:
  void run(RankState& rank) const override {
    const DeviceMesh& mesh = rank.mesh(mesh_);
    std::vector<Placement> placements = placements_;
    if (placements.empty()) placements.assign(mesh.ndim(), Replicate{});
    check_no_mixed_partials(placements);
    if (rank.is_view(local_) && !rank.layout(local_).is_contiguous()) {
      throw Error(PyErrorType::kNotImplementedError,
                  fmt::format("meshsim models contiguous DTensors only: the local tensor \"{}\" "
                              "is a non-contiguous view (stride ({})), whose strides PyTorch "
                              "would carry into the DTensor's",
                              local_, fmt::join(rank.layout(local_).stride, ", ")));
    }
    const Tensor& local = rank.tensor(local_);
    std::vector<int64_t> shape = local.shape();
    const auto ndim = static_cast<int64_t>(shape.size());
    for (size_t d = 0; d < placements.size(); ++d) {
      // Shard(-1) counts from the local tensor's last dim, before the global shape is known.
      const Placement given = placements[d];
      placements[d] = with_dim_normalized(given, ndim);
      if (!std::holds_alternative<Shard>(given) && !std::holds_alternative<StridedShard>(given))
        continue;
      const int64_t dim = sharded_dim(placements[d]);
      if (dim < 0 || dim >= ndim) {
        throw runtime_error(fmt::format("{} of a {}-d local tensor", placement_name(given), ndim));
      }
      shape[static_cast<size_t>(dim)] *= mesh.size(d);
    }
    if (global_shape_.has_value() != global_stride_.has_value())
      throw runtime_error(shape_without_stride(global_shape_, global_stride_));
    if (global_shape_) shape = *global_shape_;  // PyTorch takes them as given, uneven or not
    DTensorSpec spec{mesh, placements, shape, local.dtype()};
    if (global_stride_ && *global_stride_ != spec.stride()) {
      throw Error(
          PyErrorType::kNotImplementedError,
          fmt::format(
              "meshsim models contiguous DTensors only: stride ({}) is not the row-major stride of "
              "shape ({})",
              fmt::join(*global_stride_, ", "), fmt::join(shape, ", ")));
    }
    if (!mesh.coordinate()) {
      DTensor t = DTensor::zeros(std::move(spec), local.is_meta() ? Tensor::Storage::kMeta
                                                                  : Tensor::Storage::kMaterialized);
      t.set_requires_grad(requires_grad_);
      rank.set_dtensor(name_, std::move(t));
      return;
    }
    Tensor held = local;
    if (run_check_ && check_across_ranks(rank, mesh, placements, held)) {
      rank.write_in_place(local_, held);  // PyTorch broadcasts into the caller's own tensor
    }
    DTensor t = DTensor::from_local_shard(std::move(spec), std::move(held));
    t.set_requires_grad(requires_grad_);
    rank.set_dtensor(name_, std::move(t));
  }
  std::string name_, local_, mesh_;
  std::vector<Placement> placements_;
  bool requires_grad_ = false;
  bool run_check_ = false;
  // shape= and stride= (both or neither, as PyTorch requires).
  std::optional<std::vector<int64_t>> global_shape_, global_stride_;

 private:
  // run_check=True as PyTorch 2.15 runs it on the mesh's members: an all_gather_object over
  // WORLD (not the mesh: ranks outside it never join, so a mesh smaller than the world hangs) of
  // dtype and requires_grad, with the local shape and stride unless both were given; then rank 0
  // of each Replicate dim's group broadcasts its local tensor. Returns whether it broadcast.
  bool check_across_ranks(RankState& rank, const DeviceMesh& mesh,
                          const std::vector<Placement>& placements, Tensor& local) const {
    std::string meta = fmt::format("{} {}", dtype_name(local.dtype()), requires_grad_);
    if (!global_shape_) {
      DTensorSpec contiguous{mesh, {}, local.shape(), local.dtype()};
      meta += fmt::format(" ({}) ({})", fmt::join(local.shape(), ", "),
                          fmt::join(contiguous.stride(), ", "));
    }
    const std::vector<std::string> gathered =
        rank.backend().all_gather_object(meta, rank.group("", ""));
    for (const std::string& other : gathered) {
      if (other != meta) {
        throw value_error(
            "Inconsistent tensor metadata (including shape and stride) across ranks.");
      }
    }
    bool broadcast = false;
    for (size_t d = 0; d < placements.size(); ++d) {
      if (!std::holds_alternative<Replicate>(placements[d])) continue;
      const Group g = rank.mesh_dim_group(mesh, d);
      rank.backend().broadcast(local, g.ranks->front(), g);
      broadcast = true;
    }
    return broadcast;
  }
};

class SaveStep final : public Step {
 public:
  void run(RankState& rank) const override {
    const bool with_names = group_names_.value_or(!rank.decouple_backend_at_save());
    std::string bytes;
    switch (subject_.kind) {
      case SavedFile::Kind::kTensor: {
        const Parameter& value = rank.value(subject_.name);
        const DTensor* t = std::get_if<DTensor>(&value);
        if (t == nullptr) {
          throw runtime_error(
              fmt::format("\"{}\" is a plain tensor; save writes DTensors, meshes and RNG state",
                          subject_.name));
        }
        warn_if_group_names(rank, t->spec().mesh, with_names);
        bytes = seal_dtensor(*t, with_names, format_);
        break;
      }
      case SavedFile::Kind::kMesh:
        warn_if_group_names(rank, rank.mesh(subject_.name), with_names);
        bytes = seal_mesh(rank.mesh(subject_.name), with_names, format_);
        break;
      case SavedFile::Kind::kRng:
        bytes = seal_rng_state(rank.rng().snapshot(), format_);
        break;
    }
    SaveHook hook;
    if (fail_at_) {
      // A full disk while writing, an I/O error anywhere else.
      hook = [point = *fail_at_](SavePoint p, uint64_t) {
        return p != point ? 0 : p == SavePoint::kWrite ? ENOSPC : EIO;
      };
    }
    // Durable only where it outlives the run: a temporary directory is removed at its end.
    const Durability durability =
        rank.checkpoints_kept() ? Durability::kNow : Durability::kByCaller;
    with_stable_errors(
        rank, [&] { write_file_atomically(resolve(rank, path_), bytes, hook, durability); });
  }

  static void warn_if_group_names(RankState& rank, const DeviceMesh& mesh, bool with_names) {
    if (with_names && mesh.has_group_names()) rank.warn(std::string(kGroupNamesSavedWarning));
  }

  Subject subject_;
  std::string path_;
  ArchiveFormat format_ = ArchiveFormat::kBinary;
  std::optional<bool> group_names_;
  std::optional<SavePoint> fail_at_;
};

class LoadStep final : public Step {
 public:
  void run(RankState& rank) const override {
    with_stable_errors(rank, [&] {
      const std::string path = input_dir_.empty()
                                   ? resolve(rank, path_)
                                   : input_dir_ + "/" + with_rank(path_, rank.rank());
      const bool small = subject_.kind != SavedFile::Kind::kTensor;
      // Mapped, not copied: a binary DTensor record's shard is read where the page cache has it.
      const MappedFile file(path, small ? kMaxSmallRecordBytes : kMaxCheckpointFileBytes);
      // Nothing is replaced until the record has been read whole: a failed load leaves the rank
      // as it was.
      try {
        switch (subject_.kind) {
          case SavedFile::Kind::kTensor: {
            DTensor t = open_dtensor_file(file.bytes(), rank.world_size(), strict_);
            check_saver(rank, t.spec().mesh, path, "its shard and coordinate");
            check_group_names(rank, t.spec().mesh);
            rank.set_dtensor(subject_.name, std::move(t));
            break;
          }
          case SavedFile::Kind::kMesh: {
            DeviceMesh m = open_mesh_file(file.bytes(), rank.world_size(), strict_);
            check_saver(rank, m, path, "its coordinate");
            check_group_names(rank, m);
            rank.set_mesh(subject_.name, std::move(m));
            break;
          }
          case SavedFile::Kind::kRng:
            rank.rng().restore(open_rng_state(file.bytes()));
            break;
        }
      } catch (const Error& e) {
        forget_unwound_frames();
        throw Error(e.type(), fmt::format("cannot load {}: {}", file_name(path), e.what()));
      }
    });
  }

  // A file another rank saved: the loaded object keeps that rank's view, as PyTorch's does
  // without a word. A strict load refuses it; any other warns.
  void check_saver(RankState& rank, const DeviceMesh& mesh, const std::string& path,
                   std::string_view kept) const {
    if (mesh.rank() == rank.rank()) return;
    const std::string why = fmt::format(
        "was saved by rank {}, not by the rank loading it: the loaded object keeps "
        "rank {}'s view ({})",
        mesh.rank(), mesh.rank(), kept);
    if (strict_) throw runtime_error("it " + why);  // the load names the file
    rank.warn(fmt::format("{} {}", file_name(path), why));
  }

  // Saved group names that mean other groups here: PyTorch would use them silently.
  void check_group_names(RankState& rank, const DeviceMesh& mesh) const {
    std::vector<std::string> dims;
    for (const DeviceMesh::StaleGroupName& s : mesh.stale_group_names(rank.groups()))
      dims.push_back(s.dim);
    if (dims.empty()) return;
    rank.warn(fmt::format(
        "the DeviceMesh loaded from {} has saved group names that mean other process groups in "
        "this world (dims {}): the world created its groups in a different order. rebind_groups "
        "re-attaches the mesh to its groups by layout",
        path_, fmt::join(dims, ", ")));
  }

  Subject subject_;
  std::string path_;
  std::string input_dir_;  // set for `file`: the scenario's directory
  bool strict_ = false;
};

class ReassignMeshStep final : public Step {
 public:
  void run(RankState& rank) const override {
    rank.dtensor(tensor_).reassign_mesh(rank.mesh(mesh_));
  }
  std::string tensor_, mesh_;
};

class RebindGroupsStep final : public Step {
 public:
  void run(RankState& rank) const override {
    DeviceMesh m = rank.mesh(mesh_).without_group_names();
    m.rebind_groups(rank.groups());
    rank.set_mesh(mesh_, std::move(m));
  }
  std::string mesh_;
};

// `corrupt_file = { path, flip_byte = N }` or `{ path, truncate_to = N }`: damage a file in place
// (byte offsets from the start; a negative one counts from the end).
class CorruptFileStep final : public Step {
 public:
  void run(RankState& rank) const override {
    // A file every rank shares is damaged once (two flips of one byte would undo each other).
    if (path_.find("{rank}") == std::string::npos && rank.rank() != 0) return;
    with_stable_errors(rank, [&] { damage(resolve(rank, path_)); });
  }

  void damage(const std::string& path) const {
    std::string bytes = read_file_bounded(path, kMaxCheckpointFileBytes);
    const auto size = static_cast<int64_t>(bytes.size());
    const int64_t at = offset_ < 0 ? size + offset_ : offset_;
    if (at < 0 || at > size || (flip_ && at == size)) {
      throw Error(PyErrorType::kIndexError,
                  fmt::format("byte {} is outside {} ({} bytes)", offset_, file_name(path), size));
    }
    if (flip_) {
      bytes[static_cast<size_t>(at)] = static_cast<char>(bytes[static_cast<size_t>(at)] ^ 0xff);
    } else {
      bytes.resize(static_cast<size_t>(at));
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw runtime_error(fmt::format("cannot rewrite {}", file_name(path)));
  }
  std::string path_;
  bool flip_ = true;
  int64_t offset_ = 0;
};

std::unique_ptr<Step> parse_save(const toml::node& value, const toml::table&, LoadContext& ctx) {
  const toml::table& args = ctx.table_of(value, "save");
  if (args.get("checkpoint")) return parse_world_save(args, ctx);
  ctx.only_keys(args, {"tensor", "mesh", "rng", "path", "format", "group_names", "fail_at"},
                "save");
  auto step = std::make_unique<SaveStep>();
  step->subject_ = subject_of(args, ctx, "save");
  step->path_ = path_pattern_of(ctx.require(args, "path", "save"), ctx);
  if (const toml::node* f = args.get("format")) step->format_ = format_of(*f, ctx);
  if (const toml::node* g = args.get("group_names"))
    step->group_names_ = ctx.boolean_of(*g, "group_names");
  if (const toml::node* f = args.get("fail_at")) step->fail_at_ = save_point_of(*f, ctx);
  SavedFile saved{step->subject_.kind, {}};
  switch (step->subject_.kind) {
    case SavedFile::Kind::kTensor:
      if (!ctx.has_tensor(step->subject_.name)) {
        ctx.fail(*args.get("tensor"),
                 fmt::format("no tensor \"{}\" is set before this", step->subject_.name));
      }
      break;
    case SavedFile::Kind::kMesh:
      saved.mesh = ctx.require_mesh(*args.get("mesh"), step->subject_.name);
      break;
    case SavedFile::Kind::kRng:
      break;
  }
  ctx.declare_saved_file(step->path_, saved);
  return step;
}

constexpr EnumName<SavedFile::Kind> kSavedFileKindNames[] = {
    {SavedFile::Kind::kTensor, "a DTensor"},
    {SavedFile::Kind::kMesh, "a mesh"},
    {SavedFile::Kind::kRng, "RNG state"},
};

std::string_view kind_name(SavedFile::Kind kind) {
  return name_in(kSavedFileKindNames, kind);
}

// A file that ships beside the scenario (`file = "checkpoints/m-{rank}.ckpt"`), written by an
// earlier job: rank 0's is read now, so that later steps know what it holds.
SavedFile input_file_of(const toml::node& node, const LoadContext& ctx, const std::string& pattern,
                        const std::string& dir, SavedFile::Kind kind) {
  const std::string path = dir + "/" + with_rank(pattern, 0);
  SavedFile out{kind, {}};
  try {
    const std::string bytes = read_file_bounded(path, kMaxCheckpointFileBytes);
    if (kind == SavedFile::Kind::kMesh) {
      const DeviceMesh mesh = open_mesh_file(bytes, ctx.world_size(), false);
      out.mesh.ndim = mesh.ndim();
      out.mesh.dims = mesh.dim_names().value_or(std::vector<std::string>{});
    } else if (kind == SavedFile::Kind::kTensor) {
      open_dtensor_file(bytes, ctx.world_size(), false);
    } else {
      open_rng_state(bytes);
    }
  } catch (const Error& e) {
    ctx.fail(node,
             fmt::format("cannot use {} (rank 0's file): {}", with_rank(pattern, 0), e.what()));
  }
  return out;
}

std::unique_ptr<Step> parse_load(const toml::node& value, const toml::table&, LoadContext& ctx) {
  const toml::table& args = ctx.table_of(value, "load");
  if (args.get("checkpoint") || args.get("checkpoint_dir")) return parse_world_load(args, ctx);
  ctx.only_keys(args, {"tensor", "mesh", "rng", "path", "file", "strict"}, "load");
  auto step = std::make_unique<LoadStep>();
  step->subject_ = subject_of(args, ctx, "load");
  if (const toml::node* s = args.get("strict")) step->strict_ = ctx.boolean_of(*s, "strict");
  const toml::node* path = args.get("path");
  const toml::node* file = args.get("file");
  if ((path == nullptr) == (file == nullptr)) {
    throw InputError(ctx.at(args.source()),
                     "load takes path (a file a save step of this run wrote) or file (one "
                     "shipped beside the scenario)");
  }
  SavedFile saved;
  if (path != nullptr) {
    step->path_ = path_pattern_of(*path, ctx);
    const SavedFile* found = ctx.saved_file(step->path_);
    if (found == nullptr) {
      ctx.fail(*path, fmt::format("no save step before this writes \"{}\" (loads read the "
                                  "run's own checkpoint directory; file = reads one shipped "
                                  "beside the scenario)",
                                  step->path_));
    }
    saved = *found;
  } else {
    step->path_ = ctx.string_of(*file, "file");
    if (!plain_relative_path(step->path_, true)) {
      ctx.fail(*file,
               "file is a path relative to the scenario's directory, of names made of "
               "letters, digits, '.', '_' and '-', with {rank} for the rank");
    }
    step->input_dir_ = std::filesystem::path(ctx.file()).parent_path().string();
    if (step->input_dir_.empty()) step->input_dir_ = ".";
    saved = input_file_of(*file, ctx, step->path_, step->input_dir_, step->subject_.kind);
  }
  if (saved.kind != step->subject_.kind) {
    ctx.fail(*path, fmt::format("\"{}\" holds {}, not {}", step->path_, kind_name(saved.kind),
                                kind_name(step->subject_.kind)));
  }
  if (saved.kind == SavedFile::Kind::kMesh) {
    LoadContext::MeshInfo info = saved.mesh;
    info.root = step->subject_.name;  // a loaded mesh starts a family of its own
    ctx.declare_mesh(step->subject_.name, info);
  } else if (saved.kind == SavedFile::Kind::kTensor) {
    ctx.declare_tensor(step->subject_.name);
  }
  return step;
}

}  // namespace

void register_checkpoint_steps(StepRegistry& r) {
  r.add("decouple_backend_at_save", "true | false",
        "later saves leave out process group names (PyTorch's switch; off by default)",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          auto step = std::make_unique<DecoupleStep>();
          step->on_ = ctx.boolean_of(value, "decouple_backend_at_save");
          return step;
        });
  r.add("from_local",
        "{ name, local = \"tensor\", mesh, placements, requires_grad, run_check, shape, stride }",
        "DTensor.from_local",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          const toml::table& args = ctx.table_of(value, "from_local");
          ctx.only_keys(args,
                        {"name", "local", "mesh", "placements", "requires_grad", "run_check",
                         "shape", "stride"},
                        "from_local");
          auto step = std::make_unique<FromLocalStep>();
          step->name_ = ctx.string_of(ctx.require(args, "name", "from_local"), "name");
          step->local_ = ctx.tensor_name(args, "local", "from_local");
          // The DTensor has as many dims as its local shard.
          const std::optional<size_t> ndim = ctx.tensor_facts(step->local_).ndim;
          MeshPlacements layout = mesh_placements_of(args, "from_local", ctx, ndim);
          step->mesh_ = std::move(layout.mesh);
          step->placements_ = std::move(layout.placements);
          if (const toml::node* g = args.get("requires_grad"))
            step->requires_grad_ = ctx.boolean_of(*g, "requires_grad");
          if (const toml::node* c = args.get("run_check"))
            step->run_check_ = ctx.boolean_of(*c, "run_check");
          const toml::node* shape = args.get("shape");
          const toml::node* stride = args.get("stride");
          // PyTorch tests `if shape and stride`: an empty list counts as not given.
          if (shape != nullptr) step->global_shape_ = ctx.integers_of(*shape, "shape");
          if (stride != nullptr) step->global_stride_ = ctx.integers_of(*stride, "stride");
          if (step->global_shape_ && step->global_shape_->empty()) step->global_shape_.reset();
          if (step->global_stride_ && step->global_stride_->empty()) step->global_stride_.reset();
          if (step->global_shape_.has_value() != step->global_stride_.has_value() &&
              !ctx.entry_raises()) {
            ctx.fail(args, shape_without_stride(step->global_shape_, step->global_stride_) +
                               " (RuntimeError in PyTorch)");
          }
          if (step->global_shape_ && step->global_stride_ &&
              step->global_shape_->size() != step->global_stride_->size())
            ctx.fail(args, "shape and stride need one entry per dim each");
          if (step->global_shape_ && ndim && step->global_shape_->size() != *ndim)
            ctx.fail(*shape, fmt::format("shape has {} dims; the local tensor has {}",
                                         step->global_shape_->size(), *ndim));
          ctx.declare_tensor(step->name_, {ndim, step->mesh_});
          return step;
        });
  r.add("save",
        "{ tensor | mesh | rng = true, path = \"x-{rank}.ckpt\", format = \"binary\" | \"text\" "
        "| \"xml\", group_names, fail_at } or { checkpoint = \"step1\", tensors = [...], format }",
        "write a checkpoint record, or a whole-world checkpoint", parse_save);
  r.add("load",
        "{ tensor | mesh | rng = true, path (this run's) | file (beside the scenario), strict } "
        "or { checkpoint, tensor, from, mesh, placements }",
        "read a record, or one tensor of a checkpoint, resharded", parse_load);
  r.add("reassign_mesh", "{ tensor, mesh }", "dtensor._spec.mesh = mesh (the meshes must be equal)",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          const toml::table& args = ctx.table_of(value, "reassign_mesh");
          ctx.only_keys(args, {"tensor", "mesh"}, "reassign_mesh");
          auto step = std::make_unique<ReassignMeshStep>();
          step->tensor_ = ctx.tensor_name(args, "tensor", "reassign_mesh");
          const toml::node& mesh = ctx.require(args, "mesh", "reassign_mesh");
          step->mesh_ = ctx.string_of(mesh, "mesh");
          ctx.require_mesh(mesh, step->mesh_);
          return step;
        });
  r.add("rebind_groups", "\"mesh\"", "re-attach a mesh to this world's process groups by layout",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          auto step = std::make_unique<RebindGroupsStep>();
          step->mesh_ = ctx.string_of(value, "rebind_groups");
          ctx.require_mesh(value, step->mesh_);
          return step;
        });
  r.add("corrupt_file", "{ path, flip_byte = N } or { path, truncate_to = N }",
        "damage a checkpoint file",
        [](const toml::node& value, const toml::table&, LoadContext& ctx) -> std::unique_ptr<Step> {
          const toml::table& args = ctx.table_of(value, "corrupt_file");
          ctx.only_keys(args, {"path", "flip_byte", "truncate_to"}, "corrupt_file");
          auto step = std::make_unique<CorruptFileStep>();
          step->path_ = path_pattern_of(ctx.require(args, "path", "corrupt_file"), ctx);
          const toml::node* flip = args.get("flip_byte");
          const toml::node* cut = args.get("truncate_to");
          if ((flip == nullptr) == (cut == nullptr)) {
            throw InputError(ctx.at(args.source()),
                             "corrupt_file takes one of flip_byte and truncate_to");
          }
          step->flip_ = flip != nullptr;
          step->offset_ = ctx.integer_of(flip ? *flip : *cut, flip ? "flip_byte" : "truncate_to");
          return step;
        });
}

}  // namespace meshsim::sim
