// The directory a scenario run saves its checkpoints in: a fresh temporary directory removed when
// the run ends, or DIR/<scenario name> under --keep-checkpoints DIR, emptied first and kept. It
// is made when a step first asks for it, so a run without checkpoints (or one that crashes
// before any) leaves nothing behind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace meshsim::sim {

class CheckpointDir {
 public:
  CheckpointDir(std::optional<std::string> keep_under, std::string scenario_name)
      : keep_under_(std::move(keep_under)), scenario_name_(std::move(scenario_name)) {}
  ~CheckpointDir();
  CheckpointDir(const CheckpointDir&) = delete;
  CheckpointDir& operator=(const CheckpointDir&) = delete;

  // The directory, made on the first call. Throws meshsim::Error (RuntimeError naming the path)
  // when it cannot be made.
  const std::string& path();
  // The directory if it was made, else "".
  const std::string& made_path() const { return path_; }
  // Whether the checkpoints outlive the run (--keep-checkpoints): only those need to be durable.
  bool kept() const { return keep_under_.has_value(); }

 private:
  std::optional<std::string> keep_under_;
  std::string scenario_name_;
  std::string path_;
  bool remove_ = false;
};

// Removes the temporary checkpoint directories process `pid` made and did not remove (it died):
// best effort, errors ignored.
void remove_checkpoint_dirs_of(int64_t pid);

}  // namespace meshsim::sim
