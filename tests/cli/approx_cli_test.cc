// `plan --max-error` end to end on tests/graphs/approx_mlp.json: the plan
// file's approximations, simulate --plan and export reading them, the
// messages saying why nothing is approximated, and --max-error 0 plans equal
// to plans made without the flag, byte for byte.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace ckptplan {
namespace {

using testing::RunCli;
using testing::ScratchDir;
using testing::Slurp;

constexpr const char* kGraph = "tests/graphs/approx_mlp.json";

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// approx_mlp: batch 1024, 256 -> 512 -> 512 -> 256, float32, SGD. Save-all
// peaks at relu2_bwd (11.5 MiB). Budget 10.5 MiB (11,010,048 B): a1 (2 MiB)
// is dropped and re-made before fc2_bwd by fc1 then relu1; the peak is then
// at fc2_bwd: parameters 2 MiB + x 1 MiB + dw3 0.5 + dw2 1 + dh2 2 + a1' 2 +
// da1 2 = 10.5 MiB. Exact chain cost: fc1 2 x 1024 x 256 x 512 = 268,435,456
// + relu1 1024 x 512 = 524,288 -> 268,959,744 FLOP. fc1's options within 1%:
// rank 64 (error 0.006) costs 2 x 1024 x 64 x (256 + 512) = 100,663,296, so
// saves 167,772,160 (rank 128 saves less, 67,108,864; ranks 16, 32 are over
// 1%). Approximate cost 268,959,744 - 167,772,160 = 101,187,584 FLOP.
TEST_CASE("plan --max-error 1%: fc1 re-run at rank 64; simulate --plan and export read it") {
  const std::string dir = ScratchDir("approx_cli");
  auto made = RunCli(std::string("plan ") + kGraph + " --budget 10.5MiB --max-error 1% -o " +
                     dir + "/p.json");
  REQUIRE(made.code == 0);
  const auto plan = nlohmann::json::parse(Slurp(dir + "/p.json"));
  CHECK(plan["predicted_peak_bytes"] == 11010048);
  CHECK(plan["exact_recompute_cost"] == 268959744.0);
  CHECK(plan["recompute_cost"] == 101187584.0);
  CHECK(plan["max_error"] == 0.01);
  CHECK(plan["estimated_error"] == 0.006);
  REQUIRE(plan["approximations"].size() == 1);
  CHECK(plan["approximations"][0]["node"] == "fc1");
  CHECK(plan["approximations"][0]["rank"] == 64);
  CHECK(plan["approximations"][0]["cost_saved"] == 167772160.0);
  nlohmann::json a1;
  for (const auto& decision : plan["decisions"]) {
    if (decision["tensor"] == "a1") a1 = decision;
  }
  CHECK(a1["action"] == "recompute_approx");
  CHECK(a1["recompute_cost"] == 101187584.0);
  CHECK(Contains(made.out, "recompute cost      101.2 MFLOP  (3.42% of the step's 3.0 GFLOP), "
                           "approximate"));
  CHECK(Contains(made.out, "exact recompute     269.0 MFLOP  (9.10%), 62.38% saved"));
  CHECK(Contains(made.out, "1 re-run linear, estimated gradient error 0.006 <= max error 0.01"));
  CHECK(Contains(made.out, "fc1                 rank 64, error 0.006, saves 167.8 MFLOP"));

  // The same input, the same plan file, byte for byte.
  REQUIRE(RunCli(std::string("plan ") + kGraph + " --budget 10.5MiB --max-error 1% -o " + dir +
                 "/again.json")
              .code == 0);
  CHECK(Slurp(dir + "/again.json") == Slurp(dir + "/p.json"));

  // Re-simulated: the same peak, the same approximate cost.
  auto replay = RunCli(std::string("simulate ") + kGraph + " --plan " + dir + "/p.json --json");
  REQUIRE(replay.code == 0);
  const auto sim = nlohmann::json::parse(replay.out);
  CHECK(sim["peak_bytes"] == 11010048);
  CHECK(sim["recompute_cost"] == 101187584.0);
  CHECK(sim["exact_recompute_cost"] == 268959744.0);
  CHECK(sim["estimated_error"] == 0.006);
  CHECK(replay.err.empty());

  // The HTML report gives the same figures and marks the approximated chain.
  REQUIRE(RunCli(std::string("plan ") + kGraph + " --budget 10.5MiB --max-error 1% --report " +
                 dir + "/r.html")
              .code == 0);
  const std::string html = Slurp(dir + "/r.html");
  CHECK(Contains(html, "101.2 MFLOP</td><td>3.42% of the step's 3.0 GFLOP, with approximate "
                       "recompute"));
  CHECK(Contains(html, "<th>exact recompute</th><td class=\"num\">269.0 MFLOP</td>"));
  CHECK(Contains(html, "fc1 &rarr; relu1 (approximate)"));

  // check gates memory, which approximations do not change: the graph checks as any other.
  auto checked = RunCli(std::string("check ") + kGraph + " --budget 10.5MiB --annotate none");
  CHECK(checked.code == 0);

  // No framework target runs recomputation approximately: export says so.
  auto exported = RunCli("export " + dir + "/p.json --to pytorch-sac -o " + dir + "/sac.json");
  REQUIRE(exported.code == 0);
  CHECK(Contains(exported.out, "pytorch-sac cannot express approximate recompute"));
  const auto sac = nlohmann::json::parse(Slurp(dir + "/sac.json"));
  CHECK(sac["approximations"]["expressed"] == false);
  CHECK(sac["rounding"]["recompute_cost"] == 268959744.0);
}

TEST_CASE("plan --max-error: says why nothing is approximated") {
  // Bound 0.0001: fc1's lowest error is rank 128's 0.001.
  auto tight = RunCli(std::string("plan ") + kGraph + " --budget 10.5MiB --max-error 0.0001");
  REQUIRE(tight.code == 0);
  CHECK(Contains(tight.out, "approximations      none: every option is over the error bound: "
                            "the lowest, node 'fc1' at rank 128, has error 0.001 > 0.0001"));
  CHECK(Contains(tight.out, "recompute cost      269.0 MFLOP"));
  // Save-all fits 11.5 MiB.
  auto roomy = RunCli(std::string("plan ") + kGraph + " --budget 11.5MiB --max-error 1% --json");
  REQUIRE(roomy.code == 0);
  CHECK(nlohmann::json::parse(roomy.out)["no_approximation"] == "the plan recomputes nothing");
  // An ONNX model carries no measured errors.
  auto onnx = RunCli("plan sample_graphs/mlp.onnx --dim batch=8 --budget 1GiB --max-error 1%");
  REQUIRE(onnx.code == 0);
  CHECK(Contains(onnx.out, "approximations      none: the graph has no \"approx\" fields"));
  // Bad bounds are usage errors.
  auto bad = RunCli(std::string("plan ") + kGraph + " --budget 10.5MiB --max-error 1x");
  CHECK(bad.code == 2);
  CHECK(Contains(bad.err, "--max-error: cannot read '1x'"));
  CHECK(RunCli(std::string("plan ") + kGraph + " --budget 10.5MiB --max-error -1%").code == 2);
}

TEST_CASE("plan --max-error 0 writes the plan made without the flag, byte for byte") {
  const std::string dir = ScratchDir("approx_exact");
  for (const std::string args : {std::string(kGraph) + " --budget 10.5MiB",
                                 std::string("sample_graphs/transformer_block.json --budget 320MiB")}) {
    auto plain = RunCli("plan " + args + " -o " + dir + "/plain.json");
    auto zero = RunCli("plan " + args + " --max-error 0 -o " + dir + "/zero.json");
    auto percent = RunCli("plan " + args + " --max-error 0% --json");
    auto plain_json = RunCli("plan " + args + " --json");
    REQUIRE(plain.code == 0);
    CHECK(zero.out == plain.out);
    CHECK(percent.out == plain_json.out);
    CHECK(Slurp(dir + "/zero.json") == Slurp(dir + "/plain.json"));
    CHECK(!Contains(Slurp(dir + "/plain.json"), "approximations"));
    CHECK(!Contains(Slurp(dir + "/plain.json"), "recompute_approx"));
  }
}

TEST_CASE("plan files with approximations that do not match the graph are refused") {
  const std::string dir = ScratchDir("approx_bad");
  REQUIRE(RunCli(std::string("plan ") + kGraph + " --budget 10.5MiB --max-error 1% -o " + dir +
                 "/p.json")
              .code == 0);
  auto plan = nlohmann::json::parse(Slurp(dir + "/p.json"));
  plan["approximations"][0]["rank"] = 7;
  std::ofstream(dir + "/rank.json") << plan.dump();
  auto rank = RunCli(std::string("simulate ") + kGraph + " --plan " + dir + "/rank.json");
  CHECK(rank.code == 4);
  CHECK(Contains(rank.err, "approximations[0]: node 'fc1' has no approx option of rank 7 in "
                           "tests/graphs/approx_mlp.json (ranks: 16, 32, 64, 128)"));
  // fc2 is not re-run when only a1 is recomputed.
  plan["approximations"][0] = {{"node", "fc2"}, {"rank", 64}};
  std::ofstream(dir + "/fc2.json") << plan.dump();
  auto fc2 = RunCli(std::string("simulate ") + kGraph + " --plan " + dir + "/fc2.json");
  CHECK(fc2.code == 4);
  CHECK(Contains(fc2.err, "approximations: node 'fc2' is not re-run by the plan's recomputation"));
}

// approx_mlp with each option's memory as the PyTorch application holds it
// (float32, batch m = 1024): workspace x @ A, 1024 x r x 4 B, and the basis
// V, n x r x 4 B (fc1: n = 512).
TEST_CASE("plan --max-error counts the approximations' workspace and factors") {
  const std::string dir = ScratchDir("approx_cli_memory");
  nlohmann::json graph =
      nlohmann::json::parse(Slurp(std::string(CKPTPLAN_SOURCE_DIR) + "/" + kGraph));
  for (auto& node : graph["nodes"]) {
    if (!node.contains("approx")) continue;
    const int64_t n = node["id"] == "fc3" ? 256 : 512;
    for (auto& option : node["approx"]) {
      const int64_t rank = option["rank"];
      option["workspace_bytes"] = 1024 * rank * 4;
      option["factor_bytes"] = n * rank * 4;
    }
  }
  const std::string path = dir + "/memory.json";
  std::ofstream(path) << graph.dump();
  // At 10.5 MiB the exact plan's peak is the budget (11,010,048 B, at
  // fc2_bwd, above): fc1's rank-64 basis, 512 x 64 x 4 = 131,072 B, lifts it to
  // 11,141,120; rank 128's to more. Nothing fits, and the summary says so.
  auto tight = RunCli("plan " + path + " --budget 10.5MiB --max-error 1%");
  REQUIRE(tight.code == 0);
  CHECK(Contains(tight.out, "none: every option within the error bound makes the plan's peak "
                            "exceed the budget (its re-run's workspace and factors): the "
                            "lowest, node 'fc1' at rank 64, peaks at 11141120 bytes > 11010048"));
  // At 11,141,120 B fc1 runs at rank 64: the predicted peak holds the basis
  // (11,010,048 + 131,072), and simulate --plan gives the same.
  auto made = RunCli("plan " + path + " --budget 11141120 --max-error 1% -o " + dir + "/p.json");
  REQUIRE(made.code == 0);
  const auto plan = nlohmann::json::parse(Slurp(dir + "/p.json"));
  REQUIRE(plan["approximations"].size() == 1);
  CHECK(plan["approximations"][0]["rank"] == 64);
  CHECK(plan["predicted_peak_bytes"] == 11141120);
  auto replay = RunCli("simulate " + path + " --plan " + dir + "/p.json --json");
  REQUIRE(replay.code == 0);
  CHECK(nlohmann::json::parse(replay.out)["peak_bytes"] == 11141120);
  // A bad memory field is bad input naming the node (exit 4).
  graph["nodes"][1]["approx"][0]["factor_bytes"] = -1;
  std::ofstream(dir + "/bad.json") << graph.dump();
  auto bad = RunCli("plan " + dir + "/bad.json --budget 11141120 --max-error 1%");
  CHECK(bad.code == 4);
  CHECK(Contains(bad.err, "node 'fc1': approx[0]: factor_bytes must be an integer in "
                          "[0, 2^63-1], got -1"));
}

}  // namespace
}  // namespace ckptplan
