// DCP's .metadata as torch 2.15 wrote it (tests/io/data/dcp_2x2, made by tests/dcp_writer.py),
// and the variants torch re-pickled with one change each (tests/io/data/dcp_variants): each is
// read as torch wrote it, or refused naming the field and the byte.
#include "src/io/dcp_metadata.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "src/error.hpp"
#include "src/io/atomic_file.hpp"

using meshsim::DcpEntry;
using meshsim::DcpMetadata;

namespace {

std::string data_file(const std::string& name) {
  return meshsim::read_file_bounded(std::string(MESHSIM_SOURCE_ROOT) + "/tests/io/data/" + name,
                                    1 << 20);
}

DcpMetadata read(const std::string& name) {
  return meshsim::read_dcp_metadata(data_file(name), name);
}

std::string refusal(const std::string& name) {
  try {
    read(name);
  } catch (const meshsim::Error& e) {
    CHECK(e.type() == meshsim::PyErrorType::kValueError);
    return e.what();
  }
  return "(read)";
}

const DcpEntry& entry(const DcpMetadata& metadata, std::string_view name) {
  for (const DcpEntry& e : metadata.entries) {
    if (e.name == name) return e;
  }
  FAIL("no entry " << name);
  throw;
}

}  // namespace

TEST_CASE("a DCP checkpoint torch wrote reads with every name, shape, dtype and chunk",
          "[io][dcp]") {
  const DcpMetadata metadata = read("dcp_2x2/.metadata");
  CHECK(metadata.version == "1.0.0");
  CHECK(metadata.save_id == "c0249b9d-3401-490f-9345-1cf7b41b3644");
  CHECK(metadata.checkpoint_id == "tests/io/data/dcp_2x2");
  std::vector<std::string> names;
  for (const DcpEntry& e : metadata.entries) names.push_back(e.name);
  CHECK(names == std::vector<std::string>{"model.w", "model.emb", "optim.exp_avg", "model.b",
                                          "optim.empty", "mask", "half", "epoch", "step",
                                          "rng.cuda"});

  const DcpEntry& w = entry(metadata, "model.w");
  CHECK(w.dtype == meshsim::DType::kFloat32);
  CHECK(w.shape == std::vector<int64_t>{8, 4});
  REQUIRE(w.chunks.size() == 4);
  CHECK(w.chunks[2].offsets == std::vector<int64_t>{4, 0});
  CHECK(w.chunks[2].sizes == std::vector<int64_t>{4, 2});
  CHECK(w.chunks[2].file == "__2_0.distcp");
  CHECK(w.chunks[2].offset == 1261);  // after the object `epoch`, which rank 2 wrote first
  CHECK(w.chunks[2].length == 1577);

  const DcpEntry& b = entry(metadata, "model.b");
  CHECK(b.dtype_name == "bfloat16");
  CHECK(b.element_size == 2);
  const DcpEntry& step = entry(metadata, "step");
  CHECK(step.shape.empty());
  REQUIRE(step.chunks.size() == 1);
  CHECK(step.chunks[0].offsets.empty());
  const DcpEntry& epoch = entry(metadata, "epoch");
  CHECK_FALSE(epoch.is_tensor);
  CHECK(epoch.object.file == "__2_0.distcp");
  CHECK(epoch.object.length == 1261);
  CHECK(meshsim::dcp_entry_numel(entry(metadata, "optim.empty")) == 0);
}

TEST_CASE("DCP metadata that would load wrong data, or run code, is refused at its byte",
          "[io][dcp]") {
  CHECK(refusal("dcp_variants/calls_system.metadata") ==
        "dcp_variants/calls_system.metadata: byte 1621: STACK_GLOBAL (0x93): posix.system is not "
        "one of the classes this file may name");
  CHECK(refusal("dcp_variants/overlap.metadata") ==
        "dcp_variants/overlap.metadata: byte 427: state_dict_metadata['model.w'].chunks: chunks 0 "
        "([0, 0] + [4, 2]) and 1 ([0, 1] + [4, 2]) overlap");
  CHECK(refusal("dcp_variants/past_shape.metadata") ==
        "dcp_variants/past_shape.metadata: byte 465: state_dict_metadata['model.w'].chunks[2]: "
        "[4, 0] + [5, 2] runs past the tensor's shape [8, 4]");
  // Counted before the chunks are copied out: each chunk and object needs a key of its own.
  CHECK(refusal("dcp_variants/missing_storage.metadata") ==
        "dcp_variants/missing_storage.metadata: byte 1541: state_dict_metadata['rng.cuda']."
        "chunks[0]: more chunks and objects than storage_data has keys (16)");
  CHECK_THAT(refusal("dcp_variants/escaping_path.metadata"),
             Catch::Contains("value.relative_path: '../../etc/passwd' is not a file name inside "
                             "the checkpoint directory"));
  CHECK(refusal("dcp_variants/storage_for_unknown_name.metadata") ==
        "dcp_variants/storage_for_unknown_name.metadata: byte 3477: storage_data key 17: 'ghost' "
        "is not a name of state_dict_metadata");
  CHECK(refusal("dcp_variants/negative_length.metadata") ==
        "dcp_variants/negative_length.metadata: byte 2733: storage_data['mask' at [0]] "
        "value.length: -5 is negative");
  CHECK_THAT(refusal("dcp_variants/compressed.metadata"),
             Catch::Contains("storage_data['mask' at [0]] value: the item was written through "
                             "stream transforms"));
  // A pickle of something else entirely.
  CHECK_THROWS_WITH(meshsim::read_dcp_metadata(std::string("\x80\x02K\x05.", 5), "x"),
                    "x: byte 2: the file: expected a Metadata, found 5");
}

TEST_CASE("a tensor far larger than its chunks reads without allocating it", "[io][dcp]") {
  const DcpMetadata metadata = read("dcp_variants/huge_tensor.metadata");
  const DcpEntry& w = entry(metadata, "model.w");
  CHECK(w.shape == std::vector<int64_t>{40000, 40000});
  CHECK(meshsim::dcp_entry_numel(w) == 32);  // the loader, not the reader, refuses the gap
}
