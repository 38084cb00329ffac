#include "ckptplan/base/range_add_max.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "base/range_reference.h"

namespace ckptplan {
namespace {

// Every range of sizes up to 40 (powers of two and the sizes either side),
// after random range adds and point writes, against a plain array.
TEST_CASE("RangeAddMax answers every range after range adds and writes") {
  std::mt19937 random(11);
  size_t checked = 0, searched = 0;
  for (size_t n = 0; n <= 40; ++n) {
    std::vector<int64_t> values = testing::RandomValues(n, random);
    RangeAddMax tree;
    tree.Build(values.data(), n);
    CHECK(tree.size() == n);
    for (int round = 0; round < 12; ++round) {
      for (size_t lo = 0; lo <= n; ++lo) {
        for (size_t hi = lo; hi <= n; ++hi) {
          REQUIRE(tree.Query(lo, hi) == testing::ScanMax(values, lo, hi, RangeAddMax::kEmpty));
          ++checked;
        }
        // The ends, each by its own descent.
        REQUIRE(tree.PrefixMax(lo) == testing::ScanMax(values, 0, lo, RangeAddMax::kEmpty));
        REQUIRE(tree.SuffixMax(lo) == testing::ScanMax(values, lo, n, RangeAddMax::kEmpty));
        ++checked;
      }
      for (size_t i = 0; i < n; ++i) REQUIRE(tree.Get(i) == values[i]);
      // The first and last positions at or above some thresholds: each
      // value, one above the max, and the minimum possible.
      std::vector<int64_t> thresholds = values;
      thresholds.push_back(n == 0 ? 0 : *std::max_element(values.begin(), values.end()) + 1);
      thresholds.push_back(RangeAddMax::kEmpty + 1);
      for (const int64_t x : thresholds) {
        size_t first = n, last = n;
        for (size_t i = 0; i < n; ++i) {
          if (values[i] >= x) {
            if (first == n) first = i;
            last = i;
          }
        }
        REQUIRE(tree.FirstAtLeast(x) == first);
        REQUIRE(tree.LastAtLeast(x) == last);
        ++searched;
      }
      if (n == 0) break;
      // A few adds over random ranges (some empty), then a write.
      for (int k = 0; k < 3; ++k) {
        const size_t lo = random() % (n + 1), hi = lo + random() % (n + 1 - lo);
        const int64_t bytes = static_cast<int64_t>(random() % 2001) - 1000;
        tree.Add(lo, hi, bytes);
        for (size_t i = lo; i < hi; ++i) values[i] += bytes;
      }
      const size_t i = random() % n;
      values[i] = static_cast<int64_t>(random() % 5000) - 2500;
      tree.Set(i, values[i]);
    }
  }
  // sum over n = 1..40 of 12 (n + 1)(n + 2) / 2 ranges and 12 (n + 1) ends,
  // plus 1 + 1 for n = 0: 148,081 + 12 (820 + 40) + 1
  CHECK(checked == 158402);
  // sum over n = 1..40 of 12 (n + 2), plus 2 for n = 0: 12 (820 + 80) + 2
  CHECK(searched == 10802);
}

// Batches of adds and writes applied with AddLater / SetLater and one
// RebuildDirty answer every range as the same ones applied one by one (and
// as a plain array), sizes up to 40, overlapping ranges and repeated writes
// included.
TEST_CASE("RangeAddMax: adds and writes rebuilt once equal them one by one") {
  std::mt19937 random(23);
  size_t checked = 0;
  for (size_t n = 1; n <= 40; ++n) {
    std::vector<int64_t> values = testing::RandomValues(n, random);
    RangeAddMax one_by_one, batched;
    one_by_one.Build(values.data(), n);
    batched.Build(values.data(), n);
    for (int round = 0; round < 8; ++round) {
      const int adds = static_cast<int>(random() % 6), writes = static_cast<int>(random() % 6);
      for (int k = 0; k < adds; ++k) {
        const size_t lo = random() % (n + 1), hi = lo + random() % (n + 1 - lo);
        const int64_t bytes = static_cast<int64_t>(random() % 2001) - 1000;
        one_by_one.Add(lo, hi, bytes);
        batched.AddLater(lo, hi, bytes);
        for (size_t i = lo; i < hi; ++i) values[i] += bytes;
      }
      for (int k = 0; k < writes; ++k) {
        const size_t i = random() % n;
        values[i] = static_cast<int64_t>(random() % 5000) - 2500;
        one_by_one.Set(i, values[i]);
        batched.SetLater(i, values[i]);
      }
      batched.RebuildDirty();
      checked += testing::RequireEveryRange(values, batched, one_by_one, RangeAddMax::kEmpty);
      for (size_t i = 0; i < n; ++i) REQUIRE(batched.Get(i) == values[i]);
    }
  }
  // sum over n = 1..40 of 8 (n + 1)(n + 2) / 2 ranges:
  // 8 (41 x 42 x 43 / 6 - 1) = 8 x 12,340
  CHECK(checked == 98720);
}

TEST_CASE("RangeAddMax: an add over everything moves the max, a write under adds holds") {
  const std::vector<int64_t> values = {3, 9, 4, -2, 7};
  RangeAddMax tree;
  tree.Build(values.data(), values.size());
  CHECK(tree.Query(0, 5) == 9);
  tree.Add(0, 5, 10);   // 13 19 14 8 17
  tree.Add(3, 5, 20);   // 13 19 14 28 37
  CHECK(tree.Query(0, 5) == 37);
  CHECK(tree.Query(0, 3) == 19);
  CHECK(tree.PrefixMax(3) == 19);
  CHECK(tree.SuffixMax(2) == 37);
  tree.Set(4, 0);       // 13 19 14 28 0
  CHECK(tree.Query(0, 5) == 28);
  CHECK(tree.SuffixMax(4) == 0);
  CHECK(tree.PrefixMax(5) == 28);
  CHECK(tree.SuffixMax(5) == RangeAddMax::kEmpty);
  CHECK(tree.FirstAtLeast(14) == 1);  // 19 is the first at 14 or more
  CHECK(tree.LastAtLeast(14) == 3);   // 28
  CHECK(tree.FirstAtLeast(29) == 5);  // none: size()
  CHECK(tree.Get(4) == 0);
  tree.Add(4, 5, 5);    // 13 19 14 28 5
  CHECK(tree.Get(4) == 5);
  CHECK(tree.Query(4, 5) == 5);
  CHECK(tree.Query(2, 2) == RangeAddMax::kEmpty);
}

}  // namespace
}  // namespace ckptplan
