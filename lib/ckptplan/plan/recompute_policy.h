// Which forward ops a plan may re-run in backward.
//
// The min-cut start set (mincut.h) recomputes only ops this policy allows.
// The default list is the one place where "cheap" is defined: elementwise
// ops, views and normalisations, the way PyTorch's min-cut partitioner
// allows them. Matmul, convolution and attention are never in it (costly to
// re-run); a user may add any op name with a policy file or flag. Random
// ops such as dropout are not in it and are never recomputed by any stage
// of any planner, whatever the policy lists: a re-run would draw other
// values (IsRandomOp, SimContext::pinned).
#ifndef CKPTPLAN_RECOMPUTE_POLICY_H_
#define CKPTPLAN_RECOMPUTE_POLICY_H_

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ckptplan {

/// An op name as the policy compares it: lower case, without '_' (so
/// "layer_norm", "LayerNorm" and "layernorm" are one op).
std::string NormalizeOpName(std::string_view op);

struct RecomputePolicy {
  std::set<std::string> ops;  ///< normalised op names (Node::op) that may be recomputed
  bool Allows(std::string_view op) const { return ops.count(NormalizeOpName(op)) != 0; }
};

/// The documented default: elementwise, view and normalisation ops, in
/// PyTorch (aten) and ONNX spellings.
const std::vector<std::string>& DefaultRecomputableOps();
RecomputePolicy DefaultRecomputePolicy();

/// Parses a policy file: one op name per line; blank lines and text after
/// '#' are ignored; a line "+default" adds the default list. Throws
/// InputError naming `source` and the line on a malformed entry.
RecomputePolicy ParseRecomputePolicy(std::string_view text, const std::string& source);

/// Reads a policy file (IoError when it cannot be read).
RecomputePolicy ReadRecomputePolicy(const std::string& path);

/// Builds the policy the CLI asks for: `policy_path` (empty: the default
/// list) and then `extra_ops`, a comma-separated list of op names added to
/// it (empty: none).
RecomputePolicy MakeRecomputePolicy(const std::string& policy_path, const std::string& extra_ops);

}  // namespace ckptplan

#endif  // CKPTPLAN_RECOMPUTE_POLICY_H_
