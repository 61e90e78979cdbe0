#include "src/dtensor/index_runs.hpp"

#include <algorithm>

namespace meshsim {

IndexRuns IndexRuns::range(int64_t n) {
  IndexRuns out;
  if (n > 0) out.append(Run{0, n});
  return out;
}

void IndexRuns::append(Run run) {
  if (run.stop <= run.start) return;
  if (!runs_.empty() && runs_.back().stop == run.start) {
    runs_.back().stop = run.stop;
    ends_.back() += run.stop - run.start;
    return;
  }
  runs_.push_back(run);
  ends_.push_back(size() + (run.stop - run.start));
}

void IndexRuns::append(const IndexRuns& other) {
  for (const Run& r : other.runs_) append(r);
}

IndexRuns IndexRuns::slice(int64_t pos, int64_t len) const {
  IndexRuns out;
  const int64_t total = size();
  if (pos < 0) pos = 0;
  if (pos >= total || len <= 0) return out;
  int64_t end = len > total - pos ? total : pos + len;
  // The first run that ends after `pos`.
  auto i = static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), pos) - ends_.begin());
  for (; i < runs_.size() && pos < end; ++i) {
    const int64_t run_begin = ends_[i] - (runs_[i].stop - runs_[i].start);  // its first position
    const int64_t from = pos - run_begin;
    const int64_t to = std::min(end, ends_[i]) - run_begin;
    out.append(Run{runs_[i].start + from, runs_[i].start + to});
    pos = run_begin + to;
  }
  return out;
}

std::vector<int64_t> IndexRuns::expand() const {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(size()));
  for (const Run& r : runs_) {
    for (int64_t i = r.start; i < r.stop; ++i) out.push_back(i);
  }
  return out;
}

std::optional<IndexRuns> IndexRuns::from_indices(const std::vector<int64_t>& indices) {
  IndexRuns out;
  for (int64_t i : indices) {
    if (i < 0 || i == INT64_MAX) return std::nullopt;  // no tensor holds such an index
    out.append(Run{i, i + 1});
  }
  return out;
}

}  // namespace meshsim
