#include "sim/run/checkpoint_dir.hpp"

#include <sys/statfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "sim/run/scenario_dir_name.hpp"
#include "src/error.hpp"
#include "src/tensor/memory_budget.hpp"

namespace meshsim::sim {

namespace {

constexpr long kTmpfsMagic = 0x01021994;  // statfs's f_type of tmpfs

// Where a run's temporary checkpoints go. $TMPDIR when it is set: the user chose. Otherwise
// /dev/shm when it is memory-backed and has room for the memory budget (every rank's tensors,
// which bounds what a save writes): a whole-world save makes a file per rank, and a memory
// filesystem makes and removes a hundred thousand files in a fraction of the time a disk's does
// (ext4 without a journal checks every recently deleted inode it passes on each create). Else
// the system's temporary directory.
std::filesystem::path temporary_base() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const char* tmpdir = std::getenv("TMPDIR");
  if (tmpdir == nullptr || *tmpdir == '\0') {
    struct statfs shm {};
    if (::statfs("/dev/shm", &shm) == 0 && static_cast<long>(shm.f_type) == kTmpfsMagic &&
        static_cast<unsigned long>(shm.f_bavail) >=
            MemoryBudget::limit() / static_cast<unsigned long>(shm.f_bsize) &&
        ::access("/dev/shm", W_OK | X_OK) == 0) {
      return "/dev/shm";
    }
  }
  const fs::path base = fs::temp_directory_path(ec);
  return ec ? fs::path("/tmp") : base;
}

}  // namespace

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
  // The process id in the name lets the parent of a scenario's process remove the directory if
  // that process dies before it can (remove_checkpoint_dirs_of).
  std::string pattern =
      (temporary_base() / fmt::format("meshsim-ckpt-{}-XXXXXX", ::getpid())).string();
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
  std::filesystem::remove_all(path_, ec);  // best effort
}

void remove_checkpoint_dirs_of(int64_t pid) {
  namespace fs = std::filesystem;
  const std::string prefix = fmt::format("meshsim-ckpt-{}-", pid);
  std::error_code ec;
  for (const fs::path& base : {fs::path("/dev/shm"), temporary_base()}) {
    for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      // mkdtemp's six characters follow the prefix.
      if (name.size() == prefix.size() + 6 && name.rfind(prefix, 0) == 0) {
        std::error_code removing;
        fs::remove_all(it->path(), removing);
      }
    }
    ec.clear();
  }
}

}  // namespace meshsim::sim
