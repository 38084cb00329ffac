#include "ckptplan/ingest/op_rules.h"

#include <algorithm>

#include <doctest/doctest.h>

namespace ckptplan {
namespace {

TEST_CASE("the op rule table is sorted and unique, so lookups find every entry") {
  std::vector<std::string_view> names = OpRuleNames();
  CHECK(std::adjacent_find(names.begin(), names.end(),
                           [](std::string_view a, std::string_view b) { return a >= b; }) ==
        names.end());
  for (std::string_view name : names) {
    CAPTURE(name);
    REQUIRE(FindOpRule(name) != nullptr);
    CHECK(FindOpRule(name)->op == name);
  }
  CHECK(FindOpRule("Frobnicate") == nullptr);
}

TEST_CASE("rules follow PyTorch's autograd conventions") {
  // MatMul keeps each operand for the other's gradient; Relu/Softmax their
  // output; Erf/Gelu their input; Add nothing; views alias.
  CHECK(FindOpRule("MatMul")->saved_inputs_for_others == 0b11);
  CHECK(FindOpRule("Relu")->saved_outputs == 1);
  CHECK(FindOpRule("Relu")->saved_inputs == 0);
  CHECK(FindOpRule("Softmax")->saved_outputs == 1);
  CHECK(FindOpRule("Gelu")->saved_inputs == 1);
  CHECK(FindOpRule("Erf")->saved_inputs == 1);
  const OpRule* add = FindOpRule("Add");
  CHECK(add->saved_inputs == 0);
  CHECK(add->saved_outputs == 0);
  CHECK(FindOpRule("Dropout")->extra == SavedExtra::kDropoutMask);
  CHECK(FindOpRule("LayerNormalization")->extra == SavedExtra::kRowStats);
  CHECK((FindOpRule("LayerNormalization")->saved_inputs & 1) == 1);
  CHECK((FindOpRule("BatchNormalization")->saved_inputs & 1) == 1);
  CHECK(FindOpRule("MaxPool")->extra == SavedExtra::kPoolIndices);
  for (const char* view : {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity"}) {
    CHECK(FindOpRule(view)->view);
  }
  CHECK(FallbackOpRule().saved_inputs == 0xffffffffu);
}

}  // namespace
}  // namespace ckptplan
