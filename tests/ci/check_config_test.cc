#include "ckptplan/ci/check_config.h"

#include <doctest/doctest.h>

#include "ckptplan/base/errors.h"

namespace ckptplan {
namespace {

TEST_CASE("tolerance: percentages of the baseline peak, or bytes") {
  Tolerance two = ParseTolerance("2%", "--tolerance");
  CHECK(two.is_percent);
  CHECK(two.ToString() == "2%");
  CHECK(two.Allowed(2160) == 43);  // floor(2160 x 0.02 = 43.2)
  CHECK(two.Allowed(0) == 0);
  Tolerance half = ParseTolerance("0.5%", "--tolerance");
  CHECK(half.Allowed(1000) == 5);
  Tolerance bytes = ParseTolerance("256MiB", "--tolerance");
  CHECK(!bytes.is_percent);
  CHECK(bytes.Allowed(1) == 268435456);  // 256 x 2^20, whatever the baseline
  CHECK(bytes.ToString() == "256.0 MiB");
  CHECK(ParseTolerance("0", "--tolerance").Allowed(1 << 30) == 0);
  // 2^62 x 200% overflows int64: clamped.
  CHECK(ParseTolerance("200%", "t").Allowed(INT64_C(1) << 62) == INT64_MAX);
  for (const char* bad : {"%", "-2%", "2 %", "1e3%", "two%", "-5MiB", "5 parsecs"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(ParseTolerance(bad, "--tolerance"), doctest::Contains("--tolerance"),
                         InputError);
  }
  try {
    ParseTolerance("x%", "--tolerance");
  } catch (const InputError& e) {
    CHECK(e.exit_code() == kExitUsage);
  }
}

TEST_CASE("config: defaults, per-graph settings, paths from the config's folder") {
  CheckConfig config = ParseCheckConfig(R"({
    "format": "ckptplan.check", "version": 1,
    "baseline": "memory-baseline.json",
    "defaults": {"budget": "40GiB", "tolerance": "2%"},
    "graphs": [
      {"graph": "models/a.json"},
      {"graph": "../b.onnx", "key": "b", "budget": 1024, "reserve": "1KiB",
       "tolerance": "256MiB", "no_plan": true}]})",
                                        "ci/check.json", "ci");
  CHECK(config.baseline_path == "ci/memory-baseline.json");
  CHECK(config.defaults.budget_bytes == INT64_C(40) << 30);
  CHECK(config.defaults.tolerance->percent == 2);
  CHECK(!config.defaults.reserve_bytes);
  REQUIRE(config.graphs.size() == 2);
  CHECK(config.graphs[0].graph == "models/a.json");
  CHECK(config.graphs[0].path == "ci/models/a.json");
  CHECK(config.graphs[0].key.empty());
  CHECK(!config.graphs[0].settings.budget_bytes);
  CHECK(config.graphs[1].path == "b.onnx");  // ci/../b.onnx, normalized
  CHECK(config.graphs[1].key == "b");
  CHECK(config.graphs[1].settings.budget_bytes == 1024);
  CHECK(config.graphs[1].settings.reserve_bytes == 1024);
  CHECK(config.graphs[1].settings.tolerance->bytes == 268435456);
  CHECK(config.graphs[1].settings.no_plan == true);
}

TEST_CASE("config: every problem listed, naming the file and the entry") {
  std::string message;
  try {
    ParseCheckConfig(R"({"format": "ckptplan.check", "version": 1, "colour": "red",
      "defaults": {"budget": "40 gigs"},
      "graphs": [{"graph": "a.json", "tolerance": "2 percent"}, {"key": "k"},
                 {"graph": "c.json", "no_plan": "yes"}]})",
                     "check.json", "");
  } catch (const InputError& e) {
    message = e.what();
    CHECK(e.exit_code() == kExitBadInput);
  }
  CHECK(message.find("check.json: top level: unknown key \"colour\"") != std::string::npos);
  CHECK(message.find("check.json: defaults: \"budget\"") != std::string::npos);
  CHECK(message.find("check.json: graph 'a.json': \"tolerance\"") != std::string::npos);
  CHECK(message.find("check.json: graphs[1]: \"graph\" must be a non-empty path string") !=
        std::string::npos);
  CHECK(message.find("check.json: graph 'c.json': \"no_plan\" must be true or false") !=
        std::string::npos);
  CHECK_THROWS_WITH_AS(ParseCheckConfig("{\"graphs\": [}", "check.json", ""),
                       doctest::Contains("check.json: malformed JSON"), InputError);
}

}  // namespace
}  // namespace ckptplan
