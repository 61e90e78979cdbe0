// One rank's handle on the collectives, behind the Backend interface, for every backend: the
// shared rendezvous meets the ranks, the backend's executor (simulated or NCCL) computes or
// launches what they get.
#pragma once

#include "sim/runtime/meeting.hpp"
#include "sim/runtime/rendezvous.hpp"
#include "src/comm/collective.hpp"

namespace meshsim::sim {

class RendezvousBackend final : public Backend {
 public:
  RendezvousBackend(int64_t rank, Rendezvous& rendezvous, Executor& executor)
      : rank_(rank), rendezvous_(rendezvous), executor_(executor) {}

  void all_reduce(Tensor& tensor, ReduceOp op, const Group& group) override;
  std::vector<Tensor> all_gather(const Tensor& tensor, const Group& group) override;
  Tensor all_gather_into_tensor(const Tensor& tensor, const Group& group) override;
  Tensor reduce_scatter(const Tensor& input, ReduceOp op, const Group& group) override;
  void broadcast(Tensor& tensor, int64_t root, const Group& group) override;
  std::vector<Tensor> all_to_all(const std::vector<Tensor>& inputs, const Group& group) override;
  void barrier(const Group& group) override;
  void send(const Tensor& tensor, int64_t dst, const Group& group) override;
  Tensor recv(const Tensor& like, int64_t src, const Group& group) override;
  std::vector<std::string> broadcast_object_list(std::vector<std::string> objects, int64_t root,
                                                 const Group& group) override;
  std::vector<std::string> all_gather_object(const std::string& object,
                                             const Group& group) override;

 private:
  void meet(const Group& group, const Signature& signature, const Exchange& exchange) {
    rendezvous_.meet(rank_, group, signature, exchange, executor_);
  }

  int64_t rank_;
  Rendezvous& rendezvous_;
  Executor& executor_;
};

}  // namespace meshsim::sim
