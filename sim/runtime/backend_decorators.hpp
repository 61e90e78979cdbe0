// Backends that wrap another: fault injection (a rank that crashes, stalls or sees a backend error
// entering its k-th collective) and tracing (a Chrome-trace slice per collective in virtual time).
// Either wraps any backend, simulated or real.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/runtime/faults.hpp"
#include "sim/runtime/rank_activity.hpp"
#include "sim/runtime/trace.hpp"
#include "src/comm/collective.hpp"

namespace meshsim::sim {

// Forwards every call to `inner`; subclasses hook before and after.
class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  void call(const Signature& signature, const CallBuffers& buffers, const Group& group) override;

 protected:
  // Around every call: `signature` is what the call will be met with, `group` the group (for
  // send/recv, the group the pair talks in). after() also runs when the call failed with
  // meshsim::Error (the collective's own failure, or a refusal before it met anyone), not when
  // the rank was aborted.
  virtual void before(const Signature& signature, const Group& group) = 0;
  virtual void after(const Signature& signature, const Group& group) = 0;

 private:
  std::unique_ptr<Backend> inner_;
};

// Fires the faults of one rank at its k-th call (send and recv count too).
class FaultInjectingBackend final : public ForwardingBackend {
 public:
  FaultInjectingBackend(std::unique_ptr<Backend> inner, int64_t rank, std::vector<Fault> faults,
                        RankActivity& activity)
      : ForwardingBackend(std::move(inner)),
        rank_(rank),
        faults_(std::move(faults)),
        activity_(activity) {}

 protected:
  void before(const Signature& signature, const Group& group) override;
  void after(const Signature&, const Group&) override {}

 private:
  int64_t rank_;
  std::vector<Fault> faults_;
  RankActivity& activity_;
  int64_t calls_ = 0;
};

// Records each call as a slice on the rank's track, from when it entered to when it left (virtual
// clock); the members of one collective are joined by flow arrows.
class TracingBackend final : public ForwardingBackend {
 public:
  TracingBackend(std::unique_ptr<Backend> inner, int64_t rank, Trace& trace, RankActivity& activity)
      : ForwardingBackend(std::move(inner)), rank_(rank), trace_(trace), activity_(activity) {}

 protected:
  void before(const Signature&, const Group&) override {
    entered_at_ = activity_.clock;
    meetings_before_ = activity_.meetings_entered;
  }
  void after(const Signature& signature, const Group& group) override;

 private:
  int64_t rank_;
  Trace& trace_;
  RankActivity& activity_;
  double entered_at_ = 0.0;
  int64_t meetings_before_ = 0;
};

}  // namespace meshsim::sim
