// What the range-maximum trees' tests check them against: random values and
// a plain scan.
#ifndef CKPTPLAN_TESTS_BASE_RANGE_REFERENCE_H_
#define CKPTPLAN_TESTS_BASE_RANGE_REFERENCE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include <doctest/doctest.h>

namespace ckptplan::testing {

// `n` values in [-500, 500).
inline std::vector<int64_t> RandomValues(size_t n, std::mt19937& random) {
  std::vector<int64_t> values(n);
  for (int64_t& v : values) v = static_cast<int64_t>(random() % 1000) - 500;
  return values;
}

// Max over values[lo, hi), `empty` for an empty range.
inline int64_t ScanMax(const std::vector<int64_t>& values, size_t lo, size_t hi, int64_t empty) {
  int64_t most = empty;
  for (size_t i = lo; i < hi; ++i) most = std::max(most, values[i]);
  return most;
}

// Requires trees `a` and `b` to answer every range [lo, hi) of `values` as
// a scan does; returns how many ranges that is.
template <typename A, typename B>
size_t RequireEveryRange(const std::vector<int64_t>& values, const A& a, const B& b,
                         int64_t empty) {
  const size_t n = values.size();
  size_t ranges = 0;
  for (size_t lo = 0; lo <= n; ++lo) {
    for (size_t hi = lo; hi <= n; ++hi) {
      const int64_t expected = ScanMax(values, lo, hi, empty);
      REQUIRE(a.Query(lo, hi) == expected);
      REQUIRE(b.Query(lo, hi) == expected);
      ++ranges;
    }
  }
  return ranges;
}

}  // namespace ckptplan::testing

#endif  // CKPTPLAN_TESTS_BASE_RANGE_REFERENCE_H_
