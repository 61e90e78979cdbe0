// The process-wide budget for tensor storage: every byte a materialized tensor holds is counted,
// and an allocation that would pass the limit fails with MemoryError before it is attempted, so a
// scenario asking for `full(1000000000, 1)` on every rank gets an error, not a machine out of
// memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace meshsim {

class MemoryBudget {
 public:
  // No limit until one is set (unit tests); the meshsim command sets one from --max-memory.
  static constexpr uint64_t kUnlimited = UINT64_MAX;

  static void set_limit(uint64_t bytes);
  static uint64_t limit();
  static uint64_t in_use();
  static uint64_t peak();
  static void reset_peak();

  // Counts `bytes` against the limit; throws meshsim::Error (MemoryError) naming `what`, the bytes
  // asked for, those in use and the limit when they do not fit.
  static void reserve(uint64_t bytes, std::string_view what);
  static void release(uint64_t bytes) noexcept;
};

// Bytes held against the budget for as long as this object lives (movable, not copyable).
class MemoryReservation {
 public:
  MemoryReservation() = default;
  // Throws as MemoryBudget::reserve.
  MemoryReservation(uint64_t bytes, std::string_view what) : bytes_(bytes) {
    MemoryBudget::reserve(bytes, what);
  }
  MemoryReservation(MemoryReservation&& other) noexcept : bytes_(other.bytes_) { other.bytes_ = 0; }
  MemoryReservation& operator=(MemoryReservation&& other) noexcept {
    if (this != &other) {
      MemoryBudget::release(bytes_);
      bytes_ = other.bytes_;
      other.bytes_ = 0;
    }
    return *this;
  }
  ~MemoryReservation() { MemoryBudget::release(bytes_); }

 private:
  uint64_t bytes_ = 0;
};

// Physical memory of this machine in bytes (0 when unknown).
uint64_t physical_memory_bytes();

// "16.0 GiB", "512.0 MiB", "1.5 KiB", "12 B".
std::string format_bytes(uint64_t bytes);

}  // namespace meshsim
