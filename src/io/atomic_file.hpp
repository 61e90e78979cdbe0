// Files replaced atomically, and files read with a size bound: a crash at any point of a save
// leaves the old file or the new one, never a mix, and a load never reads more than it allows.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "src/enum_names.hpp"

namespace meshsim {

// The points of write_file_atomically, in order, where tests inject failures and crashes.
enum class SavePoint { kOpen, kWrite, kFsyncFile, kClose, kRename, kFsyncDirectory };
std::string_view save_point_name(SavePoint point);
// Every value with its name, in the order lists of them are printed.
inline constexpr EnumName<SavePoint> kSavePointNames[] = {
    {SavePoint::kOpen, "open"},       {SavePoint::kWrite, "write"},
    {SavePoint::kFsyncFile, "fsync"}, {SavePoint::kClose, "close"},
    {SavePoint::kRename, "rename"},   {SavePoint::kFsyncDirectory, "fsync of the directory"},
};

// Called before each system call of a save; returning an errno value makes that call fail with
// it (a full disk: ENOSPC), 0 lets it run. A test may also end the process there.
using SaveHook = std::function<int(SavePoint point, uint64_t bytes_written)>;

// Whether a write makes itself durable (fsync of the file before the rename, of its directory
// after), or leaves that to its caller: a file in a directory the run removes needs none, and the
// files of one checkpoint are made durable together by make_durable, which costs one pass instead
// of two waits per file. The hook is consulted at the fsync points either way.
enum class Durability { kNow, kByCaller };

// Writes `bytes` to `path`: a temporary file in the same directory, written in full (and with
// kNow fsynced), renamed over `path`, then (kNow) the directory fsynced. Throws meshsim::Error
// (OSError-like RuntimeError naming the file, the step and strerror) on any failure, after
// removing the temporary file; `path` is then untouched.
void write_file_atomically(const std::string& path, std::string_view bytes,
                           const SaveHook& hook = nullptr,
                           Durability durability = Durability::kNow);
// The same for a file given as pieces in order (never assembled in memory).
void write_file_atomically(const std::string& path, std::span<const std::string_view> pieces,
                           const SaveHook& hook = nullptr,
                           Durability durability = Durability::kNow);

// Makes files written with Durability::kByCaller durable in one pass: every file's data, then
// each of `directories` (their entries: the renames), in order. Throws meshsim::Error
// (RuntimeError naming the file or directory and strerror) on the first that fails.
void make_durable(std::span<const std::string> files, std::span<const std::string> directories);

// The whole file, refusing (RuntimeError naming the file) anything but a regular file of at most
// `max_bytes` bytes.
std::string read_file_bounded(const std::string& path, uint64_t max_bytes);

// A regular file of at most `max_bytes` bytes mapped read-only, with the same refusals as
// read_file_bounded: large shards are read where the page cache holds them, without a copy.
// The file must not shrink while mapped (meshsim's own checkpoint files are replaced by rename,
// never truncated in place).
class MappedFile {
 public:
  MappedFile(const std::string& path, uint64_t max_bytes);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace meshsim
