// `ckptplan check` end to end: verdicts, exit codes, baseline file, config,
// GitHub annotations and job summary, JUnit (validated with xmllint), and the
// GitHub Actions job in docs/manual.md.
#include "ckptplan/ci/check.h"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"

namespace ckptplan {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::ScratchDir;
using testing::Slurp;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// x (input, 1000 B) and w (parameter, 100 B) are resident. fc makes h
// (`h_bytes`), act makes y (10 B); act_bwd reads both, so both are saved
// (saved_activations), and makes dh (50 B, temporaries); fc_bwd makes the
// gradient dw (100 B). Peak at act_bwd: 1000 + 100 + h + 10 + 50 = 1160 + h,
// which beats fc_bwd's 1000 + 100 + 50 + 100 = 1250 for h > 90.
std::string GraphJson(int64_t h_bytes) {
  return R"({"format": "ckptplan.graph", "version": 1,
 "tensors": [{"id": "x", "bytes": 1000, "kind": "input"},
             {"id": "w", "bytes": 100, "kind": "parameter"},
             {"id": "h", "bytes": )" +
         std::to_string(h_bytes) + R"(}, {"id": "y", "bytes": 10}, {"id": "dh", "bytes": 50},
             {"id": "dw", "bytes": 100, "kind": "gradient"}],
 "nodes": [
  {"id": "fc", "op": "matmul", "scope": "blk/fc", "phase": "forward", "inputs": ["x", "w"], "outputs": ["h"], "flops": 100},
  {"id": "act", "op": "gelu", "scope": "blk/act", "phase": "forward", "inputs": ["h"], "outputs": ["y"], "flops": 10},
  {"id": "act_bwd", "op": "gelu_bwd", "scope": "blk/act", "phase": "backward", "inputs": ["h", "y"], "outputs": ["dh"], "flops": 20},
  {"id": "fc_bwd", "op": "matmul_bwd", "scope": "blk/fc", "phase": "backward", "inputs": ["dh", "x"], "outputs": ["dw"], "flops": 200}]})";
}

/// A fresh directory for one test, private to this process (several
/// worktrees may run the suite at once), removed at the end of the test.
class Scratch {
 public:
  explicit Scratch(const std::string& name)
      : dir_(ScratchDir(name + "_" + std::to_string(getpid()))) {}
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

/// Runs `ckptplan ARGS` (shell text) in `dir` with `env` assignments before
/// it; stdout and stderr are captured in dir/.out and dir/.err.
CliResult RunIn(const std::string& dir, const std::string& args, const std::string& env = "") {
  const std::string command =
      "cd '" + dir + "' && " + env + " '" CKPTPLAN_BINARY "' " + args + " >.out 2>.err";
  int status = std::system(command.c_str());
  CliResult result;
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = Slurp(dir + "/.out");
  result.err = Slurp(dir + "/.err");
  return result;
}

/// Writes g.json (h = 1000 B) into `dir` and records it in b.json (peak 2160 B).
void Record(const std::string& dir) {
  Write(dir + "/g.json", GraphJson(1000));
  CliResult recorded = RunIn(dir, "check g.json --budget 4KiB --baseline b.json --update-baseline");
  REQUIRE(recorded.code == 0);
}

int Xmllint(const std::string& file) {
  std::string command = "xmllint --noout --schema '" CKPTPLAN_SOURCE_DIR "/tests/junit.xsd' '" +
                        file + "' >/dev/null 2>&1";
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_CASE("check: a graph change past the tolerance fails, naming the category and op") {
  Scratch scratch("check_regress");
  const std::string& dir = scratch.dir();
  Record(dir);
  std::string baseline_before = Slurp(dir + "/b.json");
  Write(dir + "/g.json", GraphJson(1100));  // h grows 1000 -> 1100: peak 2160 -> 2260
  CliResult result = RunIn(dir, "check g.json --budget 4KiB --baseline b.json --tolerance 2%");
  CHECK(result.code == 1);
  CHECK(FirstLine(result.out) == "ckptplan check: FAIL: 1 of 1 graph failed: g.json (regressed)");
  // +100 / 2160 = +4.63%; 2% of 2160 = 43.2 -> 43 B allowed.
  CHECK(Contains(result.out,
                 "FAIL g.json: peak 2.2 KiB regressed by +100 B (+4.63%) over "
                 "baseline 2.1 KiB, more than the tolerance 2% (43 B); grew most: "
                 "saved_activations +100 B; tensor 'h' +100 B from op matmul in "
                 "module 'blk/fc'\n"));
  CHECK(Contains(result.out, "peak                2.2 KiB (2260 B)"));
  CHECK(Contains(result.out,
                 "at op gelu_bwd in module 'blk/act' (node 'act_bwd', backward, step 2)"));
  CHECK(Contains(result.out, "budget              4.0 KiB (4096 B)"));
  CHECK(Contains(result.out, "headroom 1.8 KiB (44.82% of the budget)"));  // 1836 / 4096
  CHECK(Contains(result.out, "baseline            2.1 KiB (2160 B)"));
  CHECK(Contains(result.out, "delta +100 B (+100 B, +4.63%), allowed +43 B (tolerance 2%)"));
  // Per category: saved_activations h + y = 1010 -> 1110 (1.1 KiB), +100 / 1010 = +9.90%.
  CHECK(Contains(result.out,
                 "    saved_activations   1010 B     -> 1.1 KiB    +100 B (+100 B, +9.90%)\n"));
  CHECK(!Contains(result.out, "    temporaries "));  // unchanged categories are not listed
  CHECK(Contains(result.out, "    h                        1000 B        -> 1.1 KiB    +100 B"));
  CHECK(result.err.empty());
  CHECK(Slurp(dir + "/b.json") == baseline_before);  // checking never rewrites the baseline
}

TEST_CASE("check: growth within the tolerance passes; the bound is inclusive") {
  Scratch scratch("check_within");
  const std::string& dir = scratch.dir();
  Record(dir);
  Write(dir + "/g.json", GraphJson(1100));  // +100 B over 2160
  CliResult five = RunIn(dir, "check g.json --budget 4KiB --baseline b.json --tolerance 5%");
  CHECK(five.code == 0);  // 5% of 2160 = 108 >= 100
  CHECK(FirstLine(five.out) ==
        "ckptplan check: PASS: 1 graph within budget and baseline tolerance");
  CHECK(Contains(five.out,
                 "PASS g.json: peak 2.2 KiB within budget 4.0 KiB (1.8 KiB headroom), "
                 "+100 B (+4.63%) vs baseline 2.1 KiB within tolerance 5%\n"));
  CHECK(RunIn(dir, "check g.json --budget 4KiB --baseline b.json --tolerance 100B").code == 0);
  CliResult tight = RunIn(dir, "check g.json --budget 4KiB --baseline b.json --tolerance 99B");
  CHECK(tight.code == 1);
  CHECK(Contains(tight.out, "more than the tolerance 99 B (99 B)"));
  // The default tolerance is 0: any growth fails.
  CHECK(RunIn(dir, "check g.json --budget 4KiB --baseline b.json").code == 1);
  // A shrink passes.
  Write(dir + "/g.json", GraphJson(900));
  CHECK(RunIn(dir, "check g.json --budget 4KiB --baseline b.json").code == 0);
}

TEST_CASE("check: over budget fails in both modes, without a baseline too") {
  Scratch scratch("check_budget");
  const std::string& dir = scratch.dir();
  Write(dir + "/g.json", GraphJson(1100));  // save-all peak 2260
  CliResult save_all = RunIn(dir, "check g.json --budget 2200 --no-plan");
  CHECK(save_all.code == 1);
  CHECK(
      Contains(save_all.out, "FAIL g.json: over budget: peak 2.2 KiB > budget 2.1 KiB by 60 B\n"));
  CHECK(Contains(save_all.out, "over by 60 B (2.73% of the budget)"));  // 60 / 2200
  // No plan helps: every step at act_bwd needs h, y and dh live (lower bound
  // 1100 resident + 1160 = 2260). `check` reports it as a failed check, not exit 3.
  CliResult plan = RunIn(dir, "check g.json --budget 2200");
  CHECK(plan.code == 1);
  CHECK(
      Contains(plan.out, "FAIL g.json: over budget: no plan can fit: the lower bound is 2.2 KiB"));
  CliResult fits = RunIn(dir, "check g.json --budget 2260");
  CHECK(fits.code == 0);
  CHECK(Contains(fits.out, "PASS g.json: peak 2.2 KiB within budget 2.2 KiB (0 B headroom)\n"));
  CHECK(Contains(fits.out, "Memory at the peak, by category:\n"));
}

TEST_CASE("check: a missing or corrupt baseline is a clear error") {
  Scratch scratch("check_bad_baseline");
  const std::string& dir = scratch.dir();
  Write(dir + "/g.json", GraphJson(1000));
  CliResult missing = RunIn(dir, "check g.json --budget 4KiB --baseline b.json");
  CHECK(missing.code == 5);
  CHECK(Contains(missing.err,
                 "b.json: baseline file not found; create it with `ckptplan check "
                 "... --baseline b.json --update-baseline` and commit it"));
  CHECK(missing.out.empty());
  CHECK(!fs::exists(dir + "/b.json"));

  Write(dir + "/b.json", "{\"format\": \"ckptplan.baseline\", \"version\": 1, \"graphs\": {");
  CliResult truncated = RunIn(dir, "check g.json --budget 4KiB --baseline b.json");
  CHECK(truncated.code == 4);
  CHECK(Contains(truncated.err, "b.json: corrupt baseline: malformed JSON at byte"));
  CHECK(Contains(truncated.err, "regenerate it with --update-baseline"));

  Write(dir + "/b.json", R"({"format": "ckptplan.baseline", "version": 1,
                            "graphs": {"g.json": {"mode": "plan", "peak_bytes": -5}}})");
  CliResult invalid = RunIn(dir, "check g.json --budget 4KiB --baseline b.json");
  CHECK(invalid.code == 4);
  CHECK(Contains(invalid.err, "b.json: graph 'g.json': \"peak_bytes\" must be >= 0, got -5"));
  CHECK(Contains(invalid.err, "b.json: graph 'g.json': missing \"graph_sha256\""));

  // A valid baseline without this graph, or recorded in the other mode.
  CHECK(
      RunIn(dir, "check g.json --budget 4KiB --baseline b.json --update-baseline --no-plan").code ==
      0);
  CliResult other_mode = RunIn(dir, "check g.json --budget 4KiB --baseline b.json");
  CHECK(other_mode.code == 4);
  CHECK(Contains(other_mode.err,
                 "b.json: entry 'g.json' was recorded in save-all mode but this "
                 "check runs in plan mode"));
  fs::copy_file(dir + "/g.json", dir + "/h.json");
  CliResult no_entry = RunIn(dir, "check h.json --budget 4KiB --baseline b.json --no-plan");
  CHECK(no_entry.code == 4);
  CHECK(Contains(no_entry.err,
                 "b.json: no entry for graph key 'h.json' (h.json); add it with "
                 "--update-baseline"));
}

TEST_CASE("check --update-baseline: atomic, byte-stable, keeps other graphs' entries") {
  Scratch scratch("check_update");
  const std::string& dir = scratch.dir();
  Write(dir + "/g.json", GraphJson(1000));
  Write(dir + "/other.json", GraphJson(500));
  // Over a corrupt file (e.g. a merge conflict) the update starts afresh.
  Write(dir + "/b.json", "<<<<<<< HEAD\n");
  CliResult first =
      RunIn(dir, "check g.json other.json --budget 4KiB --baseline b.json --update-baseline");
  CHECK(first.code == 0);
  CHECK(Contains(first.err, "replacing a corrupt baseline"));
  CHECK(FirstLine(first.out) ==
        "ckptplan check: PASS: 2 graphs within budget; baseline b.json updated");
  std::string text = Slurp(dir + "/b.json");
  auto json = nlohmann::json::parse(text);
  CHECK(json["format"] == "ckptplan.baseline");
  CHECK(json["graphs"]["g.json"]["peak_bytes"] == 2160);
  CHECK(json["graphs"]["other.json"]["peak_bytes"] == 1660);  // 1160 + 500
  CHECK(json["graphs"]["g.json"]["peak_breakdown"]["saved_activations"] == 1010);
  CHECK(json["graphs"]["g.json"]["peak"]["op"] == "gelu_bwd");
  CHECK(json["graphs"]["g.json"]["top_tensors"][0]["tensor"] == "h");

  // Re-recording only g.json keeps other.json's entry; same input, same bytes.
  CHECK(RunIn(dir, "check g.json --budget 4KiB --baseline b.json --update-baseline").code == 0);
  CHECK(Slurp(dir + "/b.json") == text);
  // "./g.json" is the same key; the entry records the path as given.
  CHECK(RunIn(dir, "check ./g.json --budget 4KiB --baseline b.json --update-baseline").code == 0);
  auto same_key = nlohmann::json::parse(Slurp(dir + "/b.json"));
  CHECK(same_key["graphs"].size() == 2);
  CHECK(same_key["graphs"]["g.json"]["graph"] == "./g.json");
  Write(dir + "/g.json", GraphJson(1100));
  CliResult grown = RunIn(dir, "check g.json --budget 4KiB --baseline b.json --update-baseline");
  CHECK(grown.code == 0);  // recording accepts the growth...
  CHECK(Contains(grown.out,
                 "PASS g.json: peak 2.2 KiB within budget 4.0 KiB (1.8 KiB headroom), "
                 "+100 B (+4.63%) vs baseline 2.1 KiB; baseline updated"));
  auto updated = nlohmann::json::parse(Slurp(dir + "/b.json"));
  CHECK(updated["graphs"]["g.json"]["peak_bytes"] == 2260);
  CHECK(updated["graphs"]["other.json"] == json["graphs"]["other.json"]);
  // ...but not a graph over budget (the entry is still recorded).
  CHECK(
      RunIn(dir, "check g.json --budget 2KiB --no-plan --baseline b.json --update-baseline").code ==
      1);
  for (const auto& entry : fs::directory_iterator(dir)) {
    CHECK_MESSAGE(!Contains(entry.path().filename().string(), ".tmp"), entry.path());
  }
  CliResult no_file = RunIn(dir, "check g.json --budget 4KiB --update-baseline");
  CHECK(no_file.code == 2);
  CHECK(Contains(no_file.err, "--update-baseline needs --baseline FILE"));
}

TEST_CASE("check --annotate github: escaped workflow commands and a job summary") {
  Scratch scratch("check_github");
  const std::string& dir = scratch.dir();
  Write(dir + "/m,1:x.json", GraphJson(1000));
  Write(dir + "/ok.json", GraphJson(1000));
  Write(dir + "/shrunk.json", GraphJson(1000));
  Write(dir + "/check.json", R"({"format": "ckptplan.check", "version": 1, "baseline": "b.json",
    "defaults": {"budget": "4KiB", "tolerance": "2%"},
    "graphs": [{"graph": "m,1:x.json", "key": "zoo: gpt, 50%"}, {"graph": "ok.json"},
               {"graph": "shrunk.json"}]})");
  REQUIRE(RunIn(dir, "check --config check.json --update-baseline").code == 0);
  Write(dir + "/m,1:x.json", GraphJson(1100));  // +100 B: past 2%
  Write(dir + "/ok.json", GraphJson(1040));     // +40 B: within 2% (43 B)
  Write(dir + "/shrunk.json", GraphJson(500));  // -500 B
  Write(dir + "/summary.md", "# earlier step\n");
  std::string github = "GITHUB_STEP_SUMMARY='" + dir + "/summary.md'";
  CliResult result = RunIn(dir, "check --config check.json --annotate github", github);
  CHECK(result.code == 1);
  std::istringstream lines(result.err);
  std::vector<std::string> commands;
  for (std::string line; std::getline(lines, line);) commands.push_back(line);
  // One line per command: the multi-line report is folded with %0A.
  REQUIRE(commands.size() == 3);
  CHECK(
      commands[0].rfind("::error file=m%2C1%3Ax.json,title=ckptplan check%3A zoo%3A gpt%2C "
                        "50%25::FAIL zoo: gpt, 50%25: peak 2.2 KiB regressed by +100 B (+4.63%25) "
                        "over baseline 2.1 KiB, more than the tolerance 2%25 (43 B); grew most: "
                        "saved_activations +100 B; tensor 'h' +100 B from op matmul in module "
                        "'blk/fc'%0A  graph               m,1:x.json (plan mode)%0A",
                        0) == 0);
  CHECK(commands[1].rfind("::warning file=ok.json,title=ckptplan check%3A ok.json::peak grew +40 "
                          "B (+40 B, +1.85%25), within the tolerance 2%25%0APASS ok.json",
                          0) == 0);
  CHECK(commands[2] ==
        "::notice file=shrunk.json,title=ckptplan check%3A shrunk.json::peak "
        "shrank -500 B (-500 B, -23.15%25); run ckptplan check with "
        "--update-baseline to lock it in");
  CHECK(!Contains(result.err, "\r"));

  std::string summary = Slurp(dir + "/summary.md");
  CHECK(summary.rfind("# earlier step\n### ckptplan check: FAIL: 1 of 3 graphs failed: zoo: gpt, "
                      "50% (regressed)\n",
                      0) == 0);
  CHECK(Contains(summary,
                 "| FAIL | zoo: gpt, 50% | 2.2 KiB | 4.0 KiB | 2.1 KiB | +100 B (+4.63%) | "
                 "op gelu_bwd in module 'blk/act' |\n"));
  CHECK(Contains(summary, "| PASS | ok.json | 2.1 KiB | 4.0 KiB | 2.1 KiB | +40 B (+1.85%) |"));
  CHECK(Contains(summary, "| saved_activations | 1010 B | 1.1 KiB | +100 B (+100 B, +9.90%) |\n"));

  // Without --annotate: no workflow commands, the summary file is left alone.
  CliResult plain = RunIn(dir, "check --config check.json", github);
  CHECK(plain.code == 1);
  CHECK(plain.err.empty());
  CHECK(Slurp(dir + "/summary.md") == summary);
  CHECK(RunIn(dir, "check --config check.json --annotate gitlab").code == 2);
}

TEST_CASE("check --junit: one case per graph, valid against the JUnit schema") {
  Scratch scratch("check_junit");
  const std::string& dir = scratch.dir();
  Write(dir + "/a.json", GraphJson(1000));
  Write(dir + "/b.json", GraphJson(1000));
  Write(dir + "/check.json", R"({"format": "ckptplan.check", "version": 1, "baseline": "mb.json",
    "defaults": {"budget": "4KiB"},
    "graphs": [{"graph": "a.json", "key": "<a & \"b\" 'c'>"}, {"graph": "b.json"}]})");
  REQUIRE(RunIn(dir, "check --config check.json --update-baseline").code == 0);
  Write(dir + "/a.json", GraphJson(1100));
  CliResult result = RunIn(dir, "check --config check.json --junit report.xml");
  CHECK(result.code == 1);
  std::string xml = Slurp(dir + "/report.xml");
  CHECK(Xmllint(dir + "/report.xml") == 0);
  CHECK(Contains(xml,
                 "<testsuites name=\"ckptplan check\" tests=\"2\" failures=\"1\" errors=\"0\">"));
  CHECK(Contains(xml,
                 "<testcase name=\"&lt;a &amp; &quot;b&quot; &apos;c&apos;&gt;\" "
                 "classname=\"ckptplan.check\">"));
  CHECK(Contains(xml, "<property name=\"peak_bytes\" value=\"2260\"/>"));
  CHECK(Contains(xml, "<property name=\"baseline_peak_bytes\" value=\"2160\"/>"));
  CHECK(Contains(xml, "<property name=\"delta_bytes\" value=\"100\"/>"));
  CHECK(Contains(xml, "<property name=\"peak_saved_activations_bytes\" value=\"1110\"/>"));
  CHECK(Contains(xml, "<property name=\"peak_op\" value=\"gelu_bwd\"/>"));
  CHECK(Contains(xml,
                 "<failure message=\"FAIL &lt;a &amp; &quot;b&quot; &apos;c&apos;&gt;: peak "
                 "2.2 KiB regressed"));
  CHECK(Contains(xml, "type=\"regression\">"));
  // The schema check can fail: a count that is not a number is rejected.
  std::string broken = xml;
  broken.replace(broken.find("tests=\"2\""), 9, "tests=\"two\"");
  Write(dir + "/broken.xml", broken);
  CHECK(Xmllint(dir + "/broken.xml") != 0);
  // Same input, same bytes.
  CHECK(RunIn(dir, "check --config check.json --junit report2.xml").out == result.out);
  CHECK(Slurp(dir + "/report2.xml") == xml);
}

TEST_CASE("check --config: per-graph settings beat the command line, which beats defaults") {
  Scratch scratch("check_config");
  const std::string& dir = scratch.dir();
  for (const char* name : {"a.json", "b.json", "c.json"}) Write(dir + "/" + name, GraphJson(1000));
  Write(dir + "/check.json", R"({"format": "ckptplan.check", "version": 1, "baseline": "mb.json",
    "defaults": {"budget": "4KiB", "tolerance": "2%"},
    "graphs": [{"graph": "a.json", "key": "a", "tolerance": "5%"},
               {"graph": "b.json", "key": "b"},
               {"graph": "c.json", "key": "c", "budget": 2200, "no_plan": true}]})");
  REQUIRE(RunIn(dir, "check --config check.json --update-baseline").code == 0);
  for (const char* name : {"a.json", "b.json", "c.json"}) Write(dir + "/" + name, GraphJson(1100));
  CliResult result = RunIn(dir, "check --config check.json");
  CHECK(result.code == 1);
  CHECK(FirstLine(result.out) ==
        "ckptplan check: FAIL: 2 of 3 graphs failed: b (regressed), c (over budget, regressed)");
  CHECK(Contains(result.out, "PASS a: "));  // its own 5%
  CHECK(Contains(result.out, "FAIL b: peak 2.2 KiB regressed"));
  CHECK(Contains(result.out, "FAIL c: over budget: peak 2.2 KiB > budget 2.1 KiB by 60 B; peak"));
  CHECK(Contains(result.out, "  graph               c.json (save-all mode)\n"));
  // --tolerance 10% replaces the default for b and c but not a's own 5%.
  CliResult loose = RunIn(dir, "check --config check.json --tolerance 10%");
  CHECK(FirstLine(loose.out) == "ckptplan check: FAIL: 1 of 3 graphs failed: c (over budget)");
  CHECK(Contains(loose.out, "within tolerance 5%"));
  CHECK(Contains(loose.out, "within tolerance 10%"));
  // Graphs on the command line come first and use the command line's settings.
  Write(dir + "/d.json", GraphJson(1000));
  CliResult mixed = RunIn(dir, "check d.json --config check.json --budget 8KiB --update-baseline");
  CHECK(mixed.code == 1);  // c is still over its own budget
  CHECK(Contains(mixed.out, "\nPASS d.json: peak 2.1 KiB within budget 8.0 KiB"));

  CliResult no_budget = RunIn(dir, "check d.json");
  CHECK(no_budget.code == 2);
  CHECK(Contains(no_budget.err, "graph 'd.json' has no budget: pass --budget"));
  CliResult duplicate = RunIn(dir, "check a.json ./a.json --budget 4KiB");
  CHECK(duplicate.code == 2);
  CHECK(Contains(duplicate.err, "share the baseline key 'a.json'"));
  CHECK(RunIn(dir, "check --budget 4KiB").code == 2);
  CHECK(RunIn(dir, "check d.json --budget 4KiB --tolerance 2percent").code == 2);
  Write(dir + "/bad.json",
        R"({"format": "ckptplan.check", "version": 1, "graphs": [{"path": "a.json"}]})");
  CliResult bad = RunIn(dir, "check --config bad.json");
  CHECK(bad.code == 4);
  CHECK(Contains(bad.err, "bad.json: graphs[0]: unknown key \"path\""));
  CHECK(RunIn(dir, "check --config nowhere.json").code == 5);
  Write(dir + "/broken.json", GraphJson(1000).substr(0, 40));
  CHECK(RunIn(dir, "check broken.json --budget 4KiB").code == 4);
}

TEST_CASE("check: long names are reported whole") {
  Scratch scratch("check_long");
  const std::string& dir = scratch.dir();
  std::string scope(3000, 'm');
  std::string graph = GraphJson(1000);
  graph.replace(graph.find("blk/act"), 7, scope);  // act's scope
  Write(dir + "/g.json", graph);
  CliResult result = RunIn(dir, "check g.json --budget 4KiB --no-plan");
  CHECK(result.code == 0);
  CHECK(Contains(result.out, "y [saved_activations] from op gelu in module '" + scope + "'\n"));
}

// Lines of the `run: |` block of the "Check training memory" step in docs/manual.md.
std::string ReadmeStepCommands() {
  std::istringstream readme(Slurp(CKPTPLAN_SOURCE_DIR "/docs/manual.md"));
  std::string line, commands;
  bool in_step = false;
  size_t indent = std::string::npos;
  while (std::getline(readme, line)) {
    if (Contains(line, "- name: Check training memory")) {
      in_step = true;
      continue;
    }
    if (in_step && indent == std::string::npos && Contains(line, "run: |")) {
      indent = line.find("run:") + 2;  // the block is indented past `run:`
      continue;
    }
    if (indent == std::string::npos) continue;
    if (line.find_first_not_of(' ') < indent || line.find_first_not_of(' ') == std::string::npos) {
      break;
    }
    commands += line.substr(indent) + "\n";
  }
  return commands;
}

TEST_CASE("the manual's GitHub Actions job runs as written") {
  std::string commands = ReadmeStepCommands();
  REQUIRE(Contains(commands, "ckptplan check"));
  std::string record;  // the manual's command that records the baseline
  std::istringstream readme(Slurp(CKPTPLAN_SOURCE_DIR "/docs/manual.md"));
  for (std::string line; std::getline(readme, line);) {
    // The recording command, not the usage synopsis (which has [optional] flags).
    if (line.rfind("ckptplan check ", 0) == 0 && Contains(line, "--update-baseline") &&
        !Contains(line, "[")) {
      record = line;
      break;
    }
  }
  REQUIRE(!record.empty());
  Scratch scratch("check_readme");
  const std::string& dir = scratch.dir();
  fs::copy(CKPTPLAN_SOURCE_DIR "/sample_graphs", dir + "/sample_graphs");
  Write(dir + "/record.sh", record + "\n");
  Write(dir + "/step.sh", commands);
  Write(dir + "/summary.md", "");
  std::string path = fs::path(CKPTPLAN_BINARY).parent_path().string();
  auto run_step = [&](const std::string& script) {
    std::string command = "cd '" + dir + "' && PATH='" + path +
                          "':\"$PATH\" GITHUB_STEP_SUMMARY='" + dir + "/summary.md' bash -e " +
                          script + " >out.txt 2>err.txt";
    int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  REQUIRE(run_step("record.sh") == 0);
  CHECK(fs::exists(dir + "/memory-baseline.json"));
  CHECK(run_step("step.sh") == 0);
  CHECK(FirstLine(Slurp(dir + "/out.txt")).rfind("ckptplan check: PASS", 0) == 0);
  CHECK(Contains(Slurp(dir + "/summary.md"), "### ckptplan check: PASS"));
  CHECK(Xmllint(dir + "/memory-check.xml") == 0);

  // The model change of a pull request: the MLP's hidden activation a1 grows by half.
  std::string mlp_path = dir + "/sample_graphs/mlp.json";
  auto mlp = nlohmann::json::parse(Slurp(mlp_path));
  bool grown = false;
  for (auto& tensor : mlp["tensors"]) {
    if (tensor["id"] != "a1") continue;
    tensor["shape"][1] = tensor["shape"][1].get<int64_t>() * 3 / 2;
    grown = true;
  }
  REQUIRE(grown);
  Write(mlp_path, mlp.dump(1));
  CHECK(run_step("step.sh") == 1);
  std::string err = Slurp(dir + "/err.txt");
  CHECK(Contains(err,
                 "::error file=sample_graphs/mlp.json,title=ckptplan check%3A "
                 "sample_graphs/mlp.json::FAIL sample_graphs/mlp.json: peak"));
  CHECK(Contains(err, "saved_activations +"));
  CHECK(Contains(err, "tensor 'a1' +"));
  CHECK(Contains(Slurp(dir + "/summary.md"), "### ckptplan check: FAIL"));
  CHECK(Xmllint(dir + "/memory-check.xml") == 0);
  CHECK(Contains(Slurp(dir + "/memory-check.xml"), "failures=\"1\""));
}

TEST_CASE("growth helpers: categories and tensors ordered by growth") {
  PeakRecord before, now;
  before.breakdown[static_cast<size_t>(Category::kSavedActivations)] = 100;
  now.breakdown[static_cast<size_t>(Category::kSavedActivations)] = 150;  // +50
  before.breakdown[static_cast<size_t>(Category::kTemporaries)] = 80;
  now.breakdown[static_cast<size_t>(Category::kTemporaries)] = 60;  // -20
  now.breakdown[static_cast<size_t>(Category::kRecomputed)] = 50;   // +50, later category
  std::vector<CategoryDelta> categories = CategoryDeltas(before, now);
  REQUIRE(categories.size() == 3);
  CHECK(categories[0].category == Category::kSavedActivations);
  CHECK(categories[1].category == Category::kRecomputed);
  CHECK(categories[2].category == Category::kTemporaries);

  before.top_tensors = {{"a", 100, Category::kSavedActivations, "n", "op", ""},
                        {"b", 50, Category::kSavedActivations, "n", "op", ""}};
  now.top_tensors = {{"a", 100, Category::kSavedActivations, "n", "op", ""},  // same
                     {"c", 70, Category::kSavedActivations, "n", "op", ""},   // new: +70
                     {"b", 60, Category::kSavedActivations, "n", "op", ""},   // +10
                     {"d", 10, Category::kTemporaries, "n", "op", ""}};       // new: +10
  std::vector<TensorDelta> grown = GrownTensors(before, now, 3);
  REQUIRE(grown.size() == 3);
  CHECK(grown[0].now->tensor == "c");
  CHECK(!grown[0].in_baseline);
  CHECK(grown[1].now->tensor == "b");  // +10, ties with d by name
  CHECK(grown[1].before == 50);
  CHECK(grown[2].now->tensor == "d");
}

}  // namespace
}  // namespace ckptplan

namespace ckptplan {
namespace {

// ONNX models in one config each need their own dims: "load" per graph (or
// in "defaults"), as a plan file records it; load flags are the middle level.
TEST_CASE("check --config: per-graph \"load\" settings for ONNX models with symbolic dims") {
  Scratch scratch("check_config_load");
  const std::string& dir = scratch.dir();
  const std::string samples = CKPTPLAN_SOURCE_DIR "/sample_graphs/";
  Write(dir + "/check.json", R"({"format": "ckptplan.check", "version": 1,
    "defaults": {"budget": "1GiB", "load": {"dims": {"batch": 4}}},
    "graphs": [{"graph": ")" + samples + R"(gpt2_tiny.onnx", "key": "gpt2",
                "load": {"dims": {"batch": 2, "seq": 64}, "optimizer": "sgd"}},
               {"graph": ")" + samples + R"(cnn.onnx", "key": "cnn"}]})");
  CliResult result = RunIn(dir, "check --config check.json --baseline b.json --update-baseline");
  REQUIRE(result.code == 0);
  auto baseline = nlohmann::json::parse(Slurp(dir + "/b.json"));
  // The same graphs as the flags build: compare with `check --dim ...` runs.
  auto peak_with = [&](const std::string& args) {
    CliResult run = RunIn(dir, "check " + args + " --budget 1GiB --baseline f.json --update-baseline");
    REQUIRE(run.code == 0);
    auto json = nlohmann::json::parse(Slurp(dir + "/f.json"));
    return json["graphs"].begin().value()["peak_bytes"].get<int64_t>();
  };
  CHECK(baseline["graphs"]["gpt2"]["peak_bytes"] ==
        peak_with(samples + "gpt2_tiny.onnx --dim batch=2 --dim seq=64 --optimizer sgd"));
  std::filesystem::remove(dir + "/f.json");
  CHECK(baseline["graphs"]["cnn"]["peak_bytes"] == peak_with(samples + "cnn.onnx --dim batch=4"));
  // A malformed "load" names the file, the graph and the field.
  Write(dir + "/bad.json", R"({"format": "ckptplan.check", "version": 1,
    "graphs": [{"graph": "x.onnx", "budget": "1GiB", "load": {"precision": "fp8"}}]})");
  CliResult bad = RunIn(dir, "check --config bad.json");
  CHECK(bad.code == 4);
  CHECK(Contains(bad.err, "bad.json: graph 'x.onnx': \"load\".\"precision\": unknown precision 'fp8'"));
}

}  // namespace
}  // namespace ckptplan
