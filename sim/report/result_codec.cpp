#include "sim/report/result_codec.hpp"

namespace meshsim::sim {

namespace {

Json where_json(const SourceLocation& w) {
  return Json::array({w.file, w.line, w.column});
}

SourceLocation where_of(const Json& j) {
  return SourceLocation{j.at(0).get<std::string>(), j.at(1).get<int64_t>(), j.at(2).get<int64_t>()};
}

}  // namespace

Json encode_result(const ScenarioResult& r) {
  Json dumps = Json::array();
  for (const DumpRecord& d : r.dumps) {
    dumps.push_back(Json::array({where_json(d.where), d.rank, d.what, d.value}));
  }
  Json expectations = Json::array();
  for (const ExpectationRecord& e : r.expectations) {
    expectations.push_back(
        Json::array({where_json(e.where), e.rank, e.what, e.passed, e.observed, e.expected}));
  }
  Json failures = Json::array();
  for (const std::optional<RankFailure>& f : r.failures) {
    failures.push_back(f ? Json::array({where_json(f->where), f->step, f->error_type, f->message})
                         : Json(nullptr));
  }
  return Json{{"name", r.name},
              {"file", r.file},
              {"description", r.description},
              {"world_size", r.world_size},
              {"dumps", std::move(dumps)},
              {"expectations", std::move(expectations)},
              {"failures", std::move(failures)},
              {"hang_text", r.hang_text ? Json(*r.hang_text) : Json(nullptr)},
              {"hang", r.hang ? *r.hang : Json(nullptr)},
              {"hang_dot", r.hang_dot},
              {"outcome_expected", r.outcome_expected},
              {"warnings", r.warnings},
              {"faults", r.faults},
              {"trace", r.trace},
              {"schedule_digest", r.schedule_digest},
              {"schedule_decisions", r.schedule_decisions},
              {"wall_ms", r.wall_ms},
              {"value_bytes", r.value_bytes},
              {"omitted_values", r.omitted_values},
              {"crash", r.crash}};
}

std::optional<ScenarioResult> decode_result(const Json& j) {
  try {
    ScenarioResult r;
    r.name = j.at("name").get<std::string>();
    r.file = j.at("file").get<std::string>();
    r.description = j.at("description").get<std::string>();
    r.world_size = j.at("world_size").get<int64_t>();
    for (const Json& d : j.at("dumps")) {
      r.dumps.push_back(
          {where_of(d.at(0)), d.at(1).get<int64_t>(), d.at(2).get<std::string>(), d.at(3)});
    }
    for (const Json& e : j.at("expectations")) {
      r.expectations.push_back({where_of(e.at(0)), e.at(1).get<int64_t>(),
                                e.at(2).get<std::string>(), e.at(3).get<bool>(), e.at(4), e.at(5)});
    }
    for (const Json& f : j.at("failures")) {
      if (f.is_null()) {
        r.failures.emplace_back();
      } else {
        r.failures.emplace_back(RankFailure{where_of(f.at(0)), f.at(1).get<std::string>(),
                                            f.at(2).get<std::string>(),
                                            f.at(3).get<std::string>()});
      }
    }
    if (!j.at("hang_text").is_null()) r.hang_text = j.at("hang_text").get<std::string>();
    if (!j.at("hang").is_null()) r.hang = j.at("hang");
    r.hang_dot = j.at("hang_dot").get<std::string>();
    r.outcome_expected = j.at("outcome_expected").get<bool>();
    r.warnings = j.at("warnings").get<std::vector<std::string>>();
    r.faults = j.at("faults").get<std::vector<std::string>>();
    r.trace = j.at("trace");
    r.schedule_digest = j.at("schedule_digest").get<uint64_t>();
    r.schedule_decisions = j.at("schedule_decisions").get<uint64_t>();
    r.wall_ms = j.at("wall_ms").get<double>();
    r.value_bytes = j.at("value_bytes").get<uint64_t>();
    r.omitted_values = j.at("omitted_values").get<uint64_t>();
    r.crash = j.at("crash").get<std::string>();
    return r;
  } catch (const Json::exception&) {
    return std::nullopt;
  }
}

}  // namespace meshsim::sim
