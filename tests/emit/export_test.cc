#include "ckptplan/emit/export.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

#include "ckptplan/base/errors.h"
#include "ckptplan/ingest/json_loader.h"
#include "ckptplan/sim/offload.h"
#include "cli_util.h"

namespace ckptplan {
namespace {

// Two layers l.0, l.1; x (10 B, input) -> a0 -> b0 -> a1 -> b1 -> loss, each
// activation 100 B; the backward reads b1, a1, b0, a0 in that order and makes
// 10 B gradients. Every node costs 10 FLOP (step: 90).
// l.0's internal tensors: {a0} (b0 is read by l.1); l.1's: {a1}.
const std::string kGraphPath = CKPTPLAN_SOURCE_DIR "/tests/golden/export/two_layers.json";

ExportInput DropA0(const Graph& graph, int64_t budget) {
  ExportInput input;
  input.plan_path = "plan.json";
  input.keep = SaveAll(graph);
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    if (graph.tensors[t].name == "a0") input.keep[t] = 0;
  }
  input.budget_bytes = budget;
  return input;
}

TEST_CASE("torchtitan rounds a plan it cannot express to the cheapest layer plan that fits") {
  Graph graph = LoadJsonGraph(kGraphPath);
  ExportResult r = ExportPlan(graph, DropA0(graph, 350), ExportTarget::kTorchTitan);
  // Plan (drop a0): a0 lives steps 0-1, b0 1-7, a1 2-6, b1 3-5; peak at
  // bw_head = x 10 + b0 + a1 + b1 300 + d1 10 = 320; recompute f0 = 10 FLOP.
  CHECK(r.plan.peak_bytes == 320);
  CHECK(r.plan.recompute_cost == 10);
  // TorchTitan can do none (peak 420), selective "2" = l.1 only (a1 dropped:
  // peak at g1 = x 10 + a0 + b0 + a1 + b1 400 = 410) or full (a0 and a1
  // dropped: peak at g1 = x 10 + b0 + a1 + b1 300 = 310, cost 20). Only full
  // fits 350.
  CHECK_FALSE(r.exact);
  CHECK(r.chosen.label == "mode = \"full\"");
  CHECK(r.chosen.peak_bytes == 310);
  CHECK(r.chosen.recompute_cost == 20);
  CHECK(r.report.find("+10.0 FLOP vs the plan (+11.11% of the step)") != std::string::npos);
  CHECK(r.text.find("[activation_checkpoint]\nmode = \"full\"\n") != std::string::npos);
}

TEST_CASE("megatron and deepspeed take a whole-layer plan exactly") {
  Graph graph = LoadJsonGraph(kGraphPath);
  // Dropping a0 is dropping l.0's internal tensors: block recompute of one
  // layer, or wrapping module l.0.
  ExportResult megatron = ExportPlan(graph, DropA0(graph, 350), ExportTarget::kMegatron);
  CHECK(megatron.exact);
  CHECK(megatron.chosen.peak_bytes == 320);
  CHECK(megatron.text.find("--recompute-granularity full --recompute-method block "
                           "--recompute-num-layers 1\n") != std::string::npos);
  ExportResult deepspeed = ExportPlan(graph, DropA0(graph, 350), ExportTarget::kDeepSpeed);
  CHECK(deepspeed.exact);
  CHECK(deepspeed.chosen.label == "wrap l.0");
}

TEST_CASE("exact targets keep the save set") {
  Graph graph = LoadJsonGraph(kGraphPath);
  ExportResult jax = ExportPlan(graph, DropA0(graph, 350), ExportTarget::kJax);
  CHECK(jax.exact);
  // Saved: b0, a1, b1 (a0 is recomputed, so it gets no name).
  CHECK(jax.text.find("\"names\": [\n    \"b0\",\n    \"a1\",\n    \"b1\"\n  ]") !=
        std::string::npos);
  ExportResult sac = ExportPlan(graph, DropA0(graph, 350), ExportTarget::kPytorchSac);
  // f0 is the first aten.mm call: must recompute; f1 (second mm call) saves a1.
  CHECK(sac.text.find("\"op\": \"aten.mm.default\",\n      \"call_index\": 1,\n      \"node\": "
                      "\"f1\"") != std::string::npos);
}

TEST_CASE("no expressible plan fits: infeasible, naming the lowest peak") {
  Graph graph = LoadJsonGraph(kGraphPath);
  // The plan fits 320, but TorchTitan's best is full at 310 > 300.
  CHECK_THROWS_WITH_AS(ExportPlan(graph, DropA0(graph, 300), ExportTarget::kTorchTitan),
                       doctest::Contains("the lowest peak, 310 B, is with mode = \"full\""),
                       InfeasibleError);
}

TEST_CASE("layer targets need layer scopes") {
  Graph graph = ParseJsonGraph(R"({"format": "ckptplan.graph", "version": 1,
    "tensors": [{"id": "x", "bytes": 4, "kind": "input"}, {"id": "a", "bytes": 8},
                {"id": "g", "bytes": 4}],
    "nodes": [{"id": "f", "op": "mm", "phase": "forward", "scope": "mlp", "inputs": ["x"],
               "outputs": ["a"]},
              {"id": "b", "op": "mm", "phase": "backward", "inputs": ["a"], "outputs": ["g"]}]})",
                               "flat.json");
  ExportInput input{"plan.json", SaveAll(graph), 100, 0};
  CHECK_THROWS_WITH_AS(ExportPlan(graph, input, ExportTarget::kMegatron),
                       doctest::Contains("flat.json: megatron recomputes whole layers"),
                       InputError);
}

// two_layers.json with Megatron-like scopes: f0, f1 in h.N/attn make a0, a1;
// g0, g1 in h.N/mlp make b0, b1. Each node 10 FLOP, timed at 1 FLOP/us: node
// n runs over [10n, 10n + 10) us.
Graph AttnMlpGraph() {
  std::string text = testing::Slurp(kGraphPath);
  for (auto [from, to] : {std::pair<std::string, std::string>{"l.0/f", "h.0/attn"},
                          {"l.0/g", "h.0/mlp"}, {"l.1/f", "h.1/attn"}, {"l.1/g", "h.1/mlp"}}) {
    text.replace(text.find(from), from.size(), to);
  }
  return ParseJsonGraph(text, "attn_mlp.json");
}

// The plan: a0 and a1 offloaded over 100 B/us each way (100 B: 1 us a copy).
ExportInput OffloadA(const Graph& graph, int64_t budget) {
  ExportInput input = DropA0(graph, budget);
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    const std::string& name = graph.tensors[t].name;
    if (name == "a0" || name == "a1") {
      input.keep[t] = 0;
      input.offloaded.push_back(t);
    }
  }
  input.offload.link = {100e6, 100e6};
  input.offload.node_time_us = NodeTimes(graph, 1.0);
  return input;
}

TEST_CASE("exports of a plan that offloads: jax exact, megatron's offload modules, sac rounds") {
  const Graph graph = AttnMlpGraph();
  // a0 out over [10, 11) us (during g0: freed after it), back over [70, 71)
  // (before bw_f1, due at bw_g0's 80 us); a1 out [30, 31) (freed after g1),
  // back [50, 51) (before bw_head, due at bw_g1's 60 us); nothing exposed.
  // Peak at bw_head: x 10 + b0 100 + b1 100 + a1's copy 100 + d1 10 = 320
  // (save-all: 420).
  ExportResult jax = ExportPlan(graph, OffloadA(graph, 330), ExportTarget::kJax);
  CHECK(jax.exact);
  CHECK(jax.plan.peak_bytes == 320);
  CHECK(jax.plan.exposed_cost == 0);
  CHECK(jax.text.find("\"policy\": \"jax.checkpoint_policies.save_and_offload_only_these_names\"")
        != std::string::npos);
  CHECK(jax.text.find("\"names_which_can_be_saved\": [\n    \"b0\",\n    \"b1\"\n  ]") !=
        std::string::npos);
  CHECK(jax.text.find("\"names_which_can_be_offloaded\": [\n    \"a0\",\n    \"a1\"\n  ]") !=
        std::string::npos);
  CHECK(jax.text.find("\"offload_src\": \"device\",\n  \"offload_dst\": \"pinned_host\"") !=
        std::string::npos);
  CHECK(jax.report.find("2 offloaded, peak 320 B") != std::string::npos);

  // Megatron: no flags 420; block recompute of 1 layer drops a0 (320, cost
  // 10), of 2 drops a0 and a1 (310, cost 20); --offload-modules core_attn
  // offloads a0 and a1: the plan itself, 320 at cost 0.
  ExportResult megatron = ExportPlan(graph, OffloadA(graph, 330), ExportTarget::kMegatron);
  CHECK(megatron.exact);
  CHECK(megatron.chosen.label ==
        "--fine-grained-activation-offloading --offload-modules core_attn");
  CHECK(megatron.chosen.peak_bytes == 320);
  CHECK(megatron.text.find("\n--fine-grained-activation-offloading --offload-modules core_attn\n")
        != std::string::npos);

  // SAC has no offload policy: saving a0 and a1 peaks at 420, over 330;
  // recomputing them peaks at g1 = x 10 + b0 + a1 + b1 300 = 310, cost 20.
  ExportResult sac = ExportPlan(graph, OffloadA(graph, 330), ExportTarget::kPytorchSac);
  CHECK_FALSE(sac.exact);
  CHECK(sac.chosen.peak_bytes == 310);
  CHECK(sac.chosen.recompute_cost == 20);
  CHECK(sac.text.find("\"offload\": [\n    {\n      \"op\": \"aten.mm.default\",\n      "
                      "\"call_index\": 0,\n      \"node\": \"f0\"") != std::string::npos);
  CHECK(sac.text.find("torch 1.13 has no selective checkpointing") != std::string::npos);
  CHECK(sac.report.find("pytorch-sac has no offload policy") != std::string::npos);
  CHECK(sac.report.find("0 offloaded (plan: 2)") != std::string::npos);
}

using testing::RunCli;
using testing::ScratchDir;
using testing::Slurp;

// Golden: `ckptplan plan --budget 350` then `ckptplan export --to T`, in a
// scratch directory so the files name relative paths. Set
// CKPTPLAN_UPDATE_GOLDEN=1 to rewrite the expected files.
TEST_CASE("export golden files, one per target") {
  const std::string dir = ScratchDir("export_golden");
  const std::string golden = CKPTPLAN_SOURCE_DIR "/tests/golden/export/";
  std::string setup = "cp " + kGraphPath + " " + dir + " && cd " + dir + " && " CKPTPLAN_BINARY
                      " plan two_layers.json --budget 350 -o plan.json > /dev/null";
  REQUIRE(std::system(setup.c_str()) == 0);
  for (const char* target : {"pytorch-sac", "jax", "megatron", "torchtitan", "deepspeed"}) {
    CAPTURE(target);
    std::string out = dir + "/" + target + ".out";
    std::string command = "cd " + dir + " && " CKPTPLAN_BINARY " export plan.json --to " +
                          target + " > " + target + ".out 2> " + target + ".err";
    REQUIRE(std::system(command.c_str()) == 0);
    std::string expected_path = golden + target + ".golden";
    if (std::getenv("CKPTPLAN_UPDATE_GOLDEN")) {
      std::ofstream(expected_path, std::ios::binary) << Slurp(out);
    }
    CHECK(Slurp(out) == Slurp(expected_path));
    CHECK(Slurp(dir + "/" + target + ".err").find(std::string("export ") + target) == 0);
  }
  // -o writes the same bytes to the file and the report on stdout.
  std::string command = "cd " + dir + " && " CKPTPLAN_BINARY
                        " export plan.json --to torchtitan -o titan.toml > report.txt";
  REQUIRE(std::system(command.c_str()) == 0);
  CHECK(Slurp(dir + "/titan.toml") == Slurp(golden + "torchtitan.golden"));
  CHECK(Slurp(dir + "/report.txt").find("torchtitan cannot express the plan exactly") !=
        std::string::npos);
}

TEST_CASE("export errors: usage 2, infeasible 3 with no file written") {
  const std::string dir = ScratchDir("export_errors");
  std::string setup = "cp " + kGraphPath + " " + dir + " && cd " + dir + " && " CKPTPLAN_BINARY
                      " plan two_layers.json --budget 350 -o plan.json > /dev/null";
  REQUIRE(std::system(setup.c_str()) == 0);
  auto r = RunCli("export " + dir + "/plan.json --to keras --graph " + kGraphPath);
  CHECK(r.code == 2);
  CHECK(r.err.find("--to: unknown target 'keras'") != std::string::npos);
  // Recomputing b0 alone: b0 is l.0's output (l.1 reads it), so no module
  // has it inside; DeepSpeed can only save it: peak 420 B > budget 330 B.
  std::ofstream(dir + "/b0.json") << R"({"format": "ckptplan.plan", "version": 1,
      "budget_bytes": 330, "reserve_bytes": 0, "predicted_peak_bytes": 330,
      "decisions": [{"tensor": "b0", "action": "recompute"}]})";
  r = RunCli("export " + dir + "/b0.json --to deepspeed --graph " + kGraphPath + " -o " + dir +
             "/ds.json");
  CHECK(r.code == 3);
  CHECK(r.err.find("the lowest peak, 420 B, is with no modules wrapped") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir + "/ds.json"));
  // Without --graph the graph file the plan names (relative to the plan's
  // working directory) is used; from elsewhere it is missing: I/O error 5.
  r = RunCli("export " + dir + "/plan.json --to jax -o " + dir + "/jax.json");
  CHECK(r.code == 5);
  CHECK(r.err.find("two_layers.json") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir + "/jax.json"));
}

}  // namespace
}  // namespace ckptplan
