// A stand-in for libFuzzer where the compiler has none (g++): runs a fuzz target over every file
// of the given corpus directories and over deterministic mutations of each (splitmix64, so every
// run tries the same inputs). Usage: fuzz_X_replay [--mutations N] DIR_OR_FILE...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "src/fnv1a.hpp"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One of: flip a byte, delete a range, duplicate a range, truncate, insert a digit run.
std::string mutate(std::string s, uint64_t& state) {
  if (s.empty()) return std::string(1, static_cast<char>(splitmix(state)));
  const size_t at = splitmix(state) % s.size();
  const size_t len = 1 + splitmix(state) % std::min<size_t>(64, s.size() - at);
  switch (splitmix(state) % 5) {
    case 0:
      s[at] = static_cast<char>(splitmix(state));
      break;
    case 1:
      s.erase(at, len);
      break;
    case 2:
      s.insert(at, s.substr(at, len));
      break;
    case 3:
      s.resize(at);
      break;
    default:
      s.insert(
          at, std::string(1 + splitmix(state) % 30, static_cast<char>('0' + splitmix(state) % 10)));
      break;
  }
  return s;
}

// With MESHSIM_REPLAY_LAST=FILE set, each input is written there first: after a crash, FILE
// holds the input that caused it.
void run(const std::string& input, uint64_t& executions) {
  if (const char* last = std::getenv("MESHSIM_REPLAY_LAST")) {
    std::ofstream(last, std::ios::binary | std::ios::trunc) << input;
  }
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  ++executions;
}

}  // namespace

int main(int argc, char** argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  int mutations = 20;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mutations") == 0 && i + 1 < argc) {
      mutations = std::atoi(argv[++i]);
      continue;
    }
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path().string());
      }
    } else {
      files.push_back(p.string());
    }
  }
  std::sort(files.begin(), files.end());
  uint64_t executions = 0;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    run(text.str(), executions);
    // The file name's hash seeds its mutations.
    uint64_t state =
        meshsim::fnv1a(meshsim::kFnv1aOffset, std::filesystem::path(f).filename().string());
    std::string current = text.str();
    for (int m = 0; m < mutations; ++m) {
      current = m % 4 == 0 ? text.str() : current;  // mostly chains, sometimes a fresh start
      current = mutate(current, state);
      run(current, executions);
    }
  }
  std::printf("replayed %zu corpus files, %llu executions, no crash\n", files.size(),
              static_cast<unsigned long long>(executions));
  return files.empty() ? 1 : 0;
}
