#include "ckptplan/base/range_max.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "base/range_reference.h"

namespace ckptplan {
namespace {

// Every range of every size up to 70 (odd and even sizes, powers of two and
// the sizes either side), its own values and values read in place, against
// a scan.
TEST_CASE("RangeMax answers every range, over its own values and values in place") {
  std::mt19937 random(7);
  size_t ranges = 0;
  for (size_t n = 0; n <= 70; ++n) {
    const std::vector<int64_t> values = testing::RandomValues(n, random);
    RangeMax own, in_place;
    own.Build(values);
    in_place.BuildOver(values.data(), n);
    CHECK(own.size() == n);
    CHECK(in_place.values() == values.data());
    ranges += testing::RequireEveryRange(values, own, in_place, RangeMax::kEmpty);
  }
  CHECK(ranges == 62196);  // sum over n = 0..70 of (n + 1)(n + 2) / 2
}

TEST_CASE("RangeMax rebuilt in place after its values change, and after a Reset") {
  std::vector<int64_t> values = {3, 9, 4};
  RangeMax range;
  range.BuildOver(values.data(), values.size());
  CHECK(range.Query(0, 3) == 9);
  values[1] = -1;  // changed: a rebuild reads them again
  range.BuildOver(values.data(), values.size());
  CHECK(range.Query(0, 3) == 4);
  CHECK(range.Query(1, 2) == -1);
  int64_t* own = range.Reset(2);  // back to values of its own
  own[0] = 5;
  own[1] = 6;
  range.Finish();
  CHECK(range.Query(0, 2) == 6);
  CHECK(range.Query(0, 1) == 5);
  CHECK(range.values() == own);
}

}  // namespace
}  // namespace ckptplan
