#include "sim/scenario/scenario_loader.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "sim/scenario/input_files.hpp"
#include "sim/scenario/outcome_expectation.hpp"
#include "sim/scenario/step_registry.hpp"
#include "sim/scenario/toml_guard.hpp"

namespace meshsim::sim {

namespace {

struct Entry {
  toml::source_position position;
  std::string_view array;  // "mesh", "step" or "expect"
  const toml::table* table;
};

std::optional<RaisesSpec> parse_raises(const toml::table& entry, LoadContext& ctx) {
  const toml::node* node = entry.get("raises");
  if (node == nullptr) return std::nullopt;
  const toml::table* table = node->as_table();
  if (table == nullptr) ctx.fail(*node, "raises must be a table { type, contains, on }");
  ctx.only_keys(*table, {"type", "contains", "on"}, "raises");
  RaisesSpec spec;
  const toml::node& type = ctx.require(*table, "type", "raises");
  const std::string type_name = ctx.string_of(type, "type");
  const std::optional<PyErrorType> parsed = parse_py_error_type(type_name);
  if (!parsed) {
    ctx.fail(type, fmt::format("unknown error type \"{}\" (expected RuntimeError, ValueError, "
                               "KeyError, TypeError, IndexError, AttributeError, "
                               "NotImplementedError, MemoryError, OverflowError, "
                               "ZeroDivisionError or AssertionError)",
                               type_name));
  }
  spec.type = *parsed;
  if (const toml::node* contains = table->get("contains"))
    spec.contains = ctx.string_of(*contains, "contains");
  if (const toml::node* on = table->get("on")) {
    if (on->is_array()) {
      std::vector<std::string> terms;
      for (int64_t r : ctx.integers_of(*on, "on")) terms.push_back(fmt::format("rank == {}", r));
      if (terms.empty()) ctx.fail(*on, "on lists no ranks");
      spec.on = Expression::parse(fmt::format("{}", fmt::join(terms, " or ")));
    } else if (!(on->is_string() && ctx.string_of(*on, "on") == "all")) {
      spec.on = ctx.expression_of(*on, "on");
    }
  }
  return spec;
}

// One program entry. A cross-rank expectation also gives the check it runs after the run, in
// `after_run`.
std::unique_ptr<Step> parse_entry(const Entry& e, const StepRegistry& steps, LoadContext& ctx,
                                  std::unique_ptr<OutcomeExpectation>& after_run) {
  const toml::table& table = *e.table;
  std::optional<Expression> when;
  if (const toml::node* w = table.get("when")) when = ctx.expression_of(*w, "when");
  ctx.set_entry_when(when ? &*when : nullptr);
  std::optional<RaisesSpec> raises = parse_raises(table, ctx);
  ctx.set_entry_raises(raises.has_value());
  std::unique_ptr<Step> step;
  std::string kind(e.array);
  if (e.array == "mesh") {
    step = steps.find("mesh")->parse(table, table, ctx);
  } else if (e.array == "expect") {
    if (raises) ctx.fail(*table.get("raises"), "an expectation cannot take raises");
    ExpectEntry entry = steps.expect_parser()(table, ctx);
    step = std::move(entry.step);
    after_run = std::move(entry.after_run);
  } else {
    const toml::node* value = nullptr;
    for (const auto& [key, v] : table) {
      if (key.str() == "when" || key.str() == "raises") continue;
      const StepRegistry::Kind* k = steps.find(key.str());
      if (k == nullptr) {
        throw InputError(ctx.at(key.source()),
                         fmt::format("unknown step \"{}\" (expected one of: {}; repeat, "
                                     "end_repeat; plus when, raises)",
                                     key.str(), fmt::join(steps.keys(), ", ")));
      }
      if (value != nullptr) {
        throw InputError(ctx.at(key.source()),
                         fmt::format("a [[step]] does one thing; found both \"{}\" and \"{}\"",
                                     kind, key.str()));
      }
      value = &v;
      kind = key.str();
    }
    if (value == nullptr)
      ctx.fail(table, "a [[step]] needs a step key (" +
                          fmt::format("{}", fmt::join(steps.keys(), ", ")) + ")");
    step = steps.find(kind)->parse(*value, table, ctx);
  }
  ctx.set_entry_when(nullptr);  // `when` moves into the step
  ctx.set_entry_raises(false);
  step->where = ctx.at(table);
  step->kind = kind;
  step->when = std::move(when);
  step->raises = std::move(raises);
  return step;
}

// Marks the program; the runner walks loops (program_counter.hpp).
class LoopStep final : public Step {
 public:
  void run(RankState&) const override {}
};

bool is_identifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

// `[[step]] repeat = { var, count }` (with an optional `when`) or `[[step]] end_repeat = "var"`:
// opens or closes a loop in `ctx`, linking the two ends in `steps`.
std::unique_ptr<Step> parse_loop_mark(const toml::table& table, LoadContext& ctx,
                                      std::vector<std::unique_ptr<Step>>& steps,
                                      std::vector<std::unique_ptr<LoopScope>>& scopes) {
  auto step = std::make_unique<LoopStep>();
  step->where = ctx.at(table);
  LoopMark mark;
  if (const toml::node* node = table.get("repeat")) {
    ctx.only_keys(table, {"repeat", "when"}, "a [[step]] with repeat");
    const toml::table* args = node->as_table();
    if (args == nullptr) ctx.fail(*node, "repeat must be a table { var, count }");
    ctx.only_keys(*args, {"var", "count"}, "repeat");
    const toml::node& var = ctx.require(*args, "var", "repeat");
    mark.var = ctx.string_of(var, "var");
    if (!is_identifier(mark.var) || mark.var == "rank" || mark.var == "world_size" ||
        mark.var == "true" || mark.var == "false") {
      ctx.fail(var, fmt::format("\"{}\" cannot name a loop variable (letters, digits and _, not "
                                "starting with a digit; not rank, world_size, true or false)",
                                mark.var));
    }
    for (const LoadContext::OpenLoop& open : ctx.open_loops()) {
      if (open.var == mark.var) {
        ctx.fail(var, fmt::format("loop variable \"{}\" is already in use by the repeat at {}",
                                  mark.var, open.where.to_string()));
      }
    }
    const toml::node& count = ctx.require(*args, "count", "repeat");
    mark.count = ctx.expression_of(count, "count");
    if (const std::optional<int64_t> c = mark.count->constant_value();
        c && (*c < 0 || *c > LoopMark::kMaxCount)) {
      ctx.fail(count, fmt::format("count must be between 0 and {}", LoopMark::kMaxCount));
    }
    // Nested counts multiply: the body's passes in all are bounded like one count.
    const int64_t outer = ctx.open_loops().empty() ? 1 : ctx.open_loops().back().passes;
    const int64_t passes = outer * mark.count->constant_value().value_or(1);  // <= 2^48
    if (passes > LoopMark::kMaxCount) {
      ctx.fail(count, fmt::format("this repeat's body would run {} times with the loops around "
                                  "it; nested counts multiply, and at most {} passes are allowed",
                                  passes, LoopMark::kMaxCount));
    }
    if (const toml::node* w = table.get("when")) step->when = ctx.expression_of(*w, "when");
    step->kind = "repeat";
    const LoopScope* around = ctx.open_loops().empty() ? nullptr : ctx.open_loops().back().scope;
    scopes.push_back(std::make_unique<LoopScope>(
        LoopScope{mark.var, around, around == nullptr ? 1 : around->depth + 1}));
    ctx.open_loop({mark.var, step->where, steps.size(), passes, scopes.back().get()});
  } else {
    const toml::node& end = *table.get("end_repeat");
    ctx.only_keys(table, {"end_repeat"}, "a [[step]] with end_repeat");
    mark.opens = false;
    mark.var = ctx.string_of(end, "end_repeat (the loop variable)");
    if (ctx.open_loops().empty()) {
      ctx.fail(end, fmt::format("end_repeat \"{}\" closes no repeat", mark.var));
    }
    const LoadContext::OpenLoop& inner = ctx.open_loops().back();
    if (inner.var != mark.var) {
      ctx.fail(end, fmt::format("end_repeat \"{}\" does not close the innermost repeat, \"{}\" "
                                "(at {}): close it first",
                                mark.var, inner.var, inner.where.to_string()));
    }
    const LoadContext::OpenLoop opened = ctx.close_loop();
    mark.partner = opened.step;
    steps[opened.step]->loop->partner = steps.size();
    step->kind = "end_repeat";
  }
  step->loop = std::move(mark);
  return step;
}

// [[fault]] tables: crash = { rank, step | collective }, stall = { rank, seconds, step |
// collective }, backend_error = { rank, collective }.
std::vector<Fault> parse_faults(const toml::node& node, const LoadContext& ctx) {
  const toml::array* items = node.as_array();
  if (items == nullptr) ctx.fail(node, "fault must be an array of tables: write [[fault]]");
  std::vector<Fault> out;
  for (const toml::node& item : *items) {
    const toml::table* entry = item.as_table();
    if (entry == nullptr || entry->size() != 1) {
      ctx.fail(item,
               "a [[fault]] holds exactly one of crash, stall, backend_error or "
               "stack_overflow");
    }
    for (const auto& [key, value] : *entry) {
      Fault f;
      f.where = ctx.at(item);
      if (key.str() == "crash") {
        f.kind = Fault::Kind::kCrash;
      } else if (key.str() == "stall") {
        f.kind = Fault::Kind::kStall;
      } else if (key.str() == "backend_error") {
        f.kind = Fault::Kind::kBackendError;
      } else if (key.str() == "stack_overflow") {
        f.kind = Fault::Kind::kStackOverflow;
      } else {
        throw InputError(ctx.at(key.source()),
                         fmt::format("unknown fault \"{}\" (expected crash, stall, "
                                     "backend_error or stack_overflow)",
                                     key.str()));
      }
      const toml::table* args = value.as_table();
      if (args == nullptr) ctx.fail(value, fmt::format("{} must be a table", key.str()));
      if (f.kind == Fault::Kind::kStall) {
        ctx.only_keys(*args, {"rank", "seconds", "step", "collective"}, "stall");
        f.seconds = ctx.seconds_of(ctx.require(*args, "seconds", "stall"), "seconds",
                                   LoadContext::Zero::kRefused);
      } else if (f.kind == Fault::Kind::kCrash || f.kind == Fault::Kind::kStackOverflow) {
        ctx.only_keys(*args, {"rank", "step", "collective"}, key.str());
      } else {
        ctx.only_keys(*args, {"rank", "collective"}, "backend_error");
      }
      const toml::node& rank = ctx.require(*args, "rank", key.str());
      f.rank = ctx.integer_of(rank, "rank");
      if (f.rank < 0 || f.rank >= ctx.world_size()) ctx.fail(rank, "rank is outside the world");
      const toml::node* step = args->get("step");
      const toml::node* collective = args->get("collective");
      if ((step == nullptr) == (collective == nullptr)) {
        ctx.fail(value, fmt::format("{} needs exactly one of step or collective", key.str()));
      }
      f.trigger = step ? Fault::Trigger::kStep : Fault::Trigger::kCollective;
      f.index = ctx.integer_of(step ? *step : *collective, step ? "step" : "collective");
      if (f.index < 1) ctx.fail(step ? *step : *collective, "steps and collectives count from 1");
      out.push_back(f);
    }
  }
  return out;
}

// `gpu = "H200"` (a name of docs/rng.md's table) or `gpu = { sms = 132, max_threads_per_sm = 2048
// }`.
GpuProfile parse_gpu(const toml::node& node, const LoadContext& ctx) {
  if (const toml::table* t = node.as_table()) {
    ctx.only_keys(*t, {"sms", "max_threads_per_sm"}, "gpu");
    try {
      return GpuProfile::custom(
          ctx.integer_of(ctx.require(*t, "sms", "gpu"), "sms"),
          ctx.integer_of(ctx.require(*t, "max_threads_per_sm", "gpu"), "max_threads_per_sm"));
    } catch (const Error& e) {
      ctx.fail(node, e.what());
    }
  }
  const std::string name = ctx.string_of(node, "gpu (a name or { sms, max_threads_per_sm })");
  if (std::optional<GpuProfile> gpu = find_gpu(name)) return *gpu;
  std::vector<std::string> names;
  for (const GpuProfile& g : known_gpus()) names.push_back(g.name);
  ctx.fail(node,
           fmt::format("unknown GPU \"{}\" (known: {}; or give {{ sms, max_threads_per_sm }})",
                       name, fmt::join(names, ", ")));
}

// An [[expect]] about how the run ends, or nullptr for any other entry.
std::unique_ptr<OutcomeExpectation> parse_outcome_entry(const Entry& e, LoadContext& ctx) {
  if (e.array != "expect") return nullptr;
  for (std::string_view key : outcome_keys()) {
    const toml::node* node = e.table->get(key);
    if (node == nullptr) continue;
    if (e.table->size() != 1) {
      ctx.fail(*e.table, fmt::format("an [[expect]] with {} holds nothing else", key));
    }
    std::unique_ptr<OutcomeExpectation> out = parse_outcome(key, *node, ctx);
    out->where = ctx.at(*e.table);
    return out;
  }
  return nullptr;
}

}  // namespace

Scenario load_scenario_text(std::string_view text, const std::string& file,
                            const StepRegistry& steps) {
  check_toml_text(text, file);
  toml::table doc;
  try {
    doc = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw InputError({file, static_cast<int64_t>(b.line), static_cast<int64_t>(b.column)},
                     fmt::format("TOML syntax error: {}", e.description()));
  }
  LoadContext header(file, 1, "cuda");
  header.only_keys(doc, {"scenario", "mesh", "step", "expect", "fault"}, "a scenario file");
  const toml::node* scenario_node = doc.get("scenario");
  if (scenario_node == nullptr || !scenario_node->is_table()) {
    throw InputError({file, 1, 1},
                     "a scenario file needs a [scenario] table with name and world_size");
  }
  const toml::table& head = *scenario_node->as_table();
  header.only_keys(head,
                   {"name", "description", "world_size", "device", "timeout_s", "latency_us",
                    "bandwidth_gbps", "torch", "gpu", "gpus_per_node"},
                   "[scenario]");
  Scenario s;
  s.file = file;
  s.name = header.string_of(header.require(head, "name", "[scenario]"), "name");
  if (const toml::node* d = head.get("description"))
    s.description = header.string_of(*d, "description");
  const toml::node& world = header.require(head, "world_size", "[scenario]");
  s.world_size = header.integer_of(world, "world_size");
  if (s.world_size < 1 || s.world_size > kMaxWorldSize) {
    header.fail(world, fmt::format("world_size must be between 1 and {}", kMaxWorldSize));
  }
  if (const toml::node* d = head.get("device")) s.device_type = header.string_of(*d, "device");
  if (const toml::node* g = head.get("gpus_per_node")) {
    s.gpus_per_node = header.integer_of(*g, "gpus_per_node");
    // A host may have more GPUs than the job uses (4 ranks on one 8-GPU host).
    if (*s.gpus_per_node < 1 || *s.gpus_per_node > kMaxWorldSize)
      header.fail(*g, fmt::format("gpus_per_node must be between 1 and {}", kMaxWorldSize));
  }
  auto positive = [&](std::string_view key, double scale, double& field) {
    const toml::node* node = head.get(key);
    if (node == nullptr) return;
    field = header.seconds_of(*node, key, LoadContext::Zero::kRefused) * scale;
  };
  if (const toml::node* t = head.get("torch")) {
    const std::optional<RngProfile> profile = parse_rng_profile(header.string_of(*t, "torch"));
    if (!profile) {
      header.fail(*t,
                  "torch must be \"latest\" (2.9 and later: DTensor ops advance the default "
                  "generator) or \"2.6\" (the tracker keeps its own state)");
    }
    s.rng_profile = *profile;
  }
  if (const toml::node* g = head.get("gpu")) s.gpu = parse_gpu(*g, header);
  positive("timeout_s", 1.0, s.cost.timeout_s);
  positive("latency_us", 1e-6, s.cost.latency_s);
  positive("bandwidth_gbps", 1e9 / 8, s.cost.bandwidth_bytes_per_s);

  std::vector<Entry> entries;
  for (std::string_view array : {"mesh", "step", "expect"}) {
    const toml::node* node = doc.get(array);
    if (node == nullptr) continue;
    const toml::array* items = node->as_array();
    if (items == nullptr) {
      header.fail(*node, fmt::format("{} must be an array of tables: write [[{}]]", array, array));
    }
    for (const toml::node& item : *items) {
      const toml::table* table = item.as_table();
      if (table == nullptr) header.fail(item, fmt::format("each {} entry must be a table", array));
      entries.push_back({table->source().begin, array, table});
    }
  }
  // The program reads top to bottom, whatever array an entry belongs to.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::pair(a.position.line, a.position.column) <
           std::pair(b.position.line, b.position.column);
  });
  LoadContext ctx(file, s.world_size, s.device_type);
  ctx.set_gpus_per_node(s.gpus_per_node);
  if (const toml::node* faults = doc.get("fault")) s.faults = parse_faults(*faults, ctx);
  for (const Entry& e : entries) {
    if (e.array == "step" && (e.table->contains("repeat") || e.table->contains("end_repeat"))) {
      s.steps.push_back(parse_loop_mark(*e.table, ctx, s.steps, s.loop_scopes));
    } else if (std::unique_ptr<OutcomeExpectation> outcome = parse_outcome_entry(e, ctx)) {
      s.outcomes.push_back(std::move(outcome));
    } else {
      std::unique_ptr<OutcomeExpectation> after_run;
      s.steps.push_back(parse_entry(e, steps, ctx, after_run));
      if (!ctx.open_loops().empty()) s.steps.back()->loop_scope = ctx.open_loops().back().scope;
      if (after_run) s.outcomes.push_back(std::move(after_run));
    }
  }
  if (!ctx.open_loops().empty()) {
    const LoadContext::OpenLoop& open = ctx.open_loops().back();
    throw InputError(open.where,
                     fmt::format("repeat \"{}\" is never closed: add [[step]] end_repeat = \"{}\" "
                                 "after its body",
                                 open.var, open.var));
  }
  return s;
}

Scenario load_scenario_file(const std::string& path, const StepRegistry& steps) {
  return load_scenario_text(read_scenario_file(path), path, steps);
}

}  // namespace meshsim::sim
