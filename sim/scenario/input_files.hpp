// Reading scenario files and writing reports without trusting the file system: only regular files
// of bounded size are read, directories are walked without recursion and without following a
// symlink loop, and every read or write error is reported with the path.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/source_location.hpp"

namespace meshsim::sim {

// Scenario files larger than this are refused (the largest shipped one is a few KiB).
inline constexpr size_t kMaxScenarioFileBytes = size_t{16} << 20;

// The whole file. Throws InputError naming `path` for a missing file, a directory, a FIFO, device
// or socket, a file over kMaxScenarioFileBytes, and any error while reading.
std::string read_scenario_file(const std::string& path);

// A path that cannot be used, and why.
struct PathProblem {
  std::string path;
  std::string message;
};

struct ExpandedPaths {
  std::vector<std::string> files;  // in the order given; each directory's *.toml files sorted
  std::vector<PathProblem> problems;
};

// Files as given, each once; directories expanded (recursively, not through links to directories)
// to the
// *.toml files inside. A directory that cannot be read, a *.toml entry whose type cannot be
// determined (a symlink loop, a dangling link) or a directory without scenarios is a problem for
// that path; the rest are still returned.
ExpandedPaths expand_scenario_paths(const std::vector<std::string>& paths);

// Writes `content` to `path`, flushing and closing it; returns "" or the error ("No space left on
// device").
std::string write_output_file(const std::string& path, std::string_view content);

}  // namespace meshsim::sim
