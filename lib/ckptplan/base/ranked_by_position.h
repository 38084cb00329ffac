// A set of items [0, n), each at a position in [0, positions), ranked by a
// strict total order the caller gives (`Before(a, b)`: item a comes first).
// Lists the items at positions from a given one on, best first, without
// taking them out: O(log positions) an item listed, plus the items that share
// a position with it. Insert and Erase cost O(log positions) plus the items at
// the position.
//
// A segment tree over positions holds, per node, the best item at its
// positions; the listing is a best-first walk of the tree: a heap of the
// nodes and items not yet expanded or listed, each ranked by its best item
// (a node's is no worse than any below it, so an item that comes out on top
// beats everything left).
//
// An item's rank is read through Before, so change what Before reads for an
// item only while the item is out of the set (Erase, then Insert).
#ifndef CKPTPLAN_RANKED_BY_POSITION_H_
#define CKPTPLAN_RANKED_BY_POSITION_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ckptplan {

template <typename Before>
class RankedByPosition {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  explicit RankedByPosition(Before before = Before()) : before_(before) {}

  /// Empties the set, for items [0, items) at positions [0, positions).
  void Reset(size_t positions, size_t items) {
    leaves_ = 1;
    while (leaves_ < positions) leaves_ *= 2;
    best_.assign(2 * leaves_, kNone);
    head_.assign(leaves_, kNone);
    next_.assign(items, kNone);
    prev_.assign(items, kNone);
    position_.assign(items, kNone);
    listing_.clear();
  }

  bool Contains(uint32_t item) const { return position_[item] != kNone; }
  uint32_t PositionOf(uint32_t item) const { return position_[item]; }

  /// Puts `item` (not in the set) at `position`.
  void Insert(uint32_t item, uint32_t position) {
    position_[item] = position;
    prev_[item] = kNone;
    next_[item] = head_[position];
    if (head_[position] != kNone) prev_[head_[position]] = item;
    head_[position] = item;
    for (size_t node = leaves_ + position; node >= 1; node /= 2) {
      if (best_[node] != kNone && !before_(item, best_[node])) break;
      best_[node] = item;
    }
  }

  /// Takes `item` out of the set, if it is in it. Its rank is not read.
  void Erase(uint32_t item) {
    const uint32_t position = position_[item];
    if (position == kNone) return;
    position_[item] = kNone;
    if (prev_[item] != kNone) {
      next_[prev_[item]] = next_[item];
    } else {
      head_[position] = next_[item];
    }
    if (next_[item] != kNone) prev_[next_[item]] = prev_[item];
    size_t node = leaves_ + position;
    if (best_[node] != item) return;  // a node above holds it only if its leaf does
    uint32_t best = kNone;
    for (uint32_t other = head_[position]; other != kNone; other = next_[other]) {
      if (best == kNone || before_(other, best)) best = other;
    }
    best_[node] = best;
    for (node /= 2; node >= 1; node /= 2) {
      if (best_[node] != item) break;  // the rest of the way up did not hold it
      best_[node] = Better(best_[2 * node], best_[2 * node + 1]);
    }
  }

  /// Starts listing the items at positions [from, positions), best first;
  /// the set must not change until the listing ends (Next gives kNone) or
  /// another starts.
  void Begin(size_t from) {
    listing_.clear();
    if (from >= leaves_) return;
    size_t lo = from + leaves_, hi = 2 * leaves_;
    for (; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) PushNode(lo++);
      if (hi & 1) PushNode(--hi);
    }
  }

  /// The next item of the listing without taking it; kNone when done.
  uint32_t Peek() {
    while (!listing_.empty() && listing_.front().node != kItem) {
      std::pop_heap(listing_.begin(), listing_.end(), After{this});
      const uint32_t node = listing_.back().node;
      listing_.pop_back();
      if (node >= leaves_) {
        for (uint32_t item = head_[node - leaves_]; item != kNone; item = next_[item]) {
          listing_.push_back({item, kItem});
          std::push_heap(listing_.begin(), listing_.end(), After{this});
        }
      } else {
        PushNode(2 * node);
        PushNode(2 * node + 1);
      }
    }
    return listing_.empty() ? kNone : listing_.front().rank;
  }

  /// The next item of the listing, taken; kNone when done.
  uint32_t Next() {
    const uint32_t item = Peek();
    if (item != kNone) {
      std::pop_heap(listing_.begin(), listing_.end(), After{this});
      listing_.pop_back();
    }
    return item;
  }

 private:
  static constexpr uint32_t kItem = UINT32_MAX;
  // A node of the tree not yet expanded, or an item (node == kItem), ranked
  // by `rank`: the node's best item, or the item.
  struct Entry {
    uint32_t rank;
    uint32_t node;
  };
  struct After {
    const RankedByPosition* set;
    bool operator()(const Entry& a, const Entry& b) const { return set->before_(b.rank, a.rank); }
  };

  uint32_t Better(uint32_t a, uint32_t b) const {
    if (a == kNone) return b;
    if (b == kNone) return a;
    return before_(b, a) ? b : a;
  }
  void PushNode(size_t node) {
    if (best_[node] == kNone) return;
    listing_.push_back({best_[node], static_cast<uint32_t>(node)});
    std::push_heap(listing_.begin(), listing_.end(), After{this});
  }

  Before before_;
  size_t leaves_ = 1;
  std::vector<uint32_t> best_;      // per node: its best item, or kNone
  std::vector<uint32_t> head_;      // per position: an item there, or kNone
  std::vector<uint32_t> next_, prev_;  // per item: the others at its position
  std::vector<uint32_t> position_;  // per item: kNone when out of the set
  std::vector<Entry> listing_;      // a heap, best first (After)
};

}  // namespace ckptplan

#endif  // CKPTPLAN_RANKED_BY_POSITION_H_
