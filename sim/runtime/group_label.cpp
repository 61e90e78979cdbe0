#include "sim/runtime/group_label.hpp"

#include <fmt/format.h>

#include "sim/runtime/rank_activity.hpp"

namespace meshsim::sim {

namespace {

constexpr size_t kListUpTo = 16;  // irregular lists longer than this are cut

}  // namespace

std::string group_label(const GroupTable* groups, int64_t id, const std::string& name) {
  if (id == kStoreGroupId) return "store (WORLD)";
  if (groups == nullptr) return display_group(name);
  return groups->label(id);
}

std::string meeting_group_label(const Meeting& m) {
  return group_label(m.groups, m.group_id, m.group);
}

std::string meeting_label(const Meeting& m) {
  std::string label = meeting_group_label(m);
  if (!m.point_to_point) return label;
  // The first arrival says the direction: a send goes from it to its peer.
  const int64_t first = (*m.members)[m.first];
  const Signature& sig = m.signature;
  const int64_t peer = sig.root.value_or(first);
  const bool sends = sig.op == CollectiveOp::kSend;
  return fmt::format("{} p2p {}→{}", label, sends ? first : peer, sends ? peer : first);
}

std::string rank_ranges(const std::vector<int64_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += out.empty() ? "" : ", ";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string compact_ranks(const std::vector<int64_t>& ranks) {
  const size_t n = ranks.size();
  if (n == 2) return fmt::format("{}, {}", ranks[0], ranks[1]);
  if (n >= 3) {
    const int64_t step = ranks[1] - ranks[0];
    bool progression = step > 0;
    for (size_t i = 2; progression && i < n; ++i) progression = ranks[i] - ranks[i - 1] == step;
    if (progression && step == 1) return fmt::format("{}-{}", ranks.front(), ranks.back());
    if (progression && n > 4) {
      return fmt::format("{}, {}, ..., {}", ranks[0], ranks[1], ranks.back());
    }
  }
  const std::string ranges = rank_ranges(ranks);
  if (ranges.size() <= 80) return ranges;
  std::vector<int64_t> head(ranks.begin(),
                            ranks.begin() + static_cast<ptrdiff_t>(std::min(n, kListUpTo)));
  return fmt::format("{}, ...", rank_ranges(head));
}

std::string label_with_members(const std::string& label, const std::vector<int64_t>& members) {
  if (label == "WORLD") return label;  // everyone
  if (members.size() <= 8) return fmt::format("{} [{}]", label, compact_ranks(members));
  return fmt::format("{} [{}] ({} ranks)", label, compact_ranks(members), members.size());
}

std::string label_dim(const std::string& label) {
  const size_t dot = label.find('.'), hash = label.find('#');
  if (dot == std::string::npos || hash == std::string::npos || hash < dot) return {};
  return label.substr(dot + 1, hash - dot - 1);
}

}  // namespace meshsim::sim
