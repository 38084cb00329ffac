// Golden CLI tests: `plan`, `simulate`, `sweep` and `check` on sample_graphs/,
// their stdout, --json and the files they write, against tests/golden/cli/.
// Each command runs in a scratch directory where sample_graphs/ is a link to
// the source tree's, so every path it prints or records is relative.
// CKPTPLAN_UPDATE_GOLDEN=1 rewrites the expected files (docs/hacking.md).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "cli_util.h"

namespace ckptplan {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;
using testing::Slurp;

const std::string kGoldenDir = CKPTPLAN_SOURCE_DIR "/tests/golden/cli/";

struct GoldenCase {
  std::string name;                ///< golden files are NAME.out and NAME.FILE
  std::string args;                ///< after `ckptplan`
  std::vector<std::string> files;  ///< files the command writes, compared too
};

// Runs in order: later cases may read what earlier ones wrote (plan files).
const std::vector<GoldenCase>& Cases() {
  static const std::vector<GoldenCase> cases = {
      // plan: JSON graphs and ONNX models, text, --json and the plan file.
      {"plan_transformer_block", "plan sample_graphs/transformer_block.json --budget 320MiB -o tb.plan.json", {"tb.plan.json"}},
      {"plan_transformer_block_json", "plan sample_graphs/transformer_block.json --budget 320MiB --reserve 1MiB --json", {}},
      {"plan_gpt2_tiny", "plan sample_graphs/gpt2_tiny.onnx --dim batch=2 --dim seq=64 --loss cross-entropy --budget 3MiB -o gpt2.plan.json", {"gpt2.plan.json"}},
      {"plan_gpt2_tiny_json", "plan sample_graphs/gpt2_tiny.onnx --dim batch=2 --dim seq=64 --loss cross-entropy --precision bf16-mixed --budget 2.95MiB --json", {}},
      {"plan_cnn", "plan sample_graphs/cnn.onnx --dim batch=4 --loss cross-entropy --budget 4MiB --strategy greedy --start save-all -o cnn.plan.json", {"cnn.plan.json"}},
      // simulate: save-all, and a plan replayed (its graph rebuilt from "load").
      {"simulate_mlp", "simulate sample_graphs/mlp.json", {}},
      {"simulate_diamond_json", "simulate sample_graphs/diamond.json --json", {}},
      {"simulate_transformer_block_plan", "simulate sample_graphs/transformer_block.json --plan tb.plan.json", {}},
      {"simulate_gpt2_tiny_plan_json", "simulate sample_graphs/gpt2_tiny.onnx --plan gpt2.plan.json --json", {}},
      // sweep
      {"sweep_transformer_block", "sweep sample_graphs/transformer_block.json --from 200MiB --to 400MiB --steps 5", {}},
      {"sweep_cnn_json", "sweep sample_graphs/cnn.onnx --dim batch=4 --loss cross-entropy --budgets 1MiB,4MiB,8MiB --json", {}},
      // check: the report, the baseline it writes, JUnit.
      {"check_samples", "check sample_graphs/mlp.json sample_graphs/diamond.json sample_graphs/transformer_block.json --budget 1GiB --baseline baseline.json --update-baseline --junit junit.xml", {"baseline.json", "junit.xml"}},
      {"check_gpt2_tiny", "check sample_graphs/gpt2_tiny.onnx --dim batch=2 --dim seq=64 --loss cross-entropy --budget 3MiB", {}},
  };
  return cases;
}

TEST_CASE("golden CLI outputs on sample_graphs/") {
  const std::string dir = ScratchDir("golden_cli");
  fs::create_directory_symlink(CKPTPLAN_SOURCE_DIR "/sample_graphs", dir + "/sample_graphs");
  const bool update = std::getenv("CKPTPLAN_UPDATE_GOLDEN") != nullptr;
  if (update) fs::create_directories(kGoldenDir);
  for (const GoldenCase& c : Cases()) {
    CAPTURE(c.name);
    const std::string command = "cd " + dir + " && " CKPTPLAN_BINARY " " + c.args + " >" +
                                c.name + ".out 2>" + c.name + ".err";
    const int status = std::system(command.c_str());
    CHECK(status == 0);
    CHECK(Slurp(dir + "/" + c.name + ".err") == "");  // no warnings either
    std::vector<std::pair<std::string, std::string>> outputs = {{c.name + ".out", c.name + ".out"}};
    for (const std::string& file : c.files) outputs.push_back({file, c.name + "." + file});
    for (const auto& [produced, golden] : outputs) {
      CAPTURE(golden);
      const std::string actual = Slurp(dir + "/" + produced);
      if (update) std::ofstream(kGoldenDir + golden, std::ios::binary) << actual;
      REQUIRE_MESSAGE(fs::exists(kGoldenDir + golden),
                      "missing golden file; run with CKPTPLAN_UPDATE_GOLDEN=1");
      CHECK(actual == Slurp(kGoldenDir + golden));
      // Nothing machine-dependent: no absolute paths from this run.
      CHECK(actual.find(dir) == std::string::npos);
      CHECK(actual.find(CKPTPLAN_SOURCE_DIR) == std::string::npos);
    }
  }
}

// Every file under tests/golden/cli/ belongs to a case: a renamed case
// cannot leave a stale expected file behind that nothing checks.
TEST_CASE("golden CLI files: none orphaned") {
  std::vector<std::string> expected;
  for (const GoldenCase& c : Cases()) {
    expected.push_back(c.name + ".out");
    for (const std::string& file : c.files) expected.push_back(c.name + "." + file);
  }
  size_t found = 0;
  for (const auto& entry : fs::directory_iterator(kGoldenDir)) {
    const std::string name = entry.path().filename().string();
    CAPTURE(name);
    CHECK(std::find(expected.begin(), expected.end(), name) != expected.end());
    ++found;
  }
  CHECK(found == expected.size());
}

}  // namespace
}  // namespace ckptplan
