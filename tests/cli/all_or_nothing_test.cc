// Commands that write several files write all of them or none: a failure at
// any one target leaves no new file behind and every existing file intact
// (WriteFilesAtomic in base/output_file.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_util.h"

namespace ckptplan {
namespace {

namespace fs = std::filesystem;

// Names in `dir`, sorted, to see that nothing new (a temp file) is left.
std::vector<std::string> Listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct Case {
  std::string args;  // {d} is the scratch directory
  std::string env;
};

std::string Expand(std::string text, const std::string& dir) {
  for (size_t at; (at = text.find("{d}")) != std::string::npos;) text.replace(at, 3, dir);
  return text;
}

// Runs `c` in a directory holding old.* files and a directory "dir"; the run
// must fail with exit 5 and leave exactly what was there.
void ExpectNothingWritten(const Case& c) {
  const std::string dir = testing::ScratchDir("all_or_nothing");
  fs::create_directory(dir + "/dir");
  for (const char* name : {"old.json", "old.html", "old.xml", "old_baseline.json"}) {
    std::ofstream(dir + "/" + name) << "old " << name;
  }
  const std::vector<std::string> before = Listing(dir);
  const std::string args = Expand(c.args, dir);
  CAPTURE(args);
  const testing::CliResult result = testing::RunCli(args, Expand(c.env, dir));
  CHECK(result.code == 5);
  CHECK(result.err.find("ckptplan: error: ") != std::string::npos);
  CHECK(Listing(dir) == before);
  for (const char* name : {"old.json", "old.html", "old.xml", "old_baseline.json"}) {
    CHECK(testing::Slurp(dir + "/" + name) == std::string("old ") + name);
  }
}

TEST_CASE("plan: one output that fails leaves no file and the old ones intact") {
  const std::string graph = "sample_graphs/mlp.json --budget 1GiB";
  // The case: -o is written, --timeline cannot be.
  ExpectNothingWritten({"plan " + graph + " -o {d}/old.json --timeline /nonexistent/t.json"});
  // The last target renamed fails (a directory): the earlier ones are put back.
  ExpectNothingWritten({"plan " + graph + " -o {d}/old.json --report {d}/old.html --trace "
                        "{d}/new.json --timeline-csv {d}/new.csv --timeline {d}/dir"});
  // The first target fails.
  ExpectNothingWritten({"plan " + graph + " -o {d}/old.json --report {d}/dir --timeline {d}/t.json"});
  // A disk that fills up while writing the first file of over 100 bytes.
  ExpectNothingWritten({"plan " + graph + " -o {d}/old.json --timeline {d}/t.json --report {d}/r.html",
                        "CKPTPLAN_FAIL_WRITE_AFTER=100"});
}

TEST_CASE("simulate: one output that fails leaves no file and the old ones intact") {
  const std::string graph = "sample_graphs/mlp.json";
  ExpectNothingWritten({"simulate " + graph + " --timeline {d}/old.json --report /nonexistent/r.html"});
  ExpectNothingWritten({"simulate " + graph + " --report {d}/old.html --trace {d}/new.json "
                        "--timeline-csv {d}/dir"});
  ExpectNothingWritten({"simulate " + graph + " --timeline {d}/old.json --report {d}/old.html",
                        "CKPTPLAN_FAIL_WRITE_AFTER=100"});
}

TEST_CASE("check: JUnit, job summary and baseline are written all or none") {
  const std::string graph = "sample_graphs/mlp.json --budget 1GiB";
  // The baseline (written last) has no directory to go to.
  ExpectNothingWritten({"check " + graph + " --junit {d}/old.xml --baseline /nonexistent/b.json "
                        "--update-baseline"});
  // A baseline path that is a directory cannot be read (was an internal error).
  ExpectNothingWritten({"check " + graph + " --junit {d}/old.xml --baseline {d}/dir "
                        "--update-baseline"});
  // The job summary's directory does not exist.
  ExpectNothingWritten({"check " + graph + " --junit {d}/old.xml --baseline {d}/old_baseline.json "
                        "--update-baseline --annotate github",
                        "GITHUB_STEP_SUMMARY=/nonexistent/summary.md"});
  ExpectNothingWritten({"check " + graph + " --junit {d}/new.xml --baseline {d}/old_baseline.json "
                        "--update-baseline",
                        "CKPTPLAN_FAIL_WRITE_AFTER=100"});
}

TEST_CASE("multi-output commands that succeed write every file") {
  const std::string dir = testing::ScratchDir("all_or_nothing_ok");
  const testing::CliResult result = testing::RunCli(
      "plan sample_graphs/mlp.json --budget 1GiB -o " + dir + "/p.json --timeline " + dir +
      "/t.json --report " + dir + "/r.html --trace " + dir + "/tr.json --timeline-csv " + dir +
      "/t.csv");
  CHECK(result.code == 0);
  CHECK(Listing(dir) == std::vector<std::string>{"p.json", "r.html", "t.csv", "t.json", "tr.json"});
}

}  // namespace
}  // namespace ckptplan
