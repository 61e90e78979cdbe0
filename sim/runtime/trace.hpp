// A Chrome trace (the JSON that chrome://tracing and Perfetto open) of a run in virtual time: one
// track per rank, a slice per step and per collective, and flow arrows joining the participants
// of each collective.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace meshsim::sim {

class Trace {
 public:
  // A slice on `rank`'s track from `start_s` to `end_s` (virtual seconds).
  void slice(int64_t rank, std::string name, std::string category, double start_s, double end_s,
             nlohmann::json args = nlohmann::json::object());
  // One collective: a slice per member, and arrows from the first member to every other.
  void collective(const std::vector<int64_t>& members, const std::string& name,
                  const std::vector<double>& arrived_s, double end_s, nlohmann::json args);

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
  };
  struct Flow {
    int64_t id;
    int64_t from_rank;
    int64_t to_rank;
    double at_s;
  };
  std::vector<Slice> slices_;
  std::vector<Flow> flows_;
};

}  // namespace meshsim::sim
