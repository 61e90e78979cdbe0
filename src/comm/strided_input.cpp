#include "src/comm/strided_input.hpp"

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

StridedInput strided_input(ProcessGroupKind backend, CollectiveOp op, const ViewLayout& layout,
                           std::string_view name) {
  if (layout.is_contiguous()) return {};
  const bool p2p = op == CollectiveOp::kSend || op == CollectiveOp::kRecv;
  if (backend == ProcessGroupKind::kNccl) {
    if (p2p) {
      return {true,
              "Detected non-contiguous tensor in P2P operations. It is user responsibility to "
              "guarantee that source and destination tensors have the same contiguity format."};
    }
    if (!layout.is_contiguous_for_collectives()) throw value_error("Tensors must be contiguous");
    return {true, ""};  // channels-last: dense, moved in memory order
  }
  if (p2p) throw runtime_error("input tensor has to be contiguous");
  if (op != CollectiveOp::kAllReduce && op != CollectiveOp::kBroadcast) {
    throw runtime_error(
        fmt::format("meshsim does not model Gloo's {} of the non-contiguous view \"{}\": call "
                    ".contiguous() first (contiguous = true on the view step)",
                    collective_op_name(op), name));
  }
  if (layout.is_non_overlapping_and_dense()) return {true, ""};
  return {true, fmt::format("Gloo's {} of the non-contiguous view \"{}\" moves the {} elements "
                            "from its first one in memory order, not the view's elements; "
                            "PyTorch raises nothing (call .contiguous() first)",
                            collective_op_name(op), name, layout.numel())};
}

}  // namespace meshsim
