// Collects every problem a validator finds in one file, so the user can fix
// them all in one pass, then throws them as one InputError.
#ifndef CKPTPLAN_PROBLEMS_H_
#define CKPTPLAN_PROBLEMS_H_

#include <string>
#include <vector>

namespace ckptplan {

class Problems {
 public:
  explicit Problems(std::string file) : file_(std::move(file)) {}

  /// `message` starts lower-case and names the node or tensor.
  void Add(std::string message) { messages_.push_back(std::move(message)); }
  bool empty() const { return messages_.empty(); }
  size_t size() const { return messages_.size(); }

  /// Throws InputError("FILE: problem" one per line, at most kMaxShown) when
  /// any problem was added.
  void ThrowIfAny(int exit_code = 4) const;

  static constexpr size_t kMaxShown = 25;

 private:
  std::string file_;
  std::vector<std::string> messages_;
};

}  // namespace ckptplan

#endif  // CKPTPLAN_PROBLEMS_H_
