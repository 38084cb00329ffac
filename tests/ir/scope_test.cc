#include "ckptplan/ir/scope.h"

#include <doctest/doctest.h>

namespace ckptplan {
namespace {

TEST_CASE("a scope's layer ends at its deepest numbered component") {
  CHECK(ScopeLayer("model/layers.3/mlp") == "model/layers.3");
  CHECK(ScopeLayer("h.0/attn/c_attn") == "h.0");
  CHECK(ScopeLayer("h.0.attn") == "h.0");
  CHECK(ScopeLayer("layers/3/mlp") == "layers/3");
  CHECK(ScopeLayer("model/layers.3/experts.12/w1") == "model/layers.3/experts.12");
  CHECK(ScopeLayer("encoder.block") == "");
  CHECK(ScopeLayer("0/attn") == "");  // a number with no module name before it
  CHECK(ScopeLayer("") == "");
}

TEST_CASE("a scope's block is its layer, else its first component") {
  // The strategies' rule once gave "model" here while export found the layer.
  CHECK(ScopeBlock("model/layers.3/mlp") == "model/layers.3");
  CHECK(ScopeBlock("h.0.attn") == "h.0");
  CHECK(ScopeBlock("layers/3/mlp") == "layers/3");
  CHECK(ScopeBlock("ln_f") == "ln_f");
  CHECK(ScopeBlock("encoder.block") == "encoder");
  CHECK(ScopeBlock("") == "");
}

TEST_CASE("scopes nest by '/' components") {
  CHECK(ScopeInside("h.0/attn", "h.0"));
  CHECK(ScopeInside("h.0", "h.0"));
  CHECK_FALSE(ScopeInside("h.01/attn", "h.0"));
  CHECK_FALSE(ScopeInside("h.0", "h.0/attn"));
  CHECK(ScopeInside("anything", ""));
  CHECK(SplitScope("/h.0//attn/") == std::vector<std::string>{"h.0", "attn"});
}

}  // namespace
}  // namespace ckptplan
