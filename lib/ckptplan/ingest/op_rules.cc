#include "ckptplan/ingest/op_rules.h"

#include <algorithm>
#include <array>

namespace ckptplan {
namespace {

constexpr uint32_t kIn0 = 1u << 0, kIn1 = 1u << 1, kIn2 = 1u << 2;
constexpr uint32_t kOut0 = 1u << 0;
constexpr uint32_t kAll = 0xffffffffu;

// Shorthands. PyTorch conventions behind each entry:
//   Unary(op, saves_input, saves_output): relu/sigmoid/tanh/exp/sqrt/softmax
//   keep their output; gelu/erf/log/sin/cos/pow keep their input.
constexpr OpRule View(std::string_view op) {
  OpRule rule{op};
  rule.view = true;
  rule.differentiable_inputs = kIn0;
  rule.flops_per_element = 0;
  rule.backward_flops_ratio = 0;
  return rule;
}

constexpr OpRule Unary(std::string_view op, bool keep_input, bool keep_output,
                       double flops = 1, double backward_ratio = 1) {
  OpRule rule{op};
  rule.differentiable_inputs = kIn0;
  rule.saved_inputs = keep_input ? kIn0 : 0;
  rule.saved_outputs = keep_output ? kOut0 : 0;
  rule.flops_per_element = flops;
  rule.backward_flops_ratio = backward_ratio;
  return rule;
}

// Ops that keep nothing but shapes (add, sub, neg, concat, pad, resize...).
constexpr OpRule KeepsNothing(std::string_view op, uint32_t differentiable, double flops = 1) {
  OpRule rule{op};
  rule.differentiable_inputs = differentiable;
  rule.flops_per_element = flops;
  return rule;
}

// No gradient flows through: comparisons, shape ops, index producers.
constexpr OpRule NoGradient(std::string_view op) {
  OpRule rule{op};
  rule.flops_per_element = 1;
  rule.backward_flops_ratio = 0;
  return rule;
}

constexpr OpRule Bilinear(std::string_view op, uint32_t differentiable, uint32_t saved_for_others,
                          double backward_ratio) {
  OpRule rule{op};
  rule.differentiable_inputs = differentiable;
  rule.saved_inputs_for_others = saved_for_others;
  rule.backward_flops_ratio = backward_ratio;
  return rule;
}

constexpr OpRule WithExtra(OpRule rule, SavedExtra extra) {
  rule.extra = extra;
  return rule;
}

// Adds inputs to those the rule already saves.
constexpr OpRule WithSaved(OpRule rule, uint32_t saved_inputs) {
  rule.saved_inputs |= saved_inputs;
  return rule;
}

// Normalisations: the affine scale (input 1) and bias (input 2) are trained
// parameters with gradients and optimizer state, not buffers.
constexpr OpRule Trained(OpRule rule) {
  rule.differentiable_inputs |= kIn1 | kIn2;
  return rule;
}

// CPU eager PyTorch runs LSTM and GRU as per-timestep cells that autograd
// records op by op (ATen RNN.cpp, LSTMCell / GRUCell after one matmul of the
// whole input). Per step and direction they keep 7 x batch x hidden values:
// LSTM the 4 gate activations (one buffer the sigmoid_/tanh_ views share),
// tanh(c_t), h_{t-1} and c_{t-1}; GRU the 3 hidden-gate activations, copies
// of two operands multiplied in place (the new gate's hidden part, h - n),
// the new gate and h_{t-1}. Both keep X for the input weights' gradient.
constexpr OpRule Recurrent(std::string_view op, uint32_t differentiable) {
  OpRule rule{op};
  rule.differentiable_inputs = differentiable;
  rule.saved_inputs = kIn0;
  rule.extra = SavedExtra::kRecurrentSteps;
  rule.backward_flops_ratio = 2;
  return rule;
}

// Sorted by op name (FindOpRule binary-searches; tests check the order).
constexpr std::array kRules = {
    Unary("Abs", true, false),
    // AddBackward returns its incoming gradient for both inputs (a
    // broadcast input gets a reduction of it).
    [] {
      OpRule rule = KeepsNothing("Add", kIn0 | kIn1);
      rule.passes_gradient = true;
      return rule;
    }(),
    NoGradient("And"),
    NoGradient("ArgMax"),
    NoGradient("ArgMin"),
    KeepsNothing("AveragePool", kIn0),
    // Training mode: keeps its input and per-channel save_mean/save_invstd;
    // the scale is a parameter (resident). Running stats get no gradient.
    WithExtra(Trained(WithSaved(Unary("BatchNormalization", true, false, 8, 2), kIn1)),
              SavedExtra::kChannelStats),
    KeepsNothing("Cast", kIn0),
    KeepsNothing("Ceil", 0),
    Unary("Clip", true, false),
    KeepsNothing("Concat", kAll),
    // Conv keeps input (for dW) and weight (for dX); the bias needs nothing.
    Bilinear("Conv", kIn0 | kIn1 | kIn2, kIn0 | kIn1, 2),
    Bilinear("ConvTranspose", kIn0 | kIn1 | kIn2, kIn0 | kIn1, 2),
    Unary("Cos", true, false),
    KeepsNothing("CumSum", kIn0),
    // Div(a, b): da = g / b needs b; db = -g a / b^2 needs a (and b).
    [] {
      OpRule rule = Bilinear("Div", kIn0 | kIn1, kIn0, 1);
      rule.saved_inputs = kIn1;
      return rule;
    }(),
    WithExtra(Unary("Dropout", false, false, 2, 1), SavedExtra::kDropoutMask),
    Bilinear("Einsum", kAll, kAll, 2),
    Unary("Elu", false, true),
    NoGradient("Equal"),
    Unary("Erf", true, false, 8),
    Unary("Exp", false, true, 4),
    KeepsNothing("Expand", kIn0, 0),
    View("Flatten"),
    KeepsNothing("Floor", 0),
    // X, W, R, B, initial_h (input 4 is sequence_lens).
    Recurrent("GRU", kIn0 | kIn1 | kIn2 | (1u << 3) | (1u << 5)),
    // Embedding keeps its int64 indices (input 1); the table is a parameter.
    WithSaved(KeepsNothing("Gather", kIn0, 0), kIn1),
    WithSaved(KeepsNothing("GatherElements", kIn0, 0), kIn1),
    WithSaved(KeepsNothing("GatherND", kIn0, 0), kIn1),
    Unary("Gelu", true, false, 8),
    Bilinear("Gemm", kIn0 | kIn1 | kIn2, kIn0 | kIn1, 2),
    KeepsNothing("GlobalAveragePool", kIn0),
    Unary("GlobalMaxPool", true, true),
    NoGradient("Greater"),
    NoGradient("GreaterOrEqual"),
    Trained(WithSaved(Unary("GroupNormalization", true, false, 8, 2), kIn1)),
    Unary("HardSigmoid", true, false),
    Unary("HardSwish", true, false),
    View("Identity"),
    WithExtra(Trained(WithSaved(Unary("InstanceNormalization", true, false, 8, 2), kIn1)),
              SavedExtra::kRowStats),
    NoGradient("IsInf"),
    NoGradient("IsNaN"),
    // X, W, R, B, initial_h, initial_c, P (input 4 is sequence_lens).
    Recurrent("LSTM", kIn0 | kIn1 | kIn2 | (1u << 3) | (1u << 5) | (1u << 6) | (1u << 7)),
    // Keeps its input, weight and per-row mean and rstd (fp32).
    WithExtra(Trained(WithSaved(Unary("LayerNormalization", true, false, 8, 2), kIn1)),
              SavedExtra::kRowStats),
    Unary("LeakyRelu", true, false),
    NoGradient("Less"),
    NoGradient("LessOrEqual"),
    Unary("Log", true, false, 4),
    Unary("LogSoftmax", false, true, 5, 2),
    Bilinear("MatMul", kIn0 | kIn1, kIn0 | kIn1, 2),
    Bilinear("Max", kIn0 | kIn1, kIn0 | kIn1, 1),
    WithExtra(KeepsNothing("MaxPool", kIn0), SavedExtra::kPoolIndices),
    Bilinear("Min", kIn0 | kIn1, kIn0 | kIn1, 1),
    Unary("Mish", true, false, 6),
    NoGradient("Mod"),
    // Mul(a, b): da = g b, db = g a.
    Bilinear("Mul", kIn0 | kIn1, kIn0 | kIn1, 1),
    KeepsNothing("Neg", kIn0),
    WithSaved(KeepsNothing("NegativeLogLikelihoodLoss", kIn0, 1), kIn1),
    NoGradient("NonZero"),
    NoGradient("Not"),
    NoGradient("OneHot"),
    NoGradient("Or"),
    Bilinear("PRelu", kIn0 | kIn1, kIn0 | kIn1, 1),
    KeepsNothing("Pad", kIn0, 0),
    Bilinear("Pow", kIn0 | kIn1, kIn0 | kIn1, 4),
    NoGradient("Range"),
    Unary("Reciprocal", false, true),
    Unary("ReduceL2", true, true),
    Unary("ReduceMax", true, true),
    KeepsNothing("ReduceMean", kIn0),
    Unary("ReduceMin", true, true),
    Unary("ReduceProd", true, true),
    KeepsNothing("ReduceSum", kIn0),
    Unary("ReduceSumSquare", true, false),
    Unary("Relu", false, true),
    View("Reshape"),
    KeepsNothing("Resize", kIn0, 0),
    NoGradient("Round"),
    Unary("Selu", false, true),
    NoGradient("Shape"),
    Unary("Sigmoid", false, true, 4),
    NoGradient("Sign"),
    Unary("Silu", true, false, 5),
    Unary("Sin", true, false),
    NoGradient("Size"),
    View("Slice"),
    Unary("Softmax", false, true, 5, 2),
    // log_softmax + nll_loss: keeps the targets, the log-probabilities and
    // total_weight; its backward makes the gradient of the log-probabilities
    // (a temporary the size of the scores) and from it the scores' gradient.
    [] {
      OpRule rule = Unary("SoftmaxCrossEntropyLoss", false, false, 6, 1);
      rule.saved_inputs = kIn1;  // targets; log-prob output 1 is kept below
      rule.saved_outputs = 1u << 1;
      rule.extra = SavedExtra::kLogProbs;
      rule.backward_temporaries = kIn0;
      return rule;
    }(),
    Unary("Softplus", true, false, 4),
    Unary("Softsign", true, false),
    View("Split"),
    Unary("Sqrt", false, true, 4),
    View("Squeeze"),
    KeepsNothing("Sub", kIn0 | kIn1),
    KeepsNothing("Sum", kAll),
    Unary("Tanh", false, true, 4),
    KeepsNothing("Tile", kIn0, 0),
    WithSaved(KeepsNothing("TopK", kIn0, 4), 0),
    View("Transpose"),
    KeepsNothing("Trilu", kIn0, 0),
    View("Unsqueeze"),
    // Where(c, x, y): keeps the bool condition to route gradients.
    WithSaved(KeepsNothing("Where", kIn1 | kIn2), kIn0),
    NoGradient("Xor"),
};

}  // namespace

const OpRule* FindOpRule(std::string_view op) {
  auto it = std::lower_bound(kRules.begin(), kRules.end(), op,
                             [](const OpRule& rule, std::string_view name) { return rule.op < name; });
  return it != kRules.end() && it->op == op ? &*it : nullptr;
}

std::vector<std::string_view> OpRuleNames() {
  std::vector<std::string_view> names;
  for (const OpRule& rule : kRules) names.push_back(rule.op);
  return names;
}

const OpRule& FallbackOpRule() {
  static const OpRule rule = [] {
    OpRule fallback{"(fallback)"};
    fallback.differentiable_inputs = kAll;
    fallback.saved_inputs = kAll;
    fallback.backward_flops_ratio = 2;
    return fallback;
  }();
  return rule;
}

}  // namespace ckptplan
