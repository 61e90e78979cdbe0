// What a process-group backend does with a collective's tensor that is not row-major contiguous,
// as PyTorch 2.15's ProcessGroupNCCL and ProcessGroupGloo do it (docs/tensors.md): refuse it, or
// move the memory from its first element on (its data pointer and numel), whatever its strides.
#pragma once

#include <string>
#include <string_view>

#include "src/comm/collective.hpp"
#include "src/tensor/strided_view.hpp"

namespace meshsim {

// The process-group backend PyTorch picks for the device: NCCL for cuda, Gloo for cpu.
enum class ProcessGroupKind { kNccl, kGloo };

struct StridedInput {
  // The backend moves the numel elements from the tensor's start in memory order (true for
  // every tensor it takes that is not row-major); false: the tensor's own elements, in order.
  bool memory_run = false;
  // What to tell the user: PyTorch's warning, or meshsim's where PyTorch is silent about values
  // taken from outside the tensor. Empty for none.
  std::string warning;
};

// For the tensor `name` laid out as `layout`. Throws meshsim::Error: NCCL's ValueError "Tensors
// must be contiguous" for a collective of a tensor not contiguous in its suggested memory format,
// Gloo's RuntimeError "input tensor has to be contiguous" for send and recv, and meshsim's
// RuntimeError for the Gloo collectives it does not model with such a tensor.
StridedInput strided_input(ProcessGroupKind backend, CollectiveOp op, const ViewLayout& layout,
                           std::string_view name);

}  // namespace meshsim
