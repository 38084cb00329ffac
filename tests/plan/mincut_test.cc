#include "ckptplan/plan/mincut.h"

#include <doctest/doctest.h>

#include "ckptplan/ir/synth.h"
#include "test_graphs.h"
#include "tiny_graph.h"

namespace ckptplan {
namespace {

using testing::Id;
using testing::TinyGraph;

std::vector<std::string> Names(const Graph& graph, const std::vector<TensorId>& ids) {
  std::vector<std::string> names;
  for (TensorId t : ids) names.push_back(graph.tensors[t].name);
  return names;
}

TEST_CASE("mincut: a chain with a cheap elementwise tail saves the matmul output only") {
  // x -matmul-> a -relu-> b -gelu-> c -sum-> loss; backward reads a, b, c.
  Graph graph = TinyGraph(
      "T x 10 input; T w 4 parameter; T a 100; T b 100; T c 100; T loss 4;"
      "T dc 100; T db 100; T da 100; T dw 4 gradient;"
      "F mm matmul x w -> a 100; F r relu a -> b 1; F g gelu b -> c 1; F s sum c -> loss 1;"
      "B s_bwd sum_bwd loss -> dc 1; B g_bwd gelu_bwd dc b -> db 1;"
      "B r_bwd relu_bwd db b -> da 1; B mm_bwd matmul_bwd da a x w -> dw 100");
  // Candidates: a, b, loss (read by backward). a comes from a matmul, so it
  // is cut (100 bytes); b is relu(a), recomputable from a, so its edge is
  // not cut; loss comes from 'sum', not in the policy: cut (4 bytes).
  MinCutResult cut = MinCutStart(graph, DefaultRecomputePolicy());
  CHECK(Names(graph, cut.saved) == std::vector<std::string>{"a", "loss"});
  CHECK(Names(graph, cut.dropped) == std::vector<std::string>{"b"});
  CHECK(cut.cut_bytes == 100 + 4);
  CHECK(cut.keep[Id(graph, "b")] == 0);
  CHECK(cut.keep[Id(graph, "a")] == 1);
}

TEST_CASE("mincut: the cut moves to the cheapest recomputable tensor") {
  // a (400 bytes, matmul) is not read by backward, so it cannot be saved
  // (infinite edge); b = relu(a) (100) and c = gelu(b) (100) are. Cutting b
  // (100 bytes) lets c be recomputed from it; cutting c too would cost 200.
  Graph graph = TinyGraph(
      "T x 10 input; T w 4 parameter; T a 400; T b 100; T c 100; T loss 4;"
      "T dc 100; T db 100; T dw 4 gradient;"
      "F mm matmul x w -> a 100; F r relu a -> b 1; F g gelu b -> c 1; F s sum c -> loss 1;"
      "B s_bwd sum_bwd loss c -> dc 1; B g_bwd gelu_bwd dc b -> db 1;"
      "B mm_bwd matmul_bwd db x w -> dw 100");
  MinCutResult cut = MinCutStart(graph, DefaultRecomputePolicy());
  CHECK(Names(graph, cut.saved) == std::vector<std::string>{"b", "loss"});
  CHECK(Names(graph, cut.dropped) == std::vector<std::string>{"c"});
  CHECK(cut.cut_bytes == 100 + 4);
}

TEST_CASE("mincut: a diamond saves its matmul root and recomputes both branches") {
  // a = matmul(x); b = relu(a); c = gelu(a); d = add(b, c). Backward reads
  // a (gelu saves its input, matmul its input x), b (relu saves its output).
  // b and c are recomputable from a, which must be saved anyway: cut = a.
  Graph graph = TinyGraph(
      "T x 10 input; T w 4 parameter; T a 100; T b 100; T c 100; T d 100; T loss 4;"
      "T dd 100; T dab 100; T dac 100; T da 100; T dw 4 gradient;"
      "F mm matmul x w -> a 100; F r relu a -> b 1; F g gelu a -> c 1; F add add b c -> d 1;"
      "F s sum d -> loss 1;"
      "B s_bwd sum_bwd loss -> dd 1; B r_bwd relu_bwd dd b -> dab 1;"
      "B g_bwd gelu_bwd dd a c -> dac 1; B acc add dab dac -> da 1;"
      "B mm_bwd matmul_bwd da x w -> dw 100");
  MinCutResult cut = MinCutStart(graph, DefaultRecomputePolicy());
  CHECK(Names(graph, cut.saved) == std::vector<std::string>{"a", "loss"});
  CHECK(Names(graph, cut.dropped) == std::vector<std::string>{"b", "c"});
  CHECK(cut.cut_bytes == 104);
  SUBCASE("allowing matmul and sum recomputes everything from the input") {
    RecomputePolicy policy = MakeRecomputePolicy("", "matmul,sum");
    MinCutResult all = MinCutStart(graph, policy);
    CHECK(all.saved.empty());
    CHECK(all.cut_bytes == 0);
    CHECK(Names(graph, all.dropped) == std::vector<std::string>{"a", "b", "c", "loss"});
  }
}

TEST_CASE("mincut: an attention block recomputes nothing random or bmm unless allowed") {
  // q, k, v: matmuls (10 bytes each); scores = bmm(q, k) (40, not read by
  // backward); probs = softmax(scores) (40); pd, mask = dropout(probs)
  // (40 + 10); ctx = bmm(pd, v) (10). Backward reads q, k, v, probs, pd, mask.
  Graph graph = TinyGraph(
      "T x 10 input; T wq 4 parameter; T wk 4 parameter; T wv 4 parameter;"
      "T q 10; T k 10; T v 10; T scores 40; T probs 40; T pd 40; T mask 10; T ctx 10;"
      "T loss 4; T dctx 10; T dpd 40; T dv 10; T dprobs 40; T dscores 40; T dq 10; T dk 10;"
      "F fq matmul x wq -> q 10; F fk matmul x wk -> k 10; F fv matmul x wv -> v 10;"
      "F qk bmm q k -> scores 40; F sm softmax scores -> probs 5;"
      "F drop dropout probs -> pd mask 2;"
      "F av bmm pd v -> ctx 40; F s sum ctx -> loss 1;"
      "B s_bwd sum_bwd loss -> dctx 1; B av_bwd bmm_bwd dctx pd v -> dpd dv 80;"
      "B drop_bwd dropout_bwd dpd mask -> dprobs 2; B sm_bwd softmax_bwd dprobs probs -> dscores 5;"
      "B qk_bwd bmm_bwd dscores q k -> dq dk 80");
  // Default: probs comes from softmax(bmm output that cannot be saved), so
  // recomputing it would re-run the bmm: saved; pd and mask come from
  // dropout: saved. Everything is saved: 10*3 + 40 + 40 + 10 + loss 4 = 124.
  MinCutResult cut = MinCutStart(graph, DefaultRecomputePolicy());
  CHECK(cut.dropped.empty());
  CHECK(cut.cut_bytes == 124);
  SUBCASE("allowing dropout recomputes pd and mask from the saved probs") {
    MinCutResult with_dropout = MinCutStart(graph, MakeRecomputePolicy("", "dropout"));
    CHECK(Names(graph, with_dropout.dropped) == std::vector<std::string>{"pd", "mask"});
    CHECK(with_dropout.cut_bytes == 124 - 40 - 10);
  }
  SUBCASE("allowing dropout and bmm recomputes the whole core from q and k") {
    MinCutResult core = MinCutStart(graph, MakeRecomputePolicy("", "dropout,bmm"));
    CHECK(Names(graph, core.dropped) == std::vector<std::string>{"probs", "pd", "mask"});
    CHECK(core.cut_bytes == 30 + 4);
  }
}

TEST_CASE("recompute policy: file entries, +default, and bad names") {
  RecomputePolicy policy =
      ParseRecomputePolicy("# mine\nmatmul\n\n+default  # and the rest\n", "p.txt");
  CHECK(policy.Allows("matmul"));
  CHECK(policy.Allows("relu"));
  CHECK_FALSE(policy.Allows("dropout"));
  CHECK_FALSE(ParseRecomputePolicy("matmul\n", "p.txt").Allows("relu"));
  // Names compare without case or '_': ONNX spellings match too.
  CHECK(policy.Allows("MatMul"));
  RecomputePolicy defaults = DefaultRecomputePolicy();
  for (const char* op : {"LayerNormalization", "Relu", "Reshape", "Softmax", "layer_norm", "Gelu"}) {
    CHECK_MESSAGE(defaults.Allows(op), op);
  }
  for (const char* op : {"MatMul", "Gemm", "Conv", "Dropout", "dropout", "bmm", "attention"}) {
    CHECK_FALSE_MESSAGE(defaults.Allows(op), op);
  }
  CHECK_THROWS_WITH(ParseRecomputePolicy("relu\nbad op\n", "p.txt"),
                    doctest::Contains("p.txt:2: 'bad op' is not an op name"));
}

TEST_CASE("mincut: copies of one step are cut as the step is") {
  // Regions that are copies (ShapeRegions) take the first copy's cut; each
  // part must still be cut as the step alone is.
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const Graph step = ckptplan::testing::RandomStep(seed, 3);
    const Graph graph = ckptplan::testing::Copies(step, 5);
    CAPTURE(seed);
    const MinCutResult alone = MinCutStart(step, DefaultRecomputePolicy());
    const MinCutResult all = MinCutStart(graph, DefaultRecomputePolicy());
    const size_t per_part = step.tensors.size();
    for (TensorId t = 0; t < graph.tensors.size(); ++t) {
      CHECK(all.keep[t] == alone.keep[t % per_part]);
    }
    CHECK(all.cut_bytes == 5 * alone.cut_bytes);
  }
}

}  // namespace
}  // namespace ckptplan
