// `meshsim ckpt inspect x.pt`: what a torch.save file of a DTensor or DeviceMesh holds (the
// tensor, its placements, the mesh's layout and ranks, the saver's rank, and whether process-group
// names are inside, which mean other groups in a job that creates its groups in another order).
#pragma once

#include <string_view>

#include "sim/cli/ckpt_command.hpp"

namespace meshsim::sim {

// 0 after printing the object; 2 after a clear message when the file holds anything else or
// cannot be restored (a mesh that leaves its rank table, a shard that does not fit its spec).
int inspect_torch_save_file(const CkptInspectFlags& flags, std::string_view bytes);

}  // namespace meshsim::sim
