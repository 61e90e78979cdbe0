// reduce_tensors against sums worked out here in double, in group-rank order: the order NCCL's
// ring does not promise and meshsim fixes so that results reproduce.
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "src/comm/collective.hpp"
#include "src/error.hpp"

using namespace meshsim;

namespace {

Tensor floats(const std::vector<double>& values, DType dtype) {
  Tensor t({static_cast<int64_t>(values.size())}, dtype);
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

std::vector<const Tensor*> pointers(const std::vector<Tensor>& tensors) {
  std::vector<const Tensor*> out;
  for (const Tensor& t : tensors) out.push_back(&t);
  return out;
}

}  // namespace

TEST_CASE("reduce_tensors: float32 accumulates in double in rank order, then rounds once",
          "[comm][reduce]") {
  // In float32, 1e8 + 1 is 1e8 again; in double it is exact, so the sum keeps the 1.
  const std::vector<Tensor> in = {floats({1e8, 3.0}, DType::kFloat32),
                                  floats({1.0, 0.1}, DType::kFloat32),
                                  floats({-1e8, 0.2}, DType::kFloat32)};
  for (const InputLayouts layouts : {InputLayouts::kCheck, InputLayouts::kKnownSame}) {
    const Tensor sum = reduce_tensors(pointers(in), ReduceOp::kSum, layouts);
    CHECK(sum.get(0) == 1.0);
    const double expected = static_cast<double>(
        static_cast<float>(3.0 + static_cast<double>(0.1f) + static_cast<double>(0.2f)));
    CHECK(sum.get(1) == expected);
  }
}

TEST_CASE("reduce_tensors: every op on float32 and float64 matches a loop over doubles",
          "[comm][reduce]") {
  const std::vector<std::vector<double>> values = {
      {1.5, -2.25, 1e-3, 7.0}, {0.5, 4.0, 3e-3, -1.0}, {2.0, 0.125, -5e-4, 9.5}};
  for (const DType dtype : {DType::kFloat32, DType::kFloat64}) {
    std::vector<Tensor> in;
    for (const auto& v : values) in.push_back(floats(v, dtype));
    for (const ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      const Tensor out = reduce_tensors(pointers(in), op);
      REQUIRE(out.shape() == std::vector<int64_t>{4});
      REQUIRE(out.dtype() == dtype);
      for (int64_t i = 0; i < 4; ++i) {
        double acc = in[0].get(i);
        for (size_t k = 1; k < in.size(); ++k) {
          const double x = in[k].get(i);
          if (op == ReduceOp::kSum || op == ReduceOp::kAvg) acc += x;
          if (op == ReduceOp::kMin) acc = std::min(acc, x);
          if (op == ReduceOp::kMax) acc = std::max(acc, x);
          if (op == ReduceOp::kProduct) acc *= x;
        }
        if (op == ReduceOp::kAvg) acc /= static_cast<double>(in.size());
        const double expected = dtype == DType::kFloat32 ? static_cast<float>(acc) : acc;
        CHECK(out.get(i) == expected);
      }
    }
  }
}

TEST_CASE("reduce_tensors: inputs of another shape or dtype are refused when checked",
          "[comm][reduce]") {
  const std::vector<Tensor> shapes = {floats({1.0, 2.0}, DType::kFloat32),
                                      floats({1.0, 2.0, 3.0}, DType::kFloat32)};
  CHECK_THROWS_AS(reduce_tensors(pointers(shapes), ReduceOp::kSum), Error);
  const std::vector<Tensor> dtypes = {floats({1.0}, DType::kFloat32),
                                      floats({1.0}, DType::kFloat64)};
  CHECK_THROWS_AS(reduce_tensors(pointers(dtypes), ReduceOp::kSum), Error);
}
