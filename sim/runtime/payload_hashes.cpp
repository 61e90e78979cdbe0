#include "sim/runtime/payload_hashes.hpp"

#include <algorithm>
#include <exception>
#include <tuple>

#include <fmt/format.h>

#include "sim/runtime/fiber_stack.hpp"
#include "src/io/tensor_digest.hpp"

namespace meshsim::sim {

namespace {

// What one member received is hashed: tensors by dtype, shape and bytes, objects by their bytes.
void add_object(Xxh3Stream& hash, const std::string& object) {
  const uint64_t size = object.size();
  hash.add(&size, sizeof size);
  hash.add(object.data(), object.size());
}

}  // namespace

void PayloadHashingExecutor::execute(Meeting& m) {
  std::exception_ptr failure;
  try {
    inner_.execute(m);
  } catch (...) {
    forget_unwound_frames();
    failure = std::current_exception();
  }
  for (size_t i = 0; i < m.size(); ++i) {
    const Signature& sig = m.signature_of(i);
    std::string outcome;
    if (failure || m.errors.count(i) != 0) {
      outcome = "failed";
    } else {
      const Exchange& e = m.exchanges[i];
      Xxh3Stream hash;
      // A send's result is nothing; an in-place collective's output is its input. A result
      // shared by every member reaches each output as the member leaves.
      if (e.output != nullptr && sig.op != CollectiveOp::kSend)
        hash_tensor(hash, m.shared_output ? *m.shared_output : *e.output);
      if (e.outputs != nullptr) {
        for (const Tensor& t : *e.outputs) hash_tensor(hash, t);
      }
      if (e.objects_out != nullptr) {
        for (const std::string& o : *e.objects_out) add_object(hash, o);
      }
      outcome = fmt::format("{:016x}", hash.digest());
    }
    entries_.push_back({m.group_id, m.seq, (*m.members)[i],
                        fmt::format("group {} seq {} rank {} {} {}", m.group, m.seq,
                                    (*m.members)[i], sig.describe(), outcome)});
  }
  if (failure) std::rethrow_exception(failure);
}

std::vector<std::string> PayloadHashingExecutor::lines() const {
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries_) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    // Two directions of one pair share a group and sequence numbers: the text tells them apart.
    return std::tie(a->group_id, a->seq, a->rank, a->text) <
           std::tie(b->group_id, b->seq, b->rank, b->text);
  });
  std::vector<std::string> out;
  for (const Entry* e : sorted) out.push_back(e->text);
  return out;
}

}  // namespace meshsim::sim
