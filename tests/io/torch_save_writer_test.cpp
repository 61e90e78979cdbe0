// The writers behind `save = { format = "dcp" }`, read back by meshsim's own readers: pickles
// with integers at every width boundary, torch.save archives of every dtype (0-d and empty
// included) and stored zips forced into their zip64 records. dcp_save_diff has torch read what
// they write.
#include "src/io/torch_save_writer.hpp"

#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "src/error.hpp"
#include "src/io/pickle_reader.hpp"
#include "src/io/pickle_writer.hpp"
#include "src/io/torch_save_archive.hpp"

using meshsim::DType;
using meshsim::Tensor;

namespace {

std::string joined(const meshsim::StoredZipWriter& writer) {
  std::string out;
  for (std::string_view piece : writer.pieces()) out += piece;
  return out;
}

}  // namespace

TEST_CASE("pickled integers read back at every width boundary", "[pickle_writer]") {
  const std::vector<int64_t> values = {0,
                                       1,
                                       255,
                                       256,
                                       65535,
                                       65536,
                                       -1,
                                       -256,
                                       std::numeric_limits<int32_t>::min(),
                                       std::numeric_limits<int32_t>::max(),
                                       int64_t{std::numeric_limits<int32_t>::max()} + 1,
                                       int64_t{std::numeric_limits<int32_t>::min()} - 1,
                                       int64_t{1} << 40,
                                       std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max()};
  meshsim::PickleWriter writer;
  writer.mark();
  for (int64_t v : values) writer.integer(v);
  writer.tuple_from_mark();
  const meshsim::PickleDocument document = meshsim::read_pickle(writer.finish(), {}, "ints");
  const meshsim::PickleValue& tuple = document.at(document.root);
  REQUIRE(tuple.kind == meshsim::PickleValue::Kind::kTuple);
  REQUIRE(tuple.items.size() == values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    INFO(values[i]);
    CHECK(document.at(tuple.items[i]).kind == meshsim::PickleValue::Kind::kInt);
    CHECK(document.at(tuple.items[i]).integer == values[i]);
  }
}

TEST_CASE("torch.save archives of every dtype read back", "[torch_save_writer]") {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                      DType::kInt64, DType::kInt32, DType::kUInt8, DType::kBool}) {
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{}, std::vector<int64_t>{0, 3}, std::vector<int64_t>{3, 5}}) {
      INFO(meshsim::dtype_name(dtype) << " of " << shape.size() << " dims");
      Tensor t(shape, dtype);
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(i % 2 == 0 ? i : 1));
      const meshsim::StoredZipWriter writer = meshsim::torch_save_tensor(t);
      const std::string archive = joined(writer);
      CHECK(archive.size() == writer.size());
      const Tensor back = meshsim::read_torch_saved_tensor(archive, "t");
      CHECK(back.dtype() == dtype);
      CHECK(back.shape() == shape);
      CHECK(std::ranges::equal(back.bytes(), t.bytes()));
    }
  }
}

TEST_CASE("stored zips with zip64 records from the first byte read back", "[torch_save_writer]") {
  meshsim::StoredZipWriter writer(64, 0);
  writer.add("a/data.pkl", std::string("pickle"));
  writer.add("a/data/0", std::string(1000, 'x'));
  const std::string empty;
  writer.add_borrowed("a/empty", empty);
  writer.finish();
  const std::string archive = joined(writer);
  const std::vector<meshsim::ZipEntry> entries = meshsim::read_stored_zip(archive, "zip");
  REQUIRE(entries.size() == 3);
  CHECK(entries[0].name == "a/data.pkl");
  CHECK(entries[0].data == "pickle");
  CHECK(entries[1].data == std::string(1000, 'x'));
  CHECK(entries[2].data.empty());
  // Every entry's data starts at a multiple of the alignment, so storages can be mapped.
  for (const meshsim::ZipEntry& entry : entries) {
    if (entry.data.empty()) continue;
    CHECK((entry.data.data() - archive.data()) % 64 == 0);
  }
  // A flipped data byte is caught by the checksum the writer computed.
  std::string damaged = archive;
  damaged[static_cast<size_t>(entries[1].data.data() - archive.data())] ^= 1;
  CHECK_THROWS_WITH(meshsim::read_stored_zip(damaged, "zip"),
                    Catch::Contains("entry 'a/data/0' does not match its CRC-32"));
}
