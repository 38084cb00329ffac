// Fuzzes the --budget / --reserve size parser and the byte formatter.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ckptplan/base/errors.h"
#include "ckptplan/base/size.h"

using namespace ckptplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  int64_t bytes = 0;
  try {
    bytes = ParseSize(text, "--budget");
  } catch (const InputError& e) {
    if (e.exit_code() != kExitUsage) __builtin_trap();
    return 0;
  }
  if (bytes < 0) __builtin_trap();
  // Plain byte counts read back exactly.
  const std::string plain = std::to_string(bytes);
  if (ParseSize(plain, "--budget") != bytes) __builtin_trap();
  if (FormatBytes(bytes).empty() || FormatBytes(-bytes).empty()) __builtin_trap();
  return 0;
}
