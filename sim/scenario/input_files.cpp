#include "sim/scenario/input_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include <fmt/format.h>

namespace meshsim::sim {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int error) {
  return std::strerror(error);
}

// Closes a file descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports the error close() gives (data not written, for example).
  int close_checked() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string read_scenario_file(const std::string& path) {
  auto fail = [&](const std::string& message) -> std::string {
    throw InputError({path, 0, 0}, message);
  };
  // Devices are refused before they are opened (opening some has effects). The type is checked
  // again on the open file, so nothing swapped in between is read; O_NONBLOCK keeps a FIFO
  // swapped in from making open() wait for a writer.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail("cannot open the file: " + errno_text(errno));
  auto refuse_kind = [&](mode_t mode) {
    if (!S_ISREG(mode)) {
      fail(fmt::format("cannot read a scenario from {}; give a regular .toml file", kind_of(mode)));
    }
  };
  refuse_kind(st.st_mode);
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) return fail("cannot open the file: " + errno_text(errno));
  if (::fstat(fd.get(), &st) != 0) return fail("cannot read the file: " + errno_text(errno));
  refuse_kind(st.st_mode);
  if (static_cast<uint64_t>(st.st_size) > kMaxScenarioFileBytes) {
    return fail(fmt::format("the file is {} bytes; scenario files are limited to {} bytes",
                            st.st_size, kMaxScenarioFileBytes));
  }
  std::string text;
  text.resize(static_cast<size_t>(st.st_size) + 1);
  size_t used = 0;
  for (;;) {
    if (used == text.size()) {
      if (used > kMaxScenarioFileBytes) {
        return fail(fmt::format("the file grew past the limit of {} bytes while being read",
                                kMaxScenarioFileBytes));
      }
      text.resize(std::min(text.size() * 2, kMaxScenarioFileBytes + 1));
    }
    const ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("cannot read the file: " + errno_text(errno));
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  text.resize(used);
  return text;
}

ExpandedPaths expand_scenario_paths(const std::vector<std::string>& paths) {
  ExpandedPaths out;
  for (const std::string& given : paths) {
    std::error_code ec;
    const fs::file_status status = fs::status(given, ec);
    if (ec || !fs::exists(status)) {
      out.problems.push_back({given, ec && ec != std::errc::no_such_file_or_directory
                                         ? ec.message()
                                         : "no such file or directory"});
      continue;
    }
    if (!fs::is_directory(status)) {
      out.files.push_back(given);  // read_scenario_file says what is wrong with it, if anything
      continue;
    }
    // Depth-first without recursion. Directories are identified by (device, inode), so a bind
    // mount that leads back up the tree is walked once.
    const size_t problems_before = out.problems.size();
    std::vector<std::string> found;
    std::set<std::pair<dev_t, ino_t>> seen;
    std::vector<fs::path> pending{fs::path(given)};
    while (!pending.empty()) {
      const fs::path dir = std::move(pending.back());
      pending.pop_back();
      struct stat st {};
      if (::stat(dir.c_str(), &st) != 0 || !seen.insert({st.st_dev, st.st_ino}).second) continue;
      fs::directory_iterator it(dir, ec);
      if (ec) {
        out.problems.push_back({dir.string(), "cannot read the directory: " + ec.message()});
        continue;
      }
      for (; it != fs::directory_iterator(); it.increment(ec)) {
        if (ec) break;
        const fs::path entry = it->path();
        const bool scenario_name = entry.extension() == ".toml";
        // Links to directories are not followed (a link to / would walk the whole machine);
        // links to files are, and one that leads nowhere matters only if it names a scenario.
        const fs::file_status link = fs::symlink_status(entry, ec);
        if (!ec && fs::is_directory(link)) {
          pending.push_back(entry);
          continue;
        }
        const fs::file_status s = fs::status(entry, ec);
        if (ec) {
          if (scenario_name) {
            out.problems.push_back({entry.string(), "cannot tell what this is: " + ec.message()});
          }
          ec.clear();
          continue;
        }
        if (scenario_name && !fs::is_directory(s)) found.push_back(entry.string());
      }
      if (ec) out.problems.push_back({dir.string(), "cannot read the directory: " + ec.message()});
    }
    std::sort(found.begin(), found.end());
    if (found.empty() && out.problems.size() == problems_before) {
      out.problems.push_back({given, "no .toml scenario files in this directory"});
    }
    out.files.insert(out.files.end(), found.begin(), found.end());
  }
  // A file named twice (itself and through its directory, or by two spellings) runs once, where
  // it first appears: identified by (device, inode) when it can be stat'ed.
  std::set<std::pair<dev_t, ino_t>> files_seen;
  std::set<std::string> names_seen;
  std::erase_if(out.files, [&](const std::string& f) {
    struct stat st {};
    if (::stat(f.c_str(), &st) == 0) return !files_seen.insert({st.st_dev, st.st_ino}).second;
    return !names_seen.insert(f).second;
  });
  return out;
}

std::string write_output_file(const std::string& path, std::string_view content) {
  // O_NONBLOCK: a FIFO with no reader is an error now, not a wait forever. Writes then block as
  // usual (a pipe with a reader drains).
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0644));
  if (fd.get() < 0) {
    return errno == ENXIO ? "a FIFO with no reader" : errno_text(errno);
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) return errno_text(errno);
  while (!content.empty()) {
    const ssize_t n = ::write(fd.get(), content.data(), content.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_text(errno);
    }
    content.remove_prefix(static_cast<size_t>(n));
  }
  if (const int error = fd.close_checked()) return errno_text(error);
  return "";
}

}  // namespace meshsim::sim
