#include "sim/gpu/nccl_executor.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "sim/gpu/device_ops.hpp"
#include "sim/gpu/device_types.hpp"
#include "sim/gpu/stream_wait.hpp"
#include "sim/runtime/fiber_stack.hpp"
#include "sim/runtime/group_label.hpp"
#include "src/error.hpp"

namespace meshsim::sim::gpu {

namespace {

// A CUDA or NCCL call that failed for one member (or, with rank -1, for the group call).
struct MemberFailure {
  int64_t rank;
  GpuError error;
};

// Runs `call` for the member with global rank `rank`, naming that rank if it fails.
template <typename Call>
auto for_rank(int64_t rank, Call&& call) {
  try {
    return call();
  } catch (const GpuError& e) {
    forget_unwound_frames();
    throw MemberFailure{rank, e};
  }
}

// One member as the devices see it.
struct Member {
  int64_t rank = 0;
  int64_t device = 0;
  StreamHandle stream = nullptr;
  CommHandle comm = nullptr;
};

}  // namespace

void NcclExecutor::execute(Meeting& m) {
  switch (m.signature.op) {
    case CollectiveOp::kBroadcastObjectList:
    case CollectiveOp::kAllGatherObject:
    case CollectiveOp::kNewGroup:
      host_.execute(m);
      return;
    default:
      break;
  }
  // As with the simulated executor, a failure belongs to the collective: every member gets it,
  // and virtual time still passes.
  std::exception_ptr failure;
  {
    // Declared before the catch aborts the group: device memory is released after the abort,
    // since cudaFree would wait for a kernel that never finishes.
    DeviceBuffers buffers(comms_.api());
    try {
      run_on_devices(m, buffers);
    } catch (const MemberFailure& f) {
      forget_unwound_frames();
      const std::string where =
          f.rank < 0 ? std::string("in the group call") : fmt::format("at rank {}", f.rank);
      comms_.abort_group(m.group_id, f.error.what());
      failure = std::make_exception_ptr(runtime_error(
          fmt::format("NCCL {} on group {} failed {}: {}; the group's communicators were aborted",
                      m.signature.describe(), meeting_label(m), where, f.error.what())));
    } catch (...) {
      forget_unwound_frames();
      failure = std::current_exception();
    }
  }
  time_.advance(m);
  if (failure) std::rethrow_exception(failure);
}

void NcclExecutor::run_on_devices(Meeting& m, DeviceBuffers& buffers) {
  DeviceApi& api = comms_.api();
  const Signature& sig = m.signature;
  std::vector<Exchange>& ex = m.exchanges;
  const size_t n = m.size();
  const std::vector<int64_t>& ranks = *m.members;

  for (size_t i = 0; i < n; ++i) {
    const bool meta =
        (ex[i].input != nullptr && ex[i].input->is_meta()) ||
        (ex[i].inputs != nullptr && std::any_of(ex[i].inputs->begin(), ex[i].inputs->end(),
                                                [](const Tensor& t) { return t.is_meta(); }));
    if (meta) {
      throw runtime_error(fmt::format(
          "{} on group {}: rank {}'s tensor is a meta tensor, which has no data for the nccl "
          "backend to move; run scenarios with meta tensors on --backend sim",
          collective_op_name(sig.op), meeting_label(m), ranks[i]));
    }
  }
  // Broadcast roots are checked as the simulated backend checks them (same message).
  std::optional<int64_t> root_position;
  if (sig.op == CollectiveOp::kBroadcast) {
    const auto at = std::lower_bound(ranks.begin(), ranks.end(), *sig.root);
    if (at == ranks.end() || *at != *sig.root) {
      for (size_t i = 0; i < n; ++i) {
        m.errors[i] =
            fmt::format("broadcast root {} is not in group {}", *sig.root, meeting_label(m));
      }
      return;
    }
    root_position = at - ranks.begin();
  }

  std::vector<Member> members(n);
  for (size_t i = 0; i < n; ++i) {
    Member& mb = members[i];
    mb.rank = ranks[i];
    mb.device = comms_.device_of(mb.rank);
    mb.stream = comms_.stream(mb.rank);
    mb.comm = comms_.comm(mb.rank, m.group_id);
  }
  const NcclType type = nccl_type(sig.dtype);
  auto allocate = [&](size_t i, size_t bytes) {
    return for_rank(members[i].rank, [&] { return buffers.allocate(members[i].device, bytes); });
  };
  auto upload = [&](size_t i, const Tensor& t) {
    const Member& mb = members[i];
    const DevicePtr ptr = allocate(i, t.nbytes());
    for_rank(mb.rank,
             [&] { api.copy_to_device(mb.device, ptr, t.bytes().data(), t.nbytes(), mb.stream); });
    return ptr;
  };
  auto count = [](const Tensor& t) { return static_cast<size_t>(t.numel()); };

  // What each member's results land in on the host, shaped as the simulated backend shapes them
  // (its shape rules run on meta stand-ins, so a refused shape fails with the same message).
  std::vector<std::vector<Tensor>> results(n);
  // (member, device buffer, result index) for every copy back.
  std::vector<std::tuple<size_t, DevicePtr, size_t>> downloads;
  // (member, call): run between group start and end, in order; a failure names the member.
  std::vector<std::pair<size_t, std::function<void()>>> launches;

  std::vector<Tensor> meta_inputs;
  std::vector<const Tensor*> meta_ptrs;
  auto shape_stand_ins = [&]() -> const std::vector<const Tensor*>& {
    for (const Exchange& e : ex) {
      meta_inputs.emplace_back(e.input->shape(), e.input->dtype(), Tensor::Storage::kMeta);
    }
    for (const Tensor& t : meta_inputs) meta_ptrs.push_back(&t);
    return meta_ptrs;
  };

  switch (sig.op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kBarrier: {
      // In place, as c10d does; a barrier is c10d's all_reduce of one element.
      const Tensor one({1}, DType::kFloat32);
      for (size_t i = 0; i < n; ++i) {
        const Tensor& in = sig.op == CollectiveOp::kBarrier ? one : *ex[i].input;
        const DevicePtr buf = upload(i, in);
        results[i].emplace_back(in.shape(), in.dtype());
        downloads.emplace_back(i, buf, 0);
        if (sig.op == CollectiveOp::kBroadcast) {
          launches.emplace_back(i, [&, i, buf] {
            api.broadcast(buf, buf, count(*ex[i].input), type, *root_position, members[i].comm,
                          members[i].stream);
          });
        } else {
          const NcclType t = sig.op == CollectiveOp::kBarrier ? NcclType::kFloat32 : type;
          const NcclOp op =
              sig.op == CollectiveOp::kBarrier ? NcclOp::kSum : nccl_op(*sig.reduce_op, sig.dtype);
          launches.emplace_back(i, [&, i, buf, t, op, c = count(in)] {
            api.all_reduce(buf, buf, c, t, op, members[i].comm, members[i].stream);
          });
        }
      }
      break;
    }
    case CollectiveOp::kAllGather:
    case CollectiveOp::kAllGatherIntoTensor: {
      // all_gather_into_tensor concatenates along dim 0 (with the simulated backend's checks);
      // all_gather lands in one flat buffer split afterwards, so 0-d tensors gather too.
      const Tensor joined = sig.op == CollectiveOp::kAllGatherIntoTensor
                                ? concat_dim0(shape_stand_ins())
                                : Tensor({static_cast<int64_t>(n) * ex[0].input->numel()},
                                         sig.dtype, Tensor::Storage::kMeta);
      for (size_t i = 0; i < n; ++i) {
        const DevicePtr send = upload(i, *ex[i].input);
        const DevicePtr recv = allocate(i, joined.nbytes());
        if (sig.op == CollectiveOp::kAllGatherIntoTensor) {
          results[i].emplace_back(joined.shape(), joined.dtype());
          downloads.emplace_back(i, recv, 0);
        } else {
          // Each group rank's piece comes back straight into its own tensor.
          const size_t piece = ex[0].input->nbytes();
          for (size_t k = 0; k < n; ++k) {
            results[i].emplace_back(ex[k].input->shape(), ex[k].input->dtype());
            downloads.emplace_back(i, static_cast<std::byte*>(recv) + k * piece, k);
          }
        }
        launches.emplace_back(i, [&, i, send, recv] {
          api.all_gather(send, recv, count(*ex[i].input), type, members[i].comm, members[i].stream);
        });
      }
      break;
    }
    case CollectiveOp::kReduceScatter: {
      const NcclOp op = nccl_op(*sig.reduce_op, sig.dtype);
      const Tensor chunk =
          chunk_dim0(reduce_tensors(shape_stand_ins(), *sig.reduce_op), static_cast<int64_t>(n), 0);
      for (size_t i = 0; i < n; ++i) {
        const DevicePtr send = upload(i, *ex[i].input);
        const DevicePtr recv = allocate(i, chunk.nbytes());
        results[i].emplace_back(chunk.shape(), chunk.dtype());
        downloads.emplace_back(i, recv, 0);
        launches.emplace_back(i, [&, i, send, recv, op, c = count(chunk)] {
          api.reduce_scatter(send, recv, c, type, op, members[i].comm, members[i].stream);
        });
      }
      break;
    }
    case CollectiveOp::kAllToAll: {
      // Every member sends inputs[j] to group rank j and receives what j holds for it: n x n
      // point-to-point calls in one group (a send to oneself included, as c10d issues it).
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) {
          const Tensor& out = ex[i].inputs->at(j);
          const Tensor& in = ex[j].inputs->at(i);
          const DevicePtr send = upload(i, out);
          const DevicePtr recv = allocate(i, in.nbytes());
          results[i].emplace_back(in.shape(), in.dtype());
          downloads.emplace_back(i, recv, j);
          launches.emplace_back(i, [&, i, j, send, recv, sc = count(out), rc = count(in)] {
            api.send(send, sc, type, static_cast<int64_t>(j), members[i].comm, members[i].stream);
            api.recv(recv, rc, type, static_cast<int64_t>(j), members[i].comm, members[i].stream);
          });
        }
      }
      break;
    }
    case CollectiveOp::kSend:
    case CollectiveOp::kRecv: {
      const size_t s = m.signature_of(0).op == CollectiveOp::kSend ? 0 : 1;
      const size_t d = 1 - s;
      const Tensor& payload = *ex[s].input;
      const DevicePtr send = upload(s, payload);
      const DevicePtr recv = allocate(d, payload.nbytes());
      results[d].emplace_back(payload.shape(), payload.dtype());
      downloads.emplace_back(d, recv, 0);
      const int64_t to = comms_.peer_index(members[s].rank, m.group_id, members[d].rank);
      const int64_t from = comms_.peer_index(members[d].rank, m.group_id, members[s].rank);
      launches.emplace_back(s, [&, s, send, to, c = count(payload)] {
        api.send(send, c, type, to, members[s].comm, members[s].stream);
      });
      launches.emplace_back(d, [&, d, recv, from, c = count(payload)] {
        api.recv(recv, c, type, from, members[d].comm, members[d].stream);
      });
      break;
    }
    case CollectiveOp::kBroadcastObjectList:
    case CollectiveOp::kAllGatherObject:
    case CollectiveOp::kNewGroup:
      MESHSIM_ASSERT(false, "host collectives do not reach the devices");
  }

  {
    std::optional<GroupCall> group;
    for_rank(-1, [&] { group.emplace(api); });
    for (const auto& [i, launch] : launches) for_rank(members[i].rank, launch);
    for_rank(-1, [&] { group->end(); });
  }
  // Wait for every member's stream, watching the communicators for asynchronous errors, before
  // copying back: a copy into pageable host memory blocks until the stream's NCCL kernel is done,
  // so a hung collective would hang the copy instead of reaching the deadline.
  const std::vector<size_t> running = wait_until_done(
      n, device_timeout_,
      [&](size_t i) {
        const Member& mb = members[i];
        return for_rank(mb.rank, [&] { return api.stream_done(mb.device, mb.stream); });
      },
      [&] {
        for (size_t i = 0; i < n; ++i) {
          const std::optional<std::string> error =
              for_rank(members[i].rank, [&] { return api.comm_async_error(members[i].comm); });
          if (error) {
            throw MemberFailure{members[i].rank, GpuError("ncclCommGetAsyncError", *error)};
          }
        }
      });
  if (!running.empty()) {
    std::vector<int64_t> late;
    for (size_t i : running) late.push_back(members[i].rank);
    throw MemberFailure{
        late.front(),
        GpuError("cudaStreamQuery", fmt::format("still running after {} ms (rank(s) {})",
                                                device_timeout_.count(), fmt::join(late, ", ")))};
  }

  for (const auto& download : downloads) {
    const auto [i, buf, index] = download;
    Tensor& into = results[i][index];
    const Member& mb = members[i];
    const DevicePtr from = buf;  // clang 14 cannot capture a structured binding
    for_rank(mb.rank, [&] {
      api.copy_to_host(mb.device, into.mutable_bytes().data(), from, into.nbytes(), mb.stream);
    });
  }

  switch (sig.op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kAllGatherIntoTensor:
    case CollectiveOp::kReduceScatter:
      for (size_t i = 0; i < n; ++i) *ex[i].output = std::move(results[i][0]);
      break;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kAllToAll:
      for (size_t i = 0; i < n; ++i) *ex[i].outputs = std::move(results[i]);
      break;
    case CollectiveOp::kSend:
    case CollectiveOp::kRecv:
      for (size_t i = 0; i < n; ++i) {
        if (!results[i].empty()) *ex[i].output = std::move(results[i][0]);
      }
      break;
    default:
      break;
  }
}

}  // namespace meshsim::sim::gpu
