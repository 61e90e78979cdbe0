// Parameter layouts of parallelize_module and fully_shard, and nn.Linear's init bounds.
#include "src/nn/parallelize.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"

using meshsim::DeviceMesh;
using meshsim::DTensor;
using meshsim::LocalGroupCreator;
using meshsim::Parameter;
using meshsim::Tensor;
using meshsim::TpStyle;

namespace {

std::vector<std::string> names(const DTensor& d) {
  std::vector<std::string> out;
  for (const meshsim::Placement& p : d.spec().placements) out.push_back(meshsim::placement_name(p));
  return out;
}

const Parameter kMetaWeight = Tensor({16, 8}, meshsim::DType::kFloat32, Tensor::Storage::kMeta);
const Parameter kMetaBias = Tensor({16}, meshsim::DType::kFloat32, Tensor::Storage::kMeta);

}  // namespace

TEST_CASE("nn: reset_parameters' bounds are torch.nn.init's, bit for bit", "[nn]") {
  // torch 2.15: calculate_gain("leaky_relu", sqrt(5)) / sqrt(fan) * sqrt(3), and 1 / sqrt(fan).
  CHECK(meshsim::kaiming_uniform_bound(1) == 0.9999999999999999);
  CHECK(meshsim::kaiming_uniform_bound(8) == 0.3535533905932737);
  CHECK(meshsim::kaiming_uniform_bound(16) == 0.24999999999999997);
  CHECK(meshsim::kaiming_uniform_bound(32) == 0.17677669529663684);
  CHECK(meshsim::kaiming_uniform_bound(4096) == 0.015624999999999998);
  CHECK(meshsim::linear_bias_bound(8) == 0.35355339059327373);
  CHECK(meshsim::linear_bias_bound(4096) == 0.015625);
  CHECK(meshsim::linear_bias_bound(0) == 0.0);
}

TEST_CASE("nn: ColwiseParallel, RowwiseParallel and fully_shard lay parameters out as PyTorch",
          "[nn]") {
  LocalGroupCreator groups(3, 4);
  const DeviceMesh world = DeviceMesh::init(groups, "cuda", std::vector<int64_t>{2, 2},
                                            std::vector<std::string>{"dp", "tp"});
  const DeviceMesh dp = world.slice({"dp"});
  const DeviceMesh tp = world.slice({"tp"});
  const DTensor col_w = meshsim::parallelize_parameter(kMetaWeight, false, tp, TpStyle::kColwise);
  const DTensor col_b = meshsim::parallelize_parameter(kMetaBias, true, tp, TpStyle::kColwise);
  const DTensor row_w = meshsim::parallelize_parameter(kMetaWeight, false, tp, TpStyle::kRowwise);
  const DTensor row_b = meshsim::parallelize_parameter(kMetaBias, true, tp, TpStyle::kRowwise);
  CHECK(names(col_w) == std::vector<std::string>{"Shard(0)"});
  CHECK(names(col_b) == std::vector<std::string>{"Shard(0)"});
  CHECK(names(row_w) == std::vector<std::string>{"Shard(1)"});
  CHECK(names(row_b) == std::vector<std::string>{"Replicate()"});
  CHECK(col_w.local().shape() == std::vector<int64_t>{8, 8});
  CHECK(col_w.local().is_meta());

  // FSDP over TP: dim 0 strided over dp by the TP shards of dim 0; Shard(0) when TP leaves it.
  const DTensor fsdp_col = meshsim::fully_shard_parameter(col_w, dp);
  CHECK(names(fsdp_col) == std::vector<std::string>{"_StridedShard(0, sf=2)", "Shard(0)"});
  CHECK(fsdp_col.spec().mesh.dim_names() == std::vector<std::string>{"dp", "tp"});
  CHECK(fsdp_col.local().shape() == std::vector<int64_t>{4, 8});
  CHECK(names(meshsim::fully_shard_parameter(row_w, dp)) ==
        std::vector<std::string>{"Shard(0)", "Shard(1)"});
  CHECK(names(meshsim::fully_shard_parameter(row_b, dp)) ==
        std::vector<std::string>{"Shard(0)", "Replicate()"});
  CHECK(names(meshsim::fully_shard_parameter(kMetaWeight, dp)) ==
        std::vector<std::string>{"Shard(0)"});

  // What is not modelled says so.
  const Parameter real = Tensor({4, 4}, meshsim::DType::kFloat32);
  try {
    meshsim::parallelize_parameter(real, false, tp, TpStyle::kColwise);
    FAIL("expected NotImplementedError");
  } catch (const meshsim::Error& e) {
    CHECK(e.type() == meshsim::PyErrorType::kNotImplementedError);
  }
  REQUIRE_THROWS_WITH(meshsim::fully_shard_parameter(col_w, world),
                      Catch::Contains("Slicing overlapping dim_names"));
  REQUIRE_THROWS_WITH(meshsim::parallelize_parameter(col_w, false, tp, TpStyle::kColwise),
                      "parallelize_module: the parameter is already a DTensor");
}

TEST_CASE("nn: fully_shard over a 2-D mesh is HSDP (replicate, then shard)", "[nn]") {
  LocalGroupCreator groups(5, 8);
  const DeviceMesh world = DeviceMesh::init(groups, "cuda", std::vector<int64_t>{2, 2, 2},
                                            std::vector<std::string>{"rep", "shard", "tp"});
  const DeviceMesh hsdp = world.slice({"rep", "shard"});
  const DeviceMesh tp = world.slice({"tp"});
  const DTensor plain = meshsim::fully_shard_parameter(kMetaWeight, hsdp);
  CHECK(names(plain) == std::vector<std::string>{"Replicate()", "Shard(0)"});
  CHECK(plain.local().shape() == std::vector<int64_t>{8, 8});
  const DTensor col_w = meshsim::parallelize_parameter(kMetaWeight, false, tp, TpStyle::kColwise);
  const DTensor both = meshsim::fully_shard_parameter(col_w, hsdp);
  CHECK(names(both) ==
        std::vector<std::string>{"Replicate()", "_StridedShard(0, sf=2)", "Shard(0)"});
  CHECK(both.spec().mesh.dim_names() == std::vector<std::string>{"rep", "shard", "tp"});
  CHECK(both.local().shape() == std::vector<int64_t>{4, 8});
  REQUIRE_THROWS_WITH(meshsim::fully_shard_parameter(kMetaWeight, world),
                      Catch::Contains("FSDP2 takes a 1-D mesh, or a 2-D (replicate, shard) mesh"));
}
