// A Chrome trace (the JSON that chrome://tracing and Perfetto open) of a run in virtual time: one
// track per rank, a slice per step and per collective, and flow arrows joining the participants
// of each collective.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/runtime/call_site.hpp"
#include "src/comm/collective.hpp"

namespace meshsim::sim {

class Trace {
 public:
  // A slice on `rank`'s track from `start_s` to `end_s` (virtual seconds).
  void slice(int64_t rank, std::string name, std::string category, double start_s, double end_s,
             nlohmann::json args = nlohmann::json::object());
  // A slice that starts at `start_s` and never ends (a hung collective): Perfetto shows it
  // running to the end of the trace.
  void open_slice(int64_t rank, std::string name, std::string category, double start_s,
                  nlohmann::json args);
  // One member's part in a collective: a slice on its track. Parts with the same `meeting` key
  // are joined by arrows from the lowest rank to every other.
  void collective(int64_t rank, std::string meeting, std::string name, double start_s, double end_s,
                  nlohmann::json args);

  // A collective as `rank` took part in it: "all_reduce world.tp#1 #3" from `start_s` to `end_s`,
  // keyed so that the members of one meeting are joined (send/recv: by direction).
  void meeting(int64_t rank, const CallSite& site, const Signature& signature, int64_t group_id,
               int64_t group_size, int64_t seq, double start_s, double end_s);
  // What slices call group `id` (group_label.hpp); without it, c10d's number.
  void set_group_labels(std::function<std::string(int64_t)> label) { label_ = std::move(label); }

  // The trace events of one scenario, as process `pid` named `process`.
  nlohmann::json events(int64_t pid, const std::string& process, int64_t world_size) const;

 private:
  struct Slice {
    int64_t rank;
    std::string name;
    std::string category;
    double start_s;
    double end_s;
    nlohmann::json args;
    bool open = false;
  };
  std::vector<Slice> slices_;
  std::function<std::string(int64_t)> label_;
  std::map<std::string, std::vector<size_t>> meetings_;  // key -> slices of its members
};

}  // namespace meshsim::sim
