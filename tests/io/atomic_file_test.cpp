// Atomic saves: an injected failure at any step, or the process dying there, leaves the old
// file or the new one and nothing else under its name.
#include "src/io/atomic_file.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/error.hpp"

using meshsim::Durability;
using meshsim::SavePoint;

namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char pattern[] = "/tmp/meshsim_atomic_XXXXXX";
    path = ::mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// Big enough to take several write calls (1 MiB each).
std::string content(char fill) {
  return std::string((size_t{3} << 20) + 17, fill);
}

size_t entries(const std::filesystem::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("atomic file: a save replaces the file and reads back bounded", "[io][atomic]") {
  TempDir dir;
  const std::string path = (dir.path / "ckpt").string();
  meshsim::write_file_atomically(path, "first");
  meshsim::write_file_atomically(path, "second save");
  CHECK(meshsim::read_file_bounded(path, 100) == "second save");
  CHECK(entries(dir.path) == 1);
  CHECK_THROWS_WITH(meshsim::read_file_bounded(path, 5),
                    Catch::Contains("11 bytes, more than the limit of 5"));
  CHECK_THROWS_WITH(meshsim::read_file_bounded(dir.path.string(), 100),
                    Catch::Contains("not a regular file"));
  CHECK_THROWS_WITH(meshsim::read_file_bounded(path + ".missing", 100),
                    Catch::Contains("No such file or directory"));
}

TEST_CASE("atomic file: a failure at any step leaves the old file and no temporary",
          "[io][atomic]") {
  TempDir dir;
  const std::string path = (dir.path / "ckpt").string();
  const std::string old_bytes = content('o');
  meshsim::write_file_atomically(path, old_bytes);
  // Every step but the last fsync (after the rename the new file is in place) and a full disk
  // on each of the four writes.
  for (SavePoint point : {SavePoint::kOpen, SavePoint::kWrite, SavePoint::kFsyncFile,
                          SavePoint::kClose, SavePoint::kRename}) {
    for (uint64_t at_bytes : {uint64_t{0}, uint64_t{1} << 20, uint64_t{3} << 20}) {
      if (point != SavePoint::kWrite && at_bytes != 0) continue;
      INFO(meshsim::save_point_name(point) << " after " << at_bytes << " bytes");
      auto full_disk = [&](SavePoint p, uint64_t written) {
        return p == point && (p != SavePoint::kWrite || written == at_bytes) ? ENOSPC : 0;
      };
      // A save left durable to its caller fails at the same points.
      for (const Durability durability : {Durability::kNow, Durability::kByCaller}) {
        REQUIRE_THROWS_WITH(
            meshsim::write_file_atomically(path, content('n'), full_disk, durability),
            Catch::Contains("No space left on device"));
        CHECK(meshsim::read_file_bounded(path, uint64_t{1} << 30) == old_bytes);
        CHECK(entries(dir.path) == 1);
      }
    }
  }
}

TEST_CASE("atomic file: a process killed at any step leaves the old file or the new one",
          "[io][atomic]") {
  TempDir dir;
  const std::string path = (dir.path / "ckpt").string();
  const std::string old_bytes = content('o');
  const std::string new_bytes = content('n');
  int saw_old = 0, saw_new = 0;
  // The child dies (as a SIGKILL would end it) before step k of the save, for every k, with the
  // save durable by itself or left to its caller.
  for (int run = 0; run < 24; ++run) {
    const int stop_at = run % 12;
    const Durability durability = run < 12 ? Durability::kNow : Durability::kByCaller;
    meshsim::write_file_atomically(path, old_bytes);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      int calls = 0;
      auto die = [&](SavePoint, uint64_t) {
        if (calls++ == stop_at) ::_exit(0);
        return 0;
      };
      try {
        meshsim::write_file_atomically(path, new_bytes, die, durability);
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(1);  // the save finished before step k
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    INFO("stopped before step " << stop_at << (run < 12 ? "" : ", durable by the caller"));
    const std::string now = meshsim::read_file_bounded(path, uint64_t{1} << 30);
    CHECK((now == old_bytes || now == new_bytes));
    saw_old += now == old_bytes ? 1 : 0;
    saw_new += now == new_bytes ? 1 : 0;
    // A dead save may leave its temporary file, never a damaged `ckpt`.
    for (const auto& e : std::filesystem::directory_iterator(dir.path)) {
      if (e.path().filename() != "ckpt") {
        CHECK(e.path().filename().string().rfind("ckpt.tmp.", 0) == 0);
        std::filesystem::remove(e.path());
      }
    }
  }
  CHECK(saw_old > 0);  // some deaths came before the rename...
  CHECK(saw_new > 0);  // ...and some after it
}

TEST_CASE("atomic file: files left to their caller are made durable in one pass", "[io][atomic]") {
  TempDir dir;
  std::vector<std::string> files;
  for (int i = 0; i < 3; ++i) {
    files.push_back((dir.path / ("shard-" + std::to_string(i))).string());
    meshsim::write_file_atomically(files.back(), content('a'), nullptr, Durability::kByCaller);
  }
  const std::string directories[] = {dir.path.string()};
  meshsim::make_durable(files, directories);
  CHECK(entries(dir.path) == 3);
  CHECK(meshsim::read_file_bounded(files[1], uint64_t{1} << 30) == content('a'));
  // A file that is not there is named.
  files.push_back((dir.path / "shard-9").string());
  CHECK_THROWS_WITH(meshsim::make_durable(files, directories),
                    Catch::Contains("cannot make file " + files.back() + " durable") &&
                        Catch::Contains("No such file or directory"));
}
