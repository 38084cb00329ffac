// Error channel for bad input and the exit codes the CLI maps them to.
#ifndef CKPTPLAN_ERRORS_H_
#define CKPTPLAN_ERRORS_H_

#include <stdexcept>
#include <string>

namespace ckptplan {

/// Process exit codes; documented in the README. CLI11 uses 100 and above.
enum ExitCode : int {
  kExitOk = 0,
  kExitCheckFailed = 1,  ///< `check`: over budget or regressed
  kExitUsage = 2,        ///< bad flags or flag values (e.g. an unparsable size)
  kExitInfeasible = 3,   ///< no plan fits the budget
  kExitBadInput = 4,     ///< malformed or inconsistent input file
  kExitIo = 5,           ///< cannot read or write a file
  kExitInternal = 70,    ///< a bug: an internal invariant failed
};

/// A problem with what the user gave us: a file, a flag value. The message
/// names the file and the node or tensor, and says actual vs expected.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message, int exit_code = kExitBadInput)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

/// Reading or writing a file failed (missing, permissions, disk full).
class IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// No plan fits the budget; the message carries the lower bound.
class InfeasibleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ckptplan

#endif  // CKPTPLAN_ERRORS_H_
