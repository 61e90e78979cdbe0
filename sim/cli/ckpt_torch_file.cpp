#include "sim/cli/ckpt_torch_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "src/error.hpp"
#include "src/io/torch_saved_dtensor.hpp"
#include "src/mesh/mesh_layout.hpp"

namespace meshsim::sim {
namespace {

constexpr int kExitUnusable = 2;
// The largest world a scenario may have: a file naming a larger rank is no job's.
constexpr int64_t kMaxWorldSize = int64_t{1} << 20;

// The smallest world a saved mesh's rank table fits, in which restoring it checks everything a
// load would.
int64_t world_of(const DeviceMesh::Saved& saved) {
  const std::vector<int64_t>& table = saved.root ? saved.root->rank_map : saved.self.rank_map;
  const int64_t largest = table.empty() ? 0 : *std::max_element(table.begin(), table.end());
  if (largest >= kMaxWorldSize) {
    throw value_error(
        fmt::format("its rank table names rank {}, beyond any world of at most {} "
                    "ranks",
                    largest, kMaxWorldSize));
  }
  return std::max<int64_t>(largest, 0) + 1;
}

nlohmann::json optional_json(const auto& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json mesh_json(const DeviceMesh::Saved& saved, const DeviceMesh& mesh) {
  const DeviceMesh::SavedFields& self = saved.self;
  const RankTensor ranks = mesh.coordinate() ? mesh.mesh() : mesh.full_mesh();
  nlohmann::json root = nullptr;
  if (saved.root) {
    const DeviceMesh family_root = mesh.root();
    root = {{"shape", family_root.shape()}, {"dim_names", optional_json(family_root.dim_names())}};
  }
  nlohmann::json flattened = nlohmann::json::array();
  for (const auto& [name, fields] : saved.flattened) flattened.push_back(name);
  return {{"device_type", self.device_type},
          {"shape", mesh.shape()},
          {"dim_names", optional_json(self.mesh_dim_names)},
          {"layout", mesh.layout().to_string()},
          {"ranks", ranks.values},
          {"root", std::move(root)},
          {"flattened", std::move(flattened)},
          {"rank", self.thread_id},
          {"coordinate", optional_json(self.coordinate_on_dim)},
          {"group_names", optional_json(self.dim_group_names)}};
}

std::string group_names_text(const DeviceMesh::SavedFields& self) {
  if (!self.dim_group_names || self.dim_group_names->empty()) {
    return "none (a load must attach the mesh to its groups: rebind_groups)";
  }
  std::vector<std::string> named;
  for (size_t d = 0; d < self.dim_group_names->size(); ++d) {
    const std::string dim = self.mesh_dim_names ? (*self.mesh_dim_names)[d] : std::to_string(d);
    named.push_back(fmt::format("{} '{}'", dim, (*self.dim_group_names)[d]));
  }
  return fmt::format(
      "{} (they mean these groups only in a job that creates its groups in the same order; "
      "a scenario load warns when they do not, and rebind_groups re-attaches by layout)",
      fmt::join(named, ", "));
}

void print_mesh_text(const DeviceMesh::Saved& saved, const DeviceMesh& mesh) {
  const DeviceMesh::SavedFields& self = saved.self;
  std::cout << fmt::format("  mesh         {}\n", mesh.to_string());
  std::cout << fmt::format("  ranks        {}\n",
                           py_nested_list(mesh.coordinate() ? mesh.mesh() : mesh.full_mesh()));
  if (saved.root) {
    std::cout << fmt::format("  root         {}\n", mesh.root().to_string());
  }
  if (!saved.flattened.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, fields] : saved.flattened) names.push_back(name);
    std::cout << fmt::format("  flattened    {}\n", fmt::join(names, ", "));
  }
  std::cout << fmt::format(
      "  saved by     rank {}{}\n", self.thread_id,
      self.coordinate_on_dim
          ? fmt::format(", coordinate [{}]", fmt::join(*self.coordinate_on_dim, ", "))
          : std::string(", outside the mesh"));
  std::cout << fmt::format("  group names  {}\n", group_names_text(self));
}

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = t.get(static_cast<int64_t>(i));
  return out;
}

}  // namespace

int inspect_torch_save_file(const CkptInspectFlags& flags, std::string_view bytes) {
  // What restoring the object finds wrong is said of the file.
  const auto of_file = [&](auto&& restore) {
    try {
      return restore();
    } catch (const Error& e) {
      throw Error(e.type(), fmt::format("{}: {}", flags.path, e.what()));
    }
  };
  try {
    const TorchSavedObject object = read_torch_saved_object(bytes, flags.path);
    nlohmann::json out = {{"path", flags.path}, {"format", "torch.save"}};
    if (const DeviceMesh::Saved* saved = std::get_if<DeviceMesh::Saved>(&object)) {
      const DeviceMesh mesh =
          of_file([&] { return DeviceMesh::restore(*saved, world_of(*saved)); });
      if (flags.json) {
        out["kind"] = "DeviceMesh";
        out["mesh"] = mesh_json(*saved, mesh);
      } else {
        std::cout << fmt::format("{}: a torch.save file holding a DeviceMesh\n", flags.path);
        print_mesh_text(*saved, mesh);
      }
    } else {
      const TorchSavedDTensor& t = std::get<TorchSavedDTensor>(object);
      const DTensorSpec spec = of_file([&] {
        DTensorSpec checked = torch_saved_spec(t, world_of(t.mesh));
        DTensor::from_local_shard(checked, t.local);  // the shard's checks, as a load makes them
        return checked;
      });
      if (flags.json) {
        out["kind"] = "DTensor";
        out["dtype"] = dtype_name(t.dtype);
        out["shape"] = t.shape;
        out["stride"] = t.stride;
        out["requires_grad"] = t.requires_grad;
        nlohmann::json placements = nlohmann::json::array();
        for (const Placement& p : spec.placements) placements.push_back(placement_repr(p));
        out["placements"] = std::move(placements);
        out["mesh"] = mesh_json(t.mesh, spec.mesh);
        out["local"] = {{"shape", t.local.shape()}};
        if (flags.values) out["local"]["values"] = values_of(t.local);
      } else {
        std::cout << fmt::format("{}: a torch.save file holding a DTensor\n", flags.path);
        std::cout << fmt::format("  tensor       {}[{}]{}\n", dtype_name(t.dtype),
                                 fmt::join(t.shape, ", "),
                                 t.requires_grad ? ", requires_grad" : "");
        std::cout << fmt::format("  placements   {}\n", placements_repr(spec.placements));
        std::cout << fmt::format("  local shard  {}[{}]\n", dtype_name(t.dtype),
                                 fmt::join(t.local.shape(), ", "));
        if (flags.values) {
          std::cout << fmt::format("  values       [{}]\n", fmt::join(values_of(t.local), ", "));
        }
        print_mesh_text(t.mesh, spec.mesh);
      }
    }
    if (flags.json) {
      std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    return 0;
  } catch (const Error& e) {
    std::cerr << "meshsim ckpt inspect: " << e.what() << "\n";
    return kExitUnusable;
  } catch (const std::exception& e) {  // bad_alloc: a file asking for more than there is
    std::cerr << "meshsim ckpt inspect: " << flags.path << ": " << e.what() << "\n";
    return kExitUnusable;
  }
}

}  // namespace meshsim::sim
