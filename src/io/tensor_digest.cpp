#include "src/io/tensor_digest.hpp"

namespace meshsim {

void hash_tensor(Xxh3Stream& hash, const Tensor& t) {
  const auto dtype = static_cast<int64_t>(t.dtype());
  hash.add(&dtype, sizeof dtype);
  const auto ndim = static_cast<int64_t>(t.shape().size());
  hash.add(&ndim, sizeof ndim);
  hash.add(t.shape().data(), t.shape().size() * sizeof(int64_t));
  if (!t.is_meta()) hash.add(t.bytes().data(), t.nbytes());
}

uint64_t tensor_digest(const Tensor& t) {
  Xxh3Stream hash;
  hash_tensor(hash, t);
  return hash.digest();
}

}  // namespace meshsim
