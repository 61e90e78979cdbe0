// Whole-world checkpoints: a global tensor of random bits, sharded over one mesh and saved by
// every rank, loads onto other meshes and placements (uneven and strided shards included) with
// every rank's shard bit-equal to the same global tensor cut the target's way.
#include "src/io/world_checkpoint.hpp"

#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "src/dtensor/local_shard.hpp"
#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/checkpoint_plan.hpp"
#include "src/io/record_archive.hpp"
#include "src/tensor/memory_budget.hpp"
#include "tests/support/splitmix.hpp"

using meshsim::DeviceMesh;
using meshsim::DTensor;
using meshsim::DTensorSpec;
using meshsim::LocalGroupCreator;
using meshsim::Placement;
using meshsim::Tensor;
using Ints = std::vector<int64_t>;

namespace {

struct Layout {
  Ints mesh_shape;
  std::vector<Placement> placements;
};

Tensor random_global(const Ints& shape, uint64_t seed) {
  Tensor t(shape, meshsim::DType::kFloat32);
  meshsim::testing::SplitMix rng{seed};
  auto bytes = t.mutable_bytes();
  for (std::byte& b : bytes) b = static_cast<std::byte>(rng.next());
  return t;
}

// The global tensor cut the way `spec` lays it out on the calling rank: element by element
// through owned_indices, independent of the checkpoint's run-by-run copy.
Tensor cut(const Tensor& global, const DTensorSpec& spec) {
  const std::vector<int64_t> local_shape = spec.local_shape();
  Tensor out(local_shape, global.dtype());
  if (!spec.mesh.coordinate()) return out;
  std::vector<std::vector<int64_t>> indices;
  for (const meshsim::IndexRuns& d : meshsim::owned_indices(
           spec.shape, spec.mesh.shape(), *spec.mesh.coordinate(), spec.placements))
    indices.push_back(d.expand());
  const Ints strides = global.strides();
  const size_t element = meshsim::dtype_size(global.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rest = i, source = 0;
    for (size_t d = local_shape.size(); d-- > 0;) {
      source += indices[d][static_cast<size_t>(rest % local_shape[d])] * strides[d];
      rest /= local_shape[d];
    }
    std::memcpy(out.mutable_bytes().data() + static_cast<size_t>(i) * element,
                global.bytes().data() + static_cast<size_t>(source) * element, element);
  }
  return out;
}

DTensorSpec spec_on(LocalGroupCreator& groups, const Layout& layout, const Ints& shape) {
  return DTensorSpec{DeviceMesh::init(groups, "cuda", layout.mesh_shape), layout.placements, shape,
                     meshsim::DType::kFloat32};
}

std::string fresh_dir(const std::string& name) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("meshsim-test-" + name)).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Every rank's DTensor of `global` laid out as `layout` (each rank with its own group creator,
// which its mesh keeps using).
struct WorldOf {
  std::vector<std::unique_ptr<LocalGroupCreator>> groups;
  std::vector<DTensor> tensors;

  WorldOf(const Tensor& global, int64_t world, const Layout& layout) {
    for (int64_t r = 0; r < world; ++r) {
      groups.push_back(std::make_unique<LocalGroupCreator>(r, world));
      const DTensorSpec spec = spec_on(*groups.back(), layout, global.shape());
      tensors.push_back(DTensor::from_local_shard(spec, cut(global, spec)));
    }
  }
  // Each rank's state dict, holding its DTensor as `name`.
  std::vector<std::vector<meshsim::StateDictEntry>> state_dicts(const std::string& name) const {
    std::vector<std::vector<meshsim::StateDictEntry>> out;
    for (const DTensor& t : tensors) out.push_back({{name, nullptr, &t}});
    return out;
  }
};

// Saves `global` laid out as `from` by every rank of the world, then loads it as `to` on every
// rank and compares with the global tensor cut that way.
void check_reshard(int64_t world, const Ints& shape, const Layout& from, const Layout& to,
                   meshsim::ArchiveFormat format = meshsim::ArchiveFormat::kBinary) {
  const Tensor global = random_global(shape, 7);
  const std::string dir = fresh_dir("reshard");
  meshsim::save_world_checkpoint(dir, WorldOf(global, world, from).state_dicts("w"), format);
  for (int64_t r = 0; r < world; ++r) {
    INFO("rank " << r << ", " << meshsim::archive_format_name(format));
    LocalGroupCreator groups(r, world);
    const DTensorSpec spec = spec_on(groups, to, shape);
    const DTensor loaded = meshsim::load_world_tensor(dir, "w", spec.mesh, spec.placements);
    CHECK(loaded.local().same_as(cut(global, spec)));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace

TEST_CASE("world checkpoint: 2x2 -> 4x1 and (2,2,2) -> (8,), bit-exact against the global tensor",
          "[io][world_checkpoint]") {
  using meshsim::Replicate;
  using meshsim::Shard;
  check_reshard(4, {8, 6}, {{2, 2}, {Shard{0}, Shard{1}}}, {{4, 1}, {Shard{0}, Replicate{}}});
  check_reshard(4, {8, 6}, {{2, 2}, {Replicate{}, Shard{1}}}, {{4, 1}, {Shard{1}, Shard{0}}});
  check_reshard(8, {16, 4, 3}, {{2, 2, 2}, {Shard{0}, Shard{1}, Replicate{}}}, {{8}, {Shard{2}}});
  check_reshard(8, {16, 4, 3}, {{8}, {Shard{0}}}, {{2, 2, 2}, {Shard{1}, Replicate{}, Shard{0}}});
  // The text formats hold the data in the record read back rather than in the mapped file.
  for (meshsim::ArchiveFormat format :
       {meshsim::ArchiveFormat::kText, meshsim::ArchiveFormat::kXml}) {
    check_reshard(4, {8, 6}, {{2, 2}, {Shard{0}, Shard{1}}}, {{4, 1}, {Shard{0}, Replicate{}}},
                  format);
  }
}

TEST_CASE("world checkpoint: uneven and strided shards reshard exactly", "[io][world_checkpoint]") {
  using meshsim::Replicate;
  using meshsim::Shard;
  using meshsim::StridedShard;
  // 7 rows over 4 ranks (2, 2, 2, 1) and 5 columns over 3 (2, 2, 1) and empty shards.
  check_reshard(4, {7, 5}, {{4}, {Shard{0}}}, {{2, 2}, {Shard{1}, Shard{0}}});
  check_reshard(6, {5, 3}, {{6}, {Shard{0}}}, {{3, 2}, {Shard{1}, Shard{1}}});
  // FSDP over TP: dim 0 strided over dp, then sharded over tp; loaded as plain row shards.
  check_reshard(4, {8, 4}, {{2, 2}, {StridedShard{0, 2}, Shard{0}}}, {{4}, {Shard{0}}});
  check_reshard(4, {12, 2}, {{4}, {Shard{0}}}, {{2, 2}, {StridedShard{0, 2}, Shard{0}}});
}

TEST_CASE("world checkpoint: replicas are written once, by the first rank holding them",
          "[io][world_checkpoint]") {
  const WorldOf world(random_global({6, 4}, 5), 4,
                      {{2, 2}, {meshsim::Replicate{}, meshsim::Shard{0}}});
  const std::string dir = fresh_dir("replicas");
  const meshsim::CheckpointMetadata plan =
      meshsim::save_world_checkpoint(dir, world.state_dicts("w"), meshsim::ArchiveFormat::kBinary);
  REQUIRE(plan.tensors.size() == 1);
  const auto& chunks = plan.tensors[0].chunks;
  REQUIRE(chunks.size() == 2);
  CHECK(chunks[0].file_rank == 0);
  CHECK(chunks[1].file_rank == 1);
  CHECK(chunks[1].indices[0].runs() == std::vector<meshsim::IndexRuns::Run>{{3, 6}});
  // Ranks 2 and 3 hold replicas only: their shard files are empty.
  CHECK(std::filesystem::file_size(dir + "/shard-2.ckpt") <
        std::filesystem::file_size(dir + "/shard-0.ckpt"));
  std::filesystem::remove_all(dir);
  LocalGroupCreator groups(0, 4);
  const DTensor partial = DTensor::zeros(DTensorSpec{DeviceMesh::init(groups, "cuda", Ints{2, 2}),
                                                     {meshsim::Partial{}, meshsim::Shard{0}},
                                                     {6, 4},
                                                     meshsim::DType::kFloat32});
  const std::vector<meshsim::StateDictEntry> entries{{"p", nullptr, &partial}};
  CHECK_THROWS_WITH(
      meshsim::plan_local_save(0, entries),
      "'p' is Partial on a mesh dim: reduce it (redistribute to Replicate) before saving");
}

TEST_CASE("world checkpoint: a checkpoint that does not fit is refused with a reason",
          "[io][world_checkpoint]") {
  const std::string dir = fresh_dir("refused");
  meshsim::save_world_checkpoint(
      dir, WorldOf(random_global({4, 4}, 3), 2, {{2}, {meshsim::Shard{0}}}).state_dicts("w"),
      meshsim::ArchiveFormat::kText);
  LocalGroupCreator groups(1, 2);
  const Ints two{2};
  const DeviceMesh mesh = DeviceMesh::init(groups, "cuda", two);
  CHECK_THROWS_WITH(meshsim::load_world_tensor(dir, "v", mesh, {meshsim::Shard{0}}),
                    Catch::Contains("has no tensor 'v'"));
  CHECK_THROWS_WITH(meshsim::load_world_tensor(dir, "w", mesh, {meshsim::Shard{2}}),
                    Catch::Contains("out of range"));
  std::filesystem::remove(dir + "/shard-1.ckpt");
  CHECK_THROWS_WITH(meshsim::load_world_tensor(dir, "w", mesh, {meshsim::Shard{1}}),
                    Catch::Contains("shard-1.ckpt") && Catch::Contains("No such file"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("world checkpoint: metadata of record versions 1 and 2 keeps loading",
          "[io][world_checkpoint]") {
  for (const char* version : {"v1", "v2"}) {
    INFO(version);
    // step100/metadata.ckpt of scenarios/checkpoint_reshard.toml in both layouts (see
    // tests/io/data/README.md):
    // w float32[8, 6] as [Shard(0), Shard(1)] over (2, 2), one chunk per rank; b float32[7] as
    // [Replicate(), Shard(0)], its two chunks written once, by ranks 0 and 1.
    const std::string file = meshsim::read_file_bounded(
        std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/checkpoint_metadata_" + version + ".bin",
        1 << 20);
    const meshsim::CheckpointMetadata m = meshsim::open_checkpoint_metadata(file);
    REQUIRE(m.tensors.size() == 2);
    CHECK(m.tensors[0].name == "w");
    CHECK(m.tensors[0].shape == Ints{8, 6});
    CHECK(m.tensors[0].mesh_shape == Ints{2, 2});
    CHECK(m.tensors[0].placements == std::vector<Placement>{meshsim::Shard{0}, meshsim::Shard{1}});
    REQUIRE(m.tensors[0].chunks.size() == 4);
    CHECK(m.tensors[0].chunks[3].file_rank == 3);
    CHECK(m.tensors[0].chunks[3].indices[0].runs() == std::vector<meshsim::IndexRuns::Run>{{4, 8}});
    CHECK(m.tensors[0].chunks[3].indices[1].runs() == std::vector<meshsim::IndexRuns::Run>{{3, 6}});
    CHECK(m.tensors[1].name == "b");
    REQUIRE(m.tensors[1].chunks.size() == 2);
    // Version 1 was written by the lowest rank holding a replica; version 2 by the rank DCP's
    // load balancing picks: ranks 0 and 1 were each given w's chunk before b's, so 2 and 3.
    const int64_t first_writer = std::string(version) == "v1" ? 0 : 2;
    CHECK(m.tensors[1].chunks[0].file_rank == first_writer);
    CHECK(m.tensors[1].chunks[1].file_rank == first_writer + 1);
    CHECK(m.tensors[1].chunks[1].indices[0].runs() == std::vector<meshsim::IndexRuns::Run>{{4, 7}});
  }
}

TEST_CASE("world checkpoint: every single-byte change and every truncation of metadata is refused",
          "[io][world_checkpoint]") {
  const std::string file = meshsim::read_file_bounded(
      std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/checkpoint_metadata_v1.bin", 1 << 20);
  const auto error = [](std::string_view bytes) -> std::string {
    try {
      meshsim::open_checkpoint_metadata(bytes);
    } catch (const meshsim::Error& e) {
      return e.what();
    }
    return "(opened)";
  };
  for (size_t at = 0; at < file.size(); ++at) {
    std::string damaged = file;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
    INFO("byte " << at);
    CHECK(error(damaged).find("checkpoint") != std::string::npos);
  }
  for (size_t cut = 0; cut < file.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK(error(file.substr(0, cut)).find("checkpoint") != std::string::npos);
  }
}

TEST_CASE("world checkpoint: metadata whose chunks do not hold the tensor is refused",
          "[io][world_checkpoint]") {
  const Ints two{2};
  const WorldOf world(random_global({4, 3}, 9), 2, {two, {meshsim::Shard{0}}});
  const DTensorSpec& spec = world.tensors[0].spec();
  const std::string dir = fresh_dir("bad-metadata");
  const meshsim::CheckpointMetadata plan =
      meshsim::save_world_checkpoint(dir, world.state_dicts("w"), meshsim::ArchiveFormat::kBinary);
  const auto refused = [&](const meshsim::CheckpointMetadata& m) -> std::string {
    meshsim::save_checkpoint_metadata(dir, m, meshsim::ArchiveFormat::kBinary);
    try {
      meshsim::load_checkpoint_metadata(dir);
    } catch (const meshsim::Error& e) {
      return e.what();
    }
    return "(loaded)";
  };
  meshsim::CheckpointMetadata missing = plan;
  missing.tensors[0].chunks.pop_back();
  CHECK_THAT(refused(missing), Catch::Contains("the chunks of 'w' hold 6 elements, the tensor 12"));
  meshsim::CheckpointMetadata outside = plan;
  outside.tensors[0].chunks[1].indices[0] = meshsim::IndexRuns::range(5);
  CHECK_THAT(refused(outside), Catch::Contains("outside [0, 4)"));
  // Rows [0, 2) and [1, 3): as many elements as the tensor, but row 1 twice and row 3 never.
  meshsim::CheckpointMetadata overlapping = plan;
  overlapping.tensors[0].chunks[1].indices[0] = *meshsim::IndexRuns::from_indices({1, 2});
  CHECK(refused(overlapping) == "(loaded)");
  CHECK_THROWS_WITH(meshsim::load_world_tensor(dir, "w", spec.mesh, {meshsim::Replicate{}}),
                    Catch::Contains("its chunks overlap"));
  LocalGroupCreator rank1(1, 2);
  const DeviceMesh mesh1 = DeviceMesh::init(rank1, "cuda", two);
  CHECK_THROWS_WITH(meshsim::load_world_tensor(dir, "w", mesh1, {meshsim::Shard{0}}),
                    Catch::Contains("its chunks cover 3 of this rank's 6 elements"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("world checkpoint: metadata of 1024 to 65536 ranks reads back in every format",
          "[io][world_checkpoint]") {
  // One weight sharded row-wise over every rank, and a replicated bias written by rank 0: what a
  // save of that world writes, the load must accept (bounds come from the record's own size).
  const std::string dir = fresh_dir("metadata-scale");
  for (const int64_t world : {int64_t{1024}, int64_t{16384}, int64_t{65536}}) {
    meshsim::CheckpointMetadata m;
    meshsim::CheckpointTensor w{
        "w", meshsim::DType::kFloat32, {world, 8}, {meshsim::Shard{0}}, {world}, {}};
    for (int64_t r = 0; r < world; ++r)
      w.chunks.push_back(
          {r, {meshsim::IndexRuns::range(r + 1).slice(r, 1), meshsim::IndexRuns::range(8)}});
    m.tensors.push_back(std::move(w));
    m.tensors.push_back({"b",
                         meshsim::DType::kFloat32,
                         {8},
                         {meshsim::Replicate{}},
                         {world},
                         {{0, {meshsim::IndexRuns::range(8)}}}});
    for (meshsim::ArchiveFormat format :
         {meshsim::ArchiveFormat::kBinary, meshsim::ArchiveFormat::kText}) {
      INFO(world << " ranks, " << meshsim::archive_format_name(format));
      meshsim::save_checkpoint_metadata(dir, m, format);
      const meshsim::CheckpointMetadata back = meshsim::load_checkpoint_metadata(dir);
      REQUIRE(back.tensors.size() == 2);
      CHECK(back.tensors[0].chunks.size() == static_cast<size_t>(world));
      CHECK(back.tensors[0].chunks.back().file_rank == world - 1);
      CHECK(back.tensors[0].chunks.back().indices[0].runs() ==
            std::vector<meshsim::IndexRuns::Run>{{world - 1, world}});
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("world checkpoint: metadata of a model with thousands of tensors reads back",
          "[io][world_checkpoint]") {
  // A large model's state dict: parameters and optimizer state, each sharded over 8 ranks.
  const std::string dir = fresh_dir("metadata-many");
  meshsim::CheckpointMetadata m;
  for (int t = 0; t < 4096; ++t) {
    meshsim::CheckpointTensor e{fmt::format("layers.{}.mlp.w{}.exp_avg_sq", t / 8, t % 8),
                                meshsim::DType::kBFloat16,
                                {8192, 1024},
                                {meshsim::Shard{0}},
                                {8},
                                {}};
    for (int64_t r = 0; r < 8; ++r)
      e.chunks.push_back({r,
                          {meshsim::IndexRuns::range(8192).slice(r * 1024, 1024),
                           meshsim::IndexRuns::range(1024)}});
    m.tensors.push_back(std::move(e));
  }
  for (meshsim::ArchiveFormat format :
       {meshsim::ArchiveFormat::kBinary, meshsim::ArchiveFormat::kText,
        meshsim::ArchiveFormat::kXml}) {
    INFO(meshsim::archive_format_name(format));
    meshsim::save_checkpoint_metadata(dir, m, format);
    CHECK(meshsim::load_checkpoint_metadata(dir).tensors.size() == 4096);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("world checkpoint: files of two saves are never read as one", "[io][world_checkpoint]") {
  // Two saves of one tensor under other layouts: step1's metadata next to step2's shards would
  // place step2's blocks where step1's plan says.
  const Tensor global = random_global({8, 4}, 11);
  const std::string step1 = fresh_dir("step1"), step2 = fresh_dir("step2");
  meshsim::save_world_checkpoint(step1,
                                 WorldOf(global, 2, {{2}, {meshsim::Shard{0}}}).state_dicts("w"),
                                 meshsim::ArchiveFormat::kBinary);
  meshsim::save_world_checkpoint(step2,
                                 WorldOf(global, 2, {{2}, {meshsim::Shard{1}}}).state_dicts("w"),
                                 meshsim::ArchiveFormat::kBinary);
  CHECK(meshsim::load_checkpoint_metadata(step1).save_id !=
        meshsim::load_checkpoint_metadata(step2).save_id);
  std::filesystem::copy_file(step1 + "/metadata.ckpt", step2 + "/metadata.ckpt",
                             std::filesystem::copy_options::overwrite_existing);
  LocalGroupCreator groups(0, 2);
  const DeviceMesh mesh = DeviceMesh::init(groups, "cuda", Ints{2});
  CHECK_THROWS_WITH(meshsim::load_world_tensor(step2, "w", mesh, {meshsim::Shard{0}}),
                    Catch::Contains("cannot load 'w': shard-0.ckpt was written by another save") &&
                        Catch::Contains("the directory mixes the files of two saves"));

  // Two saves of one name and one plan with other values (the same step saved by two runs): one
  // run's shard next to the other's metadata is refused as well.
  const std::string run1 = fresh_dir("run1/step1"), run2 = fresh_dir("run2/step1");
  const auto save_step1 = [&](const std::string& dir, uint64_t seed) {
    meshsim::save_world_checkpoint(
        dir, WorldOf(random_global({8, 4}, seed), 2, {{2}, {meshsim::Shard{0}}}).state_dicts("w"),
        meshsim::ArchiveFormat::kBinary);
  };
  save_step1(run1, 11);
  save_step1(run2, 12);
  CHECK(meshsim::load_checkpoint_metadata(run1).save_id !=
        meshsim::load_checkpoint_metadata(run2).save_id);
  std::filesystem::copy_file(run2 + "/shard-0.ckpt", run1 + "/shard-0.ckpt",
                             std::filesystem::copy_options::overwrite_existing);
  CHECK_THROWS_WITH(meshsim::load_world_tensor(run1, "w", mesh, {meshsim::Shard{0}}),
                    Catch::Contains("shard-0.ckpt was written by another save"));

  // A shard file listing one chunk twice (a valid record, resealed): refused, not "the last wins".
  const meshsim::CheckpointMetadata metadata = meshsim::load_checkpoint_metadata(step1);
  const std::string chunk_bytes(4 * 4 * 4, 'x');
  const auto chunk = [&] {
    return meshsim::RecordObject{"ChunkData", {}}
        .set("tensor", meshsim::RecordValue::of(std::string("w")))
        .set("chunk", meshsim::RecordValue::of(int64_t{0}))
        .set("data", meshsim::RecordValue::bytes(chunk_bytes));
  };
  const meshsim::RecordObject twice =
      meshsim::RecordObject{"ShardFile", {}}
          .set("save_id", meshsim::RecordValue::of(static_cast<int64_t>(metadata.save_id)))
          .set("chunks", meshsim::RecordValue::of(std::vector{chunk(), chunk()}));
  meshsim::write_file_atomically(
      step1 + "/shard-0.ckpt",
      meshsim::seal_record(meshsim::RecordKind::kShard, meshsim::kCheckpointShardVersion, twice,
                           meshsim::ArchiveFormat::kBinary));
  CHECK_THROWS_WITH(meshsim::load_world_tensor(step1, "w", mesh, {meshsim::Shard{0}}),
                    Catch::Contains("holds chunk 0 of 'w' twice"));
  std::filesystem::remove_all(step1);
  std::filesystem::remove_all(step2);
}

TEST_CASE("world checkpoint: a small metadata file claiming a huge tensor allocates nothing",
          "[io][world_checkpoint]") {
  // 40,000 x 40,000 float32 (6.4 GB) in one chunk of rank 0's file, which does not exist: the
  // load must say so before a byte of the shard is allocated (the budget would refuse it).
  meshsim::CheckpointMetadata plan;
  plan.save_id = 1;
  plan.tensors.push_back(
      {"w",
       meshsim::DType::kFloat32,
       {40000, 40000},
       {meshsim::Replicate{}},
       {1},
       {{0, {meshsim::IndexRuns::range(40000), meshsim::IndexRuns::range(40000)}}},
       1});
  const std::string dir = fresh_dir("huge-claim");
  meshsim::save_checkpoint_metadata(dir, plan, meshsim::ArchiveFormat::kBinary);
  const uint64_t before = meshsim::MemoryBudget::limit();
  meshsim::MemoryBudget::set_limit(uint64_t{64} << 20);
  LocalGroupCreator groups(0, 1);
  const DeviceMesh mesh = DeviceMesh::init(groups, "cuda", Ints{1});
  CHECK_THROWS_WITH(meshsim::load_world_tensor(dir, "w", mesh, {meshsim::Replicate{}}),
                    Catch::Contains("shard-0.ckpt") && Catch::Contains("No such file"));
  meshsim::MemoryBudget::set_limit(before);
  std::filesystem::remove_all(dir);
}

TEST_CASE("world checkpoint: 16 tensors of [8, 6] on a 2 x 2 mesh read back in every format",
          "[io][world_checkpoint]") {
  // A checkpoint meshsim wrote that its own reader once refused (its bound was a constant).
  const WorldOf world(random_global({8, 6}, 13), 4,
                      {{2, 2}, {meshsim::Shard{0}, meshsim::Shard{1}}});
  std::vector<std::vector<meshsim::StateDictEntry>> state_dicts(4);
  std::vector<std::string> names;
  for (int i = 0; i < 16; ++i) names.push_back(fmt::format("layers.{}.weight", i));
  for (size_t r = 0; r < 4; ++r) {
    for (const std::string& name : names)
      state_dicts[r].push_back({name, nullptr, &world.tensors[r]});
  }
  for (const auto& [format, format_name] : meshsim::kArchiveFormatNames) {
    INFO(format_name);
    const std::string dir = fresh_dir("sixteen");
    meshsim::save_world_checkpoint(dir, state_dicts, format);
    CHECK(meshsim::load_checkpoint_metadata(dir).tensors.size() == 16);
    LocalGroupCreator groups(3, 4);
    const DeviceMesh mesh = DeviceMesh::init(groups, "cuda", Ints{4});
    const DTensor back =
        meshsim::load_world_tensor(dir, "layers.15.weight", mesh, {meshsim::Shard{0}});
    CHECK(back.local().shape() == Ints{2, 6});
    std::filesystem::remove_all(dir);
  }
}
