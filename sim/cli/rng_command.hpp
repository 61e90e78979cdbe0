// `meshsim rng predict`: the numbers a CUDA random op draws for a given generator state and GPU,
// one per line, so anyone with a GPU can diff meshsim against torch.rand / torch.randn.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace meshsim::sim {

struct RngPredictFlags {
  std::string seed = "0";
  std::string offset = "0";
  std::string numel;
  std::string shape;  // or the tensor's shape: "3,4"
  std::string dtype = "float32";
  std::string gpu;
  std::string sms;
  std::string max_threads_per_sm;
  std::string op = "uniform";
  std::string from;    // uniform: default 0; normal: the mean, default 0
  std::string to;      // uniform: default 1; normal: the std, default 1
  std::string p;       // bernoulli: default 0.5
  std::string lambda;  // exponential: default 1
  std::string format = "float";
};

struct RngOffsetsFlags {
  std::string shape;                    // "8,4"
  std::string mesh;                     // "2,2"
  std::vector<std::string> placements;  // one per mesh dim: "Shard(0)", "R", ...
};

struct RngCommands {
  CLI::App* predict;
  CLI::App* offsets;
};

// Adds `rng predict` and `rng offsets` to `app`; test the returned subcommands for parsed().
RngCommands add_rng_command(CLI::App& app, RngPredictFlags& predict, RngOffsetsFlags& offsets);

// Prints the values and the generator offset after the call; 0, or 2 after a clear message on
// stderr for bad arguments.
int run_rng_predict(const RngPredictFlags& flags);

// Prints, for every rank of the mesh (row-major), where a DTensor random op draws: its
// coordinate, shard index, first-shard numel and the pre- and post-op offset increments. 0, or 2
// after a clear message for bad arguments.
int run_rng_offsets(const RngOffsetsFlags& flags);

}  // namespace meshsim::sim
