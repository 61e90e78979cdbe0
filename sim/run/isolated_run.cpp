#include "sim/run/isolated_run.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <functional>
#include <iostream>

#include <fmt/format.h>

#include "sim/report/result_codec.hpp"
#include "sim/run/rank_error.hpp"
#include "sim/scenario/scenario_loader.hpp"

namespace meshsim::sim {

namespace {

// The whole job, as JSON: {"result": ...}, {"unusable": ...} or {"error": ...}. `loaded` hears
// the scenario's header before it runs.
Json load_and_run(const std::string& file, const RunOptions& options,
                  const std::function<void(const Scenario&)>& loaded = {}) {
  try {
    const Scenario scenario = load_scenario_file(file);
    if (loaded) loaded(scenario);
    return Json{{"result", encode_result(run_scenario(scenario, options))}};
  } catch (const InputError& e) {
    const SourceLocation& w = e.where();
    return Json{
        {"unusable",
         {{"file", w.file}, {"line", w.line}, {"column", w.column}, {"message", e.what()}}}};
  } catch (...) {
    const RankError e = classify_current_exception();
    return Json{{"error", fmt::format("meshsim could not run this scenario: {}: {}",
                                      py_error_type_name(e.type), e.message)}};
  }
}

FileOutcome outcome_of(const Json& j, const std::string& file) {
  FileOutcome out;
  if (j.contains("result")) {
    out.result = decode_result(j.at("result"));
  } else if (j.contains("unusable")) {
    const Json& u = j.at("unusable");
    out.unusable_at = SourceLocation{u.value("file", file), u.value("line", int64_t{0}),
                                     u.value("column", int64_t{0})};
    out.unusable_message = u.value("message", std::string());
  } else {
    out.unusable_at = SourceLocation{file, 0, 0};
    out.unusable_message = j.value("error", std::string("meshsim could not run this scenario"));
  }
  return out;
}

void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Reads both pipes to their ends at once, so the child never blocks on a full one.
void drain(int result_fd, int error_fd, std::string& result, std::string& errors) {
  pollfd fds[2] = {{result_fd, POLLIN, 0}, {error_fd, POLLIN, 0}};
  std::string* sinks[2] = {&result, &errors};
  int open = 2;
  char buffer[65536];
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open;
      }
    }
  }
}

std::string how_it_ended(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return fmt::format("signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  }
  return "an unknown status";
}

// A failed result for a scenario whose run died: what a person needs to rerun and debug it.
// `header` is what the child said about the scenario before running it (null if it died first).
FileOutcome crashed(const std::string& file, const Json& header, int status,
                    const std::string& errors) {
  FileOutcome out;
  ScenarioResult r;
  r.file = file;
  r.name = header.is_object() ? header.value("name", file) : file;
  r.description = header.is_object() ? header.value("description", std::string()) : "";
  r.world_size = header.is_object() ? header.value("world_size", int64_t{0}) : 0;
  const std::string said =
      errors.size() > 4000 ? "..." + errors.substr(errors.size() - 4000) : errors;
  r.crash = fmt::format("meshsim stopped while running this scenario ({}){}", how_it_ended(status),
                        said.empty() ? std::string(".") : ": " + said);
  while (!r.crash.empty() && r.crash.back() == '\n') r.crash.pop_back();
  out.result = std::move(r);
  return out;
}

}  // namespace

FileOutcome run_scenario_file(const std::string& file, const RunOptions& options,
                              Isolation isolation) {
  if (isolation == Isolation::kInProcess) return outcome_of(load_and_run(file, options), file);
  int result_pipe[2];
  int error_pipe[2];
  if (::pipe(result_pipe) != 0) return outcome_of(load_and_run(file, options), file);
  if (::pipe(error_pipe) != 0) {
    ::close(result_pipe[0]);
    ::close(result_pipe[1]);
    return outcome_of(load_and_run(file, options), file);
  }
  std::cout.flush();
  std::cerr.flush();
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(result_pipe[0]);
    ::close(error_pipe[0]);
    ::dup2(error_pipe[1], STDERR_FILENO);
    // A header line first, so a run that dies still has a name; then the outcome.
    const auto header = [&](const Scenario& s) {
      write_all(result_pipe[1], json_text(Json{{"name", s.name},
                                               {"description", s.description},
                                               {"world_size", s.world_size}}) +
                                    "\n");
    };
    const Json outcome = load_and_run(file, options, header);
    if (outcome.contains("result")) {
      write_all(result_pipe[1], json_text(outcome));
    } else {
      write_all(result_pipe[1], "\n" + json_text(outcome));  // no header: an empty line
    }
    _exit(0);  // no destructors, no flushing the parent's buffers twice
  }
  ::close(result_pipe[1]);
  ::close(error_pipe[1]);
  if (child < 0) {
    ::close(result_pipe[0]);
    ::close(error_pipe[0]);
    return outcome_of(load_and_run(file, options), file);
  }
  std::string result;
  std::string errors;
  drain(result_pipe[0], error_pipe[0], result, errors);
  ::close(result_pipe[0]);
  ::close(error_pipe[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  std::cerr << errors;  // the child's own warnings stay visible
  const size_t newline = result.find('\n');
  const Json header = Json::parse(result.substr(0, newline), nullptr, false);
  const Json j = newline == std::string::npos
                     ? Json(nullptr)
                     : Json::parse(result.substr(newline + 1), nullptr, false);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && j.is_object()) {
    FileOutcome out = outcome_of(j, file);
    if (out.result || out.unusable_at) return out;
  }
  return crashed(file, header, status, errors);
}

}  // namespace meshsim::sim
