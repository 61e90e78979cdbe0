#include "sim/runtime/payload_hashes.hpp"

#include <algorithm>
#include <exception>
#include <tuple>

#include <fmt/format.h>
#include <xxhash.h>

#include "sim/runtime/fiber_stack.hpp"

namespace meshsim::sim {

namespace {

// Hashes what one member received: tensors by dtype, shape and bytes, objects by their bytes.
class MemberHash {
 public:
  MemberHash() : state_(XXH3_createState()) { XXH3_64bits_reset(state_); }
  ~MemberHash() { XXH3_freeState(state_); }
  MemberHash(const MemberHash&) = delete;
  MemberHash& operator=(const MemberHash&) = delete;

  void add(const Tensor& t) {
    const auto dtype = static_cast<int64_t>(t.dtype());
    add_bytes(&dtype, sizeof dtype);
    const auto ndim = static_cast<int64_t>(t.shape().size());
    add_bytes(&ndim, sizeof ndim);
    add_bytes(t.shape().data(), t.shape().size() * sizeof(int64_t));
    if (!t.is_meta()) add_bytes(t.bytes().data(), t.nbytes());
  }
  void add(const std::string& object) {
    const uint64_t size = object.size();
    add_bytes(&size, sizeof size);
    add_bytes(object.data(), object.size());
  }
  uint64_t digest() const { return XXH3_64bits_digest(state_); }

 private:
  void add_bytes(const void* data, size_t size) { XXH3_64bits_update(state_, data, size); }
  XXH3_state_t* state_;
};

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
      MemberHash hash;
      // A send's result is nothing; an in-place collective's output is its input.
      if (e.output != nullptr && sig.op != CollectiveOp::kSend) hash.add(*e.output);
      if (e.outputs != nullptr) {
        for (const Tensor& t : *e.outputs) hash.add(t);
      }
      if (e.objects_out != nullptr) {
        for (const std::string& o : *e.objects_out) hash.add(o);
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
