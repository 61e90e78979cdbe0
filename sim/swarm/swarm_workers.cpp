#include "sim/swarm/swarm_workers.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/run/child_process.hpp"
#include "sim/run/isolated_run.hpp"
#include "sim/swarm/failure_signature.hpp"

namespace meshsim::sim {

namespace {

struct Worker {
  pid_t pid = -1;
  int fd = -1;
  std::string pending;    // bytes after the last whole line
  uint64_t expected = 0;  // runs it owes
  uint64_t reported = 0;
};

// One line per run: {"n": combination, "pass": true} or its failure.
std::string run_line(const SwarmSpace& space, const Combination& c, const StepRegistry& steps,
                     RunOptions options) {
  options.world.policy = SchedulePolicy::kRandom;
  options.world.seed = c.schedule_seed;
  options.faults_seed = c.faults_seed;
  options.echo_child_stderr = false;  // a crashed run's stderr is in its result
  const FileOutcome outcome =
      run_scenario_file(space.files[c.file].path, steps, options, Isolation::kChildProcess);
  Json line{{"n", c.index}};
  if (outcome.result && outcome.result->passed()) {
    line["pass"] = true;
  } else if (outcome.result) {
    const FailureSummary summary = summarize_failure(*outcome.result);
    line["signature"] = summary.signature;
    line["headline"] = summary.headline;
    line["scenario"] = outcome.result->name;
  } else {
    line["signature"] = "unusable: " + outcome.unusable_message;
    line["headline"] = outcome.unusable_message;
    line["scenario"] = space.files[c.file].path;
  }
  return json_text(line) + "\n";
}

[[noreturn]] void work(const SwarmSpace& space, const Shard& shard, uint64_t first, unsigned jobs,
                       const StepRegistry& steps, const RunOptions& options, int fd) {
  const uint64_t share = shard.share_of(*space.size());
  for (uint64_t nth = first; nth < share; nth += jobs) {
    if (!write_all(fd, run_line(space, space.at(shard.combination(nth)), steps, options)))
      ::_exit(3);
  }
  ::_exit(0);
}

// Takes one whole line a worker wrote into the tally.
void take_line(const std::string& text, const SwarmSpace& space, SwarmTally& tally,
               SwarmProgress& progress) {
  const Json line = Json::parse(text, nullptr, false);
  if (!line.is_object() || !line.contains("n")) {
    throw std::runtime_error("a swarm worker wrote something else than a run's result: " +
                             text.substr(0, 200));
  }
  if (line.contains("pass")) {
    tally.add_passes();
  } else {
    const uint64_t n = line["n"].get<uint64_t>();
    tally.add_failure({space.at(n).file, line["signature"].get<std::string>(),
                       line["scenario"].get<std::string>(), n, line["headline"].get<std::string>(),
                       1});
  }
  ++progress.done;
  progress.failed = tally.failed();
  progress.distinct = tally.distinct();
}

// How worker `pid` ended, for a message ("" for a clean exit).
std::string wait_for(pid_t pid) {
  const int status = wait_for_child(pid);
  return ended_cleanly(status) ? "" : "ended with " + how_it_ended(status);
}

}  // namespace

SwarmTally run_swarm(const SwarmSpace& space, const Shard& shard, unsigned jobs,
                     const StepRegistry& steps, const RunOptions& options,
                     const std::function<void(const SwarmProgress&)>& progress) {
  const uint64_t share = shard.share_of(*space.size());
  const auto workers_wanted = static_cast<unsigned>(std::min<uint64_t>(std::max(1u, jobs), share));
  SwarmProgress seen{0, share, 0, 0};
  SwarmTally tally;
  std::vector<Worker> workers;
  std::string failure;
  // On the first failure the others are stopped: their runs would be thrown away.
  const auto fail = [&](std::string why) {
    if (!failure.empty()) return;
    failure = std::move(why);
    for (const Worker& w : workers) {
      if (w.fd >= 0) ::kill(w.pid, SIGTERM);
    }
  };
  for (unsigned w = 0; w < workers_wanted; ++w) {
    int fds[2];
    if (::pipe(fds) != 0) {
      fail(fmt::format("cannot start swarm worker {}: {}", w, std::strerror(errno)));
      break;
    }
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      for (const Worker& other : workers) ::close(other.fd);
      work(space, shard, w, workers_wanted, steps, options, fds[1]);
    }
    ::close(fds[1]);
    if (pid < 0) {
      ::close(fds[0]);
      fail(fmt::format("cannot start swarm worker {}: {}", w, std::strerror(errno)));
      break;
    }
    workers.push_back({pid, fds[0], "", share / workers_wanted + (w < share % workers_wanted), 0});
  }
  // Read every worker's lines as they come, until each has closed its pipe.
  size_t open = workers.size();
  while (open > 0) {
    std::vector<pollfd> polled;
    std::vector<Worker*> owners;
    for (Worker& w : workers) {
      if (w.fd < 0) continue;
      polled.push_back({w.fd, POLLIN, 0});
      owners.push_back(&w);
    }
    if (::poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      fail(fmt::format("swarm: poll: {}", std::strerror(errno)));
      break;
    }
    for (size_t i = 0; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      Worker& w = *owners[i];
      char buffer[1 << 14];
      const ssize_t n = ::read(w.fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) {
        w.pending.append(buffer, static_cast<size_t>(n));
        size_t newline;
        while ((newline = w.pending.find('\n')) != std::string::npos) {
          if (failure.empty()) {
            try {
              take_line(w.pending.substr(0, newline), space, tally, seen);
            } catch (const std::exception& e) {
              fail(e.what());
            }
          }
          w.pending.erase(0, newline + 1);
          ++w.reported;
          if (progress && failure.empty()) progress(seen);
        }
        continue;
      }
      ::close(w.fd);
      w.fd = -1;
      --open;
      const std::string ended = wait_for(w.pid);
      if (!ended.empty() || w.reported != w.expected) {
        fail(fmt::format("swarm worker {} (process {}) {} after {} of its {} runs",
                         &w - workers.data(), w.pid, ended.empty() ? "stopped" : ended, w.reported,
                         w.expected));
      }
    }
  }
  // Only after a failed poll: the workers still running are stopped and waited for.
  for (Worker& w : workers) {
    if (w.fd < 0) continue;
    ::close(w.fd);
    wait_for(w.pid);
  }
  if (!failure.empty()) throw std::runtime_error(failure);
  return tally;
}

}  // namespace meshsim::sim
