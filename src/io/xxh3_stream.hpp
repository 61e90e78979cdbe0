// XXH3-64 over pieces fed one after another, so data held in several places is hashed without
// being joined in memory first.
#pragma once

#include <cstddef>
#include <cstdint>

#include <xxhash.h>

#include "src/error.hpp"

namespace meshsim {

class Xxh3Stream {
 public:
  Xxh3Stream() : state_(XXH3_createState()) {
    MESHSIM_ASSERT(state_ != nullptr, "xxHash could not allocate its state");
    XXH3_64bits_reset(state_);
  }
  ~Xxh3Stream() { XXH3_freeState(state_); }
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;

  void add(const void* data, size_t size) { XXH3_64bits_update(state_, data, size); }
  uint64_t digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

}  // namespace meshsim
