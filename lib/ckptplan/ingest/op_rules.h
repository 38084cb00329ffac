// What autograd keeps for backward, per ONNX op: the table the ONNX loader
// synthesises a backward pass from. Follows PyTorch's eager autograd
// conventions (see REFERENCE.md, "What autograd keeps for backward").
#ifndef CKPTPLAN_OP_RULES_H_
#define CKPTPLAN_OP_RULES_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace ckptplan {

/// Small tensors a forward op keeps beside its inputs/outputs; the loader adds
/// them as extra forward outputs.
enum class SavedExtra : uint8_t {
  kNone,
  kRowStats,      ///< LayerNorm: mean and rstd, 2 fp32 per normalised row
  kChannelStats,  ///< BatchNorm (training): save_mean, save_invstd, 2 fp32 per channel
  kPoolIndices,   ///< MaxPool: int64 argmax index per output element
  kDropoutMask,   ///< Dropout: 1-byte mask per element (ONNX output 1 when present)
  /// SoftmaxCrossEntropyLoss: the fp32 total_weight (4 bytes), and the
  /// log-probabilities (one per score) unless ONNX output 1 holds them.
  kLogProbs,
  /// LSTM/GRU: what the per-timestep cells keep, 7 x batch x hidden values
  /// a step and direction (op_rules.cc).
  kRecurrentSteps,
};

struct OpRule {
  std::string_view op;
  /// Output 0 shares input 0's storage (a view): no bytes, no cost; its
  /// gradient is a view of the output's gradient.
  bool view = false;
  /// The backward hands its incoming gradient to its inputs as it is (Add):
  /// an input of the output's size gets that gradient, no new buffer.
  bool passes_gradient = false;
  /// Inputs that receive a gradient (bit i: input i).
  uint32_t differentiable_inputs = 0;
  /// Inputs saved whenever the node has a backward.
  uint32_t saved_inputs = 0;
  /// Input i saved only when another differentiable input requires grad
  /// (e.g. MatMul keeps A to compute dB).
  uint32_t saved_inputs_for_others = 0;
  /// Outputs saved (bit i: output i).
  uint32_t saved_outputs = 0;
  SavedExtra extra = SavedExtra::kNone;
  /// Inputs (bit i: input i) the size of which the backward allocates a
  /// temporary of, live while it runs (e.g. the gradient of the
  /// log-probabilities inside cross-entropy's backward).
  uint32_t backward_temporaries = 0;
  /// Forward FLOPs per output element, for ops not costed from their
  /// operands' shapes (MatMul, Gemm, Conv, pools, reductions are).
  double flops_per_element = 1;
  /// Backward FLOPs = this x forward FLOPs.
  double backward_flops_ratio = 1;
};

/// The rule for `op` (ai.onnx domain op type); nullptr when the table has none.
const OpRule* FindOpRule(std::string_view op);

/// Ops in the table, in table order (sorted, for FindOpRule's binary search).
std::vector<std::string_view> OpRuleNames();

/// Conservative rule for ops without one: every input is differentiable and
/// saved; backward costs twice the forward.
const OpRule& FallbackOpRule();

}  // namespace ckptplan

#endif  // CKPTPLAN_OP_RULES_H_
