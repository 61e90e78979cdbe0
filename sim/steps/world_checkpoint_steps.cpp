// Whole-world checkpoints in scenarios, as torch.distributed.checkpoint saves and loads them:
// `save = { checkpoint, tensors, rng }` writes every rank's own state dict into one checkpoint,
// and `load = { checkpoint | checkpoint_dir, ... }` reads one back (from this run's save, or from
// a directory an earlier job wrote) into the tensors each rank holds, or as a new DTensor on any
// mesh and placements. Both are collective over WORLD, or over the group given (`group = ...`),
// whose rank 0 coordinates and whose ranks number the files.
#include <filesystem>

#include <fmt/format.h>

#include "sim/run/rank_state.hpp"
#include "sim/runtime/group_label.hpp"
#include "sim/scenario/name_template.hpp"
#include "sim/steps/checkpoint_step_support.hpp"
#include "sim/steps/group_operand.hpp"
#include "sim/steps/step_kinds.hpp"
#include "src/io/checkpoint_plan.hpp"
#include "src/io/dcp_load.hpp"
#include "src/io/dcp_write.hpp"
#include "src/io/world_checkpoint.hpp"

namespace meshsim::sim {

namespace {

// Failing ranks whose exception a CheckpointException's text shows (the first ones; it lists
// every failing rank).
constexpr size_t kFailuresShown = 4;

// "world.spmd#1 [4-7]": the group a checkpoint call runs over, as reports name it (made once per
// group: listing the members costs as much as the group is large).
const std::string& describe_group(RankState& rank, const Group& group) {
  return rank.checkpoint_exchange().group_label(group, [&] {
    return label_with_members(group_label(&rank.groups().table(), group.id, group.name),
                              *group.ranks);
  });
}

// One rank's part in a collective checkpoint call, run in phases as DCP runs it (plan, then
// write or read, then finish). Each phase ends in an all_reduce over the call's group that tells
// every member whether any failed, so a rank that skips the call leaves the others waiting (a
// hang, as in PyTorch) and a failure on one rank fails the call on all of them.
class CollectiveCall {
 public:
  // `what` names the call ("save of checkpoint \"step1\""); a call over a group other than WORLD
  // says which group.
  CollectiveCall(RankState& rank, Group group, std::string what)
      : rank_(rank),
        group_(std::move(group)),
        world_(group_.id == rank.group("", "").id),
        what_(world_ ? std::move(what)
                     : fmt::format("{} over {}", what, describe_group(rank, group_))),
        slot_(rank.checkpoint_exchange().next_slot(group_)) {
    slot_.calls[static_cast<size_t>(group_.position)] = what_;
  }
  ~CollectiveCall() { rank_.checkpoint_exchange().finish(group_); }
  CollectiveCall(const CollectiveCall&) = delete;
  CollectiveCall& operator=(const CollectiveCall&) = delete;

  CheckpointExchange::Slot& slot() { return slot_; }
  // Errors name `path` as `shown`: a checkpoint from elsewhere as the scenario spells it, so that
  // a report does not depend on the directory meshsim runs in.
  void show_path_as(std::string path, std::string shown) {
    shown_as_ = {std::move(path), std::move(shown)};
  }
  bool coordinator() const { return group_.position == 0; }
  const Group& group() const { return group_; }
  const std::string& what() const { return what_; }

  // Runs `body` on this rank, then meets the others. Throws CheckpointException on every rank
  // when any rank's body threw, naming the ranks and the first failure, as DCP does.
  template <typename Body>
  void phase(Body&& body) {
    bool failed_here = false;
    const auto fail = [&](Error e) {
      forget_unwound_frames();  // ASan: this catch runs on a fiber stack
      e = stable_error(rank_, e);
      if (!shown_as_.first.empty()) {
        std::string text = e.what();
        replace_all(text, shown_as_.first, shown_as_.second);
        e = Error(e.type(), std::move(text));
      }
      slot_.failures.emplace(group_.position, std::move(e));
      failed_here = true;
    };
    // Whatever a body throws must reach the meeting, or the other ranks would wait forever.
    try {
      body();
    } catch (const Error& e) {
      fail(e);
    } catch (const std::bad_alloc&) {
      fail(Error(PyErrorType::kMemoryError, "out of memory"));
    } catch (const std::exception& e) {
      fail(runtime_error(e.what()));
    }
    Tensor failed = Tensor::full({1}, failed_here ? 1 : 0, DType::kInt64);
    rank_.backend().all_reduce(failed, ReduceOp::kMax, group_);
    if (failed.get_int(0) != 0) throw failure();
    if (!met_) check_same_calls();
    met_ = true;
  }

 private:
  // Once every rank has arrived, each learns whether all are in the same call (a rank that
  // skipped one save would otherwise meet the others in its next checkpoint call); the first to
  // ask compares them, once for all.
  void check_same_calls() const {
    if (!slot_.calls_differ) {
      slot_.calls_differ.emplace();
      for (size_t r = 1; r < slot_.calls.size(); ++r) {
        if (slot_.calls[r] == slot_.calls[0]) continue;
        const auto call = [](const std::string& c) {
          return c.empty() ? std::string("a collective of another step") : "the " + c;
        };
        *slot_.calls_differ = fmt::format(
            "rank {} is in {} where rank {} is in {}: every rank must make the same checkpoint "
            "calls in the same order, naming the same checkpoint",
            (*group_.ranks)[r], call(slot_.calls[r]), group_.ranks->front(), call(slot_.calls[0]));
        break;
      }
    }
    if (!slot_.calls_differ->empty()) throw runtime_error(*slot_.calls_differ);
  }

  Error failure() const {
    if (slot_.failures.empty()) {
      return Error(PyErrorType::kCheckpointException,
                   fmt::format("{} failed on another rank", what_));
    }
    // DCP's text starts "ranks:dict_keys([...])" (ranks in the call's group) and gives each
    // failing rank's exception after a traceback; here each rank's exception follows "(RANK r)",
    // with its global rank when the group is not WORLD.
    std::vector<int64_t> ranks;
    std::string each;
    for (const auto& [r, e] : slot_.failures) {
      ranks.push_back(r);
      const std::string who = world_ ? fmt::format("RANK {}", r)
                                     : fmt::format("RANK {}, global rank {}", r,
                                                   (*group_.ranks)[static_cast<size_t>(r)]);
      if (ranks.size() <= kFailuresShown)
        each += fmt::format("\n({}) {}: {}", who, py_error_type_name(e.type()), e.what());
    }
    if (ranks.size() > kFailuresShown)
      each += fmt::format("\n... and {} more ranks", ranks.size() - kFailuresShown);
    return Error(
        PyErrorType::kCheckpointException,
        fmt::format("ranks:dict_keys([{}]) in the {}{}", fmt::join(ranks, ", "), what_, each));
  }

  RankState& rank_;
  Group group_;
  bool world_;
  std::string what_;
  CheckpointExchange::Slot& slot_;
  bool met_ = false;
  std::pair<std::string, std::string> shown_as_;
};

// What a rank that skips a save or load does not call: the first meeting, over the call's group.
class WorldCollectiveStep : public Step {
 public:
  bool communicates() const override { return true; }
  std::optional<PlannedCall> planned_call(const RankState& rank) const override {
    PlannedCall call{CollectiveOp::kAllReduce, -1, -1};
    // A rank outside the group (it rightly skips a save over another stage's group) has none.
    try {
      call.group_id = group_.on(rank).id;
    } catch (const std::exception&) {
    }
    return call;
  }

  GroupOperand group_;  // WORLD unless the step names a group
};

// torch.Size's repr, as DCP's messages show shapes.
std::string torch_size(const std::vector<int64_t>& shape) {
  return fmt::format("torch.Size([{}])", fmt::join(shape, ", "));
}

// The rank's default CUDA generator as torch.cuda.get_rng_state() gives it: 16 bytes.
Tensor generator_state(const PhiloxState& state) {
  const std::vector<uint8_t> bytes = state.to_bytes();
  Tensor out({static_cast<int64_t>(bytes.size())}, DType::kUInt8);
  std::memcpy(out.mutable_bytes().data(), bytes.data(), bytes.size());
  return out;
}

// `save = { checkpoint = "step1", tensors = ["w", ...], rng = "key", format }`: meshsim's own
// records (format = binary, text or xml) or PyTorch's DCP layout (format = "dcp"). Each rank's
// state dict is the listed tensors it holds (a name it does not hold is not in it) and, with `rng`,
// its generator state under that key. Phases: every rank plans its chunks; the coordinator merges
// the plans (one writer per replicated chunk); every rank writes its shard file; the coordinator
// writes the metadata. No rank reads a checkpoint before it is whole.
class WorldSaveStep final : public WorldCollectiveStep {
 public:
  void run(RankState& rank) const override {
    const std::string checkpoint = name_.resolve(rank);
    CollectiveCall call(rank, group_.on(rank),
                        fmt::format("save of checkpoint \"{}\"", checkpoint));
    CheckpointExchange::Slot& slot = call.slot();
    const size_t me = static_cast<size_t>(call.group().position);
    std::string dir;
    Tensor rng_state;
    call.phase([&] {
      dir = resolve(rank, checkpoint);
      std::vector<StateDictEntry> entries;
      for (const std::string& name : tensors_) {
        const Parameter* value = rank.find_value(name);
        if (value == nullptr) continue;
        if (const DTensor* d = std::get_if<DTensor>(value)) {
          entries.push_back({name, nullptr, d});
        } else {
          entries.push_back({name, &std::get<Tensor>(*value), nullptr});
        }
      }
      if (rng_) {
        rng_state = generator_state(rank.rng().default_generator());
        entries.push_back({rng_->resolve(rank), &rng_state, nullptr});
      }
      slot.plans[me] = plan_local_save(call.group().position, entries);
      slot.plans[me].global_rank = rank.rank();
    });
    call.phase([&] {
      if (!call.coordinator()) return;
      slot.merged = plan_global_save(slot.plans);
      slot.merged.metadata.save_id =
          checkpoint_save_id(slot.merged.metadata, checkpoint, slot.merged.values_digest);
    });
    if (call.coordinator()) {
      for (const std::string& w : slot.merged.warnings)
        rank.warn(fmt::format("checkpoint \"{}\": {}", checkpoint, w));
      if (const auto both = rank.checkpoint_exchange().claim_directory(
              dir, call.group(), describe_group(rank, call.group()))) {
        rank.warn(fmt::format(
            "checkpoint \"{}\": the saves over {} and over {} write into one directory: each "
            "names its files by group rank and writes the metadata, so they replace each "
            "other's files in the order their ranks write, and a load finds one save's metadata "
            "beside files of both (Distributed Checkpoint does this silently: give each group its "
            "own checkpoint)",
            checkpoint, both->first, both->second));
      }
    }
    call.phase([&] {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) throw runtime_error(fmt::format("cannot create {}: {}", dir, ec.message()));
      if (dcp_layout_) {
        slot.dcp_written[me] =
            save_dcp_shard(dir, slot.plans[me], slot.merged.writes[me], Durability::kByCaller);
        slot.files[me] = (std::filesystem::path(dir) / dcp_data_file_name(me)).string();
      } else {
        slot.files[me] =
            save_checkpoint_shard(dir, slot.plans[me], slot.merged.metadata, slot.merged.writes[me],
                                  format_, Durability::kByCaller);
      }
    });
    call.phase([&] {
      if (!call.coordinator()) return;
      // A checkpoint kept on disk: every shard made durable in one pass, then its directories,
      // then the metadata that makes it whole. One in the run's temporary directory needs none.
      const bool kept = rank.checkpoints_kept();
      if (kept) {
        const std::string directories[] = {dir, std::filesystem::path(dir).parent_path().string()};
        make_durable(slot.files, directories);
      }
      const Durability durability = kept ? Durability::kNow : Durability::kByCaller;
      if (dcp_layout_) {
        save_dcp_metadata(dir, slot.merged.metadata, slot.plans, slot.dcp_written, checkpoint,
                          durability);
      } else {
        save_checkpoint_metadata(dir, slot.merged.metadata, format_, durability);
      }
    });
  }

  NameTemplate name_;
  std::vector<std::string> tensors_;
  std::optional<NameTemplate> rng_;
  // PyTorch's DCP layout (`format = "dcp"`), or meshsim's own records in `format_`.
  bool dcp_layout_ = false;
  ArchiveFormat format_ = ArchiveFormat::kBinary;
};

// A saved tensor of either layout a load reads: meshsim's own metadata record, or a DCP
// directory written by PyTorch (docs/checkpoints.md).
class SavedEntry {
 public:
  SavedEntry() = default;
  explicit SavedEntry(const CheckpointTensor* own) : own_(own) {}
  explicit SavedEntry(const DcpEntry* dcp) : dcp_(dcp) {}

  bool found() const { return own_ != nullptr || dcp_ != nullptr; }
  const std::vector<int64_t>& shape() const { return own_ != nullptr ? own_->shape : dcp_->shape; }
  // A DCP entry of a dtype meshsim does not have (or an object) cannot be loaded: said here, in
  // the planning phase, as DCP's own checks fail there.
  DType dtype() const {
    if (own_ != nullptr) return own_->dtype;
    if (!dcp_->is_tensor) {
      throw runtime_error(
          fmt::format("'{}' is an object in the checkpoint, not a tensor", dcp_->name));
    }
    if (!dcp_->dtype) {
      throw runtime_error(fmt::format("'{}' was saved as {}, which meshsim does not have",
                                      dcp_->name, dcp_->dtype_name));
    }
    return *dcp_->dtype;
  }
  const CheckpointTensor* own() const { return own_; }
  const DcpEntry* dcp() const { return dcp_; }

 private:
  const CheckpointTensor* own_ = nullptr;
  const DcpEntry* dcp_ = nullptr;
};

struct SavedCheckpoint {
  std::string dir;
  std::shared_ptr<const CheckpointMetadata> own;
  std::shared_ptr<const DcpMetadata> dcp;

  SavedEntry find(const std::string& name) const {
    if (own) return SavedEntry(find_tensor(*own, name));
    const DcpEntry* entry = find_dcp_entry(*dcp, name);
    return entry != nullptr ? SavedEntry(entry) : SavedEntry();
  }
  // `slot` shares each tensor's chunk lookup among the ranks of the load.
  DTensor load(const SavedEntry& entry, const DeviceMesh& mesh, std::vector<Placement> placements,
               CheckpointExchange::Slot& slot) const {
    if (entry.own() != nullptr) {
      std::shared_ptr<const ChunkLookup>& lookup = slot.chunk_lookups[entry.own()->name];
      if (!lookup) lookup = std::make_shared<const ChunkLookup>(chunk_lookup(*entry.own()));
      return load_world_tensor(dir, *entry.own(), mesh, placements, lookup.get());
    }
    return load_dcp_dtensor(dir, *entry.dcp(), mesh, std::move(placements));
  }
  Tensor load_whole(const SavedEntry& entry) const {
    if (entry.own() != nullptr) return load_whole_tensor(dir, *entry.own());
    return load_dcp_tensor(dir, *entry.dcp());
  }
};

bool is_dcp_checkpoint(const std::string& dir) {
  std::error_code error;  // unreadable: not DCP, and the own-format reader says why
  return std::filesystem::exists(std::filesystem::path(dir) / kDcpMetadataFileName, error);
}

// `load = { checkpoint = "step1" | checkpoint_dir = "dir", ... }` in one of two forms:
// - `tensors = ["w", ...]` and/or `rng = "key"`: DCP's load into this rank's state dict (the
//   listed tensors it holds, each keeping its mesh and placements; the generator state), which
//   fails as DCP fails for a name the checkpoint lacks or a shape that differs;
// - `tensor = "w2", from = "w", mesh, placements`: one saved tensor as a new DTensor.
// Phases: the coordinator reads the metadata; every rank checks its state dict against it
// (DCP's local plan); every rank reads its data. Values change only once every rank has read.
class WorldLoadStep final : public WorldCollectiveStep {
 public:
  void run(RankState& rank) const override {
    const std::string label = name_.resolve(rank);
    CollectiveCall call(rank, group_.on(rank), fmt::format("load of checkpoint \"{}\"", label));
    CheckpointExchange::Slot& slot = call.slot();
    std::string dir;
    if (!in_run_) {
      dir = (std::filesystem::path(scenario_dir_) / label).string();
      call.show_path_as(dir, label);
    }
    call.phase([&] {
      if (in_run_) dir = resolve(rank, label);
      if (!call.coordinator()) return;
      if (is_dcp_checkpoint(dir)) {
        slot.dcp_metadata = std::make_shared<const DcpMetadata>(load_dcp_metadata(dir));
      } else {
        slot.metadata = std::make_shared<const CheckpointMetadata>(load_checkpoint_metadata(dir));
      }
    });
    const SavedCheckpoint checkpoint{dir, slot.metadata, slot.dcp_metadata};
    // What this rank loads: (its name, the saved entry), checked against the metadata.
    std::vector<std::pair<std::string, SavedEntry>> wanted;
    SavedEntry rng_entry;
    call.phase([&] {
      const auto saved = [&](const std::string& key) {
        const SavedEntry entry = checkpoint.find(key);
        if (!entry.found())
          throw runtime_error(fmt::format("Missing key in checkpoint state_dict: {}.", key));
        return entry;
      };
      const auto check_size = [&](const std::string& key, const SavedEntry& entry,
                                  const std::vector<int64_t>& shape, DType dtype) {
        const DType saved_dtype = entry.dtype();  // refuses an object or an unknown dtype first
        if (entry.shape() != shape) {
          throw value_error(fmt::format("Size mismatch between saved {} and current: {} for {}",
                                        torch_size(entry.shape()), torch_size(shape), key));
        }
        if (saved_dtype != dtype) {
          throw runtime_error(fmt::format(
              "'{}' was saved as {} and this rank holds it as {}: PyTorch would convert it "
              "silently as it copies; meshsim refuses",
              key, dtype_name(entry.dtype()), dtype_name(dtype)));
        }
      };
      if (!tensor_.empty()) wanted.emplace_back(tensor_, saved(from_));
      for (const std::string& name : tensors_) {
        const Parameter* value = rank.find_value(name);
        if (value == nullptr) continue;
        const SavedEntry entry = saved(name);
        if (const DTensor* d = std::get_if<DTensor>(value)) {
          check_size(name, entry, d->spec().shape, d->spec().dtype);
        } else {
          const Tensor& t = std::get<Tensor>(*value);
          check_size(name, entry, t.shape(), t.dtype());
        }
        wanted.emplace_back(name, entry);
      }
      if (rng_) {
        const std::string key = rng_->resolve(rank);
        rng_entry = saved(key);
        check_size(key, rng_entry, {16}, DType::kUInt8);
      }
    });
    std::vector<Parameter> values;
    std::optional<PhiloxState> generator;
    call.phase([&] {
      for (const auto& [name, entry] : wanted) {
        if (name == tensor_) {
          const DeviceMesh& mesh = rank.mesh(mesh_);
          std::vector<Placement> placements = placements_;
          if (placements.empty()) placements.assign(mesh.ndim(), Replicate{});
          values.emplace_back(checkpoint.load(entry, mesh, placements, slot));
        } else if (const DTensor* d = std::get_if<DTensor>(&rank.value(name))) {
          values.emplace_back(checkpoint.load(entry, d->spec().mesh, d->spec().placements, slot));
        } else {
          values.emplace_back(checkpoint.load_whole(entry));
        }
      }
      if (rng_) {
        const Tensor state = checkpoint.load_whole(rng_entry);
        const auto* bytes = reinterpret_cast<const uint8_t*>(state.bytes().data());
        generator = PhiloxState::from_bytes({bytes, state.bytes().size()});
      }
    });
    // As DCP copies into the state dict's tensors: a DTensor keeps its requires_grad, and a plain
    // tensor's storage is written, so views of it (or the base of a view) see the values.
    for (size_t i = 0; i < wanted.size(); ++i) {
      const std::string& name = wanted[i].first;
      if (DTensor* d = std::get_if<DTensor>(&values[i])) {
        if (name != tensor_) d->set_requires_grad(rank.dtensor(name).requires_grad());
        rank.set_dtensor(name, std::move(*d));
      } else {
        rank.write_in_place(name, std::get<Tensor>(values[i]));
      }
    }
    if (generator) {
      RankRng::Snapshot snapshot = rank.rng().snapshot();
      snapshot.default_generator = *generator;
      rank.rng().restore(snapshot);
    }
  }

  // The checkpoint as the scenario names it: a save of this run (in_run_), or a directory an
  // earlier job wrote, relative to the scenario's directory.
  bool in_run_ = true;
  NameTemplate name_;
  std::string scenario_dir_;
  std::string tensor_, from_, mesh_;
  std::vector<Placement> placements_;
  std::vector<std::string> tensors_;
  std::optional<NameTemplate> rng_;
};

// A checkpoint of this run: one directory in the run's checkpoint directory, its name written with
// expressions of the rank in braces where ranks save different checkpoints ("step1-pp{coord(world,
// pp)}": one per pipeline stage, each saved over its stage's group).
NameTemplate checkpoint_name_of(const toml::node& node, LoadContext& ctx) {
  NameTemplate name = NameTemplate::parse(node, ctx, "checkpoint");
  if (!plain_relative_path(name.with_expressions_as("0"), false)) {
    ctx.fail(node,
             "a checkpoint is named by letters, digits, '.', '_' and '-' (one directory), with "
             "expressions of the rank in braces where ranks save different checkpoints");
  }
  return name;
}

// The directory of the scenario `ctx` reads, where checkpoints written by earlier jobs are found.
std::string scenario_dir_of(const LoadContext& ctx) {
  std::filesystem::path dir = std::filesystem::path(ctx.file()).parent_path();
  return dir.empty() ? std::string(".") : dir.string();
}

// A checkpoint an earlier job wrote: a directory relative to the scenario's, with expressions of
// the rank in braces where ranks load different ones (one per pipeline stage). One the same on
// every rank is read now, so that a missing or damaged checkpoint fails at its line.
NameTemplate checkpoint_dir_of(const toml::node& node, LoadContext& ctx) {
  NameTemplate path = NameTemplate::parse(node, ctx, "checkpoint_dir");
  if (!plain_relative_path(path.with_expressions_as("0"), true)) {
    ctx.fail(node,
             "checkpoint_dir is a directory relative to the scenario's, of names made of "
             "letters, digits, '.', '_' and '-', with expressions of the rank in braces where "
             "ranks load different checkpoints");
  }
  if (!path.constant()) return path;
  const std::string full = (std::filesystem::path(scenario_dir_of(ctx)) / path.text()).string();
  try {
    if (is_dcp_checkpoint(full)) {
      load_dcp_metadata(full);
    } else {
      load_checkpoint_metadata(full);
    }
  } catch (const Error& e) {
    ctx.fail(node, fmt::format("cannot use the checkpoint in {}: {}", path.text(), e.what()));
  }
  return path;
}

}  // namespace

std::unique_ptr<Step> parse_world_save(const toml::table& args, LoadContext& ctx) {
  ctx.only_keys(args, {"checkpoint", "tensors", "rng", "format", "group"}, "save of a checkpoint");
  auto step = std::make_unique<WorldSaveStep>();
  step->name_ = checkpoint_name_of(*args.get("checkpoint"), ctx);
  step->group_ = group_operand(args, ctx);
  if (const toml::node* tensors = args.get("tensors")) {
    step->tensors_ = ctx.strings_of(*tensors, "tensors");
    for (const std::string& t : step->tensors_) {
      if (!ctx.has_tensor(t))
        ctx.fail(*tensors, fmt::format("no tensor \"{}\" is set before this", t));
    }
  }
  if (const toml::node* rng = args.get("rng")) step->rng_ = NameTemplate::parse(*rng, ctx, "rng");
  if (step->tensors_.empty() && !step->rng_) {
    throw InputError(ctx.at(args.source()),
                     "a checkpoint holds tensors (tensors = [...]), the generator state "
                     "(rng = \"key\"), or both");
  }
  if (const toml::node* f = args.get("format")) {
    const std::string text = ctx.string_of(*f, "format");
    step->dcp_layout_ = text == "dcp";
    if (!step->dcp_layout_ && !value_in(kArchiveFormatNames, text)) {
      ctx.fail(*f, fmt::format("unknown checkpoint format \"{}\" (binary, text or xml: meshsim's "
                               "own records; dcp: PyTorch's torch.distributed.checkpoint layout)",
                               text));
    }
    if (!step->dcp_layout_) step->format_ = format_of(*f, ctx);
  }
  ctx.declare_checkpoint(step->name_.text(), step->tensors_);
  return step;
}

std::unique_ptr<Step> parse_world_load(const toml::table& args, LoadContext& ctx) {
  ctx.only_keys(args,
                {"checkpoint", "checkpoint_dir", "tensor", "from", "mesh", "placements", "tensors",
                 "rng", "group"},
                "load of a checkpoint");
  auto step = std::make_unique<WorldLoadStep>();
  step->group_ = group_operand(args, ctx);
  const toml::node* name = args.get("checkpoint");
  const toml::node* dir = args.get("checkpoint_dir");
  if ((name == nullptr) == (dir == nullptr)) {
    throw InputError(ctx.at(args.source()),
                     "a load of a checkpoint takes checkpoint (a save of this run) or "
                     "checkpoint_dir (a directory beside the scenario, written by an earlier job)");
  }
  // The names a save of this run wrote (nullptr for a checkpoint from elsewhere: its names are
  // checked when the load runs, and fail as DCP fails).
  const std::vector<std::string>* saved = nullptr;
  if (name != nullptr) {
    step->name_ = checkpoint_name_of(*name, ctx);
    saved = ctx.checkpoint(step->name_.text());
    if (saved == nullptr) {
      ctx.fail(*name, fmt::format("no save step before this writes the checkpoint \"{}\" "
                                  "(checkpoint_dir = reads one an earlier job wrote)",
                                  step->name_.text()));
    }
  } else {
    step->in_run_ = false;
    step->name_ = checkpoint_dir_of(*dir, ctx);
    step->scenario_dir_ = scenario_dir_of(ctx);
  }
  const auto check_saved = [&](const toml::node& at, const std::string& t) {
    if (saved != nullptr && std::find(saved->begin(), saved->end(), t) == saved->end()) {
      ctx.fail(at, fmt::format("the checkpoint \"{}\" holds {}, not \"{}\"", step->name_.text(),
                               fmt::join(*saved, ", "), t));
    }
  };
  if (const toml::node* tensor = args.get("tensor")) {
    step->tensor_ = step->from_ = ctx.string_of(*tensor, "tensor");
    const toml::node* from = args.get("from");
    if (from != nullptr) step->from_ = ctx.string_of(*from, "from");
    check_saved(from ? *from : *tensor, step->from_);
    MeshPlacements target = mesh_placements_of(args, "load of a checkpoint", ctx);
    step->mesh_ = std::move(target.mesh);
    step->placements_ = std::move(target.placements);
  } else {
    for (std::string_view key : {"from", "mesh", "placements"}) {
      if (const toml::node* n = args.get(key))
        ctx.fail(*n, fmt::format("{} goes with tensor (a new DTensor); tensors = [...] loads into "
                                 "the tensors each rank holds, as they are laid out",
                                 key));
    }
  }
  if (const toml::node* tensors = args.get("tensors")) {
    step->tensors_ = ctx.strings_of(*tensors, "tensors");
    for (const std::string& t : step->tensors_) {
      if (!ctx.has_tensor(t))
        ctx.fail(*tensors, fmt::format("no tensor \"{}\" is set before this", t));
      if (t == step->tensor_)
        ctx.fail(*tensors, fmt::format("\"{}\" is both the new tensor and one to load into", t));
      check_saved(*tensors, t);
    }
  }
  if (const toml::node* rng = args.get("rng")) step->rng_ = NameTemplate::parse(*rng, ctx, "rng");
  if (step->tensor_.empty() && step->tensors_.empty() && !step->rng_) {
    throw InputError(ctx.at(args.source()),
                     "a load of a checkpoint takes tensor (a new DTensor), tensors (the tensors "
                     "each rank holds), rng (the generator state), or several");
  }
  if (!step->tensor_.empty()) ctx.declare_tensor(step->tensor_, {std::nullopt, step->mesh_});
  return step;
}

}  // namespace meshsim::sim
