// Module scopes ("model/layers.3/mlp"): the one rule for the layer or block
// a node's scope belongs to, used by the strategies, the exports and the
// plan file (which writes each decision's block for the Python side).
#ifndef CKPTPLAN_SCOPE_H_
#define CKPTPLAN_SCOPE_H_

#include <string>
#include <string_view>
#include <vector>

namespace ckptplan {

/// The layer a scope lies in: its prefix up to the deepest numbered
/// component, a module repeated in a stack. Components are separated by '/'
/// or '.', and a numbered one is all digits after a name:
/// "model/layers.3/mlp" -> "model/layers.3", "h.0.attn" -> "h.0",
/// "layers/3/mlp" -> "layers/3". Empty when no component is numbered.
std::string ScopeLayer(std::string_view scope);

/// The block a scope is checkpointed as: its layer, or without one its first
/// component ("ln_f" -> "ln_f", "encoder.block" -> "encoder", "" -> "").
std::string ScopeBlock(std::string_view scope);

/// True when `scope` is `root` or lies under it in '/' components ("a/b" is
/// under "a", "ab" is not); every scope lies under "".
bool ScopeInside(std::string_view scope, std::string_view root);

/// The '/' components of a scope, empty ones dropped.
std::vector<std::string> SplitScope(std::string_view scope);

/// The components of a scope split at '/' and at '.', empty ones dropped
/// ("h.0/attn.c_attn" -> h, 0, attn, c_attn).
std::vector<std::string> ScopeComponents(std::string_view scope);

}  // namespace ckptplan

#endif  // CKPTPLAN_SCOPE_H_
