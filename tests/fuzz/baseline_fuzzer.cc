// Fuzzes the `check` baseline reader; every baseline it accepts must write
// back (BaselineText) to text that reads back to the same text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ckptplan/ci/baseline.h"
#include "ckptplan/base/errors.h"

using namespace ckptplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Baseline baseline;
  try {
    baseline = ParseBaseline(text, "fuzz-baseline.json");
  } catch (const InputError&) {
    return 0;
  }
  const std::string written = BaselineText(baseline);
  if (BaselineText(ParseBaseline(written, "written.json")) != written) __builtin_trap();
  return 0;
}
