// Fuzzes the `check --config` reader, including the sizes and tolerances in it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ckptplan/ci/check_config.h"
#include "ckptplan/base/errors.h"

using namespace ckptplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    ParseCheckConfig(text, "fuzz-check.json", "models");
  } catch (const InputError&) {
  }
  return 0;
}
