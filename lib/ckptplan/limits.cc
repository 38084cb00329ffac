#include "ckptplan/limits.h"

#include "ckptplan/errors.h"
#include "ckptplan/size.h"

namespace ckptplan {

void CheckJsonDepth(std::string_view text, uint32_t max_depth, const std::string& source) {
  uint32_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        throw InputError(source + ": JSON nests deeper than " + std::to_string(max_depth) +
                         " levels at byte " + std::to_string(i) +
                         " (raise the limit with --max-depth)");
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

void CheckReserve(int64_t bytes, std::string_view what) {
  if (bytes > kMaxReserveBytes) {
    throw InputError(std::string(what) + ": reserve " + FormatBytes(bytes) +
                         " is over the limit of " + FormatBytes(kMaxReserveBytes),
                     kExitUsage);
  }
}

}  // namespace ckptplan
