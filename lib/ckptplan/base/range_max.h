// Maximum over ranges of a fixed array of int64_t: a bottom-up segment tree,
// built in O(n), queried in O(log n).
#ifndef CKPTPLAN_RANGE_MAX_H_
#define CKPTPLAN_RANGE_MAX_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace ckptplan {

class RangeMax {
 public:
  static constexpr int64_t kEmpty = std::numeric_limits<int64_t>::min();

  void Build(const std::vector<int64_t>& values) {
    std::copy(values.begin(), values.end(), Reset(values.size()));
    Finish();
  }
  /// Building in two parts, for callers that compute the values as they
  /// go: Reset returns where to write `size` values, Finish builds on them.
  int64_t* Reset(size_t size) {
    size_ = size;
    tree_.resize(2 * size_);
    if (size_ > 0) tree_[0] = kEmpty;
    return tree_.data() + size_;
  }
  void Finish() {
    for (size_t i = size_; i-- > 1;) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
  }
  size_t size() const { return size_; }
  /// The values built on, [0, size()).
  const int64_t* values() const { return tree_.data() + size_; }
  /// Max over [lo, hi); kEmpty when the range is empty.
  int64_t Query(size_t lo, size_t hi) const {
    int64_t best = kEmpty;
    for (lo += size_, hi += size_; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) best = std::max(best, tree_[lo++]);
      if (hi & 1) best = std::max(best, tree_[--hi]);
    }
    return best;
  }

 private:
  size_t size_ = 0;
  std::vector<int64_t> tree_;
};

}  // namespace ckptplan

#endif  // CKPTPLAN_RANGE_MAX_H_
