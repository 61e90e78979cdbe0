// DeviceMesh records (docs/mesh.md 4.1): exactly the spec's keys, group names only when asked for,
// loads that restore every derived mesh on every rank, missing keys named as PyTorch names
// them, re-binding by layout, and records that lie about the mesh refused.
#include "src/io/mesh_record.hpp"

#include <catch2/catch.hpp>

#include "src/error.hpp"
#include "src/io/atomic_file.hpp"
#include "src/io/record_archive.hpp"

using meshsim::ArchiveFormat;
using meshsim::DeviceMesh;
using meshsim::LocalGroupCreator;
using meshsim::RecordObject;
using meshsim::RecordReader;
using Ints = std::vector<int64_t>;
using Names = std::vector<std::string>;

namespace {

Names keys_of(const RecordObject& record) {
  Names out;
  for (const auto& field : record.fields) out.push_back(field.first);
  return out;
}

DeviceMesh pp_dp_tp(LocalGroupCreator& groups) {
  const Ints shape{2, 2, 2};
  return DeviceMesh::init(groups, "cuda", shape, Names{"pp", "dp", "tp"});
}

std::string open_error(std::string_view file, int64_t world, bool strict = false) {
  try {
    meshsim::open_mesh(file, world, strict);
  } catch (const meshsim::Error& e) {
    return std::string(meshsim::py_error_type_name(e.type())) + ": " + e.what();
  }
  return "(opened)";
}

// The mesh `make` builds on `rank`, saved and opened again.
template <typename Make>
void check_round_trip(int64_t world, Make&& make) {
  for (int64_t rank = 0; rank < world; ++rank) {
    LocalGroupCreator groups(rank, world);
    const DeviceMesh mesh = make(groups);
    for (const auto& [format, format_name] : meshsim::kArchiveFormatNames) {
      for (bool with_names : {false, true}) {
        INFO("rank " << rank << ", " << meshsim::archive_format_name(format)
                     << (with_names ? ", group names" : ", decoupled"));
        const DeviceMesh loaded =
            meshsim::open_mesh(meshsim::seal_mesh(mesh, with_names, format), world, true);
        CHECK(loaded == mesh);
        CHECK(loaded.hash() == mesh.hash());
        CHECK(loaded.rank() == rank);
        CHECK(loaded.coordinate() == mesh.coordinate());
        CHECK(loaded.is_root() == mesh.is_root());
        CHECK(loaded.root() == mesh.root());
        CHECK(loaded.flattened_names() == mesh.flattened_names());
        CHECK(loaded.has_group_names() == (with_names && mesh.has_group_names()));
        if (with_names && mesh.coordinate()) {
          for (size_t d = 0; d < mesh.ndim(); ++d) {
            CHECK(loaded.group_name(meshsim::MeshDim{int64_t(d)}) ==
                  mesh.group_name(meshsim::MeshDim{int64_t(d)}));
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("mesh record: exactly the keys of docs/mesh.md 4.1", "[io][mesh_record]") {
  LocalGroupCreator groups(5, 8);
  const DeviceMesh root = pp_dp_tp(groups);
  root.slice({"dp", "tp"}).flatten(groups, std::string("dp_tp"));
  const Names base{"device_type", "rank_map",          "layout",    "mesh_dim_names",
                   "thread_id",   "coordinate_on_dim", "root_mesh", "flatten_mapping"};
  const RecordObject decoupled = meshsim::mesh_to_record(root, false);
  CHECK(keys_of(decoupled) == base);
  CHECK(decoupled.find("root_mesh")->kind == meshsim::RecordValue::Kind::kNone);
  Names with_names = base;
  with_names.push_back("dim_group_names");
  const RecordObject coupled = meshsim::mesh_to_record(root, true);
  CHECK(keys_of(coupled) == with_names);
  CHECK(coupled.find("dim_group_names")->strings == Names{"2", "8", "11"});
  CHECK(coupled.find("thread_id")->integer == 5);
  CHECK(coupled.find("coordinate_on_dim")->integers == Ints{1, 0, 1});
  CHECK(coupled.find("layout")->strings == Names{"(2:4)", "(2:2)", "(2:1)"});
  // The flattened mesh sits in the root's mapping with no root of its own (the recursion stops).
  const RecordObject& mapping = coupled.find("flatten_mapping")->objects.front();
  REQUIRE(keys_of(mapping) == Names{"dp_tp"});
  const RecordObject& flat = mapping.fields.front().second.objects.front();
  CHECK(flat.find("root_mesh")->kind == meshsim::RecordValue::Kind::kNone);
  CHECK(flat.find("layout")->strings == Names{"(4:1)"});
  CHECK(flat.find("dim_group_names")->strings == Names{"14"});

  // A derived mesh carries its root, whose mapping holds the flattened meshes.
  const RecordObject tp = meshsim::mesh_to_record(root.slice({"tp"}), false);
  CHECK(keys_of(tp) == base);
  const RecordObject& tp_root = tp.find("root_mesh")->objects.front();
  CHECK(tp_root.find("layout")->strings == Names{"(2:4)", "(2:2)", "(2:1)"});
  CHECK(keys_of(tp_root.find("flatten_mapping")->objects.front()) == Names{"dp_tp"});
  CHECK(tp.find("flatten_mapping")->objects.front().fields.empty());
}

TEST_CASE("mesh record: roots, slices, flattened and unflattened meshes round-trip on every rank",
          "[io][mesh_record]") {
  check_round_trip(8, [](LocalGroupCreator& g) { return pp_dp_tp(g); });
  check_round_trip(8, [](LocalGroupCreator& g) { return pp_dp_tp(g).slice({"pp", "tp"}); });
  check_round_trip(8, [](LocalGroupCreator& g) {
    const DeviceMesh root = pp_dp_tp(g);
    root.slice({"dp", "tp"}).flatten(g, std::string("dp_tp"));
    return root.slice({"pp", "dp_tp"});
  });
  check_round_trip(8, [](LocalGroupCreator& g) {
    const Ints eight{8}, sizes{2, 4};
    return DeviceMesh::init(g, "cuda", eight, Names{"world"})
        .unflatten(g, std::string("world"), sizes, {"dp", "tp"});
  });
  // A mesh over part of the world: ranks 4-7 are in no replica.
  check_round_trip(8, [](LocalGroupCreator& g) {
    const Ints shape{2, 2};
    return DeviceMesh::init(g, "cuda", shape, Names{"dp", "tp"});
  });
  // An explicit rank table, not the identity.
  check_round_trip(4, [](LocalGroupCreator& g) {
    return DeviceMesh::from_rank_table(g, "cuda", {{2, 2}, {3, 1, 0, 2}}, std::nullopt);
  });
}

TEST_CASE("mesh record: a decoupled load has no groups until it is re-bound by layout",
          "[io][mesh_record]") {
  LocalGroupCreator groups(6, 8);
  const DeviceMesh mesh = pp_dp_tp(groups);
  DeviceMesh loaded =
      meshsim::open_mesh(meshsim::seal_mesh(mesh, false, ArchiveFormat::kBinary), 8, true);
  CHECK_FALSE(loaded.has_group_names());
  CHECK_THROWS_WITH(loaded.group_name(std::string("tp")),
                    "DeviceMesh process groups not initialized!");
  CHECK_THROWS_WITH(loaded.local_rank(groups, std::string("dp")),
                    "DeviceMesh process groups not initialized!");

  loaded.rebind_groups(groups);
  CHECK(loaded.group_name(std::string("tp")) == mesh.group_name(std::string("tp")));
  CHECK(loaded.local_rank(groups, std::string("dp")) == 1);
}

TEST_CASE("mesh record: saved group names in a world that created its groups in another order",
          "[io][mesh_record]") {
  LocalGroupCreator saver(6, 8);
  const DeviceMesh mesh = pp_dp_tp(saver);
  const std::string file = meshsim::seal_mesh(mesh, true, ArchiveFormat::kBinary);
  // The loading world first builds a 1-d mesh of 4, then the same (2,2,2) mesh.
  LocalGroupCreator loader(6, 8);
  const Ints four{4};
  DeviceMesh::init(loader, "cuda", four);
  const DeviceMesh live = pp_dp_tp(loader);
  DeviceMesh loaded = meshsim::open_mesh(file, 8, true);
  CHECK(loaded.group_name(std::string("tp")) == "12");  // the saver's name ...
  CHECK(live.group_name(std::string("tp")) == "13");    // ... is another group here
  const std::vector<DeviceMesh::StaleGroupName> stale = loaded.stale_group_names(loader);
  REQUIRE(stale.size() == 3);
  CHECK(stale[0].dim == "'pp'");
  CHECK(stale[0].detail ==
        "saved group name '3' names ranks [1, 5] in this world, but the mesh's group has ranks "
        "[2, 6]");
  CHECK(stale[1].detail ==
        "saved group name '7' names ranks [1, 3] in this world, but the mesh's group has ranks "
        "[4, 6]");
  CHECK(stale[2].dim == "'tp'");
  CHECK(stale[2].detail ==
        "saved group name '12' names ranks [4, 5] in this world, but the mesh's group has ranks "
        "[6, 7]");
  CHECK(loaded.stale_group_names(saver).empty());
  // Re-binding by layout finds the right groups whatever their names.
  loaded.without_group_names();
  DeviceMesh rebound = loaded.without_group_names();
  rebound.rebind_groups(loader);
  CHECK(rebound.group_name(std::string("tp")) == "13");
  CHECK(rebound.stale_group_names(loader).empty());
}

TEST_CASE("mesh record: missing keys raise PyTorch's ValueError", "[io][mesh_record]") {
  LocalGroupCreator groups(0, 8);
  RecordObject record = meshsim::mesh_to_record(pp_dp_tp(groups), false);
  std::erase_if(record.fields,
                [](const auto& f) { return f.first == "rank_map" || f.first == "layout"; });
  const std::string file =
      meshsim::seal_record(meshsim::RecordKind::kDeviceMesh, 1, record, ArchiveFormat::kBinary);
  CHECK(open_error(file, 8) ==
        "ValueError: state_dict is missing required keys: {'layout', 'rank_map'} (in DeviceMesh)");
}

TEST_CASE("mesh record: strict loads refuse unknown types and fields; permissive ones skip fields",
          "[io][mesh_record]") {
  LocalGroupCreator groups(0, 8);
  const DeviceMesh mesh = pp_dp_tp(groups);
  RecordObject extra = meshsim::mesh_to_record(mesh, false);
  extra.set("_future_field", meshsim::RecordValue::of(int64_t{1}));
  const std::string with_extra =
      meshsim::seal_record(meshsim::RecordKind::kDeviceMesh, 1, extra, ArchiveFormat::kBinary);
  CHECK(meshsim::open_mesh(with_extra, 8, false) == mesh);
  CHECK(open_error(with_extra, 8, true) ==
        "RuntimeError: strict load refused unknown field '_future_field' of DeviceMesh (a newer "
        "meshsim's record?)");

  RecordObject foreign = meshsim::mesh_to_record(mesh, false);
  foreign.fields[0].second = meshsim::RecordValue::of(RecordObject{"os.system", {}});
  const std::string with_foreign =
      meshsim::seal_record(meshsim::RecordKind::kDeviceMesh, 1, foreign, ArchiveFormat::kBinary);
  CHECK(open_error(with_foreign, 8, true) ==
        "RuntimeError: strict load of a DeviceMesh refused type 'os.system' at "
        "DeviceMesh.device_type: only DeviceMesh, dict are allowed (load without strict to read "
        "other types)");
  CHECK(open_error(with_foreign, 8, false) ==
        "RuntimeError: DeviceMesh.device_type is an object, expected a str");
}

TEST_CASE("mesh record: records that lie about the mesh are refused", "[io][mesh_record]") {
  LocalGroupCreator groups(3, 8);
  const DeviceMesh mesh = pp_dp_tp(groups);
  const auto with = [&](std::string_view key, meshsim::RecordValue value) {
    RecordObject record = meshsim::mesh_to_record(mesh, true);
    for (auto& [k, v] : record.fields) {
      if (k == key) v = std::move(value);
    }
    return open_error(
        meshsim::seal_record(meshsim::RecordKind::kDeviceMesh, 1, record, ArchiveFormat::kText), 8);
  };
  using meshsim::RecordValue;
  CHECK(with("layout", RecordValue::of(Names{"(2:4)", "(2:2)", "(4:1)"})) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): layout [(2:4), (2:2), (4:1)] has "
        "more positions than its rank table's 8");
  CHECK(with("layout", RecordValue::of(Names{"(2:4)", "(2:2)", "(2:2)"})) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): layout [(2:4), (2:2), (2:2)] has "
        "overlapping dims");
  CHECK(with("layout", RecordValue::of(Names{"(2:40)", "(2:2)", "(2:1)"})) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): layout [(2:40), (2:2), (2:1)] "
        "reaches past its rank table of 8 entries");
  CHECK(with("layout", RecordValue::of(Names{"(2:4", "(2:2)", "(2:1)"}))
            .starts_with("RuntimeError: DeviceMesh.layout '(2:4': "));
  CHECK(with("rank_map", RecordValue::of(Ints{0, 1, 2, 3, 4, 5, 6, 9})) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): rank_map names rank 9, outside "
        "this world of 8 ranks");
  CHECK(with("coordinate_on_dim", RecordValue::of(Ints{0, 0, 0})) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): coordinate_on_dim [0, 0, 0] is not "
        "rank 3's place in the mesh");
  CHECK(with("thread_id", RecordValue::of(int64_t{-1})) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): thread_id -1 is not a rank of this "
        "world of 8 ranks");
  CHECK(with("mesh_dim_names", RecordValue::of(Names{"a"})) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): 1 mesh_dim_names for 3 dims");
  CHECK(with("dim_group_names", RecordValue::of(Names{"1"})) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): 1 dim_group_names for 3 dims");
  CHECK(with("rank_map", RecordValue::of(std::string("0,1"))) ==
        "RuntimeError: DeviceMesh.rank_map is a str, expected a list of int");
  // A mesh from a bigger world does not fit this one.
  CHECK(open_error(meshsim::seal_mesh(mesh, false, ArchiveFormat::kBinary), 4) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): its rank_map holds 8 ranks, more "
        "than this world's 4");
  // Found by review: each of these once reached code that trusts a mesh.
  CHECK(with("layout", RecordValue::of(Names{"(8:0)", "(1:1)", "(1:1)"})) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): layout [(8:0), ():(), ():()] "
        "repeats positions (stride 0)");
  CHECK(with("rank_map", RecordValue::of(Ints{0, 1, 2, 3, 4, 5, 6, 6})) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): rank_map names rank 6 twice");
  CHECK(with("mesh_dim_names", RecordValue::of(Names{"a", "b", "a"})) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): mesh_dim_names ('a', 'b', 'a') "
        "repeat a name");
  CHECK(with("device_type", RecordValue::of(std::string("cuda:0"))) ==
        "RuntimeError: invalid DeviceMesh record (root_mesh): device_type 'cuda:0' is not a "
        "device type");
  CHECK_THAT(with("layout", RecordValue::of(Names{std::string(100000, '('), "(2:2)", "(2:1)"})),
             Catch::Contains("at most 32 levels of parentheses"));
  CHECK_THAT(with("layout", RecordValue::of(Names{"(2,4611686018427387904):(4611686018427387904,1)",
                                                  "(2:2)", "(2:1)"})),
             Catch::Contains("layout mode 2:4611686018427387904 spans more than int64"));
}

TEST_CASE("mesh record: files of record version 1 keep loading", "[io][mesh_record]") {
  // Rank 6's (2,2,2) pp/dp/tp mesh with group names, written by
  // scenarios/checkpoint_group_names.toml (see tests/io/data/README.md).
  LocalGroupCreator groups(6, 8);
  const DeviceMesh expected = pp_dp_tp(groups);
  for (const char* name : {"mesh_v1.bin", "mesh_v1.txt", "mesh_v1.xml"}) {
    INFO(name);
    const std::string file = meshsim::read_file_bounded(
        std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/" + name, 1 << 20);
    const DeviceMesh loaded = meshsim::open_mesh(file, 8, true);
    CHECK(loaded == expected);
    CHECK(loaded.rank() == 6);
    CHECK(loaded.coordinate() == Ints{1, 1, 0});
    CHECK(loaded.group_name(std::string("pp")) == "3");
    CHECK(loaded.group_name(std::string("dp")) == "7");
    CHECK(loaded.group_name(std::string("tp")) == "12");
    CHECK(loaded.stale_group_names(groups).empty());
  }
}

TEST_CASE("mesh record: every single-byte change and every truncation is refused",
          "[io][mesh_record]") {
  LocalGroupCreator groups(1, 8);
  const DeviceMesh root = pp_dp_tp(groups);
  root.slice({"dp", "tp"}).flatten(groups, std::string("dp_tp"));
  const std::string file =
      meshsim::seal_mesh(root.slice({"dp", "tp"}), true, ArchiveFormat::kBinary);
  for (size_t at = 0; at < file.size(); ++at) {
    std::string damaged = file;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
    const std::string error = open_error(damaged, 8);
    INFO("byte " << at << ": " << error);
    CHECK(error.find("checkpoint") != std::string::npos);
  }
  for (size_t cut = 0; cut < file.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK(open_error(file.substr(0, cut), 8).find("checkpoint") != std::string::npos);
  }
}
