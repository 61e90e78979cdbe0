#include "src/tensor/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/error.hpp"
#include "src/tensor/memory_budget.hpp"

namespace meshsim {

Tensor::Buffer::Buffer(size_t size) : size_(size) {
  MemoryBudget::reserve(size, "a tensor");
  if (size <= kInline) return;
  try {
    heap_ = std::make_unique<std::byte[]>(size);  // value-initialised: zeros
  } catch (...) {
    MemoryBudget::release(size);
    throw;
  }
}

Tensor::Buffer::Buffer(const Buffer& other) : size_(other.size_) {
  MemoryBudget::reserve(size_, "a copy of a tensor");
  if (size_ > kInline) {
    try {
      heap_ = std::make_unique_for_overwrite<std::byte[]>(size_);
    } catch (...) {
      MemoryBudget::release(size_);
      throw;
    }
  }
  if (size_ > 0) std::memcpy(bytes().data(), other.bytes().data(), size_);
}

Tensor::Buffer::~Buffer() {
  MemoryBudget::release(size_);
}

int64_t Tensor::byte_size(std::span<const int64_t> shape, DType dtype) {
  if (shape.size() > kMaxDims) {
    throw value_error(
        fmt::format("meshsim handles tensors of at most {} dims (the limit of "
                    "PyTorch's CUDA kernels), got {}",
                    kMaxDims, shape.size()));
  }
  for (int64_t s : shape) {
    if (s < 0) throw value_error(fmt::format("tensor sizes must be non-negative, got {}", s));
  }
  // PyTorch refuses shapes whose byte size does not fit in int64, meta tensors included.
  const std::optional<int64_t> numel = checked_product(shape);
  const std::optional<int64_t> bytes =
      numel ? checked_mul(*numel, static_cast<int64_t>(dtype_size(dtype))) : std::nullopt;
  if (!bytes) {
    throw runtime_error(
        fmt::format("Storage size calculation overflowed with sizes=[{}]", fmt::join(shape, ", ")));
  }
  return *bytes;
}

Tensor::Tensor(std::vector<int64_t> shape, DType dtype, Storage storage)
    : shape_(std::move(shape)), dtype_(dtype), storage_(storage), numel_(0) {
  const int64_t bytes = byte_size(shape_, dtype_);
  numel_ = *checked_product(shape_);
  if (storage_ == Storage::kMaterialized)
    data_ = std::make_shared<Buffer>(static_cast<size_t>(bytes));
}

namespace {

// torch.full's check: the value must be representable in the dtype (floats: within its range).
bool representable(int64_t value, DType dtype) {
  switch (dtype) {
    case DType::kInt32:
      return value >= INT32_MIN && value <= INT32_MAX;
    case DType::kUInt8:
      return value >= 0 && value <= UINT8_MAX;
    case DType::kFloat16:
      return value >= -65504 && value <= 65504;
    default:
      return true;
  }
}

}  // namespace

Tensor Tensor::full(std::vector<int64_t> shape, int64_t value, DType dtype) {
  if (!representable(value, dtype)) {
    throw runtime_error(
        fmt::format("value cannot be converted to type {} without overflow", c_type_name(dtype)));
  }
  Tensor t(std::move(shape), dtype);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_int(i, value);
  return t;
}

Tensor Tensor::arange(int64_t n, DType dtype) {
  Tensor t({n}, dtype);
  for (int64_t i = 0; i < n; ++i) t.set_int(i, i);
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
  return data_->bytes();
}

std::span<std::byte> Tensor::mutable_bytes() {
  if (is_meta()) throw runtime_error("a meta tensor has no data");
  detach();
  return data_->bytes();
}

void Tensor::detach() {
  if (data_ && data_.use_count() > 1) data_ = std::make_shared<Buffer>(*data_);
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
  const std::byte* p = data_->bytes().data() + static_cast<size_t>(index) * dtype_size(dtype_);
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
  if (!is_floating(dtype_) && dtype_ != DType::kBool) {
    // Converting a double outside the integer range is undefined in C++; refuse it instead.
    const bool fits =
        std::isfinite(value) && value >= -9223372036854775808.0 && value < 9223372036854775808.0;
    if (!fits || !representable(static_cast<int64_t>(value), dtype_)) {
      throw overflow_error(fmt::format("value {} cannot be converted to type {} without overflow",
                                       value, c_type_name(dtype_)));
    }
    return set_int(index, static_cast<int64_t>(value));
  }
  detach();
  std::byte* p = data_->bytes().data() + static_cast<size_t>(index) * dtype_size(dtype_);
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
    default:
      store(p, static_cast<uint8_t>(value != 0.0));
      break;
  }
}

int64_t Tensor::get_int(int64_t index) const {
  check_index(index);
  const std::byte* p = data_->bytes().data() + static_cast<size_t>(index) * dtype_size(dtype_);
  switch (dtype_) {
    case DType::kInt64:
      return load<int64_t>(p);
    case DType::kInt32:
      return load<int32_t>(p);
    case DType::kUInt8:
    case DType::kBool:
      return load<uint8_t>(p);
    default: {
      const double v = get(index);
      if (!std::isfinite(v) || v < -9223372036854775808.0 || v >= 9223372036854775808.0) {
        throw overflow_error(fmt::format("value {} does not fit in int64", v));
      }
      return static_cast<int64_t>(v);
    }
  }
}

void Tensor::set_int(int64_t index, int64_t value) {
  check_index(index);
  if (is_floating(dtype_)) return set(index, static_cast<double>(value));
  detach();
  std::byte* p = data_->bytes().data() + static_cast<size_t>(index) * dtype_size(dtype_);
  switch (dtype_) {
    case DType::kInt64:
      store(p, value);
      break;
    case DType::kInt32:
      store(p, static_cast<int32_t>(static_cast<uint32_t>(value)));  // wraps, never UB
      break;
    case DType::kUInt8:
      store(p, static_cast<uint8_t>(value));
      break;
    default:
      store(p, static_cast<uint8_t>(value != 0));
      break;
  }
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  const std::optional<int64_t> n = checked_product(shape);
  if (!n || *n != numel_) {
    throw runtime_error(fmt::format("shape '[{}]' is invalid for input of size {}",
                                    fmt::join(shape, ", "), numel_));
  }
  Tensor out = *this;
  out.shape_ = std::move(shape);
  return out;
}

bool Tensor::adopt_values(const Tensor& source) {
  if (dtype_ != source.dtype_ || numel_ != source.numel_) return false;
  storage_ = source.storage_;
  data_ = source.data_;
  return true;
}

bool Tensor::same_as(const Tensor& other) const {
  return dtype_ == other.dtype_ && shape_ == other.shape_ && storage_ == other.storage_ &&
         (data_ == other.data_ ||
          (data_ && other.data_ && std::ranges::equal(data_->bytes(), other.data_->bytes())));
}

std::string Tensor::describe() const {
  return fmt::format("{}[{}]{}", dtype_name(dtype_), fmt::join(shape_, ", "),
                     is_meta() ? " (meta)" : "");
}

}  // namespace meshsim
