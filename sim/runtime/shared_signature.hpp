// One signature held by many flight-recorder records: the members of a meeting, and the meetings
// after it on the same channel that repeat it, share one copy instead of each record holding 240
// bytes of its own (records are written on every call, so their size is the collective path's
// memory traffic). The count is not atomic: a world and its reports live on one thread.
#pragma once

#include <cstdint>
#include <utility>

#include "src/comm/collective.hpp"

namespace meshsim::sim {

class SharedSignature {
 public:
  SharedSignature() = default;
  explicit SharedSignature(const Signature& signature) : block_(new Block{signature, 1}) {}
  SharedSignature(const SharedSignature& other) : block_(other.block_) {
    if (block_ != nullptr) ++block_->holders;
  }
  SharedSignature(SharedSignature&& other) noexcept
      : block_(std::exchange(other.block_, nullptr)) {}
  SharedSignature& operator=(SharedSignature other) noexcept {
    std::swap(block_, other.block_);
    return *this;
  }
  ~SharedSignature() {
    if (block_ != nullptr && --block_->holders == 0) delete block_;
  }

  explicit operator bool() const { return block_ != nullptr; }
  // Only on a non-empty one.
  const Signature& operator*() const { return block_->signature; }
  const Signature* operator->() const { return &block_->signature; }

 private:
  struct Block {
    Signature signature;
    uint64_t holders;
  };
  Block* block_ = nullptr;
};

}  // namespace meshsim::sim
