#include "sim/run/runner.hpp"

#include <algorithm>
#include <chrono>
#include <map>

#include <fmt/format.h>

#include "sim/report/hang_render.hpp"
#include "sim/report/rng_overlap.hpp"
#include "sim/run/checkpoint_dir.hpp"
#include "sim/run/fr_dump_files.hpp"
#include "sim/run/program_counter.hpp"
#include "sim/run/rank_error.hpp"
#include "sim/run/rank_state.hpp"
#include "sim/runtime/crash_handler.hpp"
#include "sim/runtime/fiber_stack.hpp"
#include "sim/runtime/hang_report.hpp"
#include "sim/runtime/trace.hpp"

namespace meshsim::sim {

namespace {

// Runs `f`; any exception but the runtime's own (abort, injected crash) comes back as the rank's
// error instead of leaving the rank.
template <typename F>
std::optional<RankError> capture_rank_error(F&& f) {
  try {
    f();
  } catch (const RankAborted&) {
    throw;
  } catch (const InjectedCrash&) {
    throw;
  } catch (...) {
    forget_unwound_frames();
    return classify_current_exception();
  }
  return std::nullopt;
}

// Runs one step on one rank; returns the failure that stops the rank, if any. `label` names
// the step in reports ("send (mb=3)" inside a loop); `skipped` says its `when` was false.
std::optional<RankFailure> run_step(const Step& step, const std::string& label, RankState& rank,
                                    bool& skipped) {
  auto failure = [&](const RankError& e, std::string suffix = {}) {
    return RankFailure{step.where, label, std::string(py_error_type_name(e.type)),
                       e.message + suffix};
  };
  bool skip = false;
  bool must_raise = false;
  // `when` or `on` itself may fail on this rank.
  if (std::optional<RankError> e = capture_rank_error([&] {
        skip = step.when && step.when->evaluate(rank) == 0;
        must_raise = !skip && step.raises && (!step.raises->on || step.raises->on->evaluate(rank));
      })) {
    return failure(*e);
  }
  skipped = skip;
  if (skip) return std::nullopt;
  if (std::optional<RankError> e = capture_rank_error([&] { step.run(rank); })) {
    // ASan: the frames capture_rank_error used while catching may still be poisoned here (seen
    // with clang, formatting the mismatch message after a deep checkpoint error).
    forget_unwound_frames();
    if (!must_raise) return failure(*e);
    if (e->type == step.raises->type &&
        std::string_view(e->message).find(step.raises->contains) != std::string_view::npos) {
      return std::nullopt;
    }
    return failure(*e, fmt::format(" (expected {} containing \"{}\")",
                                   py_error_type_name(step.raises->type), step.raises->contains));
  }
  if (must_raise) {
    return RankFailure{step.where, label, "meshsim",
                       fmt::format("expected {} containing \"{}\", but the step succeeded",
                                   py_error_type_name(step.raises->type), step.raises->contains)};
  }
  return std::nullopt;
}

// Why each blocked rank is aborted, naming the ranks it waited for, and first of all a rank
// that failed (with its original error).
std::vector<std::optional<std::string>> abort_reasons(const HangReport& hang,
                                                      const std::vector<RankActivity>& activity) {
  std::vector<std::optional<std::string>> out(activity.size());
  for (size_t r = 0; r < activity.size(); ++r) {
    if (activity[r].state != RankActivity::State::kBlocked) continue;
    const std::vector<int64_t>& missing = hang.waits_for(static_cast<int64_t>(r));
    const WaitInfo& w = *hang.ranks[r].waiting;
    std::string where =
        fmt::format("{} on group {} seq {}", collective_op_name(w.signature.op), w.group, w.seq);
    // A send or recv names its peer relative to the rank, so that a pipeline stage aborted the
    // same way is one line of the report, not one per rank.
    const bool p2p =
        (w.signature.op == CollectiveOp::kSend || w.signature.op == CollectiveOp::kRecv) &&
        w.signature.root.has_value();
    if (p2p) {
      std::string group = w.group;  // "WORLD p2p 4→2": the group, without the direction
      if (const size_t at = group.find(" p2p "); at != std::string::npos) group.resize(at);
      where =
          fmt::format("{} ({}=rank{:+}) on group {} p2p seq {}", collective_op_name(w.signature.op),
                      w.signature.op == CollectiveOp::kSend ? "dst" : "src",
                      *w.signature.root - static_cast<int64_t>(r), group, w.seq);
    }
    const auto failed = std::find_if(missing.begin(), missing.end(), [&](int64_t m) {
      return activity[static_cast<size_t>(m)].state == RankActivity::State::kFailed;
    });
    if (failed != missing.end()) {
      const RankActivity& f = activity[static_cast<size_t>(*failed)];
      out[r] = fmt::format("aborted in {}: rank {} failed at {}: {}", where, *failed,
                           f.where.to_string(), f.error);
    } else {
      out[r] = fmt::format("aborted in {} after a {} ({}){}", where, hang_kind_name(hang.kind),
                           hang_cause_name(hang.cause),
                           missing.empty() || p2p
                               ? std::string()
                               : fmt::format(", waiting for rank(s) {}", rank_ranges(missing)));
    }
  }
  return out;
}

// Overlapping draws and ranks whose generator state rank 0 overwrote, as warnings.
void add_rng_findings(ScenarioResult& result) {
  std::sort(result.rng_state_synced.begin(), result.rng_state_synced.end());
  if (!result.rng_state_synced.empty()) {
    result.warnings.push_back(
        {"rng",
         fmt::format("DTensor synchronized the RNG state of rank(s) {} with rank 0's (lazy tracker "
                     "creation broadcasts it over WORLD; PyTorch deprecates this: call "
                     "torch.manual_seed with the same seed on every rank of one SPMD region, one "
                     "seed per pipeline stage)",
                     rank_ranges(result.rng_state_synced)),
         {}});
  }
  // Rank by rank, each in program order: the report reads the same whatever the schedule.
  std::stable_sort(result.draws.begin(), result.draws.end(),
                   [](const DrawRecord& a, const DrawRecord& b) { return a.rank < b.rank; });
  find_rng_overlaps(result);
  constexpr size_t kListed = 8;
  for (size_t i = 0; i < result.overlaps.size() && i < kListed; ++i) {
    result.warnings.push_back({"rng overlap",
                               "RNG overlap: " + describe_overlap(result.overlaps[i]),
                               result.overlaps[i].first.where});
  }
  if (result.overlap_count > kListed) {
    result.warnings.push_back(
        {"rng overlap",
         fmt::format("... and {} more RNG overlaps (see --json)", result.overlap_count - kListed),
         {}});
  }
  if (result.draws_total > result.draws.size()) {
    result.warnings.push_back({"rng",
                               fmt::format("the draw log kept {} of {} draws: later draws are "
                                           "neither listed nor checked for overlaps",
                                           result.draws.size(), result.draws_total),
                               {}});
  }
  // The report lists the first draws; the overlaps carry their own copies.
  if (result.draws.size() > ScenarioResult::kMaxReportedDraws)
    result.draws.resize(ScenarioResult::kMaxReportedDraws);
}

// Ranks' own warnings, each (text, step) once with the ranks that gave it, in rank order.
void add_rank_warnings(const std::vector<std::vector<Warning>>& by_rank, ScenarioResult& result) {
  std::vector<std::pair<const Warning*, std::vector<int64_t>>> texts;
  std::map<std::tuple<std::string, std::string, int64_t, int64_t>, size_t> index;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    for (const Warning& w : by_rank[r]) {
      const auto [it, added] = index.emplace(
          std::tuple(w.text, w.where.file, w.where.line, w.where.column), texts.size());
      if (added) texts.push_back({&w, {}});
      texts[it->second].second.push_back(static_cast<int64_t>(r));
    }
  }
  for (const auto& [w, ranks] : texts) {
    result.warnings.push_back(
        {w->kind,
         fmt::format("rank{} {}: {}", ranks.size() > 1 ? "s" : "", rank_ranges(ranks), w->text),
         w->where});
  }
}

}  // namespace

namespace {

// Whether a run that asked for `wanted` is run again with that probe. The simulated backend runs
// the same schedule again (deterministic, and cheap next to a real job); real devices and a kept
// checkpoint directory are not run twice.
bool runs_again(const RunOptions& options, const std::optional<ProbeRequest>& wanted) {
  return wanted && !options.probe && options.backend.entry().simulated && !options.keep_checkpoints;
}

// One run; `wanted` gets the probe the hang report asks for, if any.
ScenarioResult run_once(const Scenario& scenario, const RunOptions& options,
                        std::optional<ProbeRequest>& wanted) {
  const auto start = std::chrono::steady_clock::now();
  ScenarioResult result;
  result.name = scenario.name;
  result.file = scenario.file;
  result.description = scenario.description;
  result.world_size = scenario.world_size;
  result.outcome_expected = std::any_of(scenario.outcomes.begin(), scenario.outcomes.end(),
                                        [](const auto& o) { return o->declares_run_outcome(); });
  const auto n = static_cast<size_t>(scenario.world_size);
  result.failures.resize(n);

  World world(scenario.world_size, options.world);
  std::vector<RankActivity> activity(n);
  if (options.fr_dump_dir) {
    for (RankActivity& a : activity) a.history = FlightRecorder::for_dump(options.fr_buffer_size);
  }
  if (options.probe) {
    for (int64_t r : options.probe->ranks) {
      if (r >= 0 && static_cast<size_t>(r) < n)
        activity[static_cast<size_t>(r)].skipped.probe(options.probe->from_calls);
    }
  }
  BackendOptions backend{
      .choice = options.backend, .cost = scenario.cost, .faults = scenario.faults};
  if (options.faults_seed) {
    for (const Fault& f : draw_faults(*options.faults_seed, scenario.world_size))
      backend.faults.push_back(f);
  }
  for (const Fault& f : backend.faults)
    result.faults.push_back(fmt::format("{} ({})", f.describe(), f.where.to_string()));
  const std::vector<Fault> faults = backend.faults;  // step-triggered ones fire here
  Trace trace;
  if (options.trace) backend.trace = &trace;
  if (options.trace && options.trace_setup) backend.setup_trace = &trace;
  BackendFactory backends(world, activity, std::move(backend));
  trace.set_group_labels([&](int64_t id) { return backends.rendezvous().group_label(id); });
  // The first stall or timeout is the one reported; later stalls (after aborts) only abort.
  auto keep_hang = [&](const HangReport& report) {
    if (result.hang) return;
    wanted = report.probe;
    // The hung collective, as a slice that never ends on every rank blocked in it; a hung
    // new_group too, even when its completed store barriers are left out (--trace-setup).
    if (options.trace) {
      for (const HangReport::Rank& r : report.ranks) {
        if (r.wait < 0) continue;
        const OpenWait& w = report.waits[static_cast<size_t>(r.wait)];
        nlohmann::json args = {{"signature", r.waiting->signature.describe()},
                               {"group", w.group},
                               {"seq", w.seq},
                               {"waiting_for", rank_ranges(w.missing)},
                               {"cause", hang_cause_name(report.cause)}};
        if (!w.creating.empty()) args["creating"] = w.creating;
        trace.open_slice(r.rank,
                         fmt::format("{} {} #{} (hung)",
                                     collective_op_name(r.waiting->signature.op), w.channel, w.seq),
                         "hung", r.activity.clock, std::move(args));
      }
    }
    result.hang_text = hang_text(report);
    result.hang = hang_json(report);
    result.hang_dot = hang_dot(report);
  };

  CheckpointDir checkpoints(options.keep_checkpoints, scenario.name);
  CheckpointExchange checkpoint_exchange;
  std::vector<std::vector<Warning>> rank_warnings(n);

  RunWatch watch(options.watch, scenario.name, activity);
  const std::string past_limit = fmt::format(
      "stopped: the run reached its wall-clock limit of {:g} s (--timeout)", watch.limit_s());

  // Crash messages name the rank and its scenario location while this world runs.
  crash::watch(&world.stacks(), &activity);
  struct Unwatch {
    ~Unwatch() { crash::watch(nullptr, nullptr); }
  } unwatch;
  // The rank body's cold paths are functions of their own: every rank's stack holds the body's
  // frame while it runs, and with these out of it an idle rank stays within one page of stack.
  const auto stop_past_limit = [&]() __attribute__((noinline)) {
    // The first rank past the limit writes down where every rank is, then each stops at its
    // next step (parked ranks: below, once nothing else runs).
    if (!result.hang)
      keep_hang(wall_clock_report(activity, backends.rendezvous(), watch.limit_s()));
    throw RankAborted{past_limit};
  };
  const auto keep_failure = [&](int64_t r, RankActivity::State state, std::string error,
                                RankFailure failure) __attribute__((noinline)) {
    RankActivity& me = activity[static_cast<size_t>(r)];
    me.state = state;
    me.error = std::move(error);
    result.failures[static_cast<size_t>(r)] = std::move(failure);
  };
  // An error at the rank's current place (where, step).
  const auto fail_here = [&](int64_t r, const RankError& e) __attribute__((noinline)) {
    const RankActivity& me = activity[static_cast<size_t>(r)];
    keep_failure(
        r, RankActivity::State::kFailed,
        fmt::format("{}: {}", py_error_type_name(e.type), e.message),
        RankFailure{me.where, me.step, std::string(py_error_type_name(e.type)), e.message});
  };
  const auto fail_step = [&](int64_t r, const Step& at, const RankError& e)
      __attribute__((noinline)) {
    RankActivity& me = activity[static_cast<size_t>(r)];
    me.where = at.where;
    me.step = at.kind;
    fail_here(r, e);
  };
  const auto trace_step = [&](int64_t r, const Step& step, const std::string& position,
                              double started) __attribute__((noinline)) {
    nlohmann::json args{{"location", step.where.to_string()}};
    if (!position.empty()) args["iterations"] = position;
    trace.slice(r, step.kind, "step", started, activity[static_cast<size_t>(r)].clock,
                std::move(args));
  };
  world.run(
      [&](int64_t r) {
        RankActivity& me = activity[static_cast<size_t>(r)];
        RankState rank(scenario, r, result, backends, me, checkpoints, checkpoint_exchange,
                       rank_warnings[static_cast<size_t>(r)]);
        int64_t index = 0;
        ProgramCounter program(scenario.steps, rank);
        // The last step this rank ran (not one its `when` skipped): where a finished rank is.
        SourceLocation last_where;
        CallSite last_site;
        std::string last_step;
        try {
          while (true) {
            if (watch.before_step(r)) stop_past_limit();
            const Step* step = nullptr;
            if (std::optional<RankError> e = capture_rank_error([&] { step = program.next(); })) {
              fail_step(r, program.current(), *e);
              return;
            }
            if (step == nullptr) break;
            const std::string position = program.loop_position();
            me.where = step->where;
            me.site = CallSite::at(static_cast<int32_t>(program.index()), step->where.line,
                                   step->where.column, step->loop_scope, rank.loops());
            me.in_loop = !position.empty();
            me.step = position.empty() ? step->kind : fmt::format("{}, {}", step->kind, position);
            for (const Fault* fault : faults_at(faults, r, Fault::Trigger::kStep, ++index)) {
              if (fault->kind == Fault::Kind::kStall) me.clock += fault->seconds;
              if (fault->kind == Fault::Kind::kStackOverflow) overflow_fiber_stack();
              if (fault->kind == Fault::Kind::kCrash) {
                throw InjectedCrash{fmt::format("injected crash ({}, {})", fault->describe(),
                                                fault->where.to_string())};
              }
            }
            const double started = me.clock;
            bool skipped = false;
            std::optional<RankFailure> f = run_step(
                *step, position.empty() ? step->kind : fmt::format("{} ({})", step->kind, position),
                rank, skipped);
            if (!skipped) {
              last_where = me.where;
              last_site = me.site;
              last_step = me.step;
              if (step->communicates()) me.skipped.ran(me.site);
            } else if (const std::optional<PlannedCall> call = step->planned_call(rank)) {
              me.skipped.add(*call, me.site, me.calls.count());
            }
            if (options.trace) trace_step(r, *step, position, started);
            if (f) {
              std::string error = fmt::format("{}: {}", f->error_type, f->message);
              keep_failure(r, RankActivity::State::kFailed, std::move(error), std::move(*f));
              return;
            }
          }
          me.state = RankActivity::State::kFinished;
          me.where = last_where;
          me.site = last_site;
          me.step = last_step;
        } catch (const InjectedCrash& c) {
          forget_unwound_frames();
          keep_failure(r, RankActivity::State::kFailed, "crash: " + c.what,
                       RankFailure{me.where, me.step, "crash", c.what});
        } catch (const RankAborted& a) {
          forget_unwound_frames();
          keep_failure(r, RankActivity::State::kAborted, a.reason,
                       RankFailure{me.where, me.step, "aborted", a.reason});
        } catch (...) {
          // Outside any step (a fault, a trace record): still this rank's failure, never the
          // process's.
          forget_unwound_frames();
          fail_here(r, classify_current_exception());
        }
      },
      [&] {
        if (watch.expired()) {
          std::vector<std::optional<std::string>> stop(n);
          for (size_t r = 0; r < n; ++r) {
            if (world.is_parked(static_cast<int64_t>(r))) stop[r] = past_limit;
          }
          return stop;
        }
        const HangReport report = analyze_hang(activity, backends.rendezvous(), backends.timeout());
        keep_hang(report);
        return abort_reasons(report, activity);
      });
  watch.finish();
  if (backends.timeout())
    keep_hang(analyze_hang(activity, backends.rendezvous(), backends.timeout()));
  // Dumped once, by the run whose report is kept.
  if (options.fr_dump_dir && !runs_again(options, wanted)) {
    try {
      result.fr_dump_dir = write_fr_dumps({*options.fr_dump_dir, scenario.name, scenario.file},
                                          activity, backends.groups());
    } catch (const std::exception& e) {
      result.fr_dump_error = e.what();
    }
  }
  for (const std::string& w : backends.warnings()) result.warnings.push_back({"new_group", w, {}});
  result.payload_hashes = backends.payload_hashes();
  add_rank_warnings(rank_warnings, result);
  add_rng_findings(result);
  if (result.unlisted_passed + result.unlisted_failed > 0) {
    result.warnings.push_back(
        {"report",
         fmt::format("{} expectations ({} failed) were checked but not listed: the report keeps "
                     "at most {} expectations and dumps (a repeat loop makes many; narrow them "
                     "with when = ...)",
                     result.unlisted_passed + result.unlisted_failed, result.unlisted_failed,
                     ScenarioResult::kMaxListedRecords),
         {}});
  }
  if (result.omitted_values > 0) {
    result.warnings.push_back(
        {"report",
         fmt::format("{} dumped or expected values were left out of the report, which reached "
                     "its limit of {} MiB of values; narrow the dumps and expectations (when = "
                     "...) to see them",
                     result.omitted_values, kMaxReportValueBytes >> 20),
         {}});
  }
  for (const auto& outcome : scenario.outcomes)
    result.expectations.push_back(outcome->check(result));
  result.cross_rank_samples.clear();  // checked; the report keeps what failed
  if (options.trace) result.trace = trace.events(0, scenario.name, scenario.world_size);
  result.schedule_digest = world.schedule().digest;
  result.schedule_decisions = world.schedule().decisions;
  result.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace

ScenarioResult run_scenario(const Scenario& scenario, const RunOptions& options) {
  std::optional<ProbeRequest> wanted;
  ScenarioResult first = run_once(scenario, options, wanted);
  if (!runs_again(options, wanted)) return first;
  const double first_ms = first.wall_ms;
  first = {};  // the second run's result replaces it: do not hold both
  RunOptions again = options;
  again.probe = std::move(wanted);
  ScenarioResult second = run_once(scenario, again, wanted);
  second.wall_ms += first_ms;
  return second;
}

uint64_t json_weight(const Json& value) {
  uint64_t weight = 0;
  std::vector<const Json*> pending{&value};
  while (!pending.empty()) {
    const Json* j = pending.back();
    pending.pop_back();
    weight += j->is_string() ? j->get_ref<const std::string&>().size() + 2 : 8;
    if (j->is_structured()) {
      for (const Json& child : *j) pending.push_back(&child);
    }
  }
  return weight;
}

uint64_t ScenarioResult::listed_checks() const {
  uint64_t n = 0;
  for (const ExpectationRecord& e : expectations) n += e.checks;
  return n;
}

size_t ScenarioResult::failed_expectations() const {
  size_t n = unlisted_failed;
  for (const ExpectationRecord& e : expectations) n += e.passed ? 0 : 1;
  return n;
}

size_t ScenarioResult::failed_ranks() const {
  size_t n = 0;
  for (const auto& f : failures) n += f ? 1 : 0;
  return n;
}

}  // namespace meshsim::sim
