// The flags layer: one set of load flags on every graph-reading subcommand,
// typed values, and plan-file settings overridden by flags.
#include "ckptplan/cli/flags.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace ckptplan {
namespace {

using testing::RunCli;
using testing::ScratchDir;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("--dim and --input-shape parse to maps; bad text is a usage error naming the flag") {
  CHECK(ParseDimFlag("seq=4096") == std::pair<std::string, int64_t>{"seq", 4096});
  auto [name, shape] = ParseInputShapeFlag("input_ids:8x4096");
  CHECK(name == "input_ids");
  CHECK(shape == std::vector<int64_t>{8, 4096});
  for (const char* bad : {"batch", "=8", "batch=0", "batch=-1", "batch=8x"}) {
    CAPTURE(bad);
    try {
      ParseDimFlag(bad);
      FAIL("expected an error");
    } catch (const InputError& e) {
      CHECK(e.exit_code() == kExitUsage);
      CHECK(Contains(e.what(), "--dim"));
    }
  }
  CHECK_THROWS_AS(ParseInputShapeFlag("input_ids"), InputError);
  CHECK_THROWS_AS(ParseInputShapeFlag("input_ids:8xx2"), InputError);
}

TEST_CASE("ResolveLoad: flags override the recorded settings, each change said once") {
  LoadOptions recorded;
  recorded.dims = {{"batch", 2}, {"seq", 64}};
  recorded.precision = Precision::kBf16Mixed;
  LoadFlags flags;
  flags.dims = {{"seq", 128}, {"extra", 1}};
  flags.precision = Precision::kBf16Mixed;  // same value: no conflict
  flags.device = LookupDevice("a100");
  flags.limits.max_nodes = 7;
  std::vector<std::string> conflicts;
  LoadOptions load = ResolveLoad(flags, recorded, &conflicts);
  CHECK(load.dims == std::map<std::string, int64_t>{{"batch", 2}, {"extra", 1}, {"seq", 128}});
  CHECK(load.precision == Precision::kBf16Mixed);
  CHECK(load.optimizer == Optimizer::kAdamW);  // neither sets it: the default
  CHECK(std::string(load.device->name) == "a100");
  CHECK(load.limits.max_nodes == 7);  // limits always come from the flags
  CHECK(conflicts == std::vector<std::string>{
                         "--dim seq=128 overrides seq=64 recorded in the plan",
                         "--device a100 overrides device h100 recorded in the plan"});
  // Without a recorded plan nothing conflicts.
  conflicts.clear();
  ResolveLoad(flags, std::nullopt, &conflicts);
  CHECK(conflicts.empty());
}

TEST_CASE("every graph-reading subcommand takes the same load flags") {
  const std::string dir = ScratchDir("flags_all");
  const std::string load =
      " --dim batch=2 --dim seq=64 --precision bf16-mixed --optimizer sgd --device a100"
      " --frozen 'wte.*' --max-nodes 100000 --max-tensors 100000 --max-depth 32";
  const std::string graph = "sample_graphs/gpt2_tiny.onnx";
  auto plan = RunCli("plan " + graph + load + " --budget 4MiB -o " + dir + "/p.json");
  CHECK(plan.code == 0);
  CHECK(RunCli("simulate " + graph + load).code == 0);
  CHECK(RunCli("sweep " + graph + load + " --budgets 3MiB,4MiB").code == 0);
  CHECK(RunCli("check " + graph + load + " --budget 1GiB").code == 0);
  CHECK(RunCli("export " + dir + "/p.json --to jax" + load).code == 0);
  // A repeatable flag takes one value per use: before the graph it does not
  // swallow the graph's path, and a second bare value is an error.
  CHECK(RunCli("simulate --dim batch=2 --dim seq=64 " + graph).code == 0);
  auto extra = RunCli("simulate " + graph + " --dim batch=2 seq=64");
  CHECK(extra.code == 2);
  CHECK(Contains(extra.err, "seq=64"));
  // One registration, one wording: a bad value is exit 2 on each.
  for (const char* command : {"plan", "simulate", "sweep", "check"}) {
    CAPTURE(command);
    auto bad = RunCli(std::string(command) + " " + graph + " --budget 1GiB --precision fp8");
    CHECK(bad.code == 2);
    CHECK(Contains(bad.err, "unknown precision 'fp8' (expected fp32, bf16-mixed, fp16-mixed)"));
  }
}

TEST_CASE("simulate --plan: --reserve 0 means 0, no --reserve means the plan's") {
  const std::string dir = ScratchDir("flags_reserve");
  const std::string graph = "sample_graphs/transformer_block.json";
  REQUIRE(RunCli("plan " + graph + " --budget 320MiB --reserve 1MiB -o " + dir + "/p.json").code ==
          0);
  auto peak = [&](const std::string& extra) {
    auto result = RunCli("simulate " + graph + " --json --plan " + dir + "/p.json" + extra);
    REQUIRE(result.code == 0);
    return nlohmann::json::parse(result.out)["peak_bytes"].get<int64_t>();
  };
  const int64_t with_plan_reserve = peak("");
  const int64_t with_zero = peak(" --reserve 0");
  // The reserve is held all step, so it adds to the peak exactly: 1 MiB = 1048576 B.
  CHECK(with_plan_reserve - with_zero == 1048576);
  CHECK(peak(" --reserve 2MiB") - with_zero == 2097152);
}

}  // namespace
}  // namespace ckptplan
