// Flight Recorder dumps torch 2.15 wrote on 4 Gloo ranks (tests/io/data/fr, made by
// tests/fr_writer.py): both encodings decode to the same record, with what each hang left in it;
// damaged and hostile dumps are refused naming the place.
#include "src/io/fr_dump.hpp"

#include <string>

#include <catch2/catch.hpp>

#include "src/error.hpp"
#include "src/io/atomic_file.hpp"

namespace {

using meshsim::FrDump;

const std::string kDir = std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/fr";

FrDump dump(const std::string& job, int rank, const std::string& encoding) {
  const std::string path = kDir + "/" + job + "/rank" + std::to_string(rank) + "." + encoding;
  return meshsim::read_fr_dump(meshsim::read_file_bounded(path, 1 << 20), path);
}

// What the two encodings share: everything but the frames (JSON dumps have none). The JSON was
// dumped after the pickle: where a call could end in between (`settled` false: Gloo fails a
// mismatched all_reduce on its own), whether it retired may differ.
void check_same_record(const FrDump& pickle, const FrDump& json, bool settled) {
  CHECK(pickle.version == json.version);
  REQUIRE(pickle.entries.size() == json.entries.size());
  for (size_t i = 0; i < pickle.entries.size(); ++i) {
    const meshsim::FrEntry& a = pickle.entries[i];
    const meshsim::FrEntry& b = json.entries[i];
    INFO("entry " << i);
    CHECK(a.record_id == b.record_id);
    CHECK(a.pg_name == b.pg_name);
    CHECK(a.collective_seq_id == b.collective_seq_id);
    CHECK(a.profiling_name == b.profiling_name);
    CHECK(a.input_sizes == b.input_sizes);
    CHECK(a.output_sizes == b.output_sizes);
    CHECK(a.input_dtypes == b.input_dtypes);
    CHECK(a.state == b.state);
    if (settled) CHECK(a.retired == b.retired);
    CHECK(a.time_created_ns == b.time_created_ns);
    CHECK(a.time_started_ns == b.time_started_ns);
    CHECK(!a.frames.empty());
    CHECK(b.frames.empty());
  }
  REQUIRE(pickle.pg_status.size() == json.pg_status.size());
  for (const auto& [pg, s] : pickle.pg_status) {
    CHECK(json.pg_status.at(pg).last_enqueued == s.last_enqueued);
    if (settled) CHECK(json.pg_status.at(pg).last_completed == s.last_completed);
  }
}

}  // namespace

TEST_CASE("fr dump: pickle and JSON of every rank of every job agree", "[io][fr_dump]") {
  for (const std::string job : {"ok", "skipped", "mismatch", "wrapped"}) {
    for (int rank = 0; rank < 4; ++rank) {
      INFO(job << " rank " << rank);
      check_same_record(dump(job, rank, "pkl"), dump(job, rank, "json"), job != "mismatch");
    }
  }
}

TEST_CASE("fr dump: what each job left in its dumps", "[io][fr_dump]") {
  // ok, rank 2: all_reduce on WORLD, all_gather on a group of all, then reduce_scatter_tensor
  // (which Gloo records as an all_reduce) and broadcast on its pair's group, c10d's group 3.
  const FrDump ok = dump("ok", 2, "pkl");
  CHECK(ok.version == "2.10");
  REQUIRE(ok.entries.size() == 4);
  CHECK(ok.entries[0].profiling_name == "gloo:all_reduce");
  CHECK(ok.entries[0].pg_desc == "default_pg");
  CHECK(ok.entries[1].profiling_name == "gloo:all_gather");
  CHECK(ok.entries[1].output_sizes == std::vector<std::vector<int64_t>>{{4, 4}});
  CHECK(ok.entries[3].pg_name == "3");
  CHECK(ok.entries[3].collective_seq_id == 2);
  CHECK(ok.entries[3].profiling_name == "gloo:broadcast");
  CHECK(ok.entries[0].state == "scheduled");  // Gloo records no other state
  CHECK(ok.entries[0].frames.front().name == "all_reduce");
  // Gloo's pg_config holds one entry under an empty name, whatever the groups: here [0, 1], a
  // group rank 2 is not in. Groups are learnt from the entries, not from it.
  REQUIRE(ok.pg_config.size() == 1);
  CHECK(ok.pg_config.at("").ranks == std::vector<int64_t>{0, 1});

  // skipped: rank 3 never enqueued the second all_reduce; the others did and never retired it.
  CHECK(dump("skipped", 3, "pkl").entries.size() == 1);
  const FrDump waiting = dump("skipped", 0, "pkl");
  REQUIRE(waiting.entries.size() == 2);
  CHECK(!waiting.entries[1].retired);
  CHECK(waiting.pg_status.at("0").last_enqueued == 2);
  CHECK(waiting.pg_status.at("0").last_completed == 1);

  // mismatch: rank 2's second all_reduce has 5 elements.
  CHECK(dump("mismatch", 2, "json").entries[1].input_sizes ==
        std::vector<std::vector<int64_t>>{{5}});
  CHECK(dump("mismatch", 1, "json").entries[1].input_sizes ==
        std::vector<std::vector<int64_t>>{{4}});

  // wrapped: a buffer of 4 over 7 calls keeps records 3 to 6.
  const FrDump wrapped = dump("wrapped", 1, "pkl");
  REQUIRE(wrapped.entries.size() == 4);
  CHECK(wrapped.entries.front().record_id == 3);
  CHECK(wrapped.entries.back().collective_seq_id == 7);
}

TEST_CASE("fr dump: damaged and hostile dumps are refused with the place", "[io][fr_dump]") {
  const auto refused = [](std::string bytes, const std::string& says) {
    CHECK_THROWS_WITH(meshsim::read_fr_dump(std::move(bytes), "rank0.pkl"),
                      Catch::Contains("rank0.pkl") && Catch::Contains(says));
  };
  // A pickle that imports os.system and calls it: refused at the GLOBAL opcode, nothing run.
  refused(std::string("\x80\x02"
                      "cos\nsystem\n"
                      "X\x02\x00\x00\x00id"
                      "\x85R.",
                      22),
          "byte 2");
  // A list that contains itself.
  refused(std::string("\x80\x02]q\x00h\x00"
                      "a.",
                      9),
          "nested deeper than 16");
  // A dump of another schema, a missing field, a wrong type, an unknown state.
  refused(R"({"version": "3.0", "entries": []})", "schema version 3.0");
  const std::string json = meshsim::read_file_bounded(kDir + "/ok/rank0.json", 1 << 20);
  std::string no_state = json;
  no_state.replace(no_state.find("\"state\""), 7, "\"statf\"");
  refused(no_state, "dump.entries[0]: the key 'state' is missing");
  std::string bad_sizes = json;
  bad_sizes.replace(bad_sizes.find("[[4]]"), 5, "[[\"4\"]]");
  refused(bad_sizes, "dump.entries[0].input_sizes[0][0]: expected an integer, found string");
  std::string bad_state = json;
  bad_state.replace(bad_state.find("\"scheduled\""), 11, "\"exploded\"");
  refused(bad_state, "dump.entries[0].state: expected scheduled, started or completed");
  // Truncated JSON, and bytes that are neither encoding.
  refused(json.substr(0, json.size() / 2), "not a Flight Recorder dump");
  refused("PK\x03\x04", "neither a pickle");
  refused(R"({"version": "2.10", "entries": [1e999]})", "not a Flight Recorder dump");
  refused(
      R"({"version": "2.10", "pg_status": {"0": {"last_enqueued_collective": 10000000000000000000}}})",
      "expected an integer below 2^63");
  refused(std::string(40, '[').insert(0, "{\"a\":"), "nested deeper than 16");
  // A recorder's RNG records: shapes past a tensor's dims, shards larger than their tensor,
  // coordinates that do not fit the mesh.
  const auto rng = [](const std::string& call) {
    return R"({"version": "2.10", "meshsim_record": {"rng": [)" + call + "]}}";
  };
  const auto op = [&](const std::string& shape, const std::string& numel) {
    return rng(R"js({"call": "random_op", "mesh_shape": [2], "mesh_ranks": [0, 1],
                     "coordinate": [1], "op": "uniform_", "placements": ["Shard(0)"],
                     "dtype": "float32", "meta": false, "region": true,
                     "tracker_created": false, "shape": )js" +
               shape + ", \"local_numel\": " + numel + "}");
  };
  CHECK(meshsim::read_fr_dump(op("[8]", "4"), "r").recorded->rng.at(0).local_numel == 4);
  std::string dims26 = "[1";
  for (int i = 1; i < 26; ++i) dims26 += ", 1";
  refused(op(dims26 + "]", "1"), "rng[0].shape: expected a tensor shape");
  refused(op("[8]", "9"), "dump.meshsim_record.rng[0].local_numel: expected the element count");
  refused(op("[4294967296, 4294967296]", "0"), "expected a shape of fewer elements");
  refused(rng(R"({"call": "manual_seed", "seed": 1, "mesh_shape": [2, 2],
                  "mesh_ranks": [0, 1, 2, 3], "coordinate": []})"),
          "rng[0].coordinate: expected a coordinate in the mesh");
  refused(rng(R"({"call": "manual_seed", "seed": 1, "mesh_shape": [2], "mesh_ranks": [0, 1, 2]})"),
          "rng[0].mesh_ranks: expected 2 ranks");
  refused(rng(R"({"call": "spin"})"), "rng[0].call: expected torch_manual_seed");
}

TEST_CASE("fr dump: a later 2.x schema's unknown fields are read past", "[io][fr_dump]") {
  const std::string path = kDir + "/ok/rank0.json";
  const std::string json = meshsim::read_file_bounded(path, 1 << 20);
  std::string later = json;
  later.replace(later.find("\"2.10\""), 6, "\"2.11\"");
  const std::string splits = R"("input_split_sizes": [1, 3], "output_split_sizes": {"a": null}, )";
  for (size_t at = later.find("\"state\""); at != std::string::npos;
       at = later.find("\"state\"", at + splits.size() + 1)) {
    later.insert(at, splits);
  }
  const FrDump a = meshsim::read_fr_dump(json, path);
  const FrDump b = meshsim::read_fr_dump(later, path);
  CHECK(b.version == "2.11");
  REQUIRE(a.entries.size() == b.entries.size());
  REQUIRE(!a.entries.empty());
  for (size_t i = 0; i < a.entries.size(); ++i) {
    CHECK(a.entries[i].profiling_name == b.entries[i].profiling_name);
    CHECK(a.entries[i].input_sizes == b.entries[i].input_sizes);
    CHECK(a.entries[i].state == b.entries[i].state);
  }
}
