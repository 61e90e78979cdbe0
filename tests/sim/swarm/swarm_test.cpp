// The swarm's pieces: seed lists as the command line gives them, the numbering of combinations
// and its partition into shards, failure signatures that leave the seeds out, tallies that merge
// in any order, the shard file's round trip and its refusals, and worker processes whose count
// changes nothing.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <fmt/format.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include "sim/base/source_location.hpp"
#include "sim/runtime/faults.hpp"
#include "sim/steps/builtin_steps.hpp"
#include "sim/swarm/failure_signature.hpp"
#include "sim/swarm/swarm_json.hpp"
#include "sim/swarm/swarm_space.hpp"
#include "sim/swarm/swarm_workers.hpp"

using namespace meshsim::sim;

namespace {

SeedList seeds(const std::string& text, bool allow_none = true) {
  SeedList out;
  const std::string error = parse_seed_list(text, allow_none, out);
  INFO(text << ": " << error);
  REQUIRE(error.empty());
  return out;
}

std::string seed_error(const std::string& text, bool allow_none = true) {
  SeedList out;
  return parse_seed_list(text, allow_none, out);
}

SwarmSpace space_of(size_t files, const std::string& faults, const std::string& schedules) {
  SwarmSpace space;
  for (size_t f = 0; f < files; ++f) space.files.push_back({fmt::format("s{}.toml", f), f * 7});
  space.fault_seeds = seeds(faults);
  space.schedule_seeds = seeds(schedules, false);
  return space;
}

// A tally of `runs` combinations of `space` where every third fails in one of a few ways.
SwarmTally planted_tally(const SwarmSpace& space, const Shard& shard) {
  SwarmTally tally;
  for (uint64_t nth = 0; nth < shard.share_of(*space.size()); ++nth) {
    const uint64_t n = shard.combination(nth);
    if (n % 3 != 0) {
      tally.add_passes();
      continue;
    }
    const Combination c = space.at(n);
    tally.add_failure({c.file, fmt::format("cause {}", n % 4), "scenario", n,
                       fmt::format("headline of {}", n), 1});
  }
  return tally;
}

std::string shard_text(const SwarmSpace& space, const Shard& shard, const SwarmTally& tally) {
  return swarm_json_text(shard_json({"1.2.3", space, shard, tally}));
}

}  // namespace

TEST_CASE("seed lists read as the command line gives them", "[swarm]") {
  CHECK(seeds("0-99").count() == 100);
  CHECK(seeds("none").count() == 1);
  CHECK(seeds("none,3").count() == 2);
  const SeedList mixed = seeds("9-12,1,none,5");
  CHECK(mixed.text() == "none,1,5,9-12");  // ascending, none first
  CHECK(mixed.at(0) == std::nullopt);
  CHECK(mixed.at(1) == 1);
  CHECK(mixed.at(2) == 5);
  CHECK(mixed.at(6) == 12);
  CHECK(seeds("18446744073709551615").at(0) == UINT64_MAX);
  CHECK(seed_error("0-18446744073709551615") == "more than 2^63 seeds");
  CHECK(seed_error("5-3").find("backwards") != std::string::npos);
  CHECK(seed_error("1-5,3").find("seed 3 is listed twice") != std::string::npos);
  CHECK(seeds("5-9,0-4,11,10") == seeds("0-11"));  // touching ranges are one
  CHECK(seeds("5-9,0-4,11,10").text() == "0-11");
  CHECK(seed_error("none,none").find("twice") != std::string::npos);
  CHECK(seed_error("none", false).find("expected seeds") != std::string::npos);
  for (const char* bad :
       {"", ",", "1,", "-1", "+1", "1e3", "a", "1-", "-", "1--2", " 1", "18446744073709551616"}) {
    INFO(bad);
    CHECK(seed_error(bad).find("expected seeds") != std::string::npos);
  }
}

TEST_CASE("combinations are numbered file, fault seed, schedule seed", "[swarm]") {
  const SwarmSpace space = space_of(2, "none,7-8", "10-13");
  REQUIRE(space.size() == 2 * 3 * 4);
  std::set<std::tuple<size_t, int64_t, uint64_t>> seen;
  for (uint64_t n = 0; n < *space.size(); ++n) {
    const Combination c = space.at(n);
    CHECK(c.index == n);
    seen.insert(
        {c.file, c.faults_seed ? static_cast<int64_t>(*c.faults_seed) : -1, c.schedule_seed});
  }
  CHECK(seen.size() == *space.size());
  CHECK(space.at(0).faults_seed == std::nullopt);
  CHECK(space.at(0).schedule_seed == 10);
  CHECK(space.at(5).faults_seed == 7);
  CHECK(space.at(5).schedule_seed == 11);
  CHECK(space.at(12).file == 1);
  CHECK(space.replay_line(space.at(5)) ==
        "meshsim run s0.toml --schedule random --seed 11 --faults-seed 7");
  SwarmSpace quoted = space;
  quoted.files[0].path = "my scenarios/it's.toml";
  quoted.run_flags = "--timeout 5s";
  CHECK(quoted.replay_line(quoted.at(0)) ==
        "meshsim run 'my scenarios/it'\\''s.toml' --schedule random --seed 10 --timeout 5s");
  CHECK(space_of(3, "0-4611686018427387904", "0-3").size() == std::nullopt);
}

TEST_CASE("shards of any count cover every combination once", "[swarm]") {
  for (uint64_t size = 0; size < 40; ++size) {
    for (uint64_t count = 1; count < 12; ++count) {
      std::vector<int> hits(size, 0);
      uint64_t total = 0;
      for (uint64_t index = 0; index < count; ++index) {
        const Shard shard{index, count};
        total += shard.share_of(size);
        for (uint64_t nth = 0; nth < shard.share_of(size); ++nth) {
          const uint64_t n = shard.combination(nth);
          REQUIRE(n < size);
          ++hits[n];
        }
      }
      CHECK(total == size);
      CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
    }
  }
}

TEST_CASE("the kind of every injected fault, as Fault::describe words it", "[swarm]") {
  const std::pair<Fault::Kind, const char*> kinds[] = {
      {Fault::Kind::kCrash, "crash"},
      {Fault::Kind::kStall, "stall"},
      {Fault::Kind::kBackendError, "backend error"},
      {Fault::Kind::kStackOverflow, "stack overflow"}};
  for (const auto& [kind, name] : kinds) {
    Fault f;
    f.kind = kind;
    f.rank = 12;
    f.index = 3;
    f.seconds = 700;
    CHECK(injected_fault_kind(f.describe()) == name);
  }
}

TEST_CASE("failure signatures name the cause and place, never ranks or seeds", "[swarm]") {
  ScenarioResult r;
  r.name = "s";
  r.world_size = 4;
  r.failures.resize(4);
  r.failures[2] = RankFailure{{"s.toml", 9, 3}, "send", "RuntimeError", "rank 2 broke"};
  r.failures[3] = RankFailure{{"s.toml", 11, 1}, "recv", "aborted", "because of rank 2"};
  r.faults = {"crash rank 2 at its collective 3 (--faults-seed 5)"};
  FailureSummary s = summarize_failure(r);
  CHECK(s.signature == "s.toml:9:3 (send): RuntimeError, with an injected crash");
  CHECK(s.headline ==
        "s.toml:9:3: rank 2: send step failed: RuntimeError: rank 2 broke (injected: crash rank 2 "
        "at its collective 3 (--faults-seed 5))");
  // A hang comes first, placed where its first culprit stopped.
  r.hang = Json{{"kind", "deadlock"},
                {"cause", "missing rank"},
                {"culprits", {2}},
                {"summary", {"rank 2 never called it\nsecond line"}},
                {"ranks",
                 {{{"rank", 0},
                   {"location", {{"file", "s.toml"}, {"line", 4}, {"column", 1}}},
                   {"step", "a"}},
                  {{"rank", 2},
                   {"location", {{"file", "s.toml"}, {"line", 9}, {"column", 3}}},
                   {"step", "send"}}}}};
  s = summarize_failure(r);
  CHECK(s.signature == "deadlock (missing rank) at s.toml:9:3 (send), with an injected crash");
  CHECK(s.headline ==
        "rank 2 never called it second line (injected: crash rank 2 at its "
        "collective 3 (--faults-seed 5))");
  // A scenario that expects its hang is decided by its expectations.
  r.outcome_expected = true;
  r.expectations.push_back({{"s.toml", 20, 1}, 1, "value", false, Json(2), Json(1)});
  r.expectations.push_back({{"s.toml", 14, 1}, -1, "deadlock", false, Json("x"), Json("y")});
  s = summarize_failure(r);
  CHECK(s.signature == "s.toml:14:1: expected deadlock failed, with an injected crash");
  CHECK(s.headline.starts_with("s.toml:14:1: expected deadlock == \"y\", got \"x\""));
  r.crash = "meshsim stopped (signal 11): rank 13 overflowed its 64 KiB stack\nmore";
  CHECK(summarize_failure(r).signature ==
        "meshsim stopped (signal N): rank N overflowed its N KiB stack, with an injected crash");
  // Only the fault a seed drew is the run's: the scenario's own come first.
  r.faults.insert(r.faults.begin(), "stall rank 0 for 5 s at step 2 (s.toml:3:1)");
  CHECK(summarize_failure(r).signature.ends_with(", with an injected crash"));
  r.faults.pop_back();
  CHECK(summarize_failure(r).signature.find("injected") == std::string::npos);
  r.crash.clear();
  r.expectations.front().what = std::string(1000, 'v');
  r.expectations.erase(r.expectations.begin() + 1);
  CHECK(summarize_failure(r).headline.size() < 320);
}

TEST_CASE("tallies of shards merge, in any order, into the whole swarm's", "[swarm]") {
  const SwarmSpace space = space_of(3, "none,1-4", "0-6");
  const std::string whole =
      swarm_json_text(swarm_report_json("1.2.3", space, planted_tally(space, Shard{})));
  std::mt19937_64 random(7);
  for (uint64_t count : {1, 2, 3, 7, 13}) {
    std::vector<NamedShard> shards;
    for (uint64_t index = 0; index < count; ++index) {
      const Shard shard{index, count};
      // Through the file's text, as shards from other machines arrive.
      const std::string text = shard_text(space, shard, planted_tally(space, shard));
      shards.push_back({fmt::format("shard{}.json", index), read_shard_json(text, "x.json")});
      CHECK(shard_text(space, shard, shards.back().results.tally) == text);
    }
    std::shuffle(shards.begin(), shards.end(), random);
    const ShardResults merged = merge_shards(shards);
    CHECK(swarm_json_text(swarm_report_json(merged.version, merged.space, merged.tally)) == whole);
  }
}

TEST_CASE("merge refuses shards that are not every shard of one swarm once", "[swarm]") {
  const SwarmSpace space = space_of(2, "none,1", "0-4");
  std::vector<NamedShard> shards;
  for (uint64_t index = 0; index < 3; ++index) {
    const Shard shard{index, 3};
    shards.push_back({fmt::format("s{}.json", index),
                      read_shard_json(shard_text(space, shard, planted_tally(space, shard)), "")});
  }
  const auto refusal = [](std::vector<NamedShard> some) -> std::string {
    try {
      merge_shards(some);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(refusal({shards[0], shards[2]}) ==
        "s0.json: shard 1 of 3 is missing (2 shard files given)");
  CHECK(refusal({shards[0], shards[1], shards[1], shards[2]}) ==
        "s1.json: s1.json is shard 1 of 3 too");
  auto other = shards;
  other[2].results.space.files[1].digest ^= 1;
  CHECK(refusal(other).find("s2.json: not a shard of the swarm s0.json is from") == 0);
  other = shards;
  other[1].results.version = "9.9";
  CHECK(refusal(other).find("meshsim version") != std::string::npos);
  CHECK(refusal({}).find("no shard files") != std::string::npos);
}

TEST_CASE("a shard file that is not whole is refused, naming the field", "[swarm]") {
  const SwarmSpace space = space_of(2, "none,1", "0-4");
  const Shard shard{1, 2};
  const nlohmann::json good =
      nlohmann::json::parse(shard_text(space, shard, planted_tally(space, shard)));
  REQUIRE(good["failures"].size() >= 2);
  const auto refusal_of_text = [](const std::string& text) -> std::string {
    try {
      read_shard_json(text, "f.json");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  const auto refusal = [&](const nlohmann::json& j) { return refusal_of_text(j.dump()); };
  CHECK(refusal(good).empty());
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> forged = {
      {[](auto& j) { j["runs"] = 1; }, "runs is 1, but the shard has 10 combinations"},
      {[](auto& j) { j["passed"] = 0; }, "passed and the failures listed do not add up"},
      {[](auto& j) { j["shard"]["index"] = 2; }, "shard is not shard I of N"},
      {[](auto& j) { j["space"]["combinations"] = 21; }, "space.combinations is not"},
      {[](auto& j) { j["space"]["fault_seeds"] = "2-1"; }, "space.fault_seeds the range 2-1"},
      {[](auto& j) { j["space"]["files"][0]["digest"] = "xyz"; }, "space.files[0].digest"},
      {[](auto& j) { j["failures"][0]["first"]["combination"] = 2; },
       "failures[0].first.combination is not one of this shard's"},
      {[](auto& j) { j["failures"][0]["first"]["faults_seed"] = 77; },
       "failures[0].first names other seeds"},
      {[](auto& j) { j["failures"][0]["file"] = "s1.toml"; }, "failures[0].file"},
      {[](auto& j) {
         j["failures"][1]["signature"] = j["failures"][0]["signature"];
         j["failures"][1]["first"] = j["failures"][0]["first"];
         j["failures"][1]["file"] = j["failures"][0]["file"];
       },
       "failures[1].signature is listed twice"},
      {[](auto& j) { j["failures"][0]["runs"] = -1; }, "failures[0].runs is not a whole number"},
      {[](auto& j) { j["failures"][0]["runs"] = 0; }, "failures[0].runs does not fit"},
      {[](auto& j) { j["failures"][0]["runs"] = 6; },  // its file has 5 runs in the shard
       "failures[0].runs is more than its file's runs in the shard"},
      {[](auto& j) { j["space"]["run_flags"] = "--timeout 1s; curl x | sh"; },
       "space.run_flags holds something else"},
      {[](auto& j) { j["space"]["run_flags"] = "--timeout"; }, "space.run_flags holds"},
      {[](auto& j) { j.erase("meshsim"); }, "meshsim is missing"},
      {[](auto& j) { j["schema"] = 2; }, "schema is not 1"},
      {[](auto& j) { j["meshsim_swarm"] = "report"; }, "meshsim_swarm is not \"shard\""},
      {[](auto& j) { j = nlohmann::json::array(); }, "is not an object"},
  };
  for (const auto& [forge, expected] : forged) {
    nlohmann::json j = good;
    forge(j);
    const std::string got = refusal(j);
    INFO(got);
    CHECK(got.find("f.json: ") == 0);
    CHECK(got.find(expected) != std::string::npos);
  }
  CHECK(refusal(nlohmann::json::parse("[[[[[[[[[[1]]]]]]]]]]")).find("nested deeper") !=
        std::string::npos);
  CHECK(refusal_of_text("{\"a\": tru").find("f.json: not JSON (byte 10)") == 0);
  // A number past a double's range is nlohmann's out_of_range, not a parse error.
  CHECK(refusal_of_text("{\"meshsim_swarm\": \"shard\", \"schema\": 1e566}")
            .find("f.json: not usable JSON: number overflow") == 0);
}

TEST_CASE("worker processes share a shard; their number changes nothing", "[swarm]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("meshsim-swarm-test-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "ring.toml").string();
  std::ofstream(file) << R"toml([scenario]
name = "ring"
world_size = 4
[[step]]
repeat = { var = "i", count = 4 }
  [[step]]
  all_reduce = { tensor = "ones(2)", out = "x" }
[[step]]
end_repeat = "i"
[[step]]
send = { tensor = "ones(1)", dst = "(rank + 1) % 4" }
when = "rank % 2 == 0"
[[step]]
recv = { like = "zeros(1)", src = "(rank + 3) % 4", out = "y" }
when = "rank % 2 == 1"
[[expect]]
tensor = "x"
equals = [4, 4]
)toml";
  SwarmSpace space;
  space.files.push_back({file, *file_digest(file)});
  space.fault_seeds = seeds("none,1-5");
  space.schedule_seeds = seeds("0-3", false);
  RunOptions options;
  options.watch.progress_fd = -1;
  const auto report = [&](const Shard& shard, unsigned jobs) {
    uint64_t heard = 0;
    const SwarmTally tally = run_swarm(space, shard, jobs, builtin_steps(), options,
                                       [&](const SwarmProgress& p) { heard = p.done; });
    CHECK(heard == shard.share_of(*space.size()));
    return tally;
  };
  const SwarmTally one = report(Shard{}, 1);
  CHECK(one.runs() == 24);
  CHECK(one.passed() >= 4);  // the runs without a fault, at least
  CHECK(one.failed() > 0);
  CHECK(one.distinct() >= 2);
  const std::string whole = swarm_json_text(swarm_report_json("v", space, one));
  CHECK(swarm_json_text(swarm_report_json("v", space, report(Shard{}, 3))) == whole);
  SwarmTally halves = report(Shard{0, 2}, 2);
  halves.merge(report(Shard{1, 2}, 5));
  CHECK(swarm_json_text(swarm_report_json("v", space, halves)) == whole);
  std::filesystem::remove_all(dir);
}
