#include "sim/run/isolated_run.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <iostream>

#include <fmt/format.h>

#include "sim/report/result_codec.hpp"
#include "sim/run/checkpoint_dir.hpp"
#include "sim/run/child_process.hpp"
#include "sim/run/rank_error.hpp"
#include "sim/scenario/scenario_loader.hpp"

namespace meshsim::sim {

namespace {

// The whole job: its result, or why the file cannot be used. `loaded` hears the scenario's
// header before it runs. In process, the result is handed over as it is.
FileOutcome load_and_run(const std::string& file, const StepRegistry& steps,
                         const RunOptions& options,
                         const std::function<void(const Scenario&)>& loaded = {}) {
  FileOutcome out;
  try {
    const Scenario scenario = load_scenario_file(file, steps);
    if (loaded) loaded(scenario);
    out.result = run_scenario(scenario, options);
  } catch (const InputError& e) {
    out.unusable_at = e.where();
    out.unusable_message = e.what();
  } catch (...) {
    const RankError e = classify_current_exception();
    out.unusable_at = SourceLocation{file, 0, 0};
    out.unusable_message = fmt::format("meshsim could not run this scenario: {}: {}",
                                       py_error_type_name(e.type), e.message);
  }
  return out;
}

// An outcome across the child-process boundary: {"result": ...} or {"unusable": ...}.
Json encode_outcome(const FileOutcome& o) {
  if (o.result) return Json{{"result", encode_result(*o.result)}};
  const SourceLocation& w = *o.unusable_at;
  return Json{{"unusable",
               {{"file", w.file},
                {"line", w.line},
                {"column", w.column},
                {"message", o.unusable_message}}}};
}

FileOutcome decode_outcome(const Json& j, const std::string& file) {
  FileOutcome out;
  if (j.contains("result")) {
    out.result = decode_result(j.at("result"));
  } else if (j.contains("unusable")) {
    const Json& u = j.at("unusable");
    out.unusable_at = SourceLocation{u.value("file", file), u.value("line", int64_t{0}),
                                     u.value("column", int64_t{0})};
    out.unusable_message = u.value("message", std::string());
  }
  return out;
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

FileOutcome run_scenario_file(const std::string& file, const StepRegistry& steps,
                              const RunOptions& options, Isolation isolation) {
  if (isolation == Isolation::kInProcess) return load_and_run(file, steps, options);
  int result_pipe[2];
  int error_pipe[2];
  if (::pipe(result_pipe) != 0) return load_and_run(file, steps, options);
  if (::pipe(error_pipe) != 0) {
    ::close(result_pipe[0]);
    ::close(result_pipe[1]);
    return load_and_run(file, steps, options);
  }
  std::cout.flush();
  std::cerr.flush();
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(result_pipe[0]);
    ::close(error_pipe[0]);
    // The progress line goes to the terminal itself, not into the stderr the parent replays.
    RunOptions child_options = options;
    if (options.watch.progress_fd >= 0)
      child_options.watch.progress_fd = ::dup(options.watch.progress_fd);
    ::dup2(error_pipe[1], STDERR_FILENO);
    // A header line first, so a run that dies still has a name; then the outcome.
    const auto header = [&](const Scenario& s) {
      write_all(result_pipe[1], json_text(Json{{"name", s.name},
                                               {"description", s.description},
                                               {"world_size", s.world_size}}) +
                                    "\n");
    };
    const FileOutcome outcome = load_and_run(file, steps, child_options, header);
    if (outcome.result) {
      write_all(result_pipe[1], json_text(encode_outcome(outcome)));
    } else {
      write_all(result_pipe[1], "\n" + json_text(encode_outcome(outcome)));  // no header line
    }
    _exit(0);  // no destructors, no flushing the parent's buffers twice
  }
  ::close(result_pipe[1]);
  ::close(error_pipe[1]);
  if (child < 0) {
    ::close(result_pipe[0]);
    ::close(error_pipe[0]);
    return load_and_run(file, steps, options);
  }
  std::string result;
  std::string errors;
  drain(result_pipe[0], error_pipe[0], result, errors);
  ::close(result_pipe[0]);
  ::close(error_pipe[0]);
  const int status = wait_for_child(child);
  if (!ended_cleanly(status)) remove_checkpoint_dirs_of(child);
  if (options.echo_child_stderr) std::cerr << errors;  // the child's own warnings stay visible
  const size_t newline = result.find('\n');
  const Json header = Json::parse(result.substr(0, newline), nullptr, false);
  const Json j = newline == std::string::npos
                     ? Json(nullptr)
                     : Json::parse(result.substr(newline + 1), nullptr, false);
  if (ended_cleanly(status) && j.is_object()) {
    FileOutcome out = decode_outcome(j, file);
    if (out.result || out.unusable_at) return out;
  }
  return crashed(file, header, status, errors);
}

}  // namespace meshsim::sim
