// Runs every case of tests/bad_inputs/manifest.json through the CLI: each
// must exit with its code, say its message on stderr and write no output.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spawn_util.h"

namespace ckptplan {
namespace {

namespace fs = std::filesystem;

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

TEST_CASE("bad inputs: every manifest case fails cleanly with its code and message") {
  const fs::path dir = fs::path(CKPTPLAN_SOURCE_DIR) / "tests" / "bad_inputs";
  std::ifstream in(dir / "manifest.json");
  REQUIRE(in);
  const nlohmann::json manifest = nlohmann::json::parse(in);
  const nlohmann::json& cases = manifest.at("cases");
  REQUIRE(cases.size() >= 40);
  // One directory per process: test runs from several checkouts share /tmp.
  const fs::path out_dir =
      fs::temp_directory_path() / ("ckptplan_bad_inputs_test." + std::to_string(getpid()));
  for (const nlohmann::json& entry : cases) {
    const std::string name = entry.at("name");
    CAPTURE(name);
    fs::remove_all(out_dir);
    fs::create_directories(out_dir);
    std::vector<std::string> args;
    for (const nlohmann::json& arg : entry.at("args")) {
      std::string text = Replace(arg.get<std::string>(), "{dir}", dir.string());
      args.push_back(Replace(text, "{out}", (out_dir / "out.json").string()));
    }
    const testing::SpawnResult result = testing::Spawn(args);
    CAPTURE(result.err);
    CHECK(result.signal == 0);
    CHECK(result.exit_code == entry.at("exit").get<int>());
    CHECK(result.err.find(entry.at("message").get<std::string>()) != std::string::npos);
    // Nothing written: no output file, no temp file beside it.
    CHECK(testing::ListDir(out_dir).empty());
  }
  fs::remove_all(out_dir);
}

}  // namespace
}  // namespace ckptplan
