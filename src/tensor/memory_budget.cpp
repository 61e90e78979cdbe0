#include "src/tensor/memory_budget.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>

#include <fmt/format.h>

#include "src/error.hpp"

namespace meshsim {

namespace {

std::atomic<uint64_t> g_limit{MemoryBudget::kUnlimited};
std::atomic<uint64_t> g_in_use{0};
std::atomic<uint64_t> g_peak{0};

}  // namespace

void MemoryBudget::set_limit(uint64_t bytes) {
  g_limit = bytes;
}

uint64_t MemoryBudget::limit() {
  return g_limit;
}

uint64_t MemoryBudget::in_use() {
  return g_in_use;
}

uint64_t MemoryBudget::peak() {
  return g_peak;
}

void MemoryBudget::reset_peak() {
  g_peak = g_in_use.load();
}

void MemoryBudget::reserve(uint64_t bytes, std::string_view what) {
  const uint64_t limit = g_limit;
  uint64_t used = g_in_use.load();
  do {
    if (bytes > limit || used > limit - bytes) {
      throw memory_error(
          fmt::format("{} needs {}, but {} of the {} memory budget is in use (--max-memory)", what,
                      format_bytes(bytes), format_bytes(used), format_bytes(limit)));
    }
  } while (!g_in_use.compare_exchange_weak(used, used + bytes));
  uint64_t peak = g_peak.load();
  while (used + bytes > peak && !g_peak.compare_exchange_weak(peak, used + bytes)) {
  }
}

void MemoryBudget::release(uint64_t bytes) noexcept {
  g_in_use -= bytes;
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

std::string format_bytes(uint64_t bytes) {
  if (bytes == MemoryBudget::kUnlimited) return "unlimited";
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  for (v /= 1024; v >= 1024 && unit + 1 < std::size(kUnits); v /= 1024) ++unit;
  return fmt::format("{:.1f} {}", v, kUnits[unit]);
}

}  // namespace meshsim
