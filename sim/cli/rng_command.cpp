#include "sim/cli/rng_command.hpp"

#include <cmath>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "sim/cli/cli_numbers.hpp"
#include "src/error.hpp"
#include "src/rng/cuda_random_kernel.hpp"

namespace meshsim::sim {

namespace {

constexpr int kExitUnusable = 2;
// One value per line: a bound that keeps the output (and the work) to what a person diffs.
constexpr uint64_t kMaxNumel = uint64_t{1} << 30;

int bad(std::string_view flag, const std::string& error) {
  std::cerr << "meshsim rng predict: " << flag << ": " << error << "\n";
  return kExitUnusable;
}

// A finite number, strictly: the whole text, as strtod reads it.
bool parse_double(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(out);
}

std::string bits_of(const Tensor& t, int64_t i) {
  const size_t size = dtype_size(t.dtype());
  uint64_t bits = 0;
  std::memcpy(&bits, t.bytes().data() + static_cast<size_t>(i) * size, size);
  return fmt::format("0x{:0{}x}", bits, 2 * size);
}

}  // namespace

CLI::App* add_rng_command(CLI::App& app, RngPredictFlags& f) {
  CLI::App* rng = app.add_subcommand("rng", "predict PyTorch's CUDA random numbers");
  rng->require_subcommand(1);
  CLI::App* predict = rng->add_subcommand(
      "predict",
      "print the values a CUDA random op draws (one per line), then the generator offset after "
      "it");
  predict->add_option("--seed", f.seed, "generator seed, -2^63 to 2^64-1 (default 0)");
  predict->add_option("--offset", f.offset,
                      "Philox offset before the op, a multiple of 4 (default 0)");
  predict->add_option("--numel", f.numel, "number of elements (1 to 2^30)")->required();
  predict->add_option("--dtype", f.dtype, "float32 (default), float64, float16 or bfloat16");
  predict->add_option("--gpu", f.gpu,
                      "GPU model: H200, H100 SXM, H100 PCIe, A100, L40S, L40, A10G, L4, T4, V100, "
                      "RTX 4090 (default H200)");
  predict->add_option("--sms", f.sms,
                      "a GPU of your own: its SM count (with --max-threads-per-sm)");
  predict->add_option("--max-threads-per-sm", f.max_threads_per_sm,
                      "a GPU of your own: its maximum threads per SM");
  predict
      ->add_option("--op", f.op, "uniform (torch.rand, uniform_) or normal (torch.randn, normal_)")
      ->check(CLI::IsMember({"uniform", "normal"}));
  predict->add_option("--from", f.from,
                      "uniform: lower bound (default 0); normal: mean (default 0)");
  predict->add_option("--to", f.to, "uniform: upper bound (default 1); normal: std (default 1)");
  predict->add_option("--format", f.format, "float (default) or hex (the raw bits)")
      ->check(CLI::IsMember({"float", "hex"}));
  return predict;
}

int run_rng_predict(const RngPredictFlags& f) {
  PhiloxState state;
  try {
    state = PhiloxState::from_seed_text(f.seed);
  } catch (const Error& e) {
    return bad("--seed", e.what());
  }
  std::string error;
  if (!(error = parse_unsigned(f.offset, 0, uint64_t{1} << 62, state.offset)).empty())
    return bad("--offset", error);
  if (state.offset % 4 != 0) return bad("--offset", "offset must be a multiple of 4");
  uint64_t numel = 0;
  if (!(error = parse_unsigned(f.numel, 1, kMaxNumel, numel)).empty()) return bad("--numel", error);
  const std::optional<DType> parsed = parse_dtype(f.dtype);
  if (!parsed) return bad("--dtype", fmt::format("unknown dtype \"{}\"", f.dtype));
  const DType dtype = *parsed;
  if (dtype != DType::kFloat32 && dtype != DType::kFloat64 && dtype != DType::kFloat16 &&
      dtype != DType::kBFloat16) {
    return bad("--dtype", fmt::format("{} is not a floating dtype the random kernels write",
                                      dtype_name(dtype)));
  }
  GpuProfile gpu = *find_gpu("H200");
  if (!f.sms.empty() || !f.max_threads_per_sm.empty()) {
    if (!f.gpu.empty()) return bad("--gpu", "give a GPU model or --sms with --max-threads-per-sm");
    if (f.sms.empty() || f.max_threads_per_sm.empty())
      return bad("--sms", "--sms and --max-threads-per-sm go together");
    uint64_t sms = 0, threads = 0;
    if (!(error = parse_unsigned(f.sms, 1, 4096, sms)).empty()) return bad("--sms", error);
    if (!(error = parse_unsigned(f.max_threads_per_sm, 256, 4096, threads)).empty())
      return bad("--max-threads-per-sm", error);
    try {
      gpu = GpuProfile::custom(static_cast<int64_t>(sms), static_cast<int64_t>(threads));
    } catch (const Error& e) {
      return bad("--max-threads-per-sm", e.what());
    }
  } else if (!f.gpu.empty()) {
    const std::optional<GpuProfile> known = find_gpu(f.gpu);
    if (!known) return bad("--gpu", fmt::format("unknown GPU \"{}\"", f.gpu));
    gpu = *known;
  }
  const bool uniform = f.op == "uniform";
  double a = 0.0, b = 1.0;
  if (!f.from.empty() && !parse_double(f.from, a)) return bad("--from", "not a finite number");
  if (!f.to.empty() && !parse_double(f.to, b)) return bad("--to", "not a finite number");
  if (uniform && !(a <= b)) {
    return bad("--to", fmt::format("uniform_ expects to return a [from, to) range, but found "
                                   "from={} > to={}",
                                   a, b));
  }
  if (!uniform && b < 0)
    return bad("--to", fmt::format("normal expects std >= 0.0, but found std {}", b));
  const auto n = static_cast<int64_t>(numel);
  const Tensor values = uniform ? predict_uniform(state, n, dtype, gpu, a, b)
                                : predict_normal(state, n, dtype, gpu, a, b);
  // Enough digits to name the value exactly: 9 for float32 and narrower, 17 for float64.
  const int digits = dtype == DType::kFloat64 ? 17 : 9;
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    out += f.format == "hex" ? bits_of(values, i) : fmt::format("{:.{}g}", values.get(i), digits);
    out += '\n';
  }
  out += fmt::format("offset {}\n", state.offset);
  std::cout << out;
  return std::cout.good() ? 0 : kExitUnusable;
}

}  // namespace meshsim::sim
