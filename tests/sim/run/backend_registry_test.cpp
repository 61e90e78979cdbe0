// Backends register themselves: the built-in table, the refusal of an unknown name, and a backend
// registered by a test that the runner then uses for every meeting, with nothing in the runtime
// told about it.
#include <catch2/catch.hpp>

#include "sim/run/runner.hpp"
#include "sim/runtime/sim_executor.hpp"
#include "sim/steps/builtin_steps.hpp"

using namespace meshsim::sim;

namespace {

// The simulated executor, counting the meetings it completes.
class CountingBackend final : public WorldBackend {
 public:
  CountingBackend(VirtualTime& time, int64_t& meetings) : counting_(time, meetings) {}
  Executor& executor() override { return counting_; }

 private:
  struct Counting final : Executor {
    Counting(VirtualTime& time, int64_t& meetings) : inner(time), count(meetings) {}
    void execute(Meeting& meeting) override {
      ++count;
      inner.execute(meeting);
    }
    SimExecutor inner;
    int64_t& count;
  } counting_;
};

}  // namespace

TEST_CASE("backend registry: the built-in backends, in --help order", "[sim][run]") {
  const std::vector<BackendEntry>& entries = builtin_backends().entries();
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].name == "sim");
  CHECK(entries[0].simulated);
  CHECK(entries[1].name == "nccl");
  CHECK_FALSE(entries[1].simulated);
  CHECK(builtin_backends().find("gloo") == nullptr);
  CHECK_THROWS_WITH(BackendChoice{.name = "gloo"}.entry(),
                    "no backend named \"gloo\" (there are sim, nccl)");
}

TEST_CASE("backend registry: a registered backend runs every meeting", "[sim][run]") {
  int64_t meetings = 0;
  BackendRegistry registry;
  register_sim_backend(registry);
  registry.add({.name = "counting",
                .summary = "counts",
                .simulated = true,
                .make = [&](const BackendContext& context) -> std::unique_ptr<WorldBackend> {
                  return std::make_unique<CountingBackend>(context.time, meetings);
                }});
  // A second entry of a name replaces the first, in its place.
  registry.add({.name = "sim", .summary = "replaced", .make = registry.find("sim")->make});
  REQUIRE(registry.entries().size() == 2);
  CHECK(registry.entries()[0].summary == "replaced");

  RunOptions options;
  options.backend = {.name = "counting", .registry = &registry};
  const ScenarioResult r = run_scenario(
      load_scenario_text("[scenario]\nname = \"t\"\nworld_size = 4\n"
                         "[[step]]\nbarrier = \"WORLD\"\n"
                         "[[step]]\nall_reduce = { tensor = \"ones(2)\", out = \"x\" }\n"
                         "[[expect]]\ntensor = \"x\"\nequals = [4, 4]\n",
                         "t.toml"),
      options);
  CHECK(r.passed());
  // The barrier and the all_reduce, once each for the whole world (new_group's store barriers
  // are the runtime's own, not the backend's).
  CHECK(meetings == 2);
}
