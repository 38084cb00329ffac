#include "ckptplan/base/limits.h"

#include "ckptplan/base/errors.h"
#include "ckptplan/base/size.h"

namespace ckptplan {

void JsonDepthScanner::Feed(std::string_view piece) {
  for (size_t i = 0; i < piece.size(); ++i) {
    char c = piece[i];
    if (in_string_) {
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '[' || c == '{') {
      if (++depth_ > max_depth_) {
        throw InputError(source_ + ": JSON nests deeper than " + std::to_string(max_depth_) +
                         " levels at byte " + std::to_string(offset_ + i) + LimitHint(hint_));
      }
    } else if ((c == ']' || c == '}') && depth_ > 0) {
      --depth_;
    }
  }
  offset_ += piece.size();
}

void CheckJsonDepth(std::string_view text, uint32_t max_depth, const std::string& source,
                    const std::string& hint) {
  JsonDepthScanner(max_depth, source, hint).Feed(text);
}

void CheckReserve(int64_t bytes, std::string_view what) {
  if (bytes > kMaxReserveBytes) {
    throw InputError(std::string(what) + ": reserve " + FormatBytes(bytes) +
                         " is over the limit of " + FormatBytes(kMaxReserveBytes),
                     kExitUsage);
  }
}

}  // namespace ckptplan
