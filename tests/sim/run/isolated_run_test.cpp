// One scenario file run in a child process and in this one: the result the child passes back as
// JSON is the in-process result, field for field; a child that dies is a failed scenario saying
// how; a file that does not load is unusable at its place either way.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "sim/report/result_codec.hpp"
#include "sim/run/isolated_run.hpp"
#include "sim/steps/builtin_steps.hpp"

using namespace meshsim::sim;

namespace {

// A fresh directory under the system's temporary one, removed with the object.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("meshsim_isolated_run_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string file = (path / name).string();
    std::ofstream(file) << text;
    return file;
  }
};

// Everything the codec carries, with the one field that differs between two runs left out.
meshsim::sim::Json comparable(ScenarioResult r) {
  r.wall_ms = 0;
  return encode_result(r);
}

}  // namespace

TEST_CASE("isolated run: a child's result is the in-process result", "[sim][run]") {
  std::vector<std::string> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(MESHSIM_SOURCE_ROOT) + "/scenarios")) {
    if (entry.path().extension() == ".toml") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 40);
  size_t hangs = 0;
  for (const std::string& file : files) {
    INFO(file);
    const FileOutcome here = run_scenario_file(file, builtin_steps(), {}, Isolation::kInProcess);
    const FileOutcome child =
        run_scenario_file(file, builtin_steps(), {}, Isolation::kChildProcess);
    REQUIRE(here.result.has_value());
    REQUIRE(child.result.has_value());
    CHECK(comparable(*child.result) == comparable(*here.result));
    CHECK(child.result->hang_dot == here.result->hang_dot);
    hangs += here.result->hang.has_value() ? 1 : 0;
  }
  // The comparison covers hang reports and their graphs, not only passing runs.
  CHECK(hangs >= 5);
}

TEST_CASE("isolated run: a child that dies is a failed scenario saying how", "[sim][run]") {
  const TempDir dir;
  const std::string file =
      dir.write("overflow.toml",
                "[scenario]\nname = \"overflow\"\nworld_size = 4\n"
                "[[fault]]\nstack_overflow = { rank = 2, step = 2 }\n"
                "[[step]]\nbarrier = \"WORLD\"\n"
                "[[step]]\nall_reduce = { tensor = \"ones(2)\", out = \"x\" }\n");
  const FileOutcome out = run_scenario_file(file, builtin_steps(), {}, Isolation::kChildProcess);
  REQUIRE(out.result.has_value());
  // What the child said before it died (its header line) names the scenario.
  CHECK(out.result->name == "overflow");
  CHECK(out.result->world_size == 4);
  CHECK_THAT(out.result->crash, Catch::StartsWith("meshsim stopped while running this scenario ("));
  CHECK_FALSE(out.result->passed());
}

TEST_CASE("isolated run: a file that does not load is unusable at its place", "[sim][run]") {
  const TempDir dir;
  const std::string file =
      dir.write("bad.toml", "[scenario]\nname = \"bad\"\nworld_size = 2\n[[step]]\nfrob = 1\n");
  for (const Isolation isolation : {Isolation::kInProcess, Isolation::kChildProcess}) {
    const FileOutcome out = run_scenario_file(file, builtin_steps(), {}, isolation);
    CHECK_FALSE(out.result.has_value());
    REQUIRE(out.unusable_at.has_value());
    CHECK(out.unusable_at->file == file);
    CHECK(out.unusable_at->line == 5);
    CHECK(out.unusable_at->column == 1);
    CHECK_THAT(out.unusable_message, Catch::StartsWith(file + ":5:1: unknown step \"frob\""));
  }
}

TEST_CASE("isolated run: a child that dies leaves no temporary checkpoint behind", "[sim][run]") {
  const TempDir dir;
  const std::filesystem::path temporary = dir.path / "tmp";
  std::filesystem::create_directories(temporary);
  const char* before = std::getenv("TMPDIR");
  const std::string saved = before == nullptr ? "" : before;
  ::setenv("TMPDIR", temporary.c_str(), 1);
  const std::string file =
      dir.write("saves_then_dies.toml",
                "[scenario]\nname = \"saves-then-dies\"\nworld_size = 4\ndevice = \"cuda\"\n"
                "[[fault]]\nstack_overflow = { rank = 1, step = 3 }\n"
                "[[step]]\ntensor = { name = \"w\", value = [1, 2] }\n"
                "[[step]]\nsave = { checkpoint = \"step1\", tensors = [\"w\"] }\n"
                "[[step]]\nbarrier = \"WORLD\"\n");
  const FileOutcome out = run_scenario_file(file, builtin_steps(), {}, Isolation::kChildProcess);
  if (before == nullptr) {
    ::unsetenv("TMPDIR");
  } else {
    ::setenv("TMPDIR", saved.c_str(), 1);
  }
  REQUIRE(out.result.has_value());
  CHECK_THAT(out.result->crash, Catch::StartsWith("meshsim stopped while running this scenario ("));
  // The child made its checkpoint directory there, and died with it on disk; it is gone.
  CHECK(std::filesystem::is_empty(temporary));
}
