// Tensors read from the DCP checkpoint torch 2.15 wrote (tests/io/data/dcp_2x2; values
// arange(numel) * 0.5 + 1 in each dtype, tests/dcp_writer.py), and torch.save archives damaged
// the ways a disk or a hand can damage them. dcp_load_diff compares DTensor loads onto other
// meshes with torch's.
#include "src/io/dcp_load.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/torch_save_archive.hpp"

using meshsim::DcpEntry;
using meshsim::Tensor;

namespace {

const std::string kDir = std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/dcp_2x2";

const DcpEntry& entry(const meshsim::DcpMetadata& metadata, std::string_view name) {
  for (const DcpEntry& e : metadata.entries) {
    if (e.name == name) return e;
  }
  FAIL("no entry " << name);
  throw;
}

// The bytes of the archive holding model.w's chunk [4:8, 0:2] (rank 2's file, after `epoch`).
std::string rank2_chunk() {
  return meshsim::read_file_bounded(kDir + "/__2_0.distcp", 1 << 20).substr(1261, 1577);
}

std::string archive_refusal(const std::string& bytes) {
  try {
    meshsim::read_torch_saved_tensor(bytes, "item");
  } catch (const meshsim::Error& e) {
    return e.what();
  }
  return "(read)";
}

}  // namespace

TEST_CASE("whole tensors of a DCP checkpoint load with the values torch saved", "[io][dcp]") {
  const meshsim::DcpMetadata metadata = meshsim::load_dcp_metadata(kDir);
  const Tensor w = meshsim::load_dcp_tensor(kDir, entry(metadata, "model.w"));  // 4 chunks
  REQUIRE(w.shape() == std::vector<int64_t>{8, 4});
  for (int64_t i = 0; i < 32; ++i) CHECK(w.get(i) == i * 0.5 + 1);
  const Tensor b = meshsim::load_dcp_tensor(kDir, entry(metadata, "model.b"));
  CHECK(b.dtype() == meshsim::DType::kBFloat16);
  for (int64_t i = 0; i < 6; ++i) CHECK(b.get(i) == i * 0.5 + 1);
  const Tensor emb = meshsim::load_dcp_tensor(kDir, entry(metadata, "model.emb"));
  for (int64_t i = 0; i < 24; ++i) CHECK(emb.get_int(i) == static_cast<int64_t>(i * 0.5 + 1));
  const Tensor step = meshsim::load_dcp_tensor(kDir, entry(metadata, "step"));
  CHECK(step.shape().empty());
  CHECK(step.get_int(0) == 1);
  const Tensor mask = meshsim::load_dcp_tensor(kDir, entry(metadata, "mask"));
  for (int64_t i = 0; i < 5; ++i) CHECK(mask.get(i) == (i % 2 == 0 ? 1 : 0));
  CHECK(meshsim::load_dcp_tensor(kDir, entry(metadata, "optim.empty")).numel() == 0);
  CHECK_THROWS_WITH(meshsim::load_dcp_tensor(kDir, entry(metadata, "epoch")),
                    "'epoch' is an object in the checkpoint, not a tensor");
}

TEST_CASE("a torch.save archive reads as the tensor it holds, or is refused at its byte",
          "[io][dcp]") {
  const std::string good = rank2_chunk();
  const Tensor t = meshsim::read_torch_saved_tensor(good, "item");
  CHECK(t.shape() == std::vector<int64_t>{4, 2});
  CHECK(t.get(0) == 16 * 0.5 + 1);  // global [4, 0] of arange(32).reshape(8, 4)

  std::string flipped = good;
  for (const meshsim::ZipEntry& e : meshsim::read_stored_zip(good, "item")) {
    if (e.name == "archive/data/0") flipped[e.data.data() - good.data() + 5] ^= 1;  // a value bit
  }
  CHECK_THAT(archive_refusal(flipped), Catch::Contains("does not match its CRC-32"));
  CHECK_THAT(archive_refusal(good.substr(0, 1000)),
             Catch::Contains("no zip end-of-directory record: not a zip archive"));
  CHECK_THAT(archive_refusal(good.substr(0, good.size() - 1)),
             Catch::Contains("no zip end-of-directory record"));
  CHECK(archive_refusal("") ==
        "item: byte 0: too short to be a zip archive (no end-of-directory "
        "record)");
}
