#include "sim/report/result_codec.hpp"

#include <optional>

namespace meshsim::sim {

namespace {

Json where_json(const SourceLocation& w) {
  return Json::array({w.file, w.line, w.column});
}

SourceLocation where_of(const Json& j) {
  return SourceLocation{j.at(0).get<std::string>(), j.at(1).get<int64_t>(), j.at(2).get<int64_t>()};
}

}  // namespace

Json draw_json(const DrawRecord& d) {
  return Json{{"rank", d.rank},
              {"location", d.where.to_string()},
              {"where", where_json(d.where)},
              {"tensor", d.tensor},
              {"op", d.draw.op},
              {"generator", generator_name(d.draw.generator)},
              {"seed", d.draw.seed},
              {"offset", d.draw.offset},
              {"words", d.draw.words},
              {"numel", d.draw.numel},
              {"shard", d.draw.shard_index ? Json(*d.draw.shard_index) : Json(nullptr)},
              {"distribute_region", d.draw.in_distribute_region},
              {"seed_epoch", d.draw.seed_epoch}};
}

DrawRecord draw_of(const Json& j) {
  DrawRecord d;
  d.rank = j.at("rank").get<int64_t>();
  d.where = where_of(j.at("where"));
  d.tensor = j.at("tensor").get<std::string>();
  d.draw.op = j.at("op").get<std::string>();
  d.draw.generator = parse_generator(j.at("generator").get<std::string>()).value();
  d.draw.seed = j.at("seed").get<uint64_t>();
  d.draw.offset = j.at("offset").get<uint64_t>();
  d.draw.words = j.at("words").get<uint64_t>();
  d.draw.numel = j.at("numel").get<int64_t>();
  if (!j.at("shard").is_null()) d.draw.shard_index = j.at("shard").get<int64_t>();
  d.draw.in_distribute_region = j.at("distribute_region").get<bool>();
  d.draw.seed_epoch = j.at("seed_epoch").get<int64_t>();
  return d;
}

Json encode_result(const ScenarioResult& r) {
  Json dumps = Json::array();
  for (const DumpRecord& d : r.dumps) {
    dumps.push_back(Json::array({where_json(d.where), d.rank, d.what, d.value}));
  }
  Json expectations = Json::array();
  for (const ExpectationRecord& e : r.expectations) {
    expectations.push_back(Json::array({where_json(e.where), e.rank, e.what, e.passed, e.observed,
                                        e.expected, e.ranks.ranges(), e.checks}));
  }
  Json failures = Json::array();
  for (const std::optional<RankFailure>& f : r.failures) {
    failures.push_back(f ? Json::array({where_json(f->where), f->step, f->error_type, f->message})
                         : Json(nullptr));
  }
  Json warnings = Json::array();
  for (const Warning& w : r.warnings)
    warnings.push_back(Json::array({w.kind, w.text, where_json(w.where)}));
  Json draws = Json::array();
  for (const DrawRecord& d : r.draws) draws.push_back(draw_json(d));
  Json overlaps = Json::array();
  for (const RngOverlap& o : r.overlaps) {
    overlaps.push_back(Json::array({draw_json(o.first), draw_json(o.second), o.first_ranks,
                                    o.second_ranks, o.block_begin, o.block_end}));
  }
  return Json{{"name", r.name},
              {"draws", std::move(draws)},
              {"overlaps", std::move(overlaps)},
              {"overlap_count", r.overlap_count},
              {"draws_total", r.draws_total},
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
              {"warnings", std::move(warnings)},
              {"fr_dump_dir", r.fr_dump_dir},
              {"fr_dump_error", r.fr_dump_error},
              {"faults", r.faults},
              {"payload_hashes", r.payload_hashes},
              {"trace", r.trace},
              {"schedule_digest", r.schedule_digest},
              {"schedule_decisions", r.schedule_decisions},
              {"wall_ms", r.wall_ms},
              {"value_bytes", r.value_bytes},
              {"omitted_values", r.omitted_values},
              {"unlisted_passed", r.unlisted_passed},
              {"unlisted_failed", r.unlisted_failed},
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
      ExpectationRecord& x = r.expectations.emplace_back(
          ExpectationRecord{where_of(e.at(0)), e.at(1).get<int64_t>(), e.at(2).get<std::string>(),
                            e.at(3).get<bool>(), e.at(4), e.at(5)});
      for (const Json& range : e.at(6))
        x.ranks.add(range.at(0).get<int64_t>(), range.at(1).get<int64_t>());
      x.checks = e.at(7).get<uint64_t>();
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
    for (const Json& w : j.at("warnings")) {
      r.warnings.push_back(
          {w.at(0).get<std::string>(), w.at(1).get<std::string>(), where_of(w.at(2))});
    }
    r.fr_dump_dir = j.at("fr_dump_dir").get<std::string>();
    r.fr_dump_error = j.at("fr_dump_error").get<std::string>();
    r.faults = j.at("faults").get<std::vector<std::string>>();
    r.payload_hashes = j.at("payload_hashes").get<std::vector<std::string>>();
    r.trace = j.at("trace");
    r.schedule_digest = j.at("schedule_digest").get<uint64_t>();
    r.schedule_decisions = j.at("schedule_decisions").get<uint64_t>();
    r.wall_ms = j.at("wall_ms").get<double>();
    r.value_bytes = j.at("value_bytes").get<uint64_t>();
    r.omitted_values = j.at("omitted_values").get<uint64_t>();
    r.unlisted_passed = j.at("unlisted_passed").get<uint64_t>();
    r.unlisted_failed = j.at("unlisted_failed").get<uint64_t>();
    r.crash = j.at("crash").get<std::string>();
    for (const Json& d : j.at("draws")) r.draws.push_back(draw_of(d));
    for (const Json& o : j.at("overlaps")) {
      r.overlaps.push_back({draw_of(o.at(0)), draw_of(o.at(1)), o.at(2).get<std::vector<int64_t>>(),
                            o.at(3).get<std::vector<int64_t>>(), o.at(4).get<uint64_t>(),
                            o.at(5).get<uint64_t>()});
    }
    r.draws_total = j.at("draws_total").get<uint64_t>();
    r.overlap_count = j.at("overlap_count").get<uint64_t>();
    return r;
  } catch (const Json::exception&) {  // a missing or mistyped field
    return std::nullopt;
  } catch (const std::bad_optional_access&) {  // a name out of its table
    return std::nullopt;
  }
}

}  // namespace meshsim::sim
