#include "sim/steps/group_operand.hpp"

#include <fmt/format.h>

namespace meshsim::sim {

GroupOperand group_operand(const toml::table& args, const LoadContext& ctx) {
  const toml::node* node = args.get("group");
  if (node == nullptr) return {};
  if (const toml::table* t = node->as_table()) {
    ctx.only_keys(*t, {"mesh", "dim"}, "group");
    GroupOperand g{ctx.string_of(ctx.require(*t, "mesh", "group"), "mesh"), ""};
    const LoadContext::MeshInfo* info = &ctx.require_mesh(*t->get("mesh"), g.mesh);
    if (const toml::node* d = t->get("dim")) {
      g.dim = ctx.dim_name(*d, g.mesh, *info);
    } else if (info->ndim != 1) {
      ctx.fail(*node,
               fmt::format("mesh \"{}\" has {} dims: name one with dim", g.mesh, info->ndim));
    }
    return g;
  }
  const std::string name = ctx.string_of(*node, "group");
  if (name == "WORLD") return {};
  const LoadContext::MeshInfo* info = ctx.mesh(name);
  if (info == nullptr)
    ctx.fail(
        *node,
        fmt::format("unknown group \"{}\" (expected WORLD, a 1-D mesh, or {{ mesh, dim }})", name));
  if (info->ndim != 1)
    ctx.fail(*node, fmt::format("mesh \"{}\" has {} dims: use {{ mesh, dim }}", name, info->ndim));
  return {name, ""};
}

}  // namespace meshsim::sim
