// Maximum over ranges of an array of int64_t that changes by range adds and
// point writes: a bottom-up segment tree whose inner nodes hold an add for
// their whole subtree that is never pushed down (queries add the adds above
// the nodes they read instead). Built in O(n); Add, Set, Get and Query in
// O(log n). RangeMax (range_max.h) is the static one, for values read in
// place; this one keeps its own, for values that move by a few range adds
// between queries (the incremental planner's node peaks after a drop).
#ifndef CKPTPLAN_RANGE_ADD_MAX_H_
#define CKPTPLAN_RANGE_ADD_MAX_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace ckptplan {

class RangeAddMax {
 public:
  static constexpr int64_t kEmpty = std::numeric_limits<int64_t>::min();

  /// The values [0, size): Reset returns where to write them, Finish
  /// builds on them (Build does both). Adds start at 0.
  int64_t* Reset(size_t size) {
    size_ = size;
    capacity_ = 1;
    while (capacity_ < size) capacity_ *= 2;
    // Leaves past size_ are never read by a query or an add over
    // [0, size_); they are kEmpty for the inner nodes above them.
    tree_.assign(2 * capacity_, kEmpty);
    add_.assign(capacity_ + 1, 0);
    return tree_.data() + capacity_;
  }
  void Finish() {
    for (size_t i = capacity_; i-- > 1;) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
  }
  void Build(const int64_t* values, size_t size) {
    std::copy(values, values + size, Reset(size));
    Finish();
  }
  size_t size() const { return size_; }

  /// Adds `bytes` to every value in [lo, hi).
  void Add(size_t lo, size_t hi, int64_t bytes) {
    if (lo >= hi || bytes == 0) return;
    ApplyOver(lo, hi, bytes);
    Rebuild(lo + capacity_);
    Rebuild(hi + capacity_ - 1);
  }
  /// Value `i` becomes `value`.
  void Set(size_t i, int64_t value) {
    const size_t leaf = i + capacity_;
    tree_[leaf] = value - AddsAbove(leaf);
    Rebuild(leaf);
  }
  /// Add and Set whose inner nodes are rebuilt at the next RebuildDirty,
  /// once for all (their paths to the root share nodes): the values are
  /// then those of Add and Set in the same order. Nothing may be read
  /// between them and RebuildDirty.
  void AddLater(size_t lo, size_t hi, int64_t bytes) {
    if (lo >= hi || bytes == 0) return;
    ApplyOver(lo, hi, bytes);
    dirty_.push_back(lo + capacity_);
    dirty_.push_back(hi + capacity_ - 1);
  }
  void SetLater(size_t i, int64_t value) {
    const size_t leaf = i + capacity_;
    tree_[leaf] = value - AddsAbove(leaf);  // reads adds only, which are current
    dirty_.push_back(leaf);
  }
  void RebuildDirty() {
    // Leaves, then level by level their parents, each once (in order, so
    // equal parents are neighbours).
    std::sort(dirty_.begin(), dirty_.end());
    while (!dirty_.empty() && dirty_.front() > 1) {
      size_t kept = 0;
      for (const size_t p : dirty_) {
        const size_t parent = p / 2;
        if (kept > 0 && dirty_[kept - 1] == parent) continue;
        tree_[parent] = std::max(tree_[2 * parent], tree_[2 * parent + 1]) + add_[parent];
        dirty_[kept++] = parent;
      }
      dirty_.resize(kept);
    }
    dirty_.clear();
  }
  /// Value `i`.
  int64_t Get(size_t i) const {
    const size_t leaf = i + capacity_;
    return tree_[leaf] + AddsAbove(leaf);
  }
  /// Max over [lo, hi); kEmpty when the range is empty.
  int64_t Query(size_t lo, size_t hi) const {
    if (lo >= hi) return kEmpty;
    // The nodes read are siblings of the ancestors of the positions just
    // outside the range (x on the left, y on the right), so they lie under
    // the same adds as those: summed once, then shed level by level.
    size_t l = lo + capacity_, r = hi + capacity_;
    size_t x = l - 1, y = r;
    int64_t x_adds = AddsAbove(x), y_adds = AddsAbove(y);
    int64_t best = kEmpty;
    for (; l < r; l /= 2, r /= 2) {
      if (l & 1) best = std::max(best, tree_[l++] + x_adds);
      if (r & 1) best = std::max(best, tree_[--r] + y_adds);
      x /= 2;
      y /= 2;
      x_adds -= add_[x];
      y_adds -= add_[y];
    }
    return best;
  }
  /// Max over [0, hi) and over [lo, size()), each in one descent from the
  /// root (Query walks up from both ends); kEmpty when the range is empty.
  int64_t PrefixMax(size_t hi) const {
    if (hi == 0 || size_ == 0) return kEmpty;
    return hi >= capacity_ ? tree_[1] : EndMax(hi, /*suffix=*/false);
  }
  int64_t SuffixMax(size_t lo) const {
    if (lo >= size_) return kEmpty;
    return lo == 0 ? tree_[1] : EndMax(lo, /*suffix=*/true);
  }
  /// The first and the last position whose value is at least `x` (above
  /// kEmpty, which the leaves past size() hold); size() when none is.
  size_t FirstAtLeast(int64_t x) const { return Find(x, /*last=*/false); }
  size_t LastAtLeast(int64_t x) const { return Find(x, /*last=*/true); }

 private:
  // Down from the root, into the child (left first, or right first with
  // `last`) whose subtree holds a value >= x; a node's value plus the adds
  // of its strict ancestors (`above`) is its subtree's max.
  size_t Find(int64_t x, bool last) const {
    if (size_ == 0 || tree_[1] < x) return size_;
    size_t p = 1;
    int64_t above = 0;
    while (p < capacity_) {
      above += add_[p];
      const size_t first = last ? 2 * p + 1 : 2 * p, second = last ? 2 * p : 2 * p + 1;
      p = tree_[first] + above >= x ? first : second;
    }
    return p - capacity_;
  }
  // PrefixMax (max over positions before `at`) or SuffixMax (from `at` on),
  // 0 < at < capacity_: down from the root towards `at`, each child wholly
  // on the side asked for read whole.
  int64_t EndMax(size_t at, bool suffix) const {
    // Node p covers [from, from + width), with from < at < from + width.
    size_t p = 1, from = 0, width = capacity_;
    int64_t above = 0, best = kEmpty;
    for (;;) {
      above += add_[p];
      width /= 2;
      const size_t mid = from + width;
      // The child on the side asked for, which the descent leaves whole.
      const int64_t whole = tree_[suffix ? 2 * p + 1 : 2 * p] + above;
      if (at == mid) return std::max(best, whole);
      if ((at > mid) != suffix) best = std::max(best, whole);
      if (at > mid) {
        p = 2 * p + 1;
        from = mid;
      } else {
        p = 2 * p;
      }
    }
  }
  // Adds `bytes` to the nodes that cover [lo, hi) (lo < hi), not to their
  // ancestors (rebuilt from the range's first and last leaves).
  void ApplyOver(size_t lo, size_t hi, int64_t bytes) {
    for (size_t l = lo + capacity_, r = hi + capacity_; l < r; l /= 2, r /= 2) {
      if (l & 1) Apply(l++, bytes);
      if (r & 1) Apply(--r, bytes);
    }
  }
  void Apply(size_t p, int64_t bytes) {
    tree_[p] += bytes;
    if (p < capacity_) add_[p] += bytes;
  }
  // Inner nodes above position p, from their children and their own add.
  void Rebuild(size_t p) {
    for (p /= 2; p >= 1; p /= 2) tree_[p] = std::max(tree_[2 * p], tree_[2 * p + 1]) + add_[p];
  }
  // The adds of the strict ancestors of position p (p <= 2 * capacity_: the
  // position past the last leaf, whose ancestors hold no add, included).
  int64_t AddsAbove(size_t p) const {
    int64_t sum = 0;
    for (p /= 2; p >= 1; p /= 2) sum += add_[p];
    return sum;
  }

  size_t size_ = 0, capacity_ = 1;
  // Position 1 is the root, p's children 2p and 2p + 1, leaves from
  // capacity_ on: a node's value is the max of its subtree's values less the
  // adds of its strict ancestors.
  std::vector<int64_t> tree_;
  std::vector<int64_t> add_;  // per inner node, [1, capacity_]; entry capacity_ stays 0
  std::vector<size_t> dirty_;  // positions whose ancestors RebuildDirty rebuilds
};

}  // namespace ckptplan

#endif  // CKPTPLAN_RANGE_ADD_MAX_H_
