// The step kinds a scenario can use, by the key that names them in a [[step]] table, and how the
// [[mesh]] and [[expect]] arrays' entries are read. The loader takes a registry; the steps meshsim
// ships fill one in sim/steps/builtin_steps.hpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/scenario/load_context.hpp"
#include "sim/scenario/scenario.hpp"

namespace meshsim::sim {

// Builds a step from the value of its key; `entry` is the whole [[step]] table.
using StepParser = std::function<std::unique_ptr<Step>(const toml::node& value,
                                                       const toml::table& entry, LoadContext& ctx)>;

class OutcomeExpectation;

// What an [[expect]] entry becomes: the step every rank runs, and for a comparison across ranks
// the check made after the run (null otherwise).
struct ExpectEntry {
  std::unique_ptr<Step> step;
  std::unique_ptr<OutcomeExpectation> after_run;
};
using ExpectParser = std::function<ExpectEntry(const toml::table& entry, LoadContext& ctx)>;

class StepRegistry {
 public:
  struct Kind {
    std::string key;
    std::string args;  // what the value holds: "{ tensor, op = \"sum\", group, out }", "\"mesh\""
    std::string summary;
    StepParser parse;
  };

  void add(std::string key, std::string args, std::string summary, StepParser parse);
  const Kind* find(std::string_view key) const;
  const std::vector<Kind>& kinds() const { return kinds_; }
  std::vector<std::string> keys() const;

  // A [[mesh]] entry is read as the step kind "mesh" is; an [[expect]] entry by this parser
  // (unset: "expect" is an unknown array).
  void set_expect_parser(ExpectParser parse) { expect_ = std::move(parse); }
  const ExpectParser& expect_parser() const { return expect_; }

 private:
  std::vector<Kind> kinds_;
  ExpectParser expect_;
};

// Whether an entry declares the error it must raise: its static checks then leave that error to
// the run.
enum class Raises { kNo, kYes };

// Keys every entry may carry besides its kind.
inline constexpr std::string_view kCommonKeys[] = {"when", "raises"};

}  // namespace meshsim::sim
