// The hand-made sample graphs, worked out by hand.
#include <doctest/doctest.h>

#include "ckptplan/ingest/json_loader.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {
namespace {

constexpr int64_t KiB = 1024, MiB = 1024 * 1024;

Graph Sample(const std::string& name) {
  return LoadJsonGraph(std::string(CKPTPLAN_SOURCE_DIR) + "/sample_graphs/" + name);
}

TEST_CASE("mlp.json: every step by hand") {
  Graph graph = Sample("mlp.json");
  SimResult sim = Simulate(graph, SaveAll(graph), {0, true});
  // Resident: x 4 MiB + w1 8 + w2 8 + AdamW 8 B x 2^22 params (32 MiB) = 52 MiB.
  const int64_t r = 52 * MiB;
  // fc1: h1 8 | relu: h1 + a1 | fc2: a1 + y 4 | mse: a1 + y + loss 4 B
  // mse_bwd: a1 + y + dy 4 | fc2_bwd: a1 + dy + da1 8 + dw2 8
  // relu_bwd: a1 + da1 + dh1 8 + dw2 | fc1_bwd: dh1 + dw1 8 + dw2 | adamw: dw1 + dw2
  CHECK(sim.total == std::vector<int64_t>{r + 8 * MiB, r + 16 * MiB, r + 12 * MiB,
                                          r + 12 * MiB + 4, r + 16 * MiB, r + 28 * MiB,
                                          r + 32 * MiB, r + 24 * MiB, r + 16 * MiB});
  CHECK(sim.peak_bytes == 84 * MiB);
  CHECK(graph.nodes[sim.steps[sim.peak_step].node].name == "relu_bwd");
}

TEST_CASE("diamond.json: the skip connection keeps a alive through backward") {
  Graph graph = Sample("diamond.json");
  SimResult sim = Simulate(graph, SaveAll(graph), {0, true});
  // Resident: x 1 MiB + 3 parameters of 1 KiB. b and d die in forward; a and
  // c are saved; gradients (1 KiB each) appear in h_bwd, g_bwd, f_bwd.
  const int64_t r = MiB + 3 * KiB;
  // f: a | g: a b | h: a b c | join: a b c d | sum: a c d loss(4 B)
  // sum_bwd: a c loss dd | h_bwd: a c dd da_c dwh | g_bwd: a dd da_c da_b dwh dwg
  // acc_a: dd da_c da_b da + 2 grads | f_bwd: da + 3 grads | sgd: 3 grads
  CHECK(sim.total == std::vector<int64_t>{r + MiB, r + 2 * MiB, r + 3 * MiB, r + 4 * MiB,
                                          r + 3 * MiB + 4, r + 3 * MiB + 4,
                                          r + 4 * MiB + KiB, r + 4 * MiB + 2 * KiB,
                                          r + 4 * MiB + 2 * KiB, r + MiB + 3 * KiB,
                                          r + 3 * KiB});
  CHECK(sim.peak_bytes == 5 * MiB + 5 * KiB);
  CHECK(graph.nodes[sim.steps[sim.peak_step].node].name == "g_bwd");
  // The peak equals the lower bound (acc_a's own 4 MiB + 2 gradients): no
  // plan can go lower.
  CHECK(ComputeLowerBound(graph, 0).bytes == sim.peak_bytes);
}

TEST_CASE("transformer_block.json: saved activations match PyTorch's conventions") {
  Graph graph = Sample("transformer_block.json");
  SimResult sim = Simulate(graph, SaveAll(graph), {0, true});
  // b=4, s=512, h=1024, a=16, bf16: sbh = 2 Mi elements, one activation 4 MiB;
  // scores as^2 b = 16 Mi elements (32 MiB in bf16, 16 MiB as a bool mask).
  // At the end of forward the saved set is (Korthikanti et al.'s list):
  //   x (input, resident) | n1 4 + stats 16 KiB | qkv 12 (q, k, v are views)
  //   probs 32 | mask1 16 | probs_d 32 | ctx 4 | mask2 2 | r1 4
  //   n2 4 + stats 16 KiB | f 16 | gl 16 | mask3 2  = 144 MiB + 32 KiB
  // plus loss (4 B, read by loss_bwd). With the layer input x (4 MiB, here an
  // input, resident) that is Korthikanti's sbh(34 + 5as/h) = 2 Mi x 74 B =
  // 148 MiB, plus the LayerNorm statistics the paper leaves out.
  uint32_t last_forward = 0;
  while (graph.nodes[sim.steps[last_forward + 1].node].phase == Phase::kForward) ++last_forward;
  CHECK(sim.by_category[last_forward][static_cast<size_t>(Category::kSavedActivations)] ==
        144 * MiB + 32 * KiB + 4);
}

}  // namespace
}  // namespace ckptplan
