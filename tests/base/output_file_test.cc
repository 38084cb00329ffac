#include "ckptplan/base/output_file.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ckptplan/base/errors.h"
#include "cli_util.h"
#include "spawn_util.h"

namespace ckptplan {
namespace {

namespace fs = std::filesystem;

using testing::Slurp;

void Spill(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

fs::path ScratchDir(const std::string& name) {
  return testing::ScratchDir("output_file_" + name);
}

TEST_CASE("WriteFileAtomic replaces the file and leaves nothing else") {
  fs::path dir = ScratchDir("replace");
  Spill(dir / "out.json", "old");
  WriteFileAtomic((dir / "out.json").string(), "new contents");
  CHECK(Slurp(dir / "out.json") == "new contents");
  CHECK(testing::ListDir(dir) == std::vector<std::string>{"out.json"});
  fs::remove_all(dir);
}

TEST_CASE("WriteFileAtomic: an injected write failure keeps the old file, no temp file") {
  fs::path dir = ScratchDir("inject");
  Spill(dir / "out.json", "old");
  setenv("CKPTPLAN_FAIL_WRITE_AFTER", "5", 1);
  std::string message;
  try {
    WriteFileAtomic((dir / "out.json").string(), "0123456789");  // fails after 5 of 10 bytes
  } catch (const IoError& e) {
    message = e.what();
  }
  unsetenv("CKPTPLAN_FAIL_WRITE_AFTER");
  CHECK(message.find("out.json: cannot write file: writing: No space left on device") !=
        std::string::npos);
  CHECK(Slurp(dir / "out.json") == "old");
  CHECK(testing::ListDir(dir) == std::vector<std::string>{"out.json"});
  fs::remove_all(dir);
}

TEST_CASE("WriteFileAtomic: a missing directory is an IoError naming the file") {
  fs::path dir = ScratchDir("missing");
  CHECK_THROWS_AS(WriteFileAtomic((dir / "no" / "out.json").string(), "x"), IoError);
  CHECK(testing::ListDir(dir).empty());
  fs::remove_all(dir);
}

// The CLI: each output `plan` can write, alone, with the previous file in
// place. Every one is over 100 bytes for the sample graph, so failing or
// killing the write after 100 bytes interrupts it mid-file.
const char* const kOutputFlags[] = {"-o", "--timeline", "--report", "--trace", "--timeline-csv"};

std::vector<std::string> PlanArgs(const std::string& flag, const fs::path& out) {
  return {"plan", std::string(CKPTPLAN_SOURCE_DIR) + "/sample_graphs/diamond.json", "--budget",
          "100GiB", flag, out.string()};
}

TEST_CASE("ckptplan plan: a write failing mid-file exits 5 and keeps the old output") {
  for (const char* flag : kOutputFlags) {
    CAPTURE(flag);
    fs::path dir = ScratchDir("cli_fail");
    const fs::path out = dir / "output";
    REQUIRE(testing::Spawn(PlanArgs(flag, out)).exit_code == 0);
    REQUIRE(fs::file_size(out) > 100);
    Spill(out, "previous output");
    testing::SpawnResult failed =
        testing::Spawn(PlanArgs(flag, out), {"CKPTPLAN_FAIL_WRITE_AFTER=100"});
    CHECK(failed.exit_code == 5);
    CHECK(failed.err.find("output: cannot write file: writing: No space left on device") !=
          std::string::npos);
    CHECK(Slurp(out) == "previous output");
    CHECK(testing::ListDir(dir) == std::vector<std::string>{"output"});
    fs::remove_all(dir);
  }
}

TEST_CASE("ckptplan plan: killed mid-write, the old output is intact and no temp file is left") {
  for (const char* flag : kOutputFlags) {
    CAPTURE(flag);
    fs::path dir = ScratchDir("cli_kill");
    const fs::path out = dir / "output";
    Spill(out, "previous output");
    testing::SpawnResult killed =
        testing::Spawn(PlanArgs(flag, out), {"CKPTPLAN_KILL_WRITE_AFTER=100"});
    CHECK(killed.signal == SIGKILL);
    CHECK(Slurp(out) == "previous output");
    // The temp file is unnamed (O_TMPFILE) until complete, so SIGKILL leaves none.
    CHECK(testing::ListDir(dir) == std::vector<std::string>{"output"});
    // Without the hook the same run replaces it.
    CHECK(testing::Spawn(PlanArgs(flag, out)).exit_code == 0);
    CHECK(Slurp(out) != "previous output");
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace ckptplan
