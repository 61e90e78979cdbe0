#include "sim/run/checkpoint_dir.hpp"

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "sim/run/scenario_dir_name.hpp"
#include "src/error.hpp"

namespace meshsim::sim {

const std::string& CheckpointDir::path() {
  if (!path_.empty()) return path_;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (keep_under_) {
    const std::string path = (fs::path(*keep_under_) / scenario_dir_name(scenario_name_)).string();
    fs::remove_all(path, ec);
    if (!ec) fs::create_directories(path, ec);
    if (ec) {
      throw runtime_error(
          fmt::format("cannot prepare checkpoint directory {}: {}", path, ec.message()));
    }
    path_ = path;
    return path_;
  }
  const fs::path base = fs::temp_directory_path(ec);
  std::string pattern = ((ec ? fs::path("/tmp") : base) / "meshsim-ckpt-XXXXXX").string();
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    throw runtime_error(fmt::format("cannot create a checkpoint directory from {}: {}", pattern,
                                    std::error_code(errno, std::generic_category()).message()));
  }
  path_ = buffer.data();
  remove_ = true;
  return path_;
}

CheckpointDir::~CheckpointDir() {
  if (!remove_) return;  // never made, or kept
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);  // best effort: a leftover temp dir is harmless
}

}  // namespace meshsim::sim
