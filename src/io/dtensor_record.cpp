#include "src/io/dtensor_record.hpp"

#include <cstring>

#include <fmt/format.h>

#include "src/error.hpp"
#include "src/io/mesh_record.hpp"
#include "src/io/record_archive.hpp"
#include "src/printable.hpp"

namespace meshsim {

namespace {

DType dtype_from(const RecordReader& r, std::string_view key) {
  const std::string& name = r.str(key);
  const std::optional<DType> dtype = parse_dtype(name);
  if (!dtype)
    throw runtime_error(fmt::format("{}.{} '{}' is not a dtype", r.path(), key, printable(name)));
  return *dtype;
}

}  // namespace

const std::set<std::string, std::less<>>& dtensor_record_types() {
  static const std::set<std::string, std::less<>> types = [] {
    std::set<std::string, std::less<>> out = mesh_record_types();
    out.insert({"DTensor", "DTensorSpec", "TensorMeta", "Tensor", "Shard", "Replicate", "Partial",
                "_StridedShard"});
    return out;
  }();
  return types;
}

RecordObject placement_to_record(const Placement& p) {
  return std::visit(
      [](const auto& v) -> RecordObject {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Shard>) {
          return RecordObject{"Shard", {}}.set("dim", RecordValue::of(v.dim));
        } else if constexpr (std::is_same_v<T, Replicate>) {
          return RecordObject{"Replicate", {}};
        } else if constexpr (std::is_same_v<T, Partial>) {
          return RecordObject{"Partial", {}}.set(
              "reduce_op", RecordValue::of(std::string(reduce_op_name(v.op))));
        } else {
          return RecordObject{"_StridedShard", {}}
              .set("dim", RecordValue::of(v.dim))
              .set("split_factor", RecordValue::of(v.split_factor));
        }
      },
      p);
}

Placement placement_from_record(const RecordReader& r) {
  const std::string& type = r.raw().type;
  Placement out;
  if (type == "Shard") {
    out = Shard{r.require({"dim"}).integer("dim")};
  } else if (type == "Replicate") {
    out = Replicate{};
  } else if (type == "Partial") {
    r.require({"reduce_op"});
    try {
      out = Partial{parse_reduce_op(r.str("reduce_op"))};
    } catch (const Error& e) {
      throw runtime_error(fmt::format("{}.reduce_op: {}", r.path(), e.what()));
    }
  } else if (type == "_StridedShard") {
    r.require({"dim", "split_factor"});
    const int64_t split_factor = r.integer("split_factor");
    if (split_factor < 1) {
      throw runtime_error(fmt::format("{}.split_factor is {}", r.path(), split_factor));
    }
    out = StridedShard{r.integer("dim"), split_factor};
  } else {
    throw runtime_error(
        fmt::format("{} is a '{}', not a placement (Shard, Replicate, Partial or _StridedShard)",
                    r.path(), printable(type)));
  }
  r.finish();
  return out;
}

RecordObject tensor_to_record(const Tensor& t) {
  RecordObject out{"Tensor", {}};
  out.set("dtype", RecordValue::of(std::string(dtype_name(t.dtype()))));
  out.set("shape", RecordValue::of(t.shape()));
  if (t.is_meta()) {
    out.set("data", RecordValue::none());
  } else {
    const std::span<const std::byte> bytes = t.bytes();
    out.set("data", RecordValue::bytes(
                        std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())));
  }
  return out;
}

Tensor tensor_from_record(const RecordReader& r) {
  r.expect_type("Tensor").require({"dtype", "shape", "data"});
  const DType dtype = dtype_from(r, "dtype");
  const std::vector<int64_t>& shape = r.integers("shape");
  int64_t expected = 0;
  try {
    expected = Tensor::byte_size(shape, dtype);
  } catch (const Error& e) {
    throw runtime_error(fmt::format("{}.shape: {}", r.path(), e.what()));
  }
  if (r.is_none("data")) {
    r.finish();
    return Tensor(shape, dtype, Tensor::Storage::kMeta);
  }
  const std::string_view data = r.bytes("data");
  if (static_cast<int64_t>(data.size()) != expected) {
    throw runtime_error(fmt::format("{} holds {} bytes of data, a {}[{}] tensor has {}", r.path(),
                                    data.size(), dtype_name(dtype), fmt::join(shape, ", "),
                                    expected));
  }
  r.finish();
  Tensor out(shape, dtype);
  if (!data.empty()) std::memcpy(out.mutable_bytes().data(), data.data(), data.size());
  return out;
}

RecordObject dtensor_to_record(const DTensor& t, bool with_group_names) {
  const DTensorSpec& spec = t.spec();
  std::vector<RecordObject> placements;
  for (const Placement& p : spec.placements) placements.push_back(placement_to_record(p));
  RecordObject meta{"TensorMeta", {}};
  meta.set("shape", RecordValue::of(spec.shape));
  meta.set("stride", RecordValue::of(spec.stride()));
  meta.set("dtype", RecordValue::of(std::string(dtype_name(spec.dtype))));
  RecordObject spec_record{"DTensorSpec", {}};
  spec_record.set("mesh", RecordValue::of(mesh_to_record(spec.mesh, with_group_names)));
  spec_record.set("placements", RecordValue::of(std::move(placements)));
  spec_record.set("tensor_meta", RecordValue::of(std::move(meta)));
  RecordObject out{"DTensor", {}};
  out.set("_local_tensor", RecordValue::of(tensor_to_record(t.local())));
  out.set("_spec", RecordValue::of(std::move(spec_record)));
  out.set("requires_grad", RecordValue::of(int64_t{t.requires_grad()}));
  return out;
}

DTensor dtensor_from_record(const RecordReader& r, int64_t world_size) {
  r.expect_type("DTensor").require({"_local_tensor", "_spec", "requires_grad"});
  const RecordReader spec_record = r.object("_spec");
  spec_record.expect_type("DTensorSpec").require({"mesh", "placements", "tensor_meta"});
  const RecordReader meta = spec_record.object("tensor_meta");
  meta.expect_type("TensorMeta").require({"shape", "stride", "dtype"});
  DTensorSpec spec{mesh_from_record(spec_record.object("mesh"), world_size),
                   {},
                   meta.integers("shape"),
                   dtype_from(meta, "dtype")};
  for (const RecordReader& p : spec_record.objects("placements")) {
    spec.placements.push_back(placement_from_record(p));
  }
  spec_record.finish();
  if (spec.stride() != meta.integers("stride")) {
    throw runtime_error(fmt::format("{}.stride [{}] is not the contiguous stride of shape [{}]",
                                    meta.path(), fmt::join(meta.integers("stride"), ", "),
                                    fmt::join(spec.shape, ", ")));
  }
  meta.finish();
  Tensor local = tensor_from_record(r.object("_local_tensor"));
  const bool requires_grad = r.flag("requires_grad");
  r.finish();
  try {
    DTensor out = DTensor::from_local_shard(std::move(spec), std::move(local));
    out.set_requires_grad(requires_grad);
    return out;
  } catch (const Error& e) {
    throw Error(e.type(), fmt::format("{}: {}", r.path(), e.what()));
  }
}

std::string seal_dtensor(const DTensor& t, bool with_group_names, ArchiveFormat format) {
  return seal_record(RecordKind::kDTensor, kDTensorRecordVersion,
                     dtensor_to_record(t, with_group_names), format);
}

DTensor open_dtensor(std::string_view file, int64_t world_size, bool strict) {
  // The shard's bytes stay in `file` until tensor_from_record copies them into the tensor.
  const OpenedRecord opened =
      open_record(file, RecordKind::kDTensor, kDTensorRecordVersion, BytesOut::kBorrow);
  if (strict) check_record_types(opened.root, dtensor_record_types(), "a DTensor");
  return dtensor_from_record(RecordReader(opened.root, "DTensor", strict), world_size);
}

}  // namespace meshsim
