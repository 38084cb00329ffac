// `plan` and `simulate` with a parallel layout: the "ranks" array and the
// plan file's stages (docs/distributed.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace ckptplan {
namespace {

using testing::RunCli;
using testing::ScratchDir;
using testing::Slurp;

std::string SmallTransformer(const std::string& dir) {
  const std::string path = dir + "/t.json";
  REQUIRE(RunCli("generate transformer --layers 2 --hidden 64 --heads 4 --seq 32 --batch 2 "
                 "--vocab 256 -o " + path).code == 0);
  return path;
}

TEST_CASE("simulate --json with a layout: peak_bytes is the highest of the ranks") {
  const std::string graph = SmallTransformer(ScratchDir("dist_sim"));
  auto one = RunCli("simulate " + graph + " --json");
  auto ddp = RunCli("simulate " + graph + " --json --dp 4");
  auto zero = RunCli("simulate " + graph + " --json --dp 4 --zero 1 --zero-partition params");
  REQUIRE(one.code == 0);
  REQUIRE(ddp.code == 0);
  REQUIRE(zero.code == 0);
  auto j1 = nlohmann::json::parse(one.out), jd = nlohmann::json::parse(ddp.out),
       jz = nlohmann::json::parse(zero.out);
  // DDP copy mode adds the buckets: one more copy of the fp32 gradients,
  // i.e. the parameters' bytes, resident as buffers.
  REQUIRE(jd["ranks"].size() == 1);
  CHECK(jd["ranks"][0]["count"] == 4);
  CHECK(jd["ranks"][0]["peak_breakdown"]["buffers"].get<int64_t>() ==
        j1["peak_breakdown"]["buffers"].get<int64_t>() +
            j1["peak_breakdown"]["parameters"].get<int64_t>());
  // ZeroRedundancyOptimizer: ranks differ; counts cover the 4 ranks.
  int64_t highest = 0, count = 0;
  for (const auto& rank : jz["ranks"]) {
    for (const char* key : {"pp_stage", "tp_rank", "dp_rank", "count", "peak_bytes"}) {
      CHECK(rank.contains(key));
    }
    highest = std::max(highest, rank["peak_bytes"].get<int64_t>());
    count += rank["count"].get<int64_t>();
  }
  CHECK(count == 4);
  CHECK(jz["ranks"].size() > 1);
  CHECK(jz["peak_bytes"] == highest);
}

TEST_CASE("plan with --zero 3 writes each stage's decisions; simulate --plan agrees") {
  const std::string dir = ScratchDir("dist_plan");
  const std::string graph = SmallTransformer(dir);
  auto save_all = nlohmann::json::parse(RunCli("simulate " + graph + " --json --dp 2 --zero 3").out);
  const int64_t budget = save_all["peak_bytes"].get<int64_t>() * 9 / 10;
  auto plan = RunCli("plan " + graph + " --dp 2 --zero 3 --json --budget " +
                     std::to_string(budget) + " -o " + dir + "/plan.json");
  REQUIRE(plan.code == 0);
  auto file = nlohmann::json::parse(Slurp(dir + "/plan.json"));
  CHECK(file["parallel"]["zero"] == 3);
  REQUIRE(file["stages"].size() == 1);
  CHECK(file["stages"][0]["predicted_peak_bytes"].get<int64_t>() <= budget);
  auto again = nlohmann::json::parse(
      RunCli("simulate " + graph + " --json --dp 2 --zero 3 --plan " + dir + "/plan.json").out);
  CHECK(again["peak_bytes"] == file["stages"][0]["predicted_peak_bytes"]);
}

TEST_CASE("plan with --pp 2 writes each stage's decisions; simulate --plan applies each stage's") {
  const std::string dir = ScratchDir("dist_plan_pp");
  const std::string graph = SmallTransformer(dir);
  const std::string layout = " --pp 2 --microbatches 4 --schedule 1f1b";
  auto save_all = nlohmann::json::parse(RunCli("simulate " + graph + " --json" + layout).out);
  // Received activations and gradients are collectives: stage 0 peaks in a
  // backward holding the gradient it received, batch x seq x hidden x 2
  // bytes (16-bit) = 2 x 32 x 64 x 2 = 8192; one device has none.
  REQUIRE(save_all["ranks"].size() == 2);
  CHECK(save_all["ranks"][0]["peak_breakdown"]["collectives"] == 8192);
  CHECK(nlohmann::json::parse(RunCli("simulate " + graph + " --json").out)["peak_breakdown"]
            ["collectives"] == 0);
  const int64_t budget = save_all["peak_bytes"].get<int64_t>() * 9 / 10;
  auto plan = RunCli("plan " + graph + " --json --budget " + std::to_string(budget) + layout +
                     " -o " + dir + "/plan.json");
  REQUIRE(plan.code == 0);
  auto file = nlohmann::json::parse(Slurp(dir + "/plan.json"));
  REQUIRE(file["stages"].size() == 2);
  auto again = nlohmann::json::parse(
      RunCli("simulate " + graph + " --json" + layout + " --plan " + dir + "/plan.json").out);
  REQUIRE(again["ranks"].size() == 2);
  for (int s = 0; s < 2; ++s) {
    CHECK(again["ranks"][s]["peak_bytes"] == file["stages"][s]["predicted_peak_bytes"]);
    CHECK(again["ranks"][s]["peak_bytes"].get<int64_t>() <= budget);
  }
}

TEST_CASE("--timeline with a layout: the highest rank's timeline, each stage's under ranks") {
  const std::string dir = ScratchDir("dist_timeline");
  const std::string graph = SmallTransformer(dir);
  const std::string layout = " --pp 2 --microbatches 4 --schedule 1f1b";
  auto save_all = nlohmann::json::parse(RunCli("simulate " + graph + " --json" + layout).out);
  const int64_t budget = save_all["peak_bytes"].get<int64_t>() * 9 / 10;
  auto plan = RunCli("plan " + graph + " --json --budget " + std::to_string(budget) + layout +
                     " -o " + dir + "/plan.json --timeline " + dir + "/timeline.json");
  REQUIRE(plan.code == 0);
  auto file = nlohmann::json::parse(Slurp(dir + "/plan.json"));
  auto timeline = nlohmann::json::parse(Slurp(dir + "/timeline.json"));
  CHECK(timeline["format"] == "ckptplan.timeline");
  REQUIRE(timeline["ranks"].size() == 2);
  int64_t highest = 0;
  for (int s = 0; s < 2; ++s) {
    const auto& stage = timeline["ranks"][s];
    CHECK(stage["rank"]["pp_stage"] == s);
    // Each stage's timeline is its planned simulation: its peak is the
    // stage's prediction, and the largest step total.
    CHECK(stage["peak_bytes"] == file["stages"][s]["predicted_peak_bytes"]);
    int64_t most = 0;
    for (const auto& step : stage["steps"]) {
      most = std::max(most, step["total_bytes"].get<int64_t>());
    }
    CHECK(most == stage["peak_bytes"].get<int64_t>());
    highest = std::max(highest, stage["peak_bytes"].get<int64_t>());
  }
  // The top level is the highest stage, as the summary's peak.
  CHECK(timeline["peak_bytes"] == highest);
  CHECK(nlohmann::json::parse(plan.out)["peak_bytes"] == highest);
  CHECK(timeline["steps"] == timeline["ranks"][timeline["rank"]["pp_stage"].get<int>()]["steps"]);
  // simulate --dp 2: one distinct rank standing for both.
  REQUIRE(RunCli("simulate " + graph + " --dp 2 --timeline " + dir + "/dp.json").code == 0);
  auto dp = nlohmann::json::parse(Slurp(dir + "/dp.json"));
  REQUIRE(dp["ranks"].size() == 1);
  CHECK(dp["rank"]["count"] == 2);
  // The other per-step outputs are still one device's.
  CHECK(RunCli("simulate " + graph + " --dp 2 --report " + dir + "/r.html").code == 2);
}

TEST_CASE("simulate --plan with a layout loads the graph as the plan recorded") {
  // The plan records --dim batch=2 --dim seq=16; simulate without them
  // loads the same graph and reproduces the stage's prediction.
  const std::string dir = ScratchDir("dist_plan_load");
  const std::string onnx = std::string(CKPTPLAN_SOURCE_DIR) + "/sample_graphs/gpt2_tiny.onnx";
  const std::string dims = " --dim batch=2 --dim seq=16 --loss none";
  auto save_all = nlohmann::json::parse(
      RunCli("simulate " + onnx + dims + " --json --dp 2 --zero 3").out);
  // The save-all peak as the budget (the lower bound is 1.7 of its
  // 1.74 MiB): without the recorded dims the graph would not load at all.
  const int64_t budget = save_all["peak_bytes"].get<int64_t>();
  REQUIRE(RunCli("plan " + onnx + dims + " --dp 2 --zero 3 --budget " + std::to_string(budget) +
                 " -o " + dir + "/plan.json").code == 0);
  auto file = nlohmann::json::parse(Slurp(dir + "/plan.json"));
  CHECK(file["load"]["dims"]["seq"] == 16);
  auto again = RunCli("simulate " + onnx + " --json --dp 2 --zero 3 --plan " + dir + "/plan.json");
  REQUIRE(again.code == 0);
  CHECK(nlohmann::json::parse(again.out)["peak_bytes"] ==
        file["stages"][0]["predicted_peak_bytes"]);
}

TEST_CASE("layout flags out of range exit 2") {
  const std::string graph = SmallTransformer(ScratchDir("dist_usage"));
  auto dp0 = RunCli("simulate " + graph + " --dp 0");
  CHECK(dp0.code == 2);
  CHECK(dp0.err.find("--dp: must be at least 1 (got 0)") != std::string::npos);  // the CLI's names
  auto bucket = RunCli("simulate " + graph + " --dp 2 --bucket-cap 0");
  CHECK(bucket.code == 2);
  CHECK(bucket.err.find("--bucket-cap: must be positive") != std::string::npos);
  CHECK(RunCli("simulate " + graph + " --dp 2 --zero 4").code == 2);
  CHECK(RunCli("simulate " + graph + " --dp 2 --zero 2 --zero-partition params").code == 2);
  CHECK(RunCli("simulate " + graph + " --dp 2 --grad-buckets flat").code == 2);
  // Interleaved needs chunks, and microbatches a multiple of the stages.
  CHECK(RunCli("simulate " + graph + " --pp 2 --schedule interleaved").code == 2);
  CHECK(RunCli("simulate " + graph + " --pp 2 --virtual-stages 2").code == 2);
  CHECK(RunCli("simulate " + graph + " --pp 2 --microbatches 3 --schedule interleaved "
               "--virtual-stages 2").code == 2);
}

TEST_CASE("simulate --tp: one rank stands for the tp ranks; --sp lowers it; --sp alone exits 2") {
  const std::string graph = SmallTransformer(ScratchDir("dist_tp"));
  auto one = nlohmann::json::parse(RunCli("simulate " + graph + " --json").out);
  auto tp = nlohmann::json::parse(RunCli("simulate " + graph + " --json --dp 2 --tp 2").out);
  auto sp = nlohmann::json::parse(RunCli("simulate " + graph + " --json --dp 2 --tp 2 --sp").out);
  REQUIRE(tp["ranks"].size() == 1);
  CHECK(tp["ranks"][0]["count"] == 4);  // 2 dp x 2 tp
  CHECK(tp["layout"]["tp"] == 2);
  // Parameters: the embedding and head split by vocabulary, the four
  // linears' weights (and column biases) split; LayerNorms, wpe and row
  // biases whole, so a little more than half.
  const int64_t params = one["peak_breakdown"]["parameters"].get<int64_t>();
  const int64_t tp_params = tp["ranks"][0]["peak_breakdown"]["parameters"].get<int64_t>();
  CHECK(tp_params > params / 2);
  CHECK(tp_params < params * 6 / 10);
  CHECK(tp["peak_bytes"].get<int64_t>() < one["peak_bytes"].get<int64_t>());
  CHECK(sp["peak_bytes"].get<int64_t>() < tp["peak_bytes"].get<int64_t>());
  CHECK(RunCli("simulate " + graph + " --sp").code == 2);
  CHECK(RunCli("simulate " + graph + " --tp 2 --tp-embedding rows").code == 2);
}

}  // namespace
}  // namespace ckptplan
