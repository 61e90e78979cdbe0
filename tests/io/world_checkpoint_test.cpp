// Whole-world checkpoints: a global tensor of random bits, sharded over one mesh and saved by
// every rank, loads onto other meshes and placements (uneven and strided shards included) with
// every rank's shard bit-equal to the same global tensor cut the target's way.
#include "src/io/world_checkpoint.hpp"

#include <cstring>
#include <filesystem>

#include <catch2/catch.hpp>

#include "src/dtensor/local_shard.hpp"
#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
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

// Saves `global` laid out as `from` by every rank of the world, then loads it as `to` on every
// rank and compares with the global tensor cut that way.
void check_reshard(int64_t world, const Ints& shape, const Layout& from, const Layout& to,
                   meshsim::ArchiveFormat format = meshsim::ArchiveFormat::kBinary) {
  const Tensor global = random_global(shape, 7);
  const std::string dir = fresh_dir("reshard");
  for (int64_t r = 0; r < world; ++r) {
    LocalGroupCreator groups(r, world);
    const DTensorSpec spec = spec_on(groups, from, shape);
    const DTensor t = DTensor::from_local_shard(spec, cut(global, spec));
    meshsim::save_world_checkpoint(dir, r, {{"w", &t}}, format);
  }
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

TEST_CASE("world checkpoint: replicas are written once, by the lowest rank",
          "[io][world_checkpoint]") {
  LocalGroupCreator groups(3, 4);
  const Ints shape{2, 2};
  const DTensorSpec spec{DeviceMesh::init(groups, "cuda", shape),
                         {meshsim::Replicate{}, meshsim::Shard{0}},
                         {6, 4},
                         meshsim::DType::kFloat32};
  const meshsim::CheckpointMetadata plan = meshsim::plan_checkpoint({{"w", spec}});
  REQUIRE(plan.tensors.size() == 1);
  const auto& chunks = plan.tensors[0].chunks;
  REQUIRE(chunks.size() == 2);
  CHECK(chunks[0].file_rank == 0);
  CHECK(chunks[1].file_rank == 1);
  CHECK(chunks[1].indices[0].runs() == std::vector<meshsim::IndexRuns::Run>{{3, 6}});
  CHECK_THROWS_WITH(
      meshsim::plan_checkpoint({{"p", DTensorSpec{spec.mesh,
                                                  {meshsim::Partial{}, meshsim::Shard{0}},
                                                  {6, 4},
                                                  meshsim::DType::kFloat32}}}),
      "'p' is Partial on a mesh dim: reduce it (redistribute to Replicate) before saving");
}

TEST_CASE("world checkpoint: a checkpoint that does not fit is refused with a reason",
          "[io][world_checkpoint]") {
  const std::string dir = fresh_dir("refused");
  const Tensor global = random_global({4, 4}, 3);
  for (int64_t r = 0; r < 2; ++r) {
    LocalGroupCreator groups(r, 2);
    const DTensorSpec spec = spec_on(groups, {{2}, {meshsim::Shard{0}}}, {4, 4});
    const DTensor t = DTensor::from_local_shard(spec, cut(global, spec));
    meshsim::save_world_checkpoint(dir, r, {{"w", &t}}, meshsim::ArchiveFormat::kText);
  }
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

TEST_CASE("world checkpoint: metadata of record version 1 keeps loading",
          "[io][world_checkpoint]") {
  // step100/metadata.ckpt of scenarios/checkpoint_reshard.toml (see tests/io/data/README.md):
  // w float32[8, 6] as [Shard(0), Shard(1)] over (2, 2), one chunk per rank; b float32[7] as
  // [Replicate(), Shard(0)], its two chunks written once, by ranks 0 and 1.
  const std::string file = meshsim::read_file_bounded(
      std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/checkpoint_metadata_v1.bin", 1 << 20);
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
  CHECK(m.tensors[1].chunks[0].file_rank == 0);
  CHECK(m.tensors[1].chunks[1].file_rank == 1);
  CHECK(m.tensors[1].chunks[1].indices[0].runs() == std::vector<meshsim::IndexRuns::Run>{{4, 7}});
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
  LocalGroupCreator groups(0, 2);
  const Ints two{2};
  const DTensorSpec spec{
      DeviceMesh::init(groups, "cuda", two), {meshsim::Shard{0}}, {4, 3}, meshsim::DType::kFloat32};
  meshsim::CheckpointMetadata plan = meshsim::plan_checkpoint({{"w", spec}});
  const std::string dir = fresh_dir("bad-metadata");
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
