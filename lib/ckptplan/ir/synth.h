// Synthetic training graphs for tests and benchmarks.
#ifndef CKPTPLAN_SYNTH_H_
#define CKPTPLAN_SYNTH_H_

#include <cstdint>

#include "ckptplan/ir/graph.h"

namespace ckptplan {

/// A random layered DAG with a backward pass built the way autograd builds it:
/// each forward node's backward node reads its output's gradient plus a
/// random subset of its inputs/output (what it saves), and gradients of
/// tensors with several consumers are summed by an accumulate node.
struct RandomGraphOptions {
  uint64_t seed = 1;
  int layers = 6;      ///< forward layers
  int width = 3;       ///< nodes per layer
  int max_inputs = 2;  ///< activation inputs per node (from any earlier layer)
  int64_t min_bytes = 1;
  int64_t max_bytes = 1000;
  double param_probability = 0.5;  ///< chance a node reads its own parameter
  bool optimizer = true;           ///< adam state and an optimizer node
};
Graph RandomTrainingGraph(const RandomGraphOptions& options);

/// A GPT-style decoder stack (pre-LayerNorm, attention + GELU MLP, dropout),
/// forward and backward as PyTorch autograd saves tensors, with
/// `microbatches` forward/backward passes unrolled before one optimizer step.
struct TransformerOptions {
  int layers = 12;
  int microbatches = 1;
  int64_t batch = 8;
  int64_t seq = 1024;
  int64_t hidden = 768;
  int64_t heads = 12;
  int64_t vocab = 50257;
  int dtype_bytes = 2;  ///< activations; parameters and gradients fp32
};
Graph TransformerGraph(const TransformerOptions& options);

/// A U-Net-like encoder/decoder with long skip connections: each encoder
/// level's activation is read again by the mirrored decoder level, so it
/// lives across the whole middle of the step. Level i activations are
/// `base_bytes` >> i; convs are matmul-like (costly), the rest cheap.
/// Backward is built the way autograd builds it (conv saves its input,
/// relu its output, pool its input; cat and upsample save nothing).
struct UNetOptions {
  int levels = 3;
  int64_t base_bytes = 1 << 20;
  bool optimizer = true;  ///< adam state and an optimizer node
};
Graph UNetGraph(const UNetOptions& options);

}  // namespace ckptplan

#endif  // CKPTPLAN_SYNTH_H_
