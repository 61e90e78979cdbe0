// torch.save files of a DTensor and a DeviceMesh that torch 2.15 wrote on 8 ranks
// (scenarios/checkpoints/torch-pt-fsdp-tp-2x4, tests/torch_pt_writer.py), read back, and the same
// files with their pickle edited the ways a hand or another torch version would. torch_pt_diff
// compares many more files with torch's own view of them.
#include "src/io/torch_saved_dtensor.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/torch_save_writer.hpp"

using meshsim::DTensor;
using meshsim::TorchSavedDTensor;

namespace {

const std::string kDir =
    std::string(MESHSIM_SOURCE_ROOT) + "/scenarios/checkpoints/torch-pt-fsdp-tp-2x4";

std::string file(const std::string& name) {
  return meshsim::read_file_bounded(kDir + "/" + name, 1 << 20);
}

// The archive with its data.pkl passed through `edit` (entries re-stored, checksums resealed).
std::string with_pickle(const std::string& archive, const auto& edit) {
  const std::vector<meshsim::ZipEntry> entries = meshsim::read_stored_zip(archive, "test");
  meshsim::StoredZipWriter writer;
  for (const meshsim::ZipEntry& entry : entries) {
    std::string data(entry.data);
    if (entry.name.ends_with("/data.pkl")) edit(data);
    writer.add(entry.name, std::move(data));
  }
  writer.finish();
  std::string out;
  for (std::string_view piece : writer.pieces()) out += piece;
  return out;
}

void replace_once(std::string& text, std::string_view from, std::string_view to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
}

std::string refusal(const std::string& bytes, int64_t world_size = 8) {
  try {
    meshsim::open_torch_saved_dtensor(bytes, "w.pt", world_size);
  } catch (const meshsim::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("torch.save of an FSDP x TP DTensor reads as torch wrote it", "[torch_save]") {
  const meshsim::TorchSavedObject object = meshsim::read_torch_saved_object(file("w-5.pt"), "w");
  const auto& t = std::get<TorchSavedDTensor>(object);
  CHECK(t.shape == std::vector<int64_t>{16, 4});
  CHECK(t.stride == std::vector<int64_t>{4, 1});
  CHECK(t.dtype == meshsim::DType::kFloat32);
  CHECK(t.requires_grad);
  CHECK(meshsim::placements_repr(t.placements) == "(_StridedShard(dim=0, sf=4), Shard(dim=0))");
  // FSDP over TP: rank 5 (dp 1, tp 1) holds rows 6 and 7 of 16.
  REQUIRE(t.local.shape() == std::vector<int64_t>{2, 4});
  for (int64_t i = 0; i < 8; ++i) CHECK(t.local.get(i) == static_cast<double>(24 + i));
  const meshsim::DeviceMesh::SavedFields& mesh = t.mesh.self;
  CHECK(mesh.thread_id == 5);
  CHECK(mesh.coordinate_on_dim == std::vector<int64_t>{1, 1});
  CHECK(mesh.mesh_dim_names == std::vector<std::string>{"dp", "tp"});
  CHECK(mesh.dim_group_names == std::vector<std::string>{"2", "6"});
  CHECK(!t.mesh.root);

  const DTensor restored = meshsim::open_torch_saved_dtensor(file("w-5.pt"), "w", 8);
  CHECK(restored.spec().mesh.rank() == 5);
  CHECK(restored.requires_grad());
}

TEST_CASE("torch.save of a DeviceMesh restores with its group names", "[torch_save]") {
  const meshsim::DeviceMesh mesh = meshsim::open_torch_saved_mesh(file("mesh-2.pt"), "m", 8);
  CHECK(mesh.shape() == std::vector<int64_t>{2, 4});
  CHECK(mesh.group_name(std::string("dp")) == "3");
  CHECK(mesh.group_name(std::string("tp")) == "5");
}

TEST_CASE("torch.save files of the wrong kind or world are refused", "[torch_save]") {
  CHECK_THAT(refusal(file("mesh-0.pt")),
             Catch::Contains("torch.save wrote a DeviceMesh here, not a DTensor"));
  CHECK_THAT(refusal(file("w-0.pt"), 4),
             Catch::Contains("its rank_map holds 8 ranks, more than this world's 4"));
  CHECK_THROWS_WITH(meshsim::open_torch_saved_mesh(file("w-0.pt"), "w.pt", 8),
                    Catch::Contains("torch.save wrote a DTensor here, not a DeviceMesh"));
}

TEST_CASE("torch.save pickles naming other classes are refused at their byte", "[torch_save]") {
  // Another placement class (GLOBAL's arguments are newline-ended, so lengths may change).
  const std::string masked = with_pickle(file("w-1.pt"), [](std::string& pickle) {
    replace_once(pickle, "placement_types\nShard\n", "placement_types\n_MaskPartial\n");
  });
  CHECK_THAT(refusal(masked),
             Catch::Contains("w.pt: w-1/data.pkl: byte 1270: GLOBAL (0x63): "
                             "torch.distributed.tensor.placement_types._MaskPartial is not one of "
                             "the classes this file may name"));
  // Something that runs code when Python unpickles it.
  const std::string evil = with_pickle(file("w-1.pt"), [](std::string& pickle) {
    replace_once(pickle, "torch\nSize\n", "os\nsystem\n");
  });
  CHECK_THAT(refusal(evil), Catch::Contains("os.system"));
}

TEST_CASE("a torch.save DTensor whose shard is not its spec's is refused", "[torch_save]") {
  // The spec's dtype made float64 while the shard stays float32.
  const std::string retyped = with_pickle(file("w-3.pt"), [](std::string& pickle) {
    replace_once(pickle, "torch\nfloat32\n", "torch\nfloat64\n");
  });
  CHECK_THAT(refusal(retyped),
             Catch::Contains("w.pt: local tensor float32[2, 4] does not fit the shard of "
                             "float64[16, 4]"));
  // A rank table of floats.
  const std::string float_table = with_pickle(file("w-3.pt"), [](std::string& pickle) {
    replace_once(pickle, "torch\nIntStorage\n", "torch\nFloatStorage\n");
  });
  CHECK_THAT(refusal(float_table),
             Catch::Contains("_spec.mesh._rank_map") && Catch::Contains("a rank table of float32"));
}

TEST_CASE("a plain torch.save tensor is not a DTensor", "[torch_save]") {
  const meshsim::Tensor plain = meshsim::Tensor::full({3}, 1, meshsim::DType::kFloat32);
  meshsim::StoredZipWriter writer = meshsim::torch_save_tensor(plain);
  std::string bytes;
  for (std::string_view piece : writer.pieces()) bytes += piece;
  CHECK(meshsim::looks_like_zip_archive(bytes));
  CHECK(!meshsim::looks_like_zip_archive("MSIM"));
  CHECK_THAT(refusal(bytes), Catch::Contains("expected a DTensor or DeviceMesh"));
}

TEST_CASE("hostile torch.save files are refused quickly and in bounds", "[torch_save]") {
  // tests/io/data/torch_pt_hostile/make.py writes them without PyTorch.
  const std::string dir = std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/torch_pt_hostile/";
  // One empty tuple named 1000 times per level, seven levels deep (14 KB): every tuple visited
  // counts, so the walk stops at 256 parts instead of making 10^21 steps.
  CHECK_THROWS_WITH(
      meshsim::open_torch_saved_mesh(meshsim::read_file_bounded(dir + "layout_bomb.pt", 1 << 20),
                                     "layout_bomb.pt", 8),
      Catch::Contains("DeviceMesh._layout.axes[0]") &&
          Catch::Contains("its shape has more than 256 parts"));
  // Two placements on a 1-d mesh with a shard order naming mesh dim 1: refused, never read.
  CHECK_THROWS_WITH(
      meshsim::open_torch_saved_dtensor(meshsim::read_file_bounded(dir + "order_1d.pt", 1 << 20),
                                        "order_1d.pt", 8),
      Catch::Contains("order_1d.pt: the DTensor's shard_order: 2 placements for a 1-d mesh"));
}
