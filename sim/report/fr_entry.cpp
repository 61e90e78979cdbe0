#include "sim/report/fr_entry.hpp"

#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "src/printable.hpp"

namespace meshsim::sim {

namespace {

// Frames inside torch itself (distributed_c10d.py, c10d_logger.py, FSDP's own calls) say nothing
// about which line of the user's program made the call.
bool torch_internal(const FrFrame& f) {
  return f.filename.find("/torch/") != std::string::npos || f.filename.starts_with("<");
}

std::string frame_text(const FrFrame& f) {
  return fmt::format("{}:{} in {}", printable(f.filename, 160), f.line, printable(f.name, 64));
}

}  // namespace

std::optional<int64_t> parse_rank(std::string_view text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

bool finished(const FrEntry& e) {
  return e.retired || e.state == "completed";
}

std::string_view op_and_peers(const FrEntry& e) {
  std::string_view name = e.profiling_name;
  if (const size_t colon = name.rfind(':'); colon != std::string_view::npos)
    name.remove_prefix(colon + 1);
  return name;
}

std::string_view op_name(const FrEntry& e) {
  const std::string_view name = op_and_peers(e);
  return name.substr(0, name.find(' '));
}

bool closes_coalesced(const FrEntry& e) {
  // Exactly "coalesced": "allreduce_coalesced" and the like are collectives of their own.
  return op_name(e) == "coalesced";
}

std::optional<P2pEnds> p2p_ends(const FrEntry& e) {
  const std::string_view name = op_and_peers(e);
  const size_t space = name.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view op = name.substr(0, space), meta = name.substr(space + 1);
  const bool send = op == "send";
  if (!send && op != "recv") return std::nullopt;
  const size_t arrow = meta.find(send ? "->" : "<-");
  if (arrow == std::string_view::npos) return std::nullopt;
  const std::optional<int64_t> left = parse_rank(meta.substr(0, arrow));
  const std::string_view right_text = meta.substr(arrow + 2);
  const std::optional<int64_t> right = parse_rank(right_text);
  if (!left || (!right && !(!send && right_text == "?"))) return std::nullopt;
  if (send) return P2pEnds{left, *right};
  return P2pEnds{right, *left};
}

std::string tensors_text(const std::vector<std::vector<int64_t>>& sizes,
                         const std::vector<std::string>& dtypes) {
  constexpr size_t kShown = 4;
  std::string out;
  for (size_t i = 0; i < sizes.size() && i < kShown; ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("{}[{}]", i < dtypes.size() ? printable(dtypes[i], 16) : "?",
                       fmt::join(sizes[i], ", "));
  }
  if (sizes.size() > kShown) out += fmt::format(", ... ({} tensors)", sizes.size());
  return out;
}

std::string call_text(const FrEntry& e) {
  const std::string op = printable(op_name(e), 48);
  const std::string in = tensors_text(e.input_sizes, e.input_dtypes);
  const std::string out = tensors_text(e.output_sizes, e.output_dtypes);
  if (op == "send") return fmt::format("send({})", in);
  if (op == "recv") return fmt::format("recv({})", out);
  if (out.empty() || in == out) return fmt::format("{}({})", op, in);
  return fmt::format("{}({} → {})", op, in, out);
}

const FrFrame* user_frame(const std::vector<FrFrame>& frames) {
  for (const FrFrame& f : frames)
    if (!torch_internal(f)) return &f;
  return nullptr;
}

const FrFrame* user_frame(const FrEntry& e) {
  return user_frame(e.frames);
}

std::optional<std::string> user_line(const FrEntry& e) {
  if (const FrFrame* f = user_frame(e)) return frame_text(*f);
  return std::nullopt;
}

std::string site_text(const FrEntry& e) {
  if (std::optional<std::string> line = user_line(e)) return *line;
  if (!e.frames.empty()) return frame_text(e.frames.front());
  return fmt::format("record {}", e.record_id);
}

bool all_to_all(std::string_view op) {
  return op == "all_to_all" || op == "all_to_all_single" || op == "alltoall" ||
         op == "alltoall_base";
}

// What members of one collective must agree on, by the op's rules: all-to-all sizes may differ
// per rank; a scatter's input and a gather's output live on the root only.
std::string agreed_sizes(const FrEntry& e) {
  const std::string_view op = op_name(e);
  if (all_to_all(op)) return "";
  std::string out;
  if (op != "scatter") out += fmt::format("in {}", tensors_text(e.input_sizes, {}));
  if (op != "gather") out += fmt::format(" out {}", tensors_text(e.output_sizes, {}));
  return out;
}

std::string agreed_dtypes(const FrEntry& e) {
  const std::string_view op = op_name(e);
  return fmt::format("{}|{}",
                     op == "scatter" ? "" : fmt::format("{}", fmt::join(e.input_dtypes, ",")),
                     op == "gather" ? "" : fmt::format("{}", fmt::join(e.output_dtypes, ",")));
}

std::string agreed_call(const FrEntry& e) {
  return fmt::format("{}|{}|{}", op_name(e), agreed_sizes(e), agreed_dtypes(e));
}

}  // namespace meshsim::sim
