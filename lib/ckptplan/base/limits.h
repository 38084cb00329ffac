// Caps on input size, so hostile or corrupt files fail with a clear message
// instead of exhausting memory, the stack or 64-bit arithmetic.
#ifndef CKPTPLAN_LIMITS_H_
#define CKPTPLAN_LIMITS_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace ckptplan {

/// Every limit a loader enforces; the CLI exposes the counts as flags.
struct Limits {
  uint64_t max_nodes = 10'000'000;    ///< --max-nodes
  uint64_t max_tensors = 10'000'000;  ///< --max-tensors
  uint32_t max_depth = 64;            ///< --max-depth: JSON nesting / ONNX subgraphs
  uint32_t max_rank = 64;             ///< dims in one tensor shape
  /// Sum of every tensor's bytes, workspace and training-state bytes. With
  /// the reserve capped at kMaxReserveBytes, any simulated total (at most
  /// twice the graph, for recomputed copies, plus the reserve) fits int64.
  int64_t max_total_bytes = int64_t{1} << 60;  ///< 1 EiB
  /// Cost (FLOPs or microseconds) of one node; sums over 10^7 nodes stay finite.
  double max_node_cost = 1e30;
  /// How the caller raises max_nodes, max_tensors and max_depth, added in
  /// parentheses to the message of a graph over that limit (the CLI names
  /// its flags); empty: nothing added.
  std::string max_nodes_hint, max_tensors_hint, max_depth_hint;
};

/// " (hint)", or "" for an empty hint: the tail of an over-limit message.
inline std::string LimitHint(const std::string& hint) {
  return hint.empty() ? std::string() : " (" + hint + ")";
}

/// Largest --reserve (or plan reserve_bytes) accepted: 2^62 bytes = 4 EiB.
inline constexpr int64_t kMaxReserveBytes = int64_t{1} << 62;

/// a + b and a * b for sizes and element counts read from files, clamped to
/// int64's range instead of overflowing; a clamped size then fails the
/// max_total_bytes check in ValidateGraph.
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  __int128 sum = static_cast<__int128>(a) + b;
  return sum > INT64_MAX ? INT64_MAX : sum < INT64_MIN ? INT64_MIN : static_cast<int64_t>(sum);
}
inline int64_t SaturatingMul(int64_t a, int64_t b) {
  __int128 product = static_cast<__int128>(a) * b;
  return product > INT64_MAX   ? INT64_MAX
         : product < INT64_MIN ? INT64_MIN
                               : static_cast<int64_t>(product);
}

/// Throws InputError naming `source` when `text`, read as JSON, nests arrays
/// and objects deeper than `max_depth` (brackets inside strings do not count);
/// the message ends with LimitHint(hint). Linear and allocation-free; run it
/// before handing text to a parser.
void CheckJsonDepth(std::string_view text, uint32_t max_depth, const std::string& source,
                    const std::string& hint = "");

/// CheckJsonDepth over text that arrives in pieces (a file read in chunks).
class JsonDepthScanner {
 public:
  JsonDepthScanner(uint32_t max_depth, const std::string& source, const std::string& hint = "")
      : max_depth_(max_depth), source_(source), hint_(hint) {}
  /// Scans the next piece; throws as CheckJsonDepth does.
  void Feed(std::string_view piece);

 private:
  const uint32_t max_depth_;
  const std::string& source_;
  const std::string hint_;
  uint32_t depth_ = 0;
  bool in_string_ = false, escaped_ = false;
  uint64_t offset_ = 0;  // bytes scanned before this piece
};

/// Throws InputError (exit code kExitUsage) naming `what` when `bytes` is
/// over kMaxReserveBytes.
void CheckReserve(int64_t bytes, std::string_view what);

}  // namespace ckptplan

#endif  // CKPTPLAN_LIMITS_H_
