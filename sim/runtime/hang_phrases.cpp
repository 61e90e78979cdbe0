#include "sim/runtime/hang_phrases.hpp"

#include <fmt/format.h>

#include "sim/runtime/group_label.hpp"

namespace meshsim::sim {

std::string location_text(const RankActivity& a) {
  return a.where.line > 0 ? fmt::format("{} ({})", a.where.to_string(), a.step) : "(no step)";
}

std::string finished_text(const RankActivity& a) {
  return a.where.line > 0 ? fmt::format("finished after {}", location_text(a)) : "finished";
}

std::string group_text(const OpenWait& w) {
  return label_with_members(w.channel, *w.members);
}

std::string call_text(const OpenWait& w, const Signature& signature) {
  if (signature.op == CollectiveOp::kNewGroup) {
    return fmt::format("new_group creating {} (store barrier seq {})",
                       w.creating.empty() ? "groups" : w.creating, w.seq);
  }
  return fmt::format("{} on {} seq {}", signature.describe(), group_text(w), w.seq);
}

std::string ranks_text(const std::vector<int64_t>& ranks) {
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  const std::string list = compact_ranks(ranks);
  return ranks.size() <= 4 ? fmt::format("ranks {}", list)
                           : fmt::format("ranks {} ({} ranks)", list, ranks.size());
}

bool is_p2p(const OpenWait& w) {
  return w.signature.op == CollectiveOp::kSend || w.signature.op == CollectiveOp::kRecv;
}

std::string relative_call(const Signature& sig, int64_t rank) {
  std::string call = sig.describe();
  if (!sig.root) return call;
  const std::string key = sig.op == CollectiveOp::kSend ? "dst" : "src";
  const std::string peer = fmt::format("{}={}", key, *sig.root);
  if (const size_t at = call.find(peer); at != std::string::npos)
    call.replace(at, peer.size(), fmt::format("{}=rank{:+}", key, *sig.root - rank));
  return call;
}

std::string ordinal(int64_t n) {
  const int64_t tens = n % 100;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                       : n % 10 == 1              ? "st"
                       : n % 10 == 2              ? "nd"
                       : n % 10 == 3              ? "rd"
                                                  : "th";
  return fmt::format("{}{}", n, suffix);
}

}  // namespace meshsim::sim
