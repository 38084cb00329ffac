// Names from a hostile graph file never reach a log as control characters:
// every subcommand and output format over tests/graphs/hostile_names.{json,onnx}
// (scripts/make_hostile_names.py: names with "\n::error::x", "\r", "\x1b[31m",
// "\x07", DEL, a C1 control and, in the ONNX file, bytes that are not UTF-8).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cli_util.h"

namespace ckptplan {
namespace {

// Length of the valid UTF-8 sequence at text[i], 0 when there is none.
size_t Utf8Length(const std::string& text, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = at(i);
  const size_t length = lead < 0xc2 ? 0 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : lead < 0xf5 ? 4 : 0;
  if (length == 0 || i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((at(i + k) & 0xc0) != 0x80) return 0;
  }
  if (lead == 0xc2 && at(i + 1) < 0xa0) return 0;  // C1 controls U+0080..U+009F
  return length;
}

// The first problem in one output stream or file, or "" when it is clean: a
// line starting with "::" that is not one of ckptplan's own annotations
// (allowed only when `annotations`), a raw control byte other than the line
// ends, or bytes that are not UTF-8 (`utf8`: every output but --json's).
std::string Problem(const std::string& text, bool annotations) {
  size_t line_start = 0;
  for (size_t i = 0; i < text.size();) {
    if (i == line_start && text.compare(i, 2, "::") == 0) {
      const bool own = annotations && (text.compare(i, 13, "::error file=") == 0 ||
                                       text.compare(i, 15, "::warning file=") == 0 ||
                                       text.compare(i, 14, "::notice file=") == 0);
      if (!own) return "a line starts with '::' at byte " + std::to_string(i);
    }
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == '\n') {
      line_start = ++i;
    } else if (byte < 0x20 || byte == 0x7f) {
      return "raw control byte " + std::to_string(byte) + " at byte " + std::to_string(i);
    } else if (byte < 0x80) {
      ++i;
    } else if (size_t length = Utf8Length(text, i)) {
      i += length;
    } else {
      return "not UTF-8 (or a C1 control) at byte " + std::to_string(i);
    }
  }
  return "";
}

struct Run {
  std::string args;
  std::vector<std::string> files;  // human-readable files it writes
  bool annotations = false;
  std::string env;
};

void CheckRun(const Run& run) {
  CAPTURE(run.args);
  const testing::CliResult result = testing::RunCli(run.args, run.env);
  CHECK(result.code != 70);
  CHECK(result.code >= 0);  // exited, not killed
  CHECK(Problem(result.out, run.annotations) == "");
  CHECK(Problem(result.err, run.annotations) == "");
  for (const std::string& file : run.files) {
    CAPTURE(file);
    CHECK(Problem(testing::Slurp(file), false) == "");
  }
}

TEST_CASE("hostile names: every subcommand and format escapes them") {
  const std::string dir = testing::ScratchDir("hostile_names");
  for (const char* name : {"hostile_names.json", "hostile_names.onnx"}) {
    const std::string graph = std::string("tests/graphs/") + name;
    CAPTURE(graph);
    const std::string plan = dir + "/plan.json";
    const std::string junit = dir + "/junit.xml", summary = dir + "/summary.md";
    const std::string csv = dir + "/t.csv", report = dir + "/r.html";
    std::vector<Run> runs = {
        {"plan " + graph + " --budget 1MiB -o " + plan + " --timeline " + dir + "/t.json" +
             " --timeline-csv " + csv + " --report " + report + " --trace " + dir + "/tr.json",
         {csv}},
        {"-vvv plan " + graph + " --budget 1MiB --top 20"},
        {"plan " + graph + " --budget 1MiB --json"},
        {"plan " + graph + " --budget 1KiB"},  // infeasible: names in the lower bound
        {"plan " + graph + " --budget 1KiB --json"},
        {"-vv simulate " + graph + " --plan " + plan + " --top 20"},
        {"simulate " + graph + " --json --timeline-csv " + csv, {csv}},
        {"-vv sweep " + graph + " --budgets 1KiB,5KiB,1MiB --report " + report},
        {"sweep " + graph + " --budgets 1KiB,1MiB --json"},
        {"check " + graph + " --budget 1KiB --junit " + junit, {junit}},
        {"check " + graph + " --budget 1KiB --annotate github --junit " + junit, {junit, summary},
         true, "GITHUB_STEP_SUMMARY=" + summary},
        {"check " + graph + " --budget 1MiB --baseline " + dir + "/b.json --update-baseline"},
        {"check " + graph + " --budget 1MiB --tolerance 0 --baseline " + dir + "/b.json"},
    };
    for (const char* target : {"pytorch-sac", "jax", "megatron", "torchtitan", "deepspeed"}) {
      runs.push_back({"export " + plan + " --graph " + graph + " --to " + target});
    }
    for (const Run& run : runs) CheckRun(run);
  }
}

TEST_CASE("hostile names in rejected files are escaped in the error") {
  const std::string dir = testing::ScratchDir("hostile_errors");
  const std::string path = dir + "/bad.json";
  // Two producers of one tensor and a read of a tensor nobody makes: each
  // error names them.
  std::ofstream(path) << R"({"format":"ckptplan.graph","version":1,"tensors":[
    {"id":"x\n::error::x","bytes":4,"kind":"input"},{"id":"a\r\u001b[31m","bytes":4},
    {"id":"b\u0007","bytes":4}],"nodes":[
    {"id":"f\n::error::f","op":"relu\n::error::op","phase":"forward","inputs":["x\n::error::x"],"outputs":["a\r\u001b[31m"]},
    {"id":"g","op":"relu","phase":"forward","inputs":["x\n::error::x","b\u0007"],"outputs":["a\r\u001b[31m"]}]})";
  for (const std::string& command : {"plan " + path + " --budget 1MiB", "simulate " + path,
                                     "check " + path + " --budget 1MiB --annotate github"}) {
    CAPTURE(command);
    const testing::CliResult result = testing::RunCli(command);
    CHECK(result.code == 4);
    CHECK(Problem(result.out, true) == "");
    CHECK(Problem(result.err, true) == "");
    CHECK(result.err.find("node 'g' reads tensor 'b\\x07'") != std::string::npos);
    CHECK(result.err.find("tensor 'a\\r\\x1b[31m' is produced by both node 'f\\n::error::f'") !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace ckptplan
