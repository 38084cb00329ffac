// `plan --host-link` end to end: the plan file's offload decisions, simulate
// --plan re-simulating them to the same peak, and the host budget.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace ckptplan {
namespace {

using testing::RunCli;
using testing::ScratchDir;
using testing::Slurp;

// The graph of tests/sim/offload_test.cc, timed in microseconds (10 us a
// node), with f1 a dropout: a (1000 B) can never be recomputed. Save-all
// peaks at 2300 B (g1: x 100 + a + b 1000 + c 100 + gb 100). Dropping b
// re-runs f2 before g1 (x + a + c + b' = 2200, then gb: 2300): recompute
// alone cannot go below 2300. Offloading a at 1 GB/s (1000 B/us: 1 us a
// copy) frees it after f2 and brings it back before g1b: peak 2100 at f2.
constexpr const char* kGraph = R"({"format": "ckptplan.graph", "version": 1,
 "tensors": [{"id": "x", "bytes": 100, "kind": "input"}, {"id": "a", "bytes": 1000},
  {"id": "b", "bytes": 1000}, {"id": "c", "bytes": 100}, {"id": "gb", "bytes": 100},
  {"id": "gb2", "bytes": 100}, {"id": "ga", "bytes": 100}],
 "nodes": [
  {"id": "f1", "op": "dropout", "phase": "forward", "inputs": ["x"], "outputs": ["a"], "time_us": 10},
  {"id": "f2", "op": "op", "phase": "forward", "inputs": ["a"], "outputs": ["b"], "time_us": 10},
  {"id": "f3", "op": "op", "phase": "forward", "inputs": ["b"], "outputs": ["c"], "time_us": 10},
  {"id": "g1", "op": "op", "phase": "backward", "inputs": ["c", "b"], "outputs": ["gb"], "time_us": 10},
  {"id": "g1b", "op": "op", "phase": "backward", "inputs": ["gb"], "outputs": ["gb2"], "time_us": 10},
  {"id": "g2", "op": "op", "phase": "backward", "inputs": ["gb2", "a"], "outputs": ["ga"], "time_us": 10}]})";

std::string WriteGraph(const std::string& dir) {
  const std::string path = dir + "/offload.json";
  std::ofstream(path) << kGraph;
  return path;
}

TEST_CASE("plan --host-link offloads what recompute cannot free, and simulate --plan agrees") {
  const std::string dir = ScratchDir("offload_cli");
  const std::string graph = WriteGraph(dir);
  // Without a host link nothing is offloaded and 2100 B cannot be reached.
  CHECK(RunCli("plan " + graph + " --budget 2100").code == 3);
  auto made = RunCli("plan " + graph + " --budget 2100 --host-link 1GB/s -o " + dir + "/p.json");
  REQUIRE(made.code == 0);
  const auto plan = nlohmann::json::parse(Slurp(dir + "/p.json"));
  CHECK(plan["predicted_peak_bytes"] == 2100);
  CHECK(plan["recompute_cost"] == 0);
  CHECK(plan["offload"]["exposed_us"] == 0);
  CHECK(plan["offload"]["host_peak_bytes"] == 1024);  // 1000 B pinned: 2^10
  const auto& a = plan["decisions"][0];
  CHECK(a["tensor"] == "a");
  CHECK(a["action"] == "offload");
  CHECK(a["freed_after"] == "f2");      // the copy out ends at 11 us, in f2
  CHECK(a["reloaded_before"] == "g1b");  // due at 50 us (g2), so started in g1b
  CHECK(made.out.find("freed after 'f2', back before 'g1b'") != std::string::npos);
  auto replay = RunCli("simulate " + graph + " --plan " + dir + "/p.json --json");
  REQUIRE(replay.code == 0);
  CHECK(nlohmann::json::parse(replay.out)["peak_bytes"] == 2100);
}

TEST_CASE("plan --host-budget: a plan that needs more host memory is infeasible, and says so") {
  const std::string dir = ScratchDir("offload_cli_host");
  const std::string graph = WriteGraph(dir);
  auto over = RunCli("plan " + graph + " --budget 2100 --host-link 1GB/s --host-budget 1000");
  CHECK(over.code == 3);
  CHECK(over.err.find("holds 1.0 KiB on the host, over the host budget of 1000 B") !=
        std::string::npos);
  // A budget recompute reaches alone stays recompute-only, offload or not.
  auto loose = RunCli("plan " + graph + " --budget 2300 --host-link 1GB/s --json");
  REQUIRE(loose.code == 0);
  CHECK(loose.out.find("\"offload\"") == std::string::npos);
}

}  // namespace
}  // namespace ckptplan
