// The plan file's "load" object: written from LoadOptions, read back before
// any graph is loaded, every malformed field named.
#include "ckptplan/emit/plan_io.h"

#include <fstream>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace ckptplan {
namespace {

using testing::RunCli;
using testing::ScratchDir;
using testing::Slurp;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("plan header: graph file and load settings round-trip") {
  const std::string text = R"({"format": "ckptplan.plan", "version": 1,
    "graph": {"file": "m.onnx"},
    "load": {"dims": {"batch": 2, "seq": 64}, "input_shapes": {"ids": [2, 64]},
             "frozen": ["wte.*"], "precision": "bf16-mixed", "optimizer": "sgd-momentum",
             "device": "a100"},
    "budget_bytes": 1, "predicted_peak_bytes": 1, "decisions": []})";
  PlanHeader header = ParsePlanHeader(text, "p.json");
  CHECK(header.graph_file == "m.onnx");
  REQUIRE(header.load.has_value());
  CHECK(header.load->dims == std::map<std::string, int64_t>{{"batch", 2}, {"seq", 64}});
  CHECK(header.load->input_shapes.at("ids") == std::vector<int64_t>{2, 64});
  CHECK(header.load->frozen == std::vector<std::string>{"wte.*"});
  CHECK(header.load->precision == Precision::kBf16Mixed);
  CHECK(header.load->optimizer == Optimizer::kSgdMomentum);
  CHECK(std::string(header.load->device->name) == "a100");
  // A plan without "load" (version 1 as first written) still reads.
  PlanHeader old = ParsePlanHeader(R"({"format": "ckptplan.plan", "version": 1})", "old.json");
  CHECK_FALSE(old.load.has_value());
  CHECK(old.graph_file.empty());
}

TEST_CASE("plan header: every malformed load field is named, in one error") {
  const std::string text = R"({"format": "ckptplan.plan", "version": 1,
    "load": {"dims": {"batch": 0}, "input_shapes": {"ids": []}, "frozen": [1],
             "precision": "fp8", "optimizer": 3, "device": "tpu"}})";
  try {
    ParsePlanHeader(text, "bad.json");
    FAIL("expected an error");
  } catch (const InputError& e) {
    const std::string message = e.what();
    CHECK(e.exit_code() == kExitBadInput);
    for (const char* part : {"bad.json: \"load\".\"dims\".\"batch\" must be a positive integer",
                             "\"load\".\"input_shapes\".\"ids\" must be a non-empty array",
                             "\"load\".\"frozen\" must be an array of strings",
                             "unknown precision 'fp8'", "\"load\".\"optimizer\" must be a string",
                             "unknown device 'tpu'"}) {
      CAPTURE(part);
      CHECK(Contains(message, part));
    }
  }
}

// The done-when of issue 18: check and export work on an ONNX model with
// symbolic dims, and export / simulate --plan rebuild the graph from the plan.
TEST_CASE("ONNX with symbolic dims: plan records the load, export and simulate rebuild it") {
  const std::string dir = ScratchDir("plan_io_onnx");
  const std::string plan = dir + "/p.json";
  const std::string graph = "sample_graphs/gpt2_tiny.onnx";
  auto made = RunCli("plan " + graph + " --dim batch=2 --dim seq=64 --optimizer sgd" +
                     " --loss cross-entropy" +
                     " --budget 3MiB -o " + plan);
  REQUIRE(made.code == 0);
  auto written = nlohmann::json::parse(Slurp(plan));
  CHECK(written["load"]["dims"] == nlohmann::json({{"batch", 2}, {"seq", 64}}));
  CHECK(written["load"]["optimizer"] == "sgd");
  // simulate --plan without flags: the same graph, so the plan's own peak.
  auto replay = RunCli("simulate " + graph + " --json --plan " + plan);
  REQUIRE(replay.code == 0);
  CHECK(nlohmann::json::parse(replay.out)["peak_bytes"] == written["predicted_peak_bytes"]);
  CHECK(replay.err.empty());
  // export without flags, to a target that takes the save set as is.
  auto exported = RunCli("export " + plan + " --to pytorch-sac");
  CHECK(exported.code == 0);
  CHECK(Contains(exported.out, "\"exact\": true"));
  // A flag that changes a recorded value wins, and says so.
  auto changed = RunCli("simulate " + graph + " --json --plan " + plan + " --optimizer adamw");
  REQUIRE(changed.code == 0);
  CHECK(Contains(changed.err, "--optimizer adamw overrides optimizer sgd recorded in the plan"));
  // AdamW's two fp32 moments on top of plain SGD, 141056 params (norm scales
  // and biases are trained) * 8 B = 1128448 B, plus a 4-byte step for each of
  // the 29 parameter tensors = 116 B: 1128564 B more at the same (backward) peak.
  CHECK(nlohmann::json::parse(changed.out)["peak_bytes"].get<int64_t>() -
            written["predicted_peak_bytes"].get<int64_t>() ==
        1128564);
  // check takes the same flags.
  auto check = RunCli("check " + graph + " --dim batch=2 --dim seq=64 --budget 1GiB");
  CHECK(check.code == 0);
  CHECK(Contains(check.out, "PASS"));
}

TEST_CASE("a plan without load settings: export names the unbound dims, then takes --dim") {
  const std::string dir = ScratchDir("plan_io_old");
  const std::string plan = dir + "/p.json";
  const std::string graph = "sample_graphs/gpt2_tiny.onnx";
  REQUIRE(RunCli("plan " + graph + " --dim batch=2 --dim seq=64 --budget 3MiB -o " + plan).code ==
          0);
  auto json = nlohmann::json::parse(Slurp(plan));
  json.erase("load");  // as plans were written before "load"
  std::ofstream(plan) << json.dump(2);
  auto bare = RunCli("export " + plan + " --to megatron");
  CHECK(bare.code == kExitBadInput);
  CHECK(Contains(bare.err, "is symbolic 'batch', which is unbound"));
  CHECK(Contains(bare.err, "ckptplan: bind the graph inputs with --dim batch=N --dim seq=N"));
  auto bound = RunCli("export " + plan + " --to megatron --dim batch=2 --dim seq=64");
  CHECK(bound.code == 0);
  CHECK(Contains(bound.out, "--recompute-granularity"));
}

}  // namespace
}  // namespace ckptplan
