// `meshsim rng predict`: the numbers a CUDA random op draws for a given generator state and GPU,
// one per line, so anyone with a GPU can diff meshsim against torch.rand / torch.randn.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace meshsim::sim {

struct RngPredictFlags {
  std::string seed = "0";
  std::string offset = "0";
  std::string numel;
  std::string dtype = "float32";
  std::string gpu;
  std::string sms;
  std::string max_threads_per_sm;
  std::string op = "uniform";
  std::string from;  // uniform: default 0; normal: the mean, default 0
  std::string to;    // uniform: default 1; normal: the std, default 1
  std::string format = "float";
};

// Adds `rng predict` to `app`; returns the `predict` subcommand to test for parsed().
CLI::App* add_rng_command(CLI::App& app, RngPredictFlags& flags);

// Prints the values and the generator offset after the call; 0, or 2 after a clear message on
// stderr for bad arguments.
int run_rng_predict(const RngPredictFlags& flags);

}  // namespace meshsim::sim
