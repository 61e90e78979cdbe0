// DTensor records (docs/mesh.md 4.2): the seed test on every rank and format, every placement, meta
// shards, requires_grad, and records whose parts do not fit together refused.
#include "src/io/dtensor_record.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/record_archive.hpp"
#include "src/rng/rank_rng.hpp"
#include "tests/support/splitmix.hpp"

using meshsim::ArchiveFormat;
using meshsim::DeviceMesh;
using meshsim::DTensor;
using meshsim::DTensorSpec;
using meshsim::LocalGroupCreator;
using meshsim::RecordObject;
using meshsim::Tensor;
using Ints = std::vector<int64_t>;
using Names = std::vector<std::string>;

namespace {

Tensor random_tensor(Ints shape, uint64_t seed) {
  Tensor t(std::move(shape), meshsim::DType::kFloat32);
  meshsim::testing::SplitMix rng{seed};
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(rng.below(1 << 20)) / 7.0);
  return t;
}

// from_local(randn(3, 3), mesh, [Shard(0)]) on a 1-d mesh of the whole world.
DTensor seed_test_tensor(LocalGroupCreator& groups) {
  const Ints world{groups.world_size()};
  DeviceMesh mesh = DeviceMesh::init(groups, "cuda", world);
  DTensorSpec spec{
      mesh, {meshsim::Shard{0}}, {3 * groups.world_size(), 3}, meshsim::DType::kFloat32};
  return DTensor::from_local_shard(std::move(spec),
                                   random_tensor({3, 3}, static_cast<uint64_t>(groups.rank())));
}

std::string open_error(std::string_view file, int64_t world, bool strict = false) {
  try {
    meshsim::open_dtensor(file, world, strict);
  } catch (const meshsim::Error& e) {
    return std::string(meshsim::py_error_type_name(e.type())) + ": " + e.what();
  }
  return "(opened)";
}

std::string sealed(const RecordObject& record) {
  return meshsim::seal_record(meshsim::RecordKind::kDTensor, 1, record, ArchiveFormat::kBinary);
}

}  // namespace

TEST_CASE("dtensor record: the seed test, on every rank, format and loader",
          "[io][dtensor_record]") {
  for (int64_t rank = 0; rank < 4; ++rank) {
    LocalGroupCreator groups(rank, 4);
    DTensor original = seed_test_tensor(groups);
    original.set_requires_grad(rank % 2 == 1);
    for (const auto& [format, format_name] : meshsim::kArchiveFormatNames) {
      for (bool strict : {false, true}) {
        INFO("rank " << rank << ", " << meshsim::archive_format_name(format)
                     << (strict ? ", strict" : ", permissive"));
        // decouple_backend_at_save on: no group names.
        DTensor loaded =
            meshsim::open_dtensor(meshsim::seal_dtensor(original, false, format), 4, strict);
        CHECK_FALSE(loaded.spec().mesh.has_group_names());
        CHECK_THROWS_WITH(loaded.spec().mesh.group_name(),
                          "DeviceMesh process groups not initialized!");
        loaded.reassign_mesh(original.spec().mesh);
        CHECK(loaded.spec().mesh.has_group_names());
        CHECK(loaded == original);
        CHECK(loaded.local().same_as(original.local()));
        CHECK(loaded.requires_grad() == (rank % 2 == 1));
      }
    }
  }
}

TEST_CASE("dtensor record: every placement and meta shards round-trip", "[io][dtensor_record]") {
  for (int64_t rank = 0; rank < 8; ++rank) {
    LocalGroupCreator groups(rank, 8);
    const Ints shape{2, 2, 2};
    const DeviceMesh mesh = DeviceMesh::init(groups, "cuda", shape, Names{"pp", "dp", "tp"});
    const std::vector<std::vector<meshsim::Placement>> cases{
        {meshsim::Shard{0}, meshsim::Replicate{}, meshsim::Shard{1}},
        {meshsim::StridedShard{0, 2}, meshsim::Partial{meshsim::ReduceOp::kMax}, meshsim::Shard{0}},
        {meshsim::Replicate{}, meshsim::Replicate{}, meshsim::Partial{}}};
    for (const auto& placements : cases) {
      for (Tensor::Storage storage : {Tensor::Storage::kMaterialized, Tensor::Storage::kMeta}) {
        DTensor t = DTensor::zeros(DTensorSpec{mesh, placements, {7, 5}, meshsim::DType::kBFloat16},
                                   storage);
        if (!t.local().is_meta()) {
          Tensor local = t.local();
          for (int64_t i = 0; i < local.numel(); ++i) local.set(i, static_cast<double>(i + rank));
          t.set_local(local);
        }
        INFO("rank " << rank << ": " << t.spec().describe());
        const DTensor loaded =
            meshsim::open_dtensor(meshsim::seal_dtensor(t, true, ArchiveFormat::kBinary), 8, true);
        CHECK(loaded == t);
        CHECK(loaded.spec().mesh.has_group_names());
      }
    }
  }
}

TEST_CASE("dtensor record: the strict loader names types it does not know",
          "[io][dtensor_record]") {
  LocalGroupCreator groups(0, 4);
  const RecordObject good = meshsim::dtensor_to_record(seed_test_tensor(groups), false);
  RecordObject record = good;
  auto& spec = record.fields[1].second.objects.front();
  REQUIRE(spec.type == "DTensorSpec");
  spec.fields[1].second.objects.front() = RecordObject{"Flatten", {}};
  CHECK(open_error(sealed(record), 4, true) ==
        "RuntimeError: strict load of a DTensor refused type 'Flatten' at "
        "DTensor._spec.placements[0]: only DTensor, DTensorSpec, DeviceMesh, Partial, Replicate, "
        "Shard, Tensor, TensorMeta, _StridedShard, dict are allowed (load without strict to read "
        "other types)");
  CHECK(open_error(sealed(record), 4, false) ==
        "RuntimeError: DTensor._spec.placements[0] is a 'Flatten', not a placement (Shard, "
        "Replicate, Partial or _StridedShard)");
}

TEST_CASE("dtensor record: parts that do not fit together are refused", "[io][dtensor_record]") {
  LocalGroupCreator groups(1, 4);
  const RecordObject good = meshsim::dtensor_to_record(seed_test_tensor(groups), false);
  const auto edit = [&](auto&& change) {
    RecordObject record = good;
    change(record);
    return open_error(sealed(record), 4);
  };
  const auto local = [](RecordObject& r) -> RecordObject& { return r.fields[0].second.objects[0]; };
  const auto meta = [](RecordObject& r) -> RecordObject& {
    return r.fields[1].second.objects[0].fields[2].second.objects[0];
  };
  CHECK(
      edit([&](RecordObject& r) { local(r).fields[2].second.text.pop_back(); }) ==
      "RuntimeError: DTensor._local_tensor holds 35 bytes of data, a float32[3, 3] tensor has 36");
  CHECK(edit([&](RecordObject& r) { local(r).fields[0].second.text = "complex32"; }) ==
        "RuntimeError: DTensor._local_tensor.dtype 'complex32' is not a dtype");
  CHECK(edit([&](RecordObject& r) {
          meta(r).fields[1].second.integers = {1, 12};
        }) ==
        "RuntimeError: DTensor._spec.tensor_meta.stride [1, 12] is not the contiguous stride of "
        "shape [12, 3]");
  CHECK(edit([&](RecordObject& r) {
          meta(r).fields[0].second.integers = {16, 3};
          meta(r).fields[1].second.integers = {3, 1};
        }).find("local tensor float32[3, 3] does not fit the shard of float32[16, 3]") !=
        std::string::npos);
  CHECK(edit([&](RecordObject& r) { r.fields[2].second.integer = 2; }) ==
        "RuntimeError: DTensor.requires_grad is 2, not 0 or 1");
  CHECK(edit([&](RecordObject& r) { r.fields.pop_back(); }) ==
        "ValueError: state_dict is missing required keys: {'requires_grad'} (in DTensor)");
}

TEST_CASE("dtensor record: files of record version 1 keep loading", "[io][dtensor_record]") {
  // Rank 1's DTensor of scenarios/checkpoint_seed_test.toml (see tests/io/data/README.md):
  // from_local(randn(3, 3)) drawn from rank 1's default CUDA generator (seed 67280421310721),
  // Shard(0) over a 1-d mesh of 4, saved decoupled.
  const std::string file = meshsim::read_file_bounded(
      std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/dtensor_v1.bin", 1 << 20);
  const DTensor loaded = meshsim::open_dtensor(file, 4, true);
  CHECK_FALSE(loaded.spec().mesh.has_group_names());
  CHECK(loaded.spec().mesh.rank() == 1);
  CHECK(loaded.spec().shape == Ints{12, 3});
  CHECK(loaded.spec().placements == std::vector<meshsim::Placement>{meshsim::Shard{0}});
  CHECK_FALSE(loaded.requires_grad());
  // The values are what the kernel model draws for torch.randn(3, 3) on that generator.
  meshsim::RankRng rng(meshsim::RngProfile::kLatest, *meshsim::find_gpu("H200"));
  Tensor expected({3, 3}, meshsim::DType::kFloat32);
  rng.random_(expected, meshsim::RandomOp{meshsim::RandomOp::Kind::kNormal, 0.0, 1.0, {}});
  CHECK(loaded.local().same_as(expected));
}

TEST_CASE("dtensor record: every single-byte change and every truncation is refused",
          "[io][dtensor_record]") {
  LocalGroupCreator groups(2, 4);
  const std::string file =
      meshsim::seal_dtensor(seed_test_tensor(groups), true, ArchiveFormat::kBinary);
  for (size_t at = 0; at < file.size(); ++at) {
    std::string damaged = file;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x01);
    INFO("byte " << at);
    CHECK(open_error(damaged, 4).find("checkpoint") != std::string::npos);
  }
  for (size_t cut = 0; cut < file.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK(open_error(file.substr(0, cut), 4).find("checkpoint") != std::string::npos);
  }
}
