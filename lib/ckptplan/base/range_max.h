// Maximum over ranges of a fixed array of int64_t: a bottom-up segment tree,
// built in O(n), queried in O(log n). The values are its own, written after
// Reset, or another's array read in place (BuildOver), which saves a copy
// where the values already lie in one (a simulation's totals or node peaks).
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
    int64_t* const own = tree_.data() + size_;
    values_ = own;
    return own;
  }
  void Finish() {
    // Nodes over two values, the one over an inner node and a value (odd
    // sizes), then the inner ones: the first loop reads no branch.
    size_t i = size_;
    for (; i-- > 1 && 2 * i >= size_;) {
      tree_[i] = std::max(values_[2 * i - size_], values_[2 * i + 1 - size_]);
    }
    for (++i; i-- > 1;) tree_[i] = std::max(At(2 * i), At(2 * i + 1));
  }
  /// Builds over `values[0, size)` where they lie: they must outlive the
  /// queries and not change before the next build.
  void BuildOver(const int64_t* values, size_t size) {
    size_ = size;
    tree_.resize(size_);
    values_ = values;
    Finish();
  }
  size_t size() const { return size_; }
  /// The values built on, [0, size()).
  const int64_t* values() const { return values_; }
  /// Max over [lo, hi); kEmpty when the range is empty.
  int64_t Query(size_t lo, size_t hi) const {
    int64_t best = kEmpty;
    for (lo += size_, hi += size_; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) best = std::max(best, At(lo++));
      if (hi & 1) best = std::max(best, At(--hi));
    }
    return best;
  }

 private:
  // Tree position i: an inner node below size_, else value i - size_.
  int64_t At(size_t i) const { return i < size_ ? tree_[i] : values_[i - size_]; }

  size_t size_ = 0;
  std::vector<int64_t> tree_;  // inner nodes [1, size_), then own values when not built over
  const int64_t* values_ = nullptr;
};

}  // namespace ckptplan

#endif  // CKPTPLAN_RANGE_MAX_H_
