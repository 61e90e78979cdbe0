#include "sim/cli/ckpt_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "sim/cli/ckpt_torch_file.hpp"
#include "sim/cli/cli_numbers.hpp"
#include "src/checked_math.hpp"
#include "src/dtensor/placement.hpp"
#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/dcp_metadata.hpp"
#include "src/io/dcp_read_plan.hpp"
#include "src/io/torch_saved_dtensor.hpp"

namespace meshsim::sim {
namespace {

namespace fs = std::filesystem;

constexpr int kExitProblems = 1;
constexpr int kExitUnusable = 2;
constexpr uint64_t kMaxMeshSize = uint64_t{1} << 22;
// One rank's shard of one tensor: larger files are refused before they are read.
constexpr uint64_t kMaxTorchSaveFileBytes = uint64_t{16} << 30;

struct LoadedCheckpoint {
  std::string directory;
  DcpMetadata metadata;
};

LoadedCheckpoint load_checkpoint(const std::string& path) {
  LoadedCheckpoint out;
  std::string metadata_path = path;
  std::error_code error;
  if (fs::is_directory(path, error)) {
    out.directory = path;
    metadata_path = (fs::path(path) / kDcpMetadataFileName).string();
    if (!fs::exists(metadata_path, error)) {
      throw runtime_error(
          fmt::format("{}: not a torch.distributed.checkpoint directory (it has no {} file)", path,
                      kDcpMetadataFileName));
    }
  } else {
    out.directory = fs::path(path).parent_path().string();
  }
  out.metadata = read_dcp_metadata_file(metadata_path);
  return out;
}

// Whether the file's first bytes are a zip archive's (a torch.save file), read alone.
bool starts_as_zip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[4] = {};
  in.read(head, sizeof head);
  return in.gcount() == sizeof head && looks_like_zip_archive(std::string_view(head, sizeof head));
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string region_text(const DcpChunk& chunk) {
  std::vector<std::string> ranges;
  for (size_t d = 0; d < chunk.offsets.size(); ++d) {
    ranges.push_back(fmt::format("{}:{}", chunk.offsets[d], chunk.offsets[d] + chunk.sizes[d]));
  }
  return fmt::format("[{}]", fmt::join(ranges, ", "));
}

std::string counted(size_t count, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", count, count == 1 ? one : many);
}

// The bytes of a whole tensor (what a rank holding it all would need).
uint64_t tensor_bytes(const DcpEntry& entry) {
  return static_cast<uint64_t>(*checked_product(entry.shape)) * entry.element_size;
}

// What the data files must hold, checked against the disk (sizes only, no data read).
struct FileUse {
  uint64_t needed = 0;  // the end of the last item in it
  size_t items = 0;
};

std::vector<std::string> check_files(const LoadedCheckpoint& checkpoint,
                                     std::map<std::string, FileUse>& files) {
  const auto use = [&](const DcpChunk& chunk) {
    FileUse& file = files[chunk.file];
    file.needed = std::max(file.needed, chunk.offset + chunk.length);
    ++file.items;
  };
  std::vector<std::string> problems;
  for (const DcpEntry& entry : checkpoint.metadata.entries) {
    if (!entry.is_tensor) {
      use(entry.object);
      continue;
    }
    for (const DcpChunk& chunk : entry.chunks) use(chunk);
    if (std::string gap = dcp_coverage_gap(entry); !gap.empty()) problems.push_back(std::move(gap));
  }
  // The metadata reader accepts only plain file names inside the directory.
  for (const auto& [name, file] : files) {
    std::error_code error;
    const fs::path full = fs::path(checkpoint.directory) / name;
    const uint64_t size = fs::file_size(full, error);
    if (error) {
      problems.push_back(fmt::format("{}: missing ({} items are in it)", name, file.items));
    } else if (size < file.needed) {
      problems.push_back(
          fmt::format("{}: {} bytes, but its items end at byte {}", name, size, file.needed));
    }
  }
  return problems;
}

nlohmann::json chunk_json(const DcpChunk& chunk) {
  return {{"offsets", chunk.offsets},
          {"sizes", chunk.sizes},
          {"file", chunk.file},
          {"offset", chunk.offset},
          {"length", chunk.length}};
}

void print_json(const std::string& path, const LoadedCheckpoint& checkpoint,
                const std::map<std::string, FileUse>& files,
                const std::vector<std::string>& problems) {
  const DcpMetadata& metadata = checkpoint.metadata;
  nlohmann::json entries = nlohmann::json::array();
  for (const DcpEntry& entry : metadata.entries) {
    if (!entry.is_tensor) {
      entries.push_back({{"name", entry.name},
                         {"kind", "object"},
                         {"file", entry.object.file},
                         {"offset", entry.object.offset},
                         {"length", entry.object.length}});
      continue;
    }
    nlohmann::json chunks = nlohmann::json::array();
    for (const DcpChunk& chunk : entry.chunks) chunks.push_back(chunk_json(chunk));
    entries.push_back({{"name", entry.name},
                       {"kind", "tensor"},
                       {"dtype", entry.dtype_name},
                       {"shape", entry.shape},
                       {"requires_grad", entry.requires_grad},
                       {"bytes", tensor_bytes(entry)},
                       {"chunks", std::move(chunks)}});
  }
  nlohmann::json file_list = nlohmann::json::array();
  for (const auto& [name, use] : files) {
    file_list.push_back({{"name", name}, {"items", use.items}, {"bytes_needed", use.needed}});
  }
  const nlohmann::json out = {{"path", path},
                              {"format", "torch.distributed.checkpoint"},
                              {"version", metadata.version},
                              {"save_id", metadata.save_id},
                              {"checkpoint_id", metadata.checkpoint_id},
                              {"entries", std::move(entries)},
                              {"files", std::move(file_list)},
                              {"problems", problems}};
  std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void print_text(const std::string& path, const CkptInspectFlags& flags,
                const LoadedCheckpoint& checkpoint, const std::map<std::string, FileUse>& files,
                const std::vector<std::string>& problems) {
  const DcpMetadata& metadata = checkpoint.metadata;
  size_t tensors = 0, items = 0;
  uint64_t stored = 0;
  for (const DcpEntry& entry : metadata.entries) {
    tensors += entry.is_tensor ? 1 : 0;
    items += entry.is_tensor ? entry.chunks.size() : 1;
  }
  for (const auto& [name, use] : files) stored += use.needed;
  std::cout << fmt::format("{}: a torch.distributed.checkpoint (format {}{})\n", path,
                           metadata.version.empty() ? "unknown" : metadata.version,
                           metadata.save_id.empty() ? "" : ", save id " + metadata.save_id);
  std::cout << fmt::format("{} ({}, {}), {} in {}, {} bytes\n\n",
                           counted(metadata.entries.size(), "entry", "entries"),
                           counted(tensors, "tensor", "tensors"),
                           counted(metadata.entries.size() - tensors, "object", "objects"),
                           counted(items, "stored item", "stored items"),
                           counted(files.size(), "file", "files"), stored);
  size_t name_width = 4;
  for (const DcpEntry& entry : metadata.entries) {
    name_width = std::max(name_width, entry.name.size());
  }
  name_width = std::min<size_t>(name_width, 60);
  std::cout << fmt::format("  {:<{}}  {:<9}  {:<16}  {:>6}  {:>12}\n", "name", name_width, "dtype",
                           "shape", "chunks", "bytes");
  for (const DcpEntry& entry : metadata.entries) {
    if (!entry.is_tensor) {
      std::cout << fmt::format("  {:<{}}  {:<9}  {:<16}  {:>6}  {:>12}  {} @{} +{}\n", entry.name,
                               name_width, "object", "-", 1, "-", entry.object.file,
                               entry.object.offset, entry.object.length);
      continue;
    }
    std::cout << fmt::format("  {:<{}}  {:<9}  {:<16}  {:>6}  {:>12}\n", entry.name, name_width,
                             entry.dtype_name, shape_text(entry.shape), entry.chunks.size(),
                             tensor_bytes(entry));
    if (!flags.chunks) continue;
    for (const DcpChunk& chunk : entry.chunks) {
      std::cout << fmt::format("      {}  {} @{} +{}\n", region_text(chunk), chunk.file,
                               chunk.offset, chunk.length);
    }
  }
  if (!problems.empty()) {
    std::cout << fmt::format("\nproblems ({}):\n", problems.size());
    for (const std::string& problem : problems) std::cout << "  " << problem << "\n";
  }
}

std::string placements_text(const DcpReadRequest& request) {
  std::vector<std::string> names;
  for (const Placement& p : request.placements) names.push_back(placement_name(p));
  return fmt::format("[{}]", fmt::join(names, ", "));
}

nlohmann::json read_json(const DcpMetadata& metadata, const DcpRead& read) {
  const DcpEntry& entry = metadata.entries[read.entry];
  const DcpChunk& stored = entry.is_tensor ? entry.chunks[read.chunk] : entry.object;
  nlohmann::json out = {{"name", entry.name},
                        {"file", stored.file},
                        {"offset", stored.offset},
                        {"length", stored.length}};
  if (entry.is_tensor) {
    out["chunk"] = {{"offsets", stored.offsets}, {"sizes", stored.sizes}};
    out["keeps"] = {{"offsets", read.offsets}, {"sizes", read.sizes}};
  }
  return out;
}

void print_plan_json(const CkptPlanFlags& flags, const DcpReadRequest& request,
                     const LoadedCheckpoint& checkpoint, const DcpReadPlan& plan,
                     const std::vector<std::string>& problems) {
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const DcpRankRead& rank = plan.ranks[r];
    nlohmann::json one = {{"rank", r},
                          {"items", rank.items},
                          {"file_bytes", rank.file_bytes},
                          {"holds_bytes", rank.holds_bytes},
                          {"peak_bytes", rank.peak_bytes}};
    if (request.detailed(r)) {
      nlohmann::json reads = nlohmann::json::array();
      for (const DcpRead& read : rank.reads) reads.push_back(read_json(checkpoint.metadata, read));
      one["reads"] = std::move(reads);
    }
    ranks.push_back(std::move(one));
  }
  std::vector<std::string> placements;
  for (const Placement& p : request.placements) placements.push_back(placement_name(p));
  const nlohmann::json out = {{"path", flags.path},
                              {"mesh", request.mesh_shape},
                              {"placements", placements},
                              {"tensors", plan.tensors},
                              {"objects", plan.objects},
                              {"missing", plan.missing},
                              {"mismatched", plan.mismatched},
                              {"uncovered", plan.uncovered},
                              {"problems", problems},
                              {"ranks", std::move(ranks)}};
  std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void print_plan_text(const CkptPlanFlags& flags, const DcpReadRequest& request,
                     const LoadedCheckpoint& checkpoint, const DcpReadPlan& plan,
                     const std::vector<std::string>& problems) {
  std::cout << fmt::format("{} onto a mesh of [{}] with {}: {}\n", flags.path,
                           fmt::join(request.mesh_shape, ", "), placements_text(request),
                           counted(plan.ranks.size(), "rank", "ranks"));
  std::cout << fmt::format("loads {} and {}\n\n", counted(plan.tensors, "tensor", "tensors"),
                           counted(plan.objects, "object", "objects"));
  std::cout << fmt::format("  {:<13}  {:>8}  {:>14}  {:>14}  {:>14}\n", "ranks", "items",
                           "file bytes", "holds bytes", "peak bytes");
  // Ranks with the same figures share a line: a 1,024-rank plan is a few lines, not 1,024.
  for (size_t first = 0; first < plan.ranks.size();) {
    const DcpRankRead& rank = plan.ranks[first];
    const auto same = [&](const DcpRankRead& other) {
      return other.items == rank.items && other.file_bytes == rank.file_bytes &&
             other.holds_bytes == rank.holds_bytes && other.peak_bytes == rank.peak_bytes;
    };
    size_t last = first;
    while (last + 1 < plan.ranks.size() && same(plan.ranks[last + 1])) ++last;
    const std::string range =
        first == last ? std::to_string(first) : fmt::format("{}-{}", first, last);
    std::cout << fmt::format("  {:<13}  {:>8}  {:>14}  {:>14}  {:>14}\n", range, rank.items,
                             rank.file_bytes, rank.holds_bytes, rank.peak_bytes);
    first = last + 1;
  }
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    if (!request.detailed(r)) continue;
    std::cout << fmt::format("\nrank {} reads:\n", r);
    for (const DcpRead& read : plan.ranks[r].reads) {
      const DcpEntry& entry = checkpoint.metadata.entries[read.entry];
      if (!entry.is_tensor) {
        std::cout << fmt::format("  {}  (object)  {} @{} +{}\n", entry.name, entry.object.file,
                                 entry.object.offset, entry.object.length);
        continue;
      }
      const DcpChunk& chunk = entry.chunks[read.chunk];
      DcpChunk keeps;
      keeps.offsets = read.offsets;
      keeps.sizes = read.sizes;
      std::cout << fmt::format("  {}  chunk {}  {} @{} +{}  keeps {}\n", entry.name,
                               region_text(chunk), chunk.file, chunk.offset, chunk.length,
                               region_text(keeps));
    }
  }
  if (!problems.empty()) {
    std::cout << fmt::format("\nproblems ({}):\n", problems.size());
    for (const std::string& problem : problems) std::cout << "  " << problem << "\n";
  }
}

}  // namespace

CkptCommands add_ckpt_command(CLI::App& app, CkptInspectFlags& inspect_flags,
                              CkptPlanFlags& plan_flags) {
  CLI::App* ckpt = app.add_subcommand("ckpt", "read PyTorch checkpoints without running PyTorch");
  ckpt->require_subcommand(1);
  CLI::App* inspect = ckpt->add_subcommand(
      "inspect",
      "list what a torch.distributed.checkpoint directory holds, from its .metadata alone: "
      "names, dtypes, shapes, chunks and the file holding each; the data files are checked for "
      "presence and size, never read. Given a torch.save file of a DTensor or DeviceMesh: its "
      "tensor, placements, mesh, saver and process-group names");
  inspect
      ->add_option("path", inspect_flags.path,
                   "the checkpoint directory (or its .metadata), or a torch.save file (x.pt)")
      ->required();
  inspect->add_flag("--values", inspect_flags.values,
                    "a torch.save file of a DTensor: also print the saver's shard");
  inspect->add_flag("--json", inspect_flags.json, "print JSON (schema in docs/checkpoints.md)");
  inspect->add_flag("--chunks", inspect_flags.chunks,
                    "list every chunk: its region, file, offset and length");
  CLI::App* plan = ckpt->add_subcommand(
      "plan",
      "say what loading a torch.distributed.checkpoint onto a mesh would read on every rank "
      "(the items whose chunks overlap its shard, their file bytes, the bytes it holds and its "
      "peak), and which names are missing, mismatched or not fully saved; reads only .metadata");
  plan->add_option("path", plan_flags.path, "the checkpoint directory (or its .metadata)")
      ->required();
  plan->add_option("--mesh", plan_flags.mesh, "the target mesh shape, e.g. 2,4")->required();
  plan->add_option("--placement", plan_flags.placements,
                   "one per mesh dim, in order, for every tensor: Shard(0), Replicate(), "
                   "_StridedShard(0, sf=2)")
      ->required();
  plan->add_option("--names", plan_flags.names,
                   "load only these names, comma-separated (default: every name saved)");
  plan->add_option("--rank", plan_flags.rank,
                   "list every read of this rank (\"all\": of every rank; for small meshes)");
  plan->add_flag("--json", plan_flags.json, "print JSON (schema in docs/checkpoints.md)");
  return {inspect, plan};
}

int run_ckpt_plan(const CkptPlanFlags& flags) {
  const auto bad = [](std::string_view flag, const std::string& error) {
    std::cerr << "meshsim ckpt plan: " << flag << ": " << error << "\n";
    return kExitUnusable;
  };
  DcpReadRequest request;
  if (const std::string error = parse_sizes(flags.mesh, kMaxMeshSize, request.mesh_shape);
      !error.empty() || request.mesh_shape.empty()) {
    return bad("--mesh", error.empty() ? "give the mesh shape, e.g. 2,4" : error);
  }
  for (const std::string& text : flags.placements) {
    try {
      request.placements.push_back(parse_placement(text));
    } catch (const Error& e) {
      return bad("--placement", e.what());
    }
  }
  for (size_t start = 0; start < flags.names.size();) {
    const size_t comma = std::min(flags.names.find(',', start), flags.names.size());
    if (comma > start) request.names.push_back(flags.names.substr(start, comma - start));
    start = comma + 1;
  }
  if (flags.rank == "all") {
    request.detail_all_ranks = true;
  } else if (!flags.rank.empty()) {
    uint64_t rank = 0;
    if (const std::string error = parse_unsigned(flags.rank, 0, INT64_MAX, rank); !error.empty()) {
      return bad("--rank", error);
    }
    request.detail_rank = static_cast<int64_t>(rank);
  }
  LoadedCheckpoint checkpoint;
  DcpReadPlan plan;
  try {
    checkpoint = load_checkpoint(flags.path);
    plan = plan_dcp_read(checkpoint.metadata, request);
  } catch (const Error& e) {
    std::cerr << "meshsim ckpt plan: " << e.what() << "\n";
    return kExitUnusable;
  }
  std::vector<std::string> problems;
  for (const std::string& name : plan.missing) {
    problems.push_back(fmt::format("Missing key in checkpoint state_dict: {}.", name));
  }
  problems.insert(problems.end(), plan.mismatched.begin(), plan.mismatched.end());
  problems.insert(problems.end(), plan.uncovered.begin(), plan.uncovered.end());
  if (flags.json) {
    print_plan_json(flags, request, checkpoint, plan, problems);
  } else {
    print_plan_text(flags, request, checkpoint, plan, problems);
  }
  return problems.empty() ? 0 : kExitProblems;
}

int run_ckpt_inspect(const CkptInspectFlags& flags) {
  LoadedCheckpoint checkpoint;
  try {
    std::error_code error;
    if (fs::is_regular_file(flags.path, error) &&
        fs::path(flags.path).filename() != kDcpMetadataFileName && starts_as_zip(flags.path)) {
      return inspect_torch_save_file(flags, read_file_bounded(flags.path, kMaxTorchSaveFileBytes));
    }
    checkpoint = load_checkpoint(flags.path);
  } catch (const Error& e) {
    std::cerr << "meshsim ckpt inspect: " << e.what() << "\n";
    return kExitUnusable;
  }
  std::map<std::string, FileUse> files;
  const std::vector<std::string> problems = check_files(checkpoint, files);
  if (flags.json) {
    print_json(flags.path, checkpoint, files, problems);
  } else {
    print_text(flags.path, flags, checkpoint, files, problems);
  }
  return problems.empty() ? 0 : kExitProblems;
}

}  // namespace meshsim::sim
