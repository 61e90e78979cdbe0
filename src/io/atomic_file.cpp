#include "src/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "src/enum_names.hpp"
#include "src/error.hpp"

namespace meshsim {

namespace {

// Writes are issued in pieces so that a test can fail or stop a save half-way through.
constexpr size_t kWriteChunk = size_t{1} << 20;

// `call()` again while a signal interrupts it (-1 and EINTR); its result otherwise.
template <typename Call>
long retrying(Call&& call) {
  long rc = 0;
  do {
    rc = static_cast<long>(call());
  } while (rc < 0 && errno == EINTR);
  return rc;
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ~FileDescriptor() { close_quietly(); }
  int get() const { return fd_; }
  int release_and_close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  void close_quietly() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd_;
};

}  // namespace

std::string_view save_point_name(SavePoint point) {
  return name_in(kSavePointNames, point);
}

void write_file_atomically(const std::string& path, std::string_view bytes, const SaveHook& hook,
                           Durability durability) {
  write_file_atomically(path, std::span<const std::string_view>(&bytes, 1), hook, durability);
}

void write_file_atomically(const std::string& path, std::span<const std::string_view> pieces,
                           const SaveHook& hook, Durability durability) {
  const bool sync = durability == Durability::kNow;
  const std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
  uint64_t written = 0;
  // The call at `point` fails with the hook's errno, or runs `call` (-1 and errno on failure).
  auto step = [&](SavePoint point, auto&& call) {
    const int injected = hook ? hook(point, written) : 0;
    if (injected != 0) {
      errno = injected;
      return -1L;
    }
    return retrying(call);
  };
  auto fail = [&](SavePoint point, const std::string& what) {
    const int saved = errno;
    ::unlink(temp.c_str());
    throw runtime_error(fmt::format("cannot save {}: {} of {} failed: {}", path,
                                    save_point_name(point), what, std::strerror(saved)));
  };
  const int raw = static_cast<int>(step(SavePoint::kOpen, [&] {
    return ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }));
  if (raw < 0) {
    const int saved = errno;
    throw runtime_error(
        fmt::format("cannot save {}: open of {} failed: {}", path, temp, std::strerror(saved)));
  }
  FileDescriptor fd(raw);
  for (const std::string_view bytes : pieces) {
    size_t done = 0;
    while (done < bytes.size()) {
      const size_t n = std::min(kWriteChunk, bytes.size() - done);
      const long rc =
          step(SavePoint::kWrite, [&] { return ::write(fd.get(), bytes.data() + done, n); });
      if (rc < 0) fail(SavePoint::kWrite, temp);
      if (rc == 0) {
        errno = EIO;
        fail(SavePoint::kWrite, temp);
      }
      done += static_cast<size_t>(rc);
      written += static_cast<uint64_t>(rc);
    }
  }
  if (step(SavePoint::kFsyncFile, [&] { return sync ? ::fsync(fd.get()) : 0; }) < 0)
    fail(SavePoint::kFsyncFile, temp);
  if (step(SavePoint::kClose, [&] { return fd.release_and_close(); }) < 0)
    fail(SavePoint::kClose, temp);
  if (step(SavePoint::kRename, [&] { return ::rename(temp.c_str(), path.c_str()); }) < 0)
    fail(SavePoint::kRename, temp);
  // The rename is durable once the directory entry is: without this a power cut could bring the
  // old file back (or no file at all for a first save).
  if (!sync) {
    if (step(SavePoint::kFsyncDirectory, [] { return 0; }) < 0) {
      const int saved = errno;
      throw runtime_error(fmt::format("cannot save {}: fsync of directory {} failed: {}", path,
                                      directory_of(path), std::strerror(saved)));
    }
    return;
  }
  const std::string dir = directory_of(path);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    const int saved = errno;
    throw runtime_error(fmt::format("cannot save {}: open of directory {} failed: {}", path, dir,
                                    std::strerror(saved)));
  }
  FileDescriptor dir_guard(dir_fd);
  if (step(SavePoint::kFsyncDirectory, [&] { return ::fsync(dir_fd); }) < 0) {
    const int saved = errno;
    throw runtime_error(
        fmt::format("cannot save {}: fsync of directory {} failed: {} (the new "
                    "file is in place but may not survive a power cut)",
                    path, dir, std::strerror(saved)));
  }
}

namespace {

// fsync of `path` (a file or a directory), opened read-only.
void fsync_path(const std::string& path, int flags, std::string_view what) {
  const int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  if (raw < 0) {
    const int saved = errno;
    throw runtime_error(fmt::format("cannot make {} {} durable: open failed: {}", what, path,
                                    std::strerror(saved)));
  }
  FileDescriptor fd(raw);
  if (retrying([&] { return ::fsync(fd.get()); }) < 0) {
    const int saved = errno;
    throw runtime_error(fmt::format("cannot make {} {} durable: fsync failed: {}", what, path,
                                    std::strerror(saved)));
  }
}

}  // namespace

void make_durable(std::span<const std::string> files, std::span<const std::string> directories) {
  for (const std::string& file : files) fsync_path(file, 0, "file");
  for (const std::string& dir : directories) fsync_path(dir, O_DIRECTORY, "directory");
}

namespace {

// Opens a regular file of at most `max_bytes` bytes for reading and says how long it is.
FileDescriptor open_bounded(const std::string& path, uint64_t max_bytes, size_t& size) {
  const int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (raw < 0) {
    const int saved = errno;
    throw runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(saved)));
  }
  FileDescriptor fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw runtime_error(fmt::format("cannot read {}: not a regular file", path));
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    throw runtime_error(fmt::format("cannot read {}: {} bytes, more than the limit of {}", path,
                                    st.st_size, max_bytes));
  }
  size = static_cast<size_t>(st.st_size);
  return fd;
}

}  // namespace

std::string read_file_bounded(const std::string& path, uint64_t max_bytes) {
  size_t size = 0;
  const FileDescriptor fd = open_bounded(path, max_bytes, size);
  std::string out(size, '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t rc = ::read(fd.get(), out.data() + got, out.size() - got);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) {
      const int saved = errno;
      throw runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(saved)));
    }
    if (rc == 0) break;  // shrank while reading: what was read is checked by the envelope
    got += static_cast<size_t>(rc);
  }
  out.resize(got);
  return out;
}

MappedFile::MappedFile(const std::string& path, uint64_t max_bytes) {
  const FileDescriptor fd = open_bounded(path, max_bytes, size_);
  if (size_ == 0) return;  // mmap refuses empty files; an empty view is what they hold
  data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd.get(), 0);
  if (data_ == MAP_FAILED) {
    const int saved = errno;
    data_ = nullptr;
    size_ = 0;
    throw runtime_error(fmt::format("cannot map {}: {}", path, std::strerror(saved)));
  }
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace meshsim
