#include "sim/cli/rng_command.hpp"

#include <cmath>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "sim/cli/cli_numbers.hpp"
#include "src/error.hpp"
#include "src/rng/cuda_random_kernel.hpp"
#include "src/rng/dropout_kernel.hpp"
#include "src/rng/dtensor_rng_offsets.hpp"

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

RngCommands add_rng_command(CLI::App& app, RngPredictFlags& f, RngOffsetsFlags& o) {
  CLI::App* rng = app.add_subcommand("rng", "predict PyTorch's CUDA random numbers");
  rng->require_subcommand(1);
  CLI::App* predict = rng->add_subcommand(
      "predict",
      "print the values a CUDA random op draws (one per line), then \"offset N\": the "
      "generator's Philox offset after it (torch.cuda.default_generators[i].get_offset())");
  predict->add_option("--seed", f.seed, "generator seed, -2^63 to 2^64-1 (default 0)");
  predict->add_option("--offset", f.offset,
                      "Philox offset before the op, a multiple of 4 (default 0)");
  predict->add_option("--numel", f.numel, "number of elements (1 to 2^30), or:");
  predict->add_option("--shape", f.shape,
                      "the tensor's shape, e.g. 3,4 for torch.rand(3, 4) (row-major: the same "
                      "values as its numel)");
  predict->add_option("--dtype", f.dtype, "float32 (default), float64, float16 or bfloat16");
  predict->add_option("--gpu", f.gpu,
                      "GPU model: H200, H100 SXM, H100 PCIe, A100, L40S, L40, A10G, L4, T4, V100, "
                      "RTX 4090 (default H200); `--gpu list` prints them with their other names");
  predict->add_option("--sms", f.sms,
                      "a GPU of your own: its SM count (with --max-threads-per-sm)");
  predict->add_option("--max-threads-per-sm", f.max_threads_per_sm,
                      "a GPU of your own: its maximum threads per SM");
  predict
      ->add_option("--op", f.op,
                   "uniform (torch.rand, uniform_), normal (torch.randn, normal_), bernoulli "
                   "(bernoulli_), exponential (exponential_), log_normal (log_normal_), "
                   "geometric (geometric_) or dropout (F.dropout of a tensor of ones)")
      ->check(CLI::IsMember(
          {"uniform", "normal", "bernoulli", "exponential", "log_normal", "geometric", "dropout"}));
  predict->add_option("--from", f.from,
                      "uniform: lower bound (default 0); normal: mean (default 0); log_normal: "
                      "mean (default 1)");
  predict->add_option("--to", f.to,
                      "uniform: upper bound (default 1); normal: std (default 1); log_normal: "
                      "std (default 2)");
  predict->add_option("--p", f.p,
                      "bernoulli: the probability of a 1 (default 0.5); geometric: the success "
                      "probability (required); dropout: the probability of a zero (default 0.5)");
  predict->add_option("--lambda", f.lambda, "exponential: the rate (default 1)");
  predict->add_option("--format", f.format, "float (default) or hex (the raw bits)")
      ->check(CLI::IsMember({"float", "hex"}));
  CLI::App* offsets = rng->add_subcommand(
      "offsets",
      "print where a DTensor random op draws on every rank: shard index and the Philox offset "
      "increments before and after the op");
  offsets->add_option("--shape", o.shape, "the DTensor's global shape, e.g. 8,4")->required();
  offsets->add_option("--mesh", o.mesh, "the mesh shape, e.g. 2,2")->required();
  offsets
      ->add_option("--placement", o.placements,
                   "one per mesh dim, in order: Shard(0), Replicate(), Partial(), "
                   "_StridedShard(0, sf=2), or S(0), R, P")
      ->required();
  return {predict, offsets};
}

// The known models with what decides their values, and the other names they go by.
int list_gpus() {
  for (const GpuProfile& g : known_gpus()) {
    std::string line =
        fmt::format("{:<10} {:>4} SMs x {} threads", g.name, g.sms, g.max_threads_per_sm);
    std::vector<std::string> others;
    for (const auto& [alias, model] : gpu_aliases()) {
      if (model == g.name) others.push_back(alias);
    }
    if (!others.empty()) line += fmt::format("  (also {})", fmt::join(others, ", "));
    std::cout << line << "\n";
  }
  return std::cout.good() ? 0 : kExitUnusable;
}

int run_rng_predict(const RngPredictFlags& f) {
  if (f.gpu == "list") return list_gpus();
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
  if (f.numel.empty() == f.shape.empty()) return bad("--numel", "give --numel or --shape");
  if (!f.shape.empty()) {
    std::vector<int64_t> sizes;
    if (!(error = parse_sizes(f.shape, kMaxNumel, sizes)).empty()) return bad("--shape", error);
    numel = 1;
    for (const int64_t size : sizes) {
      numel *= static_cast<uint64_t>(size);  // at most 2^30 x 2^30: no overflow
      if (numel > kMaxNumel) break;
    }
    if (sizes.empty() || numel < 1 || numel > kMaxNumel) {
      return bad("--shape", fmt::format("shape [{}]: 1 to 2^30 elements are predicted",
                                        fmt::join(sizes, ", ")));
    }
  } else if (!(error = parse_unsigned(f.numel, 1, kMaxNumel, numel)).empty()) {
    return bad("--numel", error);
  }
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
    if (f.sms.empty() || f.max_threads_per_sm.empty()) {
      return bad(f.sms.empty() ? "--max-threads-per-sm" : "--sms",
                 "--sms and --max-threads-per-sm go together");
    }
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
  const bool normal = f.op == "normal";
  const bool log_normal = f.op == "log_normal";
  const bool takes_p = f.op == "bernoulli" || f.op == "geometric" || f.op == "dropout";
  // Each flag belongs to its op: a stray one is a mistake, not something to ignore.
  if ((!f.from.empty() || !f.to.empty()) && !uniform && !normal && !log_normal) {
    return bad(f.from.empty() ? "--to" : "--from",
               "--from and --to go with uniform, normal and log_normal");
  }
  if (!f.p.empty() && !takes_p) return bad("--p", "--p goes with bernoulli, geometric and dropout");
  if (f.p.empty() && f.op == "geometric") return bad("--p", "--op geometric needs --p");
  if (!f.lambda.empty() && f.op != "exponential")
    return bad("--lambda", "--lambda goes with --op exponential");
  double a = 0.0, b = 1.0;
  if (f.op == "bernoulli" || f.op == "dropout") a = 0.5;
  if (f.op == "exponential") a = 1.0;
  if (log_normal) a = 1.0, b = 2.0;
  if (!f.from.empty() && !parse_double(f.from, a)) return bad("--from", "not a finite number");
  if (!f.to.empty() && !parse_double(f.to, b)) return bad("--to", "not a finite number");
  if (!f.p.empty() && !parse_double(f.p, a)) return bad("--p", "not a finite number");
  if (!f.lambda.empty() && !parse_double(f.lambda, a))
    return bad("--lambda", "not a finite number");
  // The kernels' own checks, reported against the flag that set the value.
  try {
    if (uniform) check_uniform_bounds(dtype, a, b);
    if (normal) check_normal(dtype, b);
    if (f.op == "bernoulli") check_bernoulli(a);
    if (f.op == "exponential") check_exponential(dtype, a);
    if (log_normal) check_log_normal(dtype, b);
    if (f.op == "geometric") check_geometric(dtype, a);
    if (f.op == "dropout") check_dropout(dtype, a);
  } catch (const Error& e) {
    const std::string message = e.what();
    const char* flag = uniform ? (message.rfind("from is", 0) == 0 ? "--from" : "--to")
                       : normal || log_normal  ? "--to"
                       : f.op == "exponential" ? "--lambda"
                                               : "--p";
    return bad(flag, message);
  }
  const auto n = static_cast<int64_t>(numel);
  Tensor values;
  try {
    if (uniform) {
      values = predict_uniform(state, n, dtype, gpu, a, b);
    } else if (normal) {
      values = predict_normal(state, n, dtype, gpu, a, b);
    } else if (f.op == "bernoulli") {
      values = predict_bernoulli(state, n, dtype, gpu, a);
    } else if (f.op == "exponential") {
      values = predict_exponential(state, n, dtype, gpu, a);
    } else if (log_normal) {
      values = predict_log_normal(state, n, dtype, gpu, a, b);
    } else if (f.op == "geometric") {
      values = predict_geometric(state, n, dtype, gpu, a);
    } else {
      // The kernel's output for an input of ones: 0 or 1 / (1 - p). The fused kernel runs only
      // for 0 < p < 1.
      if (!dropout_draws(a, true, n)) return bad("--p", "dropout draws only for 0 < p < 1");
      values = predict_dropout(state, Tensor::full({n}, 1, dtype), a, gpu);
    }
  } catch (const Error& e) {
    return bad("--numel", fmt::format("{}: {}", py_error_type_name(e.type()), e.what()));
  }
  // Enough digits to name the value exactly: 9 for float32 and narrower, 17 for float64. Written
  // in pieces: a billion lines never sit in memory at once.
  const int digits = dtype == DType::kFloat64 ? 17 : 9;
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    out += f.format == "hex" ? bits_of(values, i) : fmt::format("{:.{}g}", values.get(i), digits);
    out += '\n';
    if (out.size() >= (1 << 16)) {
      std::cout << out;
      out.clear();
    }
  }
  out += fmt::format("offset {}\n", state.offset);
  std::cout << out;
  return std::cout.good() ? 0 : kExitUnusable;
}

}  // namespace meshsim::sim

namespace meshsim::sim {

int run_rng_offsets(const RngOffsetsFlags& o) {
  const auto fail = [](std::string_view flag, const std::string& error) {
    std::cerr << "meshsim rng offsets: " << flag << ": " << error << "\n";
    return kExitUnusable;
  };
  constexpr uint64_t kMaxRanks = 65536;  // one line per rank
  std::vector<int64_t> shape, mesh;
  std::string error;
  if (!(error = parse_sizes(o.shape, uint64_t{1} << 62, shape)).empty())
    return fail("--shape", error);
  if (shape.size() > Tensor::kMaxDims) return fail("--shape", "at most 25 dims");
  if (!(error = parse_sizes(o.mesh, kMaxRanks, mesh)).empty() || mesh.empty())
    return fail("--mesh", error.empty() ? "give the mesh shape, e.g. 2,2" : error);
  uint64_t ranks = 1;
  for (int64_t m : mesh) {
    if (m < 1) return fail("--mesh", "mesh sizes must be positive");
    ranks *= static_cast<uint64_t>(m);
    if (ranks > kMaxRanks) return fail("--mesh", "at most 65,536 ranks");
  }
  if (o.placements.size() != mesh.size()) {
    return fail("--placement", fmt::format("{} placements for a {}-d mesh: give one per mesh dim",
                                           o.placements.size(), mesh.size()));
  }
  std::vector<Placement> placements;
  for (const std::string& text : o.placements) {
    try {
      placements.push_back(parse_placement(text));
    } catch (const Error& e) {
      return fail("--placement", fmt::format("\"{}\": {}", text, e.what()));
    }
  }
  std::string out;
  std::vector<int64_t> coordinate(mesh.size(), 0);
  for (uint64_t rank = 0; rank < ranks; ++rank) {
    try {
      const DTensorRngOffsets r = dtensor_rng_offsets(shape, mesh, coordinate, placements);
      out += fmt::format(
          "rank {}: coordinate [{}], shard {}, first_shard_numel {}, pre +{}, "
          "post +{}\n",
          rank, fmt::join(coordinate, ", "), r.shard_linear_index, r.first_shard_numel,
          r.pre_op_increment, r.post_op_increment);
    } catch (const Error& e) {
      // Offsets past int64 come from the shape; everything else from the placements.
      return fail(e.type() == PyErrorType::kOverflowError ? "--shape" : "--placement",
                  fmt::format("{}: {}", py_error_type_name(e.type()), e.what()));
    }
    for (size_t d = mesh.size(); d-- > 0;) {
      if (++coordinate[d] < mesh[d]) break;
      coordinate[d] = 0;
    }
  }
  std::cout << out;
  return std::cout.good() ? 0 : kExitUnusable;
}

}  // namespace meshsim::sim
