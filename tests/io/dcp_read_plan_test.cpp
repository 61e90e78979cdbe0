// Load plans of the DCP checkpoint torch 2.15 wrote (tests/io/data/dcp_2x2) onto other meshes.
// dcp_inspect_diff compares plans of random checkpoints with torch's own load planner; these pin
// the figures and refusals of one.
#include "src/io/dcp_read_plan.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "src/error.hpp"
#include "src/io/atomic_file.hpp"

using meshsim::DcpReadPlan;
using meshsim::DcpReadRequest;

namespace {

meshsim::DcpMetadata fixture() {
  const std::string path = std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/dcp_2x2/.metadata";
  return meshsim::read_dcp_metadata(meshsim::read_file_bounded(path, 1 << 20), path);
}

DcpReadRequest request(std::vector<int64_t> mesh, std::vector<std::string> placements) {
  DcpReadRequest out;
  out.mesh_shape = std::move(mesh);
  for (const std::string& p : placements) out.placements.push_back(meshsim::parse_placement(p));
  return out;
}

}  // namespace

TEST_CASE("a DCP load plan reads the chunks overlapping each rank's shard", "[io][dcp]") {
  const meshsim::DcpMetadata metadata = fixture();
  DcpReadRequest asked = request({2, 4}, {"Shard(0)", "Replicate()"});
  asked.names = {"model.w", "model.b", "epoch", "nope", "step"};
  asked.detail_rank = 5;
  const DcpReadPlan plan = meshsim::plan_dcp_read(metadata, asked);
  CHECK(plan.missing == std::vector<std::string>{"nope"});
  CHECK(plan.mismatched.empty());
  CHECK(plan.tensors == 3);
  CHECK(plan.objects == 1);
  REQUIRE(plan.ranks.size() == 8);
  const meshsim::DcpRankRead& rank = plan.ranks[5];
  // Rows 4:8 of w come from two saved chunks, b's 3:6 from one; epoch and the 0-d step whole.
  REQUIRE(rank.reads.size() == 5);
  CHECK(metadata.entries[rank.reads[0].entry].name == "model.w");
  CHECK(rank.reads[0].offsets == std::vector<int64_t>{4, 0});
  CHECK(rank.reads[0].sizes == std::vector<int64_t>{4, 2});
  CHECK(rank.items == 5);
  CHECK(rank.file_bytes == 1577 * 4 + 1261);
  CHECK(rank.holds_bytes == 16 * 4 + 3 * 2 + 8);  // w's 16 floats, b's 3 bfloat16s, the int64
  CHECK(rank.peak_bytes == rank.holds_bytes + 1577 + 32);
  CHECK(plan.ranks[0].reads.empty());  // only rank 5 was asked for in detail
}

TEST_CASE("a DCP load plan names what the placements do not fit and refuses bad requests",
          "[io][dcp]") {
  const meshsim::DcpMetadata metadata = fixture();
  const DcpReadPlan plan =
      meshsim::plan_dcp_read(metadata, request({2, 2}, {"Shard(0)", "Shard(1)"}));
  CHECK(plan.mismatched ==
        std::vector<std::string>{"model.b: Shard(1) does not apply to a 1-d tensor",
                                 "mask: Shard(1) does not apply to a 1-d tensor",
                                 "half: Shard(1) does not apply to a 1-d tensor",
                                 "rng.cuda: Shard(1) does not apply to a 1-d tensor"});
  CHECK_THROWS_WITH(meshsim::plan_dcp_read(metadata, request({2, 2}, {"Shard(0)"})),
                    "1 placements for a 2-d mesh: give one per mesh dim");
  CHECK_THROWS_WITH(meshsim::plan_dcp_read(metadata, request({4}, {"Partial()"})),
                    Catch::Contains("cannot be loaded into Partial placements"));
  DcpReadRequest outside = request({4}, {"Shard(0)"});
  outside.detail_rank = 4;
  CHECK_THROWS_WITH(meshsim::plan_dcp_read(metadata, outside),
                    "rank 4 is not in a mesh of 4 ranks");
}
