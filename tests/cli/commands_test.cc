// `generate` and the hidden plan flags, through the CLI.
#include <doctest/doctest.h>

#include <string>

#include "cli_util.h"

namespace ckptplan {
namespace {

using testing::RunCli;
using testing::ScratchDir;
using testing::Slurp;

TEST_CASE("generate writes graphs the planners agree on") {
  const std::string dir = ScratchDir("commands_generate");
  auto made = RunCli("generate transformer --layers 2 --microbatches 2 --batch 2 --seq 16 "
                     "--hidden 32 --heads 4 --vocab 64 -o " + dir + "/t.json");
  REQUIRE(made.code == 0);
  CHECK(made.out.find("nodes") != std::string::npos);
  auto random = RunCli("generate random --seed 7 --layers 5 --width 3 -o " + dir + "/r.json");
  REQUIRE(random.code == 0);
  for (const char* graph : {"t.json", "r.json"}) {
    // Budget: 70% of the save-all peak; the plan files must be identical.
    auto probe = RunCli(std::string("plan ") + dir + "/" + graph + " --budget 1PiB --timings");
    REQUIRE(probe.code == 0);
    const size_t at = probe.err.find("save_all_peak=");
    REQUIRE(at != std::string::npos);
    const long long peak = std::stoll(probe.err.substr(at + 14));
    const std::string budget = std::to_string(peak * 7 / 10);
    std::string plans[2];
    int index = 0;
    for (const char* planner : {"incremental", "reference"}) {
      const std::string out = dir + "/" + graph + "." + planner + ".plan.json";
      auto result = RunCli(std::string("plan ") + dir + "/" + graph + " --budget " + budget +
                           " --planner " + planner + " -o " + out);
      CAPTURE(result.err);
      REQUIRE((result.code == 0 || result.code == 3));
      plans[index++] = result.code == 0 ? Slurp(out) : result.err;
    }
    CHECK(plans[0] == plans[1]);
  }
}

TEST_CASE("generate and --planner reject bad values with usage errors") {
  const std::string dir = ScratchDir("commands_generate_bad");
  CHECK(RunCli("generate transformer --hidden 30 --heads 4 -o " + dir + "/t.json").code == 2);
  CHECK(RunCli("generate random --layers 0 -o " + dir + "/r.json").code == 2);
  CHECK(RunCli("generate transformer").code == 2);  // -o is required
  auto bad = RunCli("plan sample_graphs/mlp.json --budget 1GiB --planner fast");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("unknown planner 'fast'") != std::string::npos);
}

}  // namespace
}  // namespace ckptplan

namespace ckptplan {
namespace {

TEST_CASE("plan files and summaries do not depend on recording every step's categories") {
  // The timeline makes `plan` record categories at every step; without it
  // only the peak's breakdown is computed. Both must print the same figures.
  const std::string dir = testing::ScratchDir("commands_per_step");
  const std::string graph =
      std::string(CKPTPLAN_SOURCE_DIR) + "/sample_graphs/transformer_block.json";
  auto plain = testing::RunCli("plan " + graph + " --budget 300MiB --json -o " + dir + "/a.json");
  auto charted = testing::RunCli("plan " + graph + " --budget 300MiB --json -o " + dir +
                                 "/b.json --timeline " + dir + "/t.json");
  REQUIRE(plain.code == 0);
  REQUIRE(charted.code == 0);
  CHECK(plain.out.find("\"peak_breakdown\"") != std::string::npos);
  CHECK(plain.out == charted.out);
  CHECK(testing::Slurp(dir + "/a.json") == testing::Slurp(dir + "/b.json"));
}

}  // namespace
}  // namespace ckptplan
