#include "src/tensor/tensor.hpp"

#include <cstring>

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

Tensor::Tensor(std::vector<int64_t> shape, DType dtype, Storage storage)
    : shape_(std::move(shape)), dtype_(dtype), storage_(storage), numel_(1) {
  for (int64_t s : shape_) {
    if (s < 0) throw value_error(fmt::format("tensor sizes must be non-negative, got {}", s));
    numel_ *= s;
  }
  if (storage_ == Storage::kMaterialized) {
    data_ = std::make_shared<std::vector<std::byte>>(nbytes(), std::byte{0});
  }
}

Tensor Tensor::full(std::vector<int64_t> shape, double value, DType dtype) {
  Tensor t(std::move(shape), dtype);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, value);
  return t;
}

Tensor Tensor::arange(int64_t n, DType dtype) {
  Tensor t({n}, dtype);
  for (int64_t i = 0; i < n; ++i) t.set(i, static_cast<double>(i));
  return t;
}

std::vector<int64_t> Tensor::strides() const {
  std::vector<int64_t> out(shape_.size());
  int64_t s = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    out[i] = s;
    s *= shape_[i];
  }
  return out;
}

std::span<const std::byte> Tensor::bytes() const {
  if (is_meta()) throw runtime_error("a meta tensor has no data");
  return *data_;
}

std::span<std::byte> Tensor::mutable_bytes() {
  if (is_meta()) throw runtime_error("a meta tensor has no data");
  detach();
  return *data_;
}

void Tensor::detach() {
  if (data_ && data_.use_count() > 1) data_ = std::make_shared<std::vector<std::byte>>(*data_);
}

void Tensor::check_index(int64_t index) const {
  if (is_meta()) throw runtime_error("a meta tensor has no data");
  if (index < 0 || index >= numel_) {
    throw Error(
        PyErrorType::kIndexError,
        fmt::format("index {} is out of bounds for a tensor of {} elements", index, numel_));
  }
}

namespace {
template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
}  // namespace

double Tensor::get(int64_t index) const {
  check_index(index);
  const std::byte* p = data_->data() + static_cast<size_t>(index) * dtype_size(dtype_);
  switch (dtype_) {
    case DType::kFloat32:
      return load<float>(p);
    case DType::kFloat64:
      return load<double>(p);
    case DType::kFloat16:
      return half_bits_to_float(load<uint16_t>(p));
    case DType::kBFloat16:
      return bfloat16_bits_to_float(load<uint16_t>(p));
    case DType::kInt64:
      return static_cast<double>(load<int64_t>(p));
    case DType::kInt32:
      return load<int32_t>(p);
    case DType::kUInt8:
      return load<uint8_t>(p);
    case DType::kBool:
      return load<uint8_t>(p) != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

void Tensor::set(int64_t index, double value) {
  check_index(index);
  detach();
  std::byte* p = data_->data() + static_cast<size_t>(index) * dtype_size(dtype_);
  switch (dtype_) {
    case DType::kFloat32:
      store(p, static_cast<float>(value));
      break;
    case DType::kFloat64:
      store(p, value);
      break;
    case DType::kFloat16:
      store(p, float_to_half_bits(static_cast<float>(value)));
      break;
    case DType::kBFloat16:
      store(p, float_to_bfloat16_bits(static_cast<float>(value)));
      break;
    case DType::kInt64:
      store(p, static_cast<int64_t>(value));
      break;
    case DType::kInt32:
      store(p, static_cast<int32_t>(value));
      break;
    case DType::kUInt8:
      store(p, static_cast<uint8_t>(static_cast<int64_t>(value)));
      break;
    case DType::kBool:
      store(p, static_cast<uint8_t>(value != 0.0));
      break;
  }
}

bool Tensor::same_as(const Tensor& other) const {
  return dtype_ == other.dtype_ && shape_ == other.shape_ && storage_ == other.storage_ &&
         (data_ == other.data_ || (data_ && other.data_ && *data_ == *other.data_));
}

std::string Tensor::describe() const {
  return fmt::format("{}[{}]{}", dtype_name(dtype_), fmt::join(shape_, ", "),
                     is_meta() ? " (meta)" : "");
}

}  // namespace meshsim
