#include "src/io/chunk_lookup.hpp"

#include <algorithm>
#include <climits>
#include <numeric>

namespace meshsim {

std::pair<int64_t, int64_t> index_bounds(const IndexRuns& indices) {
  if (indices.empty()) return {0, 0};
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const IndexRuns::Run& r : indices.runs()) {
    lo = std::min(lo, r.start);
    hi = std::max(hi, r.stop);
  }
  return {lo, hi};
}

ChunkLookup::ChunkLookup(const std::vector<const std::vector<IndexRuns>*>& chunks) {
  boxes_.reserve(chunks.size());
  for (const std::vector<IndexRuns>* chunk : chunks) {
    Box box;
    for (const IndexRuns& d : *chunk) box.push_back(index_bounds(d));
    boxes_.push_back(std::move(box));
  }
  const size_t ndim = boxes_.empty() ? 0 : boxes_.front().size();
  for (const Box& box : boxes_) {
    if (box.size() != ndim) return;
  }
  size_t most = 0;
  for (size_t d = 0; d < ndim; ++d) {
    std::vector<int64_t> starts;
    for (const Box& box : boxes_) starts.push_back(box[d].first);
    std::sort(starts.begin(), starts.end());
    const size_t distinct =
        static_cast<size_t>(std::unique(starts.begin(), starts.end()) - starts.begin());
    if (!dim_ || distinct > most) {
      dim_ = d;
      most = distinct;
    }
  }
  if (!dim_) return;
  by_start_.resize(boxes_.size());
  std::iota(by_start_.begin(), by_start_.end(), size_t{0});
  std::stable_sort(by_start_.begin(), by_start_.end(), [&](size_t a, size_t b) {
    return boxes_[a][*dim_].first < boxes_[b][*dim_].first;
  });
  int64_t end = INT64_MIN;
  for (size_t c : by_start_) {
    end = std::max(end, boxes_[c][*dim_].second);
    max_end_.push_back(end);
  }
}

std::vector<size_t> ChunkLookup::candidates(const std::vector<IndexRuns>& shard) const {
  Box want;
  for (const IndexRuns& d : shard) want.push_back(index_bounds(d));
  std::vector<size_t> out;
  const auto meets = [&](size_t c) {
    if (boxes_[c].size() != want.size()) return true;  // the caller's checks refuse it
    for (size_t d = 0; d < want.size(); ++d) {
      if (boxes_[c][d].first >= want[d].second || boxes_[c][d].second <= want[d].first)
        return false;
    }
    return true;
  };
  if (!dim_ || *dim_ >= want.size()) {
    for (size_t c = 0; c < boxes_.size(); ++c) {
      if (meets(c)) out.push_back(c);
    }
    return out;
  }
  // Chunks starting before the shard's end in dim_, walked back until none of the earlier ones
  // reaches the shard's start.
  const size_t d = *dim_;
  const auto upper = std::lower_bound(by_start_.begin(), by_start_.end(), want[d].second,
                                      [&](size_t c, int64_t v) { return boxes_[c][d].first < v; });
  for (size_t at = static_cast<size_t>(upper - by_start_.begin()); at-- > 0;) {
    if (max_end_[at] <= want[d].first) break;
    if (meets(by_start_[at])) out.push_back(by_start_[at]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace meshsim
