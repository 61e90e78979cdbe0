#include "sim/steps/checkpoint_step_support.hpp"

#include <filesystem>

#include <unistd.h>

#include "sim/run/query.hpp"
#include "sim/steps/step_kinds.hpp"
#include "src/enum_names.hpp"

namespace meshsim::sim {

MeshPlacements mesh_placements_of(const toml::table& args, std::string_view what,
                                  const LoadContext& ctx, std::optional<size_t> tensor_ndim) {
  MeshPlacements out;
  const toml::node& mesh = ctx.require(args, "mesh", what);
  out.mesh = ctx.string_of(mesh, "mesh");
  ctx.require_mesh(mesh, out.mesh);
  if (const toml::node* p = args.get("placements")) {
    out.placements = placements_of(*p, ctx, out.mesh, tensor_ndim);
  }
  return out;
}

bool plain_relative_path(const std::string& path, bool allow_directories) {
  std::string plain = path;
  for (size_t at; (at = plain.find("{rank}")) != std::string::npos;) plain.replace(at, 6, "0");
  if (path.empty() || path.size() > 200) return false;
  size_t begin = 0;
  while (true) {
    const size_t end = plain.find('/', begin);
    const std::string part = plain.substr(begin, end == std::string::npos ? end : end - begin);
    if (part.empty() || part == "." || part == ".." ||
        part.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789._-") != std::string::npos) {
      return false;
    }
    if (end == std::string::npos) return true;
    if (!allow_directories) return false;
    begin = end + 1;
  }
}

std::string with_rank(std::string pattern, int64_t rank) {
  for (size_t at; (at = pattern.find("{rank}")) != std::string::npos;)
    pattern.replace(at, 6, std::to_string(rank));
  return pattern;
}

std::string resolve(const RankState& rank, const std::string& pattern) {
  return (std::filesystem::path(rank.checkpoint_dir()) / with_rank(pattern, rank.rank())).string();
}

void replace_all(std::string& text, const std::string& from, std::string_view to) {
  for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size())
    text.replace(at, from.size(), to);
}

Error stable_error(const RankState& rank, const Error& e) {
  std::string text = e.what();
  if (!rank.checkpoint_dir_made().empty()) replace_all(text, rank.checkpoint_dir_made() + "/", "");
  replace_all(text, fmt::format(".tmp.{}", ::getpid()), ".tmp");
  return Error(e.type(), std::move(text));
}

ArchiveFormat format_of(const toml::node& node, const LoadContext& ctx) {
  const std::string text = ctx.string_of(node, "format");
  if (const std::optional<ArchiveFormat> format = value_in(kArchiveFormatNames, text)) {
    return *format;
  }
  ctx.fail(node, fmt::format("unknown archive format \"{}\" (binary, text or xml)", text));
}

}  // namespace meshsim::sim
