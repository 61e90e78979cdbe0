// The scheduler's queue of ready fibers: a ring buffer that grows but never gives memory back, so
// a world in its steady state schedules without allocating (a std::deque allocates and frees a
// block every few dozen pushes as it slides).
#pragma once

#include <cstddef>
#include <vector>

namespace meshsim::sim {

template <typename T>
class ReadyQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  void push_back(T value) {
    if (size_ == slots_.size()) grow();
    slots_[(head_ + size_) & (slots_.size() - 1)] = value;
    ++size_;
  }

  // Removes and returns the `index`-th entry (0 = the oldest), keeping the others in order.
  T take(size_t index) {
    const size_t mask = slots_.size() - 1;
    const T out = slots_[(head_ + index) & mask];
    if (index < size_ / 2) {
      for (size_t i = index; i > 0; --i)
        slots_[(head_ + i) & mask] = slots_[(head_ + i - 1) & mask];
      head_ = (head_ + 1) & mask;
    } else {
      for (size_t i = index; i + 1 < size_; ++i)
        slots_[(head_ + i) & mask] = slots_[(head_ + i + 1) & mask];
    }
    --size_;
    return out;
  }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 64 : 2 * slots_.size());
    for (size_t i = 0; i < size_; ++i) bigger[i] = slots_[(head_ + i) & (slots_.size() - 1)];
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;  // a power of two in size
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace meshsim::sim
