// The directory a scenario run saves its checkpoints in: a fresh temporary directory removed when
// the run ends, or DIR/<scenario name> under --keep-checkpoints DIR, emptied first and kept.
#pragma once

#include <optional>
#include <string>

namespace meshsim::sim {

class CheckpointDir {
 public:
  // Throws meshsim::Error (RuntimeError naming the path) when the directory cannot be made.
  CheckpointDir(const std::optional<std::string>& keep_under, const std::string& scenario_name);
  ~CheckpointDir();
  CheckpointDir(const CheckpointDir&) = delete;
  CheckpointDir& operator=(const CheckpointDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool remove_ = false;
};

}  // namespace meshsim::sim
