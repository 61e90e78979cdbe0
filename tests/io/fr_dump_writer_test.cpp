// The dump writer against the reader and against dumps torch 2.15 wrote (tests/io/data/fr):
// every torch-written dump read, written again in either encoding and read back is the same
// record, field for field (JSON drops the frames, as PyTorch's does). That Python's pickle and
// torch's analyzer read what it writes is checked by tests/fr_dump_diff_test.py.
#include "src/io/fr_dump_writer.hpp"

#include <string>

#include <catch2/catch.hpp>

#include "src/io/atomic_file.hpp"
#include "src/printable.hpp"

namespace {

using meshsim::FrDump;
using meshsim::FrEntry;

const std::string kDir = std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/fr";

void check_same(const FrDump& a, const FrDump& b, bool frames) {
  CHECK(a.version == b.version);
  CHECK(a.comm_lib_version == b.comm_lib_version);
  REQUIRE(a.pg_config.size() == b.pg_config.size());
  for (const auto& [key, g] : a.pg_config) {
    REQUIRE(b.pg_config.contains(key));
    CHECK(b.pg_config.at(key).name == g.name);
    CHECK(b.pg_config.at(key).desc == g.desc);
    CHECK(b.pg_config.at(key).ranks == g.ranks);
  }
  REQUIRE(a.pg_status.size() == b.pg_status.size());
  for (const auto& [key, s] : a.pg_status) {
    REQUIRE(b.pg_status.contains(key));
    CHECK(b.pg_status.at(key).last_enqueued == s.last_enqueued);
    CHECK(b.pg_status.at(key).last_started == s.last_started);
    CHECK(b.pg_status.at(key).last_completed == s.last_completed);
  }
  REQUIRE(a.entries.size() == b.entries.size());
  for (size_t i = 0; i < a.entries.size(); ++i) {
    INFO("entry " << i);
    const FrEntry& x = a.entries[i];
    const FrEntry& y = b.entries[i];
    CHECK(x.record_id == y.record_id);
    CHECK(x.pg_id == y.pg_id);
    CHECK(x.pg_name == y.pg_name);
    CHECK(x.pg_desc == y.pg_desc);
    CHECK(x.collective_seq_id == y.collective_seq_id);
    CHECK(x.p2p_seq_id == y.p2p_seq_id);
    CHECK(x.op_id == y.op_id);
    CHECK(x.profiling_name == y.profiling_name);
    CHECK(x.input_sizes == y.input_sizes);
    CHECK(x.output_sizes == y.output_sizes);
    CHECK(x.input_dtypes == y.input_dtypes);
    CHECK(x.output_dtypes == y.output_dtypes);
    CHECK(x.state == y.state);
    CHECK(x.retired == y.retired);
    CHECK(x.is_p2p == y.is_p2p);
    CHECK(x.timeout_ms == y.timeout_ms);
    CHECK(x.time_created_ns == y.time_created_ns);
    CHECK(x.time_started_ns == y.time_started_ns);
    CHECK(x.time_completed_ns == y.time_completed_ns);
    CHECK(x.thread_name == y.thread_name);
    CHECK(x.thread_id == y.thread_id);
    if (frames) {
      REQUIRE(x.frames.size() == y.frames.size());
      for (size_t f = 0; f < x.frames.size(); ++f) {
        CHECK(x.frames[f].name == y.frames[f].name);
        CHECK(x.frames[f].filename == y.frames[f].filename);
        CHECK(x.frames[f].line == y.frames[f].line);
      }
    } else {
      CHECK(y.frames.empty());
    }
  }
}

}  // namespace

TEST_CASE("fr dump writer: torch's dumps written again read back the same", "[io][fr_dump]") {
  for (const std::string job : {"ok", "skipped", "mismatch", "wrapped", "mesh_skipped"}) {
    for (int rank = 0; rank < 4; ++rank) {
      INFO(job << " rank " << rank);
      const std::string path = kDir + "/" + job + "/rank" + std::to_string(rank) + ".pkl";
      const FrDump torch = meshsim::read_fr_dump(meshsim::read_file_bounded(path, 1 << 20), path);
      REQUIRE(!torch.entries.empty());
      const std::string pickle = meshsim::fr_dump_pickle(torch);
      CHECK(static_cast<unsigned char>(pickle[0]) == 0x80);
      check_same(torch, meshsim::read_fr_dump(pickle, "written.pkl"), true);
      const std::string json = meshsim::fr_dump_json(torch);
      CHECK(json.front() == '{');
      check_same(torch, meshsim::read_fr_dump(json, "written.json"), false);
    }
  }
}

TEST_CASE("fr dump writer: an empty dump, and text that is not UTF-8", "[io][fr_dump]") {
  FrDump empty;
  empty.version = "2.10";
  check_same(empty, meshsim::read_fr_dump(meshsim::fr_dump_pickle(empty), "empty.pkl"), true);
  check_same(empty, meshsim::read_fr_dump(meshsim::fr_dump_json(empty), "empty.json"), false);
  // JSON replaces a byte that is not UTF-8 rather than failing.
  FrDump odd = empty;
  odd.comm_lib_version = "2.27\xff";
  CHECK(meshsim::read_fr_dump(meshsim::fr_dump_json(odd), "odd.json").comm_lib_version ==
        "2.27\xef\xbf\xbd");
  CHECK(meshsim::valid_utf8("train.toml"));
  CHECK(meshsim::valid_utf8("Jos\xc3\xa9/train.toml"));
  CHECK(!meshsim::valid_utf8("a\xff"));
  CHECK(!meshsim::valid_utf8("\xc3"));              // cut short
  CHECK(!meshsim::valid_utf8("\xc0\xaf"));          // overlong '/'
  CHECK(!meshsim::valid_utf8("\xed\xa0\x80"));      // a surrogate
  CHECK(!meshsim::valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
}
