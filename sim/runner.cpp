#include "sim/runner.hpp"

#include <chrono>

#include <fmt/format.h>

#include "sim/rank_state.hpp"
#include "sim/runtime/hang_report.hpp"

namespace meshsim::sim {

namespace {

// Runs one step on one rank; returns the failure that stops the rank, if any.
std::optional<RankFailure> run_step(const Step& step, RankState& rank) {
  auto failure = [&](std::string type, std::string message) {
    return RankFailure{step.where, step.kind, std::move(type), std::move(message)};
  };
  try {
    if (step.when && step.when->evaluate(rank) == 0) return std::nullopt;
    const bool must_raise =
        step.raises && (!step.raises->on || step.raises->on->evaluate(rank) != 0);
    try {
      step.run(rank);
    } catch (const Error& e) {
      if (must_raise && e.type() == step.raises->type &&
          std::string_view(e.what()).find(step.raises->contains) != std::string_view::npos) {
        return std::nullopt;
      }
      if (!must_raise) return failure(std::string(py_error_type_name(e.type())), e.what());
      return failure(std::string(py_error_type_name(e.type())),
                     fmt::format("{} (expected {} containing \"{}\")", e.what(),
                                 py_error_type_name(step.raises->type), step.raises->contains));
    }
    if (must_raise) {
      return failure("meshsim",
                     fmt::format("expected {} containing \"{}\", but the step succeeded",
                                 py_error_type_name(step.raises->type), step.raises->contains));
    }
  } catch (const Error& e) {
    // From `when` or `on`: the expression itself failed on this rank.
    return failure(std::string(py_error_type_name(e.type())), e.what());
  }
  return std::nullopt;
}

}  // namespace

ScenarioResult run_scenario(const Scenario& scenario, const RunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  ScenarioResult result;
  result.name = scenario.name;
  result.file = scenario.file;
  result.description = scenario.description;
  result.world_size = scenario.world_size;
  result.outcome_expected = !scenario.outcomes.empty();
  const auto n = static_cast<size_t>(scenario.world_size);
  result.failures.resize(n);

  World world(scenario.world_size, WorldOptions{options.policy, options.seed, options.stack_size});
  std::vector<RankActivity> activity(n);
  SimCollectives collectives(world, activity, scenario.cost);
  auto keep_hang = [&] {
    if (result.hang) return;
    const HangReport report = analyze_hang(activity, collectives);
    result.hang_text = report.text();
    result.hang = report.json();
    result.hang_dot = report.dot();
  };

  world.run(
      [&](int64_t r) {
        RankActivity& me = activity[static_cast<size_t>(r)];
        RankState rank(scenario, r, result, collectives, me);
        try {
          for (const auto& step : scenario.steps) {
            me.where = step->where;
            me.step = step->kind;
            if (std::optional<RankFailure> f = run_step(*step, rank)) {
              me.state = RankActivity::State::kFailed;
              me.error = fmt::format("{}: {}", f->error_type, f->message);
              result.failures[static_cast<size_t>(r)] = std::move(f);
              return;
            }
          }
          me.state = RankActivity::State::kFinished;
        } catch (const RankAborted& a) {
          me.state = RankActivity::State::kAborted;
          me.error = a.reason;
          result.failures[static_cast<size_t>(r)] =
              RankFailure{me.where, me.step, "aborted", a.reason};
        }
      },
      [&] {
        keep_hang();
        std::vector<std::optional<std::string>> aborts(n);
        const std::string reason =
            fmt::format("aborted after a {} ({})", (*result.hang)["kind"].get<std::string>(),
                        (*result.hang)["cause"].get<std::string>());
        for (size_t r = 0; r < n; ++r) {
          if (activity[r].state == RankActivity::State::kBlocked) aborts[r] = reason;
        }
        return aborts;
      });
  if (collectives.timeout()) keep_hang();
  result.warnings = collectives.warnings();
  for (const auto& outcome : scenario.outcomes)
    result.expectations.push_back(outcome->check(result));
  result.schedule_digest = world.schedule().digest;
  result.schedule_decisions = world.schedule().decisions;
  result.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

size_t ScenarioResult::failed_expectations() const {
  size_t n = 0;
  for (const ExpectationRecord& e : expectations) n += e.passed ? 0 : 1;
  return n;
}

size_t ScenarioResult::failed_ranks() const {
  size_t n = 0;
  for (const auto& f : failures) n += f ? 1 : 0;
  return n;
}

}  // namespace meshsim::sim
