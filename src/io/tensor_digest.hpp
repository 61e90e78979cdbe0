// A tensor's content as one 64-bit XXH3 digest: dtype, shape and every byte (a meta tensor by its
// dtype and shape alone). Equal tensors give equal digests; different ones collide with
// probability about 2^-64.
#pragma once

#include <cstdint>

#include "src/io/xxh3_stream.hpp"
#include "src/tensor/tensor.hpp"

namespace meshsim {

// Adds `t` to a running hash, so several tensors can make one digest.
void hash_tensor(Xxh3Stream& hash, const Tensor& t);

uint64_t tensor_digest(const Tensor& t);

}  // namespace meshsim
