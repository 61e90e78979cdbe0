#include "sim/swarm/failure_signature.hpp"

#include <algorithm>
#include <cctype>
#include <tuple>

#include <fmt/format.h>

namespace meshsim::sim {

namespace {

constexpr size_t kHeadlineChars = 300;

std::string first_line(std::string_view text) {
  return std::string(text.substr(0, text.find('\n')));
}

// The fault a fault seed drew (the run's last: a scenario's own [[fault]] entries come first),
// or nullptr when the run had none from a seed.
const std::string* seeded_fault(const ScenarioResult& result) {
  for (auto it = result.faults.rbegin(); it != result.faults.rend(); ++it) {
    if (it->find("(--faults-seed ") != std::string::npos) return &*it;
  }
  return nullptr;
}

// `text` with every run of digits as "N": which rank overflowed its stack, or the stack size
// the message suggests, depends on the schedule, not on the failure.
std::string without_numbers(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      out += text[i];
    } else if (out.empty() || out.back() != 'N') {
      out += 'N';
    }
  }
  return out;
}

// One line of at most about kHeadlineChars.
std::string cut(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (text.size() <= kHeadlineChars) return text;
  size_t end = kHeadlineChars;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // UTF-8
  return text.substr(0, end) + "...";
}

// "deadlock (unmatched send/recv) at f.toml:60:3 (send)": the hang's kind and cause, and where
// its first culprit stopped.
std::string hang_signature(const Json& hang) {
  std::string out = fmt::format("{} ({})", hang.value("kind", "hang"), hang.value("cause", "?"));
  const Json& culprits = hang.contains("culprits") ? hang["culprits"] : Json::array();
  if (culprits.empty() || !hang.contains("ranks")) return out;
  for (const Json& rank : hang["ranks"]) {
    if (rank.value("rank", int64_t{-1}) != culprits.front()) continue;
    const Json& at = rank["location"];
    const SourceLocation where{at.value("file", ""), at.value("line", int64_t{0}),
                               at.value("column", int64_t{0})};
    out += fmt::format(" at {} ({})", where.to_string(), rank.value("step", ""));
    break;
  }
  return out;
}

}  // namespace

std::string_view injected_fault_kind(std::string_view described) {
  const size_t rank = described.find(" rank ");
  if (rank == std::string_view::npos) return described;
  std::string_view kind = described.substr(0, rank);
  if (kind.ends_with(" on")) kind.remove_suffix(3);
  return kind;
}

FailureSummary summarize_failure(const ScenarioResult& result) {
  FailureSummary out;
  // The first failed rank that failed on its own (aborted ranks follow from it) and the first
  // failed expectation by place in the file.
  const RankFailure* own = nullptr;
  int64_t own_rank = -1;
  for (size_t r = 0; r < result.failures.size() && own == nullptr; ++r) {
    const auto& f = result.failures[r];
    if (f && f->error_type != "aborted") {
      own = &*f;
      own_rank = static_cast<int64_t>(r);
    }
  }
  const ExpectationRecord* expectation = nullptr;
  for (const ExpectationRecord& e : result.expectations) {
    if (!e.passed &&
        (expectation == nullptr ||
         std::tuple(e.where.line, e.where.column, e.rank) <
             std::tuple(expectation->where.line, expectation->where.column, expectation->rank))) {
      expectation = &e;
    }
  }
  // The root cause first, as the run's report orders it: meshsim's own crash, a hang, a rank's
  // failure; an expected outcome leaves the expectations to decide.
  if (!result.crash.empty()) {
    out.signature = without_numbers(first_line(result.crash));
    out.headline = first_line(result.crash);
  } else if (result.hang && !result.outcome_expected) {
    out.signature = hang_signature(*result.hang);
    const Json& summary =
        result.hang->contains("summary") ? (*result.hang)["summary"] : Json::array();
    out.headline = summary.empty() || !summary.front().is_string()
                       ? out.signature
                       : summary.front().get<std::string>();
  } else if (own != nullptr && !result.outcome_expected) {
    out.signature = fmt::format("{} ({}): {}", own->where.to_string(), own->step, own->error_type);
    out.headline = fmt::format("{}: rank {}: {} step failed: {}: {}", own->where.to_string(),
                               own_rank, own->step, own->error_type, own->message);
  } else if (expectation != nullptr) {
    out.signature =
        fmt::format("{}: expected {} failed", expectation->where.to_string(), expectation->what);
    // A cross-rank expectation (rank -1) belongs to the run, not to one rank.
    const std::string rank =
        expectation->rank >= 0 ? fmt::format(" rank {}:", expectation->rank) : "";
    out.headline = fmt::format("{}:{} expected {} == {}, got {}", expectation->where.to_string(),
                               rank, expectation->what, json_text(expectation->expected),
                               json_text(expectation->observed));
  } else {
    out.signature = "failed";
    out.headline = "the scenario failed";
  }
  out.headline = cut(std::move(out.headline));
  if (const std::string* fault = seeded_fault(result)) {
    out.signature += fmt::format(", with an injected {}", injected_fault_kind(*fault));
    if (out.headline.find("--faults-seed") == std::string::npos)
      out.headline += fmt::format(" (injected: {})", *fault);
  }
  return out;
}

}  // namespace meshsim::sim
