#include "tests/gpu/recording_device_api.hpp"

#include <algorithm>
#include <cstring>
#include <tuple>

#include <fmt/format.h>

#include "sim/gpu/device_types.hpp"
#include "src/comm/collective.hpp"
#include "src/rng/cuda_random_kernel.hpp"

namespace meshsim::test {

namespace {

void* handle(int64_t id) {
  return reinterpret_cast<void*>(static_cast<intptr_t>(id));
}
int64_t id_of(const void* h) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(h));
}

std::string_view op_name(NcclOp op) {
  return reduce_op_name(reduce_of(op));
}

Tensor tensor_from(const std::byte* data, size_t count, NcclType type) {
  Tensor t({static_cast<int64_t>(count)}, dtype_of(type));
  if (t.nbytes() > 0) std::memcpy(t.mutable_bytes().data(), data, t.nbytes());
  return t;
}

}  // namespace

void RecordingDeviceApi::record(std::string line) {
  calls.push_back(std::move(line));
}

void RecordingDeviceApi::fail(std::string call, std::string nccl_name, std::string message,
                              int skip) {
  failures_.push_back({std::move(call), std::move(nccl_name), std::move(message), skip});
}

void RecordingDeviceApi::maybe_fail(const std::string& call) {
  for (auto it = failures_.begin(); it != failures_.end(); ++it) {
    if (it->call != call) continue;
    if (it->skip > 0) {
      --it->skip;
      return;
    }
    GpuError error(it->nccl_name, it->message);
    failures_.erase(it);
    record(call + " -> error");
    throw error;
  }
}

size_t RecordingDeviceApi::live_comms() const {
  return static_cast<size_t>(
      std::count_if(comms_.begin(), comms_.end(), [](const auto& c) { return c.second.alive; }));
}

std::vector<std::string> RecordingDeviceApi::calls_of(
    const std::vector<std::string>& prefixes) const {
  std::vector<std::string> out;
  for (const std::string& line : calls) {
    for (const std::string& p : prefixes) {
      if (line.rfind(p, 0) == 0) {
        out.push_back(line);
        break;
      }
    }
  }
  return out;
}

RecordingDeviceApi::Comm& RecordingDeviceApi::comm_of(CommHandle h) {
  const auto it = comms_.find(id_of(h));
  if (it == comms_.end() || !it->second.alive) {
    throw GpuError("fake", fmt::format("communicator c{} is not alive", id_of(h)));
  }
  return it->second;
}

// The allocation holding `ptr` (which may point inside it), or end().
std::map<const std::byte*, std::vector<std::byte>>::iterator RecordingDeviceApi::allocation_of(
    const void* ptr) {
  const auto* p = static_cast<const std::byte*>(ptr);
  auto it = buffers_.upper_bound(p);
  if (it == buffers_.begin()) return buffers_.end();
  --it;
  return p < it->first + it->second.size() ? it : buffers_.end();
}

std::byte* RecordingDeviceApi::buffer_of(const void* ptr, size_t bytes) {
  const auto it = allocation_of(ptr);
  const auto* p = static_cast<const std::byte*>(ptr);
  if (it == buffers_.end() || static_cast<size_t>(p - it->first) + bytes > it->second.size()) {
    throw GpuError("fake", fmt::format("{} bytes at an address that is no live allocation", bytes));
  }
  return it->second.data() + (p - it->first);
}

std::string RecordingDeviceApi::name_of_buffer(const void* ptr) {
  const auto it = allocation_of(ptr);
  if (it == buffers_.end()) return "?";
  const std::string name = fmt::format("b{}", buffer_names_.at(it->first));
  const auto offset = static_cast<const std::byte*>(ptr) - it->first;
  return offset == 0 ? name : fmt::format("{}+{}", name, offset);
}

int64_t RecordingDeviceApi::device_count() {
  record("device_count");
  if (devices_ < 0) {
    throw GpuError("cudaGetDeviceCount",
                   "CUDA driver version is insufficient for CUDA runtime version (CUDA error 35, "
                   "cudaErrorInsufficientDriver)");
  }
  return devices_;
}

DeviceProperties RecordingDeviceApi::properties(int64_t device) {
  record(fmt::format("properties(dev {})", device));
  return {"Fake H200", 132, 2048, 9, 0};
}

StreamHandle RecordingDeviceApi::create_stream(int64_t device) {
  maybe_fail("create_stream");
  const int64_t id = next_handle_++;
  streams_[id] = device;
  record(fmt::format("create_stream(dev {}) -> s{}", device, id));
  return handle(id);
}

void RecordingDeviceApi::destroy_stream(int64_t device, StreamHandle stream) {
  record(fmt::format("destroy_stream(dev {}, s{})", device, id_of(stream)));
  streams_.erase(id_of(stream));
}

DevicePtr RecordingDeviceApi::allocate(int64_t device, size_t bytes) {
  maybe_fail("allocate");
  std::vector<std::byte> block(bytes);
  std::byte* data = block.data();
  buffers_.emplace(data, std::move(block));
  const int64_t id = next_handle_++;
  buffer_names_[data] = id;
  record(fmt::format("allocate(dev {}, {} B) -> b{}", device, bytes, id));
  return data;
}

void RecordingDeviceApi::release(int64_t device, DevicePtr ptr) {
  if (streams_never_finish && live_comms() > 0 && aborted_ == 0) {
    // cudaFree synchronizes the device: with a kernel that never ends, it blocks forever.
    throw GpuError("fake", "cudaFree while a collective still runs would block forever");
  }
  record(fmt::format("release(dev {}, {})", device, name_of_buffer(ptr)));
  buffer_names_.erase(static_cast<const std::byte*>(ptr));
  buffers_.erase(static_cast<const std::byte*>(ptr));
}

void RecordingDeviceApi::copy_to_device(int64_t device, DevicePtr dst, const void* src,
                                        size_t bytes, StreamHandle stream) {
  maybe_fail("copy_to_device");
  record(fmt::format("copy_to_device(dev {}, {}, {} B, s{})", device, name_of_buffer(dst), bytes,
                     id_of(stream)));
  if (bytes > 0) std::memcpy(buffer_of(dst, bytes), src, bytes);
}

void RecordingDeviceApi::copy_to_host(int64_t device, void* dst, DevicePtr src, size_t bytes,
                                      StreamHandle stream) {
  maybe_fail("copy_to_host");
  if (streams_never_finish) {
    throw GpuError("fake",
                   "a copy to pageable host memory on a stream that never finishes "
                   "would block forever");
  }
  record(fmt::format("copy_to_host(dev {}, {}, {} B, s{})", device, name_of_buffer(src), bytes,
                     id_of(stream)));
  if (bytes > 0) std::memcpy(dst, buffer_of(src, bytes), bytes);
}

bool RecordingDeviceApi::stream_done(int64_t device, StreamHandle stream) {
  maybe_fail("stream_done");
  record(fmt::format("stream_done(dev {}, s{}) -> {}", device, id_of(stream),
                     streams_never_finish ? "no" : "yes"));
  return !streams_never_finish;
}

void RecordingDeviceApi::fill_random(int64_t device, DevicePtr out, const RandomFillLaunch& launch,
                                     StreamHandle stream) {
  maybe_fail("fill_random");
  record(fmt::format("fill_random(dev {}, {}, {} elements, seed {}, offset {}, grid {}, s{})",
                     device, name_of_buffer(out), launch.numel, launch.seed, launch.offset,
                     launch.grid, id_of(stream)));
#ifdef MESHSIM_HAVE_RANDOM_HOST
  random_fill_on_host(out, launch);
#else
  // Without the CUDA toolkit there is no host twin: the fake device writes what meshsim predicts
  // for the kernel, on a GPU whose grid cap is this launch's grid (so the launch is the same).
  const DType dtype = dtype_of(launch.dtype);
  PhiloxState state{launch.seed, launch.offset};
  const GpuProfile gpu = GpuProfile::custom(launch.grid, 256);
  const Tensor values = launch.distribution == RandomDistribution::kUniform
                            ? predict_uniform(state, launch.numel, dtype, gpu, launch.a, launch.b)
                            : predict_normal(state, launch.numel, dtype, gpu, launch.a, launch.b);
  std::memcpy(buffer_of(out, values.nbytes()), values.bytes().data(), values.nbytes());
#endif
}

CommUniqueId RecordingDeviceApi::unique_id() {
  CommUniqueId id;
  const std::string text = fmt::format("id{}", next_id_++);
  std::copy(text.begin(), text.end(), id.bytes.begin());
  record("unique_id -> " + text);
  return id;
}

CommHandle RecordingDeviceApi::comm_init_rank(int64_t device, int64_t nranks,
                                              const CommUniqueId& id, int64_t rank) {
  maybe_fail("comm_init_rank");
  const int64_t h = next_handle_++;
  comms_[h] = Comm{0, rank, nranks, device, true, std::nullopt};
  const std::string key(id.bytes.data());
  inits_.push_back({key, h});
  record(fmt::format("comm_init_rank(dev {}, {} ranks, {}, rank {}) -> c{}", device, nranks, key,
                     rank, h));
  if (group_depth_ == 0) complete_group();  // alone, it completes at once
  return handle(h);
}

CommHandle RecordingDeviceApi::comm_split(CommHandle parent, std::optional<int64_t> color,
                                          int64_t key) {
  maybe_fail("comm_split");
  comm_of(parent);
  if (group_depth_ == 0) throw GpuError("ncclCommSplit", "fake: split outside a group call");
  const int64_t child = color ? next_handle_++ : 0;
  splits_.push_back({id_of(parent), color, key, child});
  record(fmt::format("comm_split(c{}, {}, key {}) -> {}", id_of(parent),
                     color ? fmt::format("color {}", *color) : std::string("no color"), key,
                     color ? fmt::format("c{}", child) : std::string("none")));
  return child == 0 ? nullptr : handle(child);
}

void RecordingDeviceApi::comm_finalize(CommHandle comm) {
  maybe_fail("comm_finalize");
  record(fmt::format("comm_finalize(c{})", id_of(comm)));
  comm_of(comm);
}

void RecordingDeviceApi::comm_destroy(CommHandle comm) {
  record(fmt::format("comm_destroy(c{})", id_of(comm)));
  comm_of(comm).alive = false;
}

void RecordingDeviceApi::comm_abort(CommHandle comm) {
  ++aborted_;
  record(fmt::format("comm_abort(c{})", id_of(comm)));
  comm_of(comm).alive = false;
}

std::optional<std::string> RecordingDeviceApi::comm_async_error(CommHandle comm) {
  return comm_of(comm).async_error;
}

void RecordingDeviceApi::group_start() {
  maybe_fail("group_start");
  record("group_start");
  ++group_depth_;
}

void RecordingDeviceApi::group_end() {
  if (group_depth_ == 0) throw GpuError("ncclGroupEnd", "invalid usage (no group is open)");
  --group_depth_;  // a failing ncclGroupEnd still closes the group
  maybe_fail("group_end");
  record("group_end");
  if (group_depth_ == 0) complete_group();
}

void RecordingDeviceApi::complete_group() {
  // Communicators from one unique id form a clique once all of its ranks have called.
  std::map<std::string, std::vector<int64_t>> by_id;
  for (const Init& init : inits_) by_id[init.id].push_back(init.comm);
  for (auto& [key, members] : by_id) {
    if (static_cast<int64_t>(members.size()) != comms_.at(members[0]).nranks) continue;
    const int64_t clique = next_clique_++;
    for (int64_t c : members) comms_.at(c).clique = clique;
    const std::string& id = key;  // clang 14 cannot capture a structured binding
    std::erase_if(inits_, [&](const Init& i) { return i.id == id; });
  }
  // Splits: one clique per (parent clique, color), ranked by key.
  std::map<std::pair<int64_t, int64_t>, std::vector<const Split*>> by_color;
  for (const Split& s : splits_) {
    if (s.color) by_color[{comms_.at(s.parent).clique, *s.color}].push_back(&s);
  }
  for (auto& [where, members] : by_color) {
    std::stable_sort(members.begin(), members.end(),
                     [](const Split* a, const Split* b) { return a->key < b->key; });
    const int64_t clique = next_clique_++;
    for (size_t i = 0; i < members.size(); ++i) {
      comms_[members[i]->child] = Comm{clique,
                                       static_cast<int64_t>(i),
                                       static_cast<int64_t>(members.size()),
                                       comms_.at(members[i]->parent).device,
                                       true,
                                       std::nullopt};
    }
  }
  splits_.clear();
  std::vector<Op> ops = std::move(pending_);
  pending_.clear();
  if (async_failure_) {
    for (const Op& op : ops) comms_.at(op.comm).async_error = async_failure_;
    if (!ops.empty()) async_failure_.reset();
    return;  // the collectives "fail on the device": nothing is computed
  }
  run_ops(std::move(ops));
}

void RecordingDeviceApi::enqueue(Op op) {
  const Comm& c = comm_of(handle(op.comm));
  if (group_depth_ == 0 && c.nranks > 1) {
    throw GpuError("nccl" + op.kind,
                   "fake: one thread issued a multi-rank call outside ncclGroupStart/End; on a "
                   "real node it would wait forever for the other ranks");
  }
  pending_.push_back(op);
  if (group_depth_ == 0) complete_group();
}

void RecordingDeviceApi::run_ops(std::vector<Op> ops) {
  // Collectives: the k-th call of each member of a clique meet; point-to-point: the n-th send
  // from a to b meets the n-th recv at b from a.
  std::map<int64_t, std::vector<std::vector<const Op*>>> collectives;  // clique → by rank
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<const Op*>> sends, recvs;
  for (const Op& op : ops) {
    const Comm& c = comms_.at(op.comm);
    if (op.kind == "send") {
      sends[{c.clique, c.rank, op.peer}].push_back(&op);
    } else if (op.kind == "recv") {
      recvs[{c.clique, op.peer, c.rank}].push_back(&op);
    } else {
      auto& by_rank = collectives[c.clique];
      by_rank.resize(static_cast<size_t>(c.nranks));
      by_rank[static_cast<size_t>(c.rank)].push_back(&op);
    }
  }
  for (auto& [clique, by_rank] : collectives) {
    const size_t n = by_rank.size();
    for (const auto& calls_of_rank : by_rank) {
      if (calls_of_rank.size() != by_rank[0].size()) {
        throw GpuError("ncclGroupEnd",
                       "fake: the ranks of a clique issued different numbers of "
                       "collectives (NCCL would hang)");
      }
    }
    for (size_t k = 0; k < by_rank[0].size(); ++k) {
      std::vector<const Op*> at(n);
      for (size_t r = 0; r < n; ++r) {
        at[r] = by_rank[r][k];
        if (at[r]->kind != at[0]->kind || at[r]->type != at[0]->type ||
            at[r]->count != at[0]->count || at[r]->op != at[0]->op || at[r]->peer != at[0]->peer) {
          throw GpuError("ncclGroupEnd",
                         "fake: members issued different collectives (kind, type, count, op or "
                         "root; NCCL would hang or corrupt memory)");
        }
      }
      const Op& first = *at[0];
      const size_t width = dtype_size(dtype_of(first.type));
      std::vector<Tensor> inputs;
      for (const Op* op : at) inputs.push_back(tensor_from(op->send, op->count, op->type));
      std::vector<const Tensor*> ptrs;
      for (const Tensor& t : inputs) ptrs.push_back(&t);
      if (first.kind == "all_reduce") {
        const Tensor out = reduce_tensors(ptrs, reduce_of(first.op));
        for (const Op* op : at) std::memcpy(op->recv, out.bytes().data(), out.nbytes());
      } else if (first.kind == "broadcast") {
        const Tensor& root = inputs.at(static_cast<size_t>(first.peer));
        for (const Op* op : at) std::memcpy(op->recv, root.bytes().data(), root.nbytes());
      } else if (first.kind == "all_gather") {
        for (const Op* op : at) {
          for (size_t r = 0; r < n; ++r) {
            std::memcpy(op->recv + r * first.count * width, inputs[r].bytes().data(),
                        inputs[r].nbytes());
          }
        }
      } else if (first.kind == "reduce_scatter") {
        const Tensor out = reduce_tensors(ptrs, reduce_of(first.op));
        const size_t chunk = first.count / n * width;  // each rank's share of the reduction
        for (size_t r = 0; r < n; ++r) {
          std::memcpy(at[r]->recv, out.bytes().data() + r * chunk, chunk);
        }
      }
    }
  }
  for (auto& [key, from] : sends) {
    const auto it = recvs.find(key);
    if (it == recvs.end() || it->second.size() != from.size()) {
      throw GpuError("ncclGroupEnd", "fake: a send has no matching recv in this group call");
    }
    for (size_t k = 0; k < from.size(); ++k) {
      const Op& s = *from[k];
      const Op& r = *it->second[k];
      if (s.count != r.count || s.type != r.type) {
        throw GpuError("ncclGroupEnd", "fake: send and recv disagree on count or type");
      }
      std::memcpy(r.recv, s.send, s.count * dtype_size(dtype_of(s.type)));
    }
    recvs.erase(it);
  }
  if (!recvs.empty()) throw GpuError("ncclGroupEnd", "fake: a recv has no matching send");
}

void RecordingDeviceApi::all_reduce(const void* send, void* recv, size_t count, NcclType type,
                                    NcclOp op, CommHandle comm, StreamHandle stream) {
  maybe_fail("all_reduce");
  record(fmt::format("all_reduce({} -> {}, {} x {}, {}, c{}, s{})", name_of_buffer(send),
                     name_of_buffer(recv), count, dtype_name(dtype_of(type)), op_name(op),
                     id_of(comm), id_of(stream)));
  const size_t bytes = count * dtype_size(dtype_of(type));
  enqueue({"all_reduce", id_of(comm), buffer_of(send, bytes), buffer_of(recv, bytes), count, type,
           op, 0});
}

void RecordingDeviceApi::all_gather(const void* send, void* recv, size_t send_count, NcclType type,
                                    CommHandle comm, StreamHandle stream) {
  maybe_fail("all_gather");
  record(fmt::format("all_gather({} -> {}, {} x {}, c{}, s{})", name_of_buffer(send),
                     name_of_buffer(recv), send_count, dtype_name(dtype_of(type)), id_of(comm),
                     id_of(stream)));
  const size_t bytes = send_count * dtype_size(dtype_of(type));
  const auto n = static_cast<size_t>(comm_of(comm).nranks);
  enqueue({"all_gather", id_of(comm), buffer_of(send, bytes), buffer_of(recv, bytes * n),
           send_count, type, NcclOp::kSum, 0});
}

void RecordingDeviceApi::reduce_scatter(const void* send, void* recv, size_t recv_count,
                                        NcclType type, NcclOp op, CommHandle comm,
                                        StreamHandle stream) {
  maybe_fail("reduce_scatter");
  record(fmt::format("reduce_scatter({} -> {}, {} x {}, {}, c{}, s{})", name_of_buffer(send),
                     name_of_buffer(recv), recv_count, dtype_name(dtype_of(type)), op_name(op),
                     id_of(comm), id_of(stream)));
  const size_t bytes = recv_count * dtype_size(dtype_of(type));
  const auto n = static_cast<size_t>(comm_of(comm).nranks);
  // The reduction reads all n chunks of the send buffer; run_ops hands it count * n elements.
  enqueue({"reduce_scatter", id_of(comm), buffer_of(send, bytes * n), buffer_of(recv, bytes),
           recv_count, type, op, 0});
  pending_.back().count = recv_count * n;
}

void RecordingDeviceApi::broadcast(const void* send, void* recv, size_t count, NcclType type,
                                   int64_t root, CommHandle comm, StreamHandle stream) {
  maybe_fail("broadcast");
  record(fmt::format("broadcast({} -> {}, {} x {}, root {}, c{}, s{})", name_of_buffer(send),
                     name_of_buffer(recv), count, dtype_name(dtype_of(type)), root, id_of(comm),
                     id_of(stream)));
  const size_t bytes = count * dtype_size(dtype_of(type));
  enqueue({"broadcast", id_of(comm), buffer_of(send, bytes), buffer_of(recv, bytes), count, type,
           NcclOp::kSum, root});
}

void RecordingDeviceApi::send(const void* data, size_t count, NcclType type, int64_t peer,
                              CommHandle comm, StreamHandle stream) {
  maybe_fail("send");
  record(fmt::format("send({}, {} x {}, peer {}, c{}, s{})", name_of_buffer(data), count,
                     dtype_name(dtype_of(type)), peer, id_of(comm), id_of(stream)));
  const size_t bytes = count * dtype_size(dtype_of(type));
  enqueue({"send", id_of(comm), buffer_of(data, bytes), nullptr, count, type, NcclOp::kSum, peer});
}

void RecordingDeviceApi::recv(void* data, size_t count, NcclType type, int64_t peer,
                              CommHandle comm, StreamHandle stream) {
  maybe_fail("recv");
  record(fmt::format("recv({}, {} x {}, peer {}, c{}, s{})", name_of_buffer(data), count,
                     dtype_name(dtype_of(type)), peer, id_of(comm), id_of(stream)));
  const size_t bytes = count * dtype_size(dtype_of(type));
  enqueue({"recv", id_of(comm), nullptr, buffer_of(data, bytes), count, type, NcclOp::kSum, peer});
}

}  // namespace meshsim::test
