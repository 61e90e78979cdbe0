// DTensor checkpoint records (docs/mesh.md 4.2): the local shard, the spec (mesh record,
// placements, global shape, stride and dtype) and requires_grad.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "src/dtensor/dtensor.hpp"
#include "src/io/envelope.hpp"
#include "src/io/record_tree.hpp"

namespace meshsim {

inline constexpr uint32_t kDTensorRecordVersion = 1;

// Every type a DTensor record may hold: the strict loader's allow-list (mesh, spec, tensor meta,
// tensor, DTensor and the four placements).
const std::set<std::string, std::less<>>& dtensor_record_types();

RecordObject placement_to_record(const Placement& p);
// RuntimeError naming the path for an unknown placement type or bad fields.
Placement placement_from_record(const RecordReader& record);

// A tensor's dtype, shape and bytes (no bytes for a meta tensor).
RecordObject tensor_to_record(const Tensor& t);
// Checks the byte count against dtype and shape before allocating.
Tensor tensor_from_record(const RecordReader& record);

RecordObject dtensor_to_record(const DTensor& t, bool with_group_names);
DTensor dtensor_from_record(const RecordReader& record, int64_t world_size);

std::string seal_dtensor(const DTensor& t, bool with_group_names, ArchiveFormat format);
DTensor open_dtensor(std::string_view file, int64_t world_size, bool strict);

}  // namespace meshsim
