// Runs the ckptplan binary: exit codes, messages, files, determinism.
#include <filesystem>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace ckptplan {
namespace {

namespace fs = std::filesystem;
using testing::RunCli;
using testing::ScratchDir;
using testing::Slurp;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("plan writes a plan that fits, a timeline, and a summary") {
  const std::string dir = ScratchDir("cli_plan");
  auto result = RunCli("plan sample_graphs/transformer_block.json --budget 320MiB --reserve 1MiB -o " +
                       dir + "/plan.json --timeline " + dir + "/timeline.json");
  REQUIRE(result.code == 0);
  CHECK(Contains(result.out, "peak, planned"));
  CHECK(Contains(result.out, "Decisions:"));
  auto plan = nlohmann::json::parse(Slurp(dir + "/plan.json"));
  CHECK(plan["format"] == "ckptplan.plan");
  CHECK(plan["version"] == 1);
  CHECK(plan["budget_bytes"] == 320 << 20);
  CHECK(plan["reserve_bytes"] == 1 << 20);
  CHECK(plan["predicted_peak_bytes"].get<int64_t>() <= 320 << 20);
  CHECK(plan["save_all_peak_bytes"].get<int64_t>() > 320 << 20);
  CHECK(plan["graph"]["sha256"].get<std::string>().size() == 64);
  auto timeline = nlohmann::json::parse(Slurp(dir + "/timeline.json"));
  CHECK(timeline["peak_bytes"] == plan["predicted_peak_bytes"]);
  int64_t max_total = 0;
  for (const auto& row : timeline["steps"]) {
    int64_t sum = 0;
    for (const auto& [name, bytes] : row["bytes"].items()) sum += bytes.get<int64_t>();
    CHECK(sum == row["total_bytes"].get<int64_t>());  // categories add up
    max_total = std::max(max_total, row["total_bytes"].get<int64_t>());
  }
  CHECK(max_total == plan["predicted_peak_bytes"].get<int64_t>());
  // simulate --plan replays the plan to the same peak.
  auto replay = RunCli("simulate sample_graphs/transformer_block.json --json --plan " + dir + "/plan.json");
  REQUIRE(replay.code == 0);
  CHECK(nlohmann::json::parse(replay.out)["peak_bytes"] == plan["predicted_peak_bytes"]);
}

TEST_CASE("same input, byte-identical output") {
  const std::string dir = ScratchDir("cli_determinism");
  std::string outputs[2];
  for (int run = 0; run < 2; ++run) {
    const std::string base = dir + "/run" + std::to_string(run);
    auto result = RunCli("plan sample_graphs/transformer_block.json --budget 320MiB -o " + base +
                         ".plan.json --timeline " + base + ".timeline.json");
    REQUIRE(result.code == 0);
    outputs[run] = result.out + Slurp(base + ".plan.json") + Slurp(base + ".timeline.json");
  }
  CHECK(outputs[0] == outputs[1]);
  CHECK(RunCli("simulate sample_graphs/mlp.json --json").out ==
        RunCli("simulate sample_graphs/mlp.json --json").out);
}

TEST_CASE("simulate --json prints peak_bytes") {
  auto result = RunCli("simulate sample_graphs/mlp.json --json");
  REQUIRE(result.code == 0);
  auto summary = nlohmann::json::parse(result.out);
  CHECK(summary["peak_bytes"] == 84 << 20);  // worked out in samples_test.cc
  CHECK(summary["peak_node"] == "relu_bwd");
}

TEST_CASE("an infeasible budget exits 3 with the lower bound and writes nothing") {
  const std::string dir = ScratchDir("cli_infeasible");
  auto result = RunCli("plan sample_graphs/mlp.json --budget 80MiB -o " + dir + "/plan.json");
  CHECK(result.code == 3);
  // mlp.json: lower bound 84 MiB = 16 + 32 + 4 + 8 (dw2) + relu_bwd's 24.
  CHECK(Contains(result.err, "no plan can fit: the lower bound is 84.0 MiB = parameters 16.0 MiB + "
                             "optimizer_state 32.0 MiB + inputs 4.0 MiB + gradients 8.0 MiB + "
                             "largest single step 24.0 MiB (node 'relu_bwd') > budget 80.0 MiB"));
  CHECK(fs::is_empty(dir));
}

TEST_CASE("usage errors exit 2") {
  auto result = RunCli("plan sample_graphs/mlp.json --budget 12 gigs");
  CHECK(result.code == 2);
  result = RunCli("plan sample_graphs/mlp.json --budget 12gigs");
  CHECK(result.code == 2);
  CHECK(Contains(result.err, "--budget: cannot parse size '12gigs'"));
  CHECK(RunCli("plan sample_graphs/mlp.json").code == 2);  // --budget missing
  CHECK(RunCli("frobnicate").code == 2);
  CHECK(RunCli("").code == 2);
  CHECK(RunCli("--help").code == 0);
}

TEST_CASE("bad graph files exit 4 naming the file, missing files exit 5, no output left") {
  const std::string dir = ScratchDir("cli_bad_input");
  std::ofstream(dir + "/broken.json") << R"({"format":"ckptplan.graph","version":1,"tensors":[)";
  auto result = RunCli("plan " + dir + "/broken.json --budget 1GiB -o " + dir + "/plan.json");
  CHECK(result.code == 4);
  CHECK(Contains(result.err, dir + "/broken.json: malformed JSON at byte"));
  std::ofstream(dir + "/cycle.json") << R"({"format":"ckptplan.graph","version":1,
    "tensors":[{"id":"a","bytes":1},{"id":"b","bytes":1}],
    "nodes":[{"id":"f","op":"relu","phase":"forward","inputs":["b"],"outputs":["a"]},
             {"id":"g","op":"relu","phase":"forward","inputs":["a"],"outputs":["b"]}]})";
  result = RunCli("simulate " + dir + "/cycle.json --timeline " + dir + "/t.json");
  CHECK(result.code == 4);
  CHECK(Contains(result.err, "cycle.json: node 'f' (forward) reads tensor 'b' before node 'g' produces it"));
  result = RunCli("simulate " + dir + "/missing.json");
  CHECK(result.code == 5);
  CHECK(Contains(result.err, dir + "/missing.json: cannot open file for reading"));
  CHECK_FALSE(fs::exists(dir + "/plan.json"));
  CHECK_FALSE(fs::exists(dir + "/t.json"));
}

TEST_CASE("a plan naming a tensor the graph lacks is bad input") {
  const std::string dir = ScratchDir("cli_bad_plan");
  std::ofstream(dir + "/plan.json") << R"({"format":"ckptplan.plan","version":1,"budget_bytes":1,
    "reserve_bytes":0,"predicted_peak_bytes":1,"decisions":[{"tensor":"ghost","action":"recompute"}]})";
  auto result = RunCli("simulate sample_graphs/mlp.json --plan " + dir + "/plan.json");
  CHECK(result.code == 4);
  CHECK(Contains(result.err, "plan.json: decisions[0]: unknown tensor 'ghost'"));
}

}  // namespace
}  // namespace ckptplan
