#include "ckptplan/base/problems.h"

#include "ckptplan/base/errors.h"

namespace ckptplan {

void Problems::ThrowIfAny(int exit_code) const {
  if (messages_.empty()) return;
  std::string text;
  for (size_t i = 0; i < messages_.size() && i < kMaxShown; ++i) {
    if (i > 0) text += '\n';
    text += file_ + ": " + messages_[i];
  }
  if (messages_.size() > kMaxShown) {
    text += "\n" + file_ + ": ... and " +
            std::to_string(messages_.size() - kMaxShown) + " more problems";
  }
  throw InputError(text, exit_code);
}

}  // namespace ckptplan
