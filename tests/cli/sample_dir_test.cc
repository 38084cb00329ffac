// sample_graphs/ holds graphs only: a script that plans every sample works.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_util.h"

namespace ckptplan {
namespace {

TEST_CASE("every file in sample_graphs/ is a graph ckptplan loads") {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(CKPTPLAN_SOURCE_DIR "/sample_graphs")) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  CHECK(names.size() >= 7);
  for (const std::string& name : names) {
    CAPTURE(name);
    const std::string extension = std::filesystem::path(name).extension().string();
    REQUIRE((extension == ".json" || extension == ".onnx"));
    const testing::CliResult result = testing::RunCli("simulate sample_graphs/" + name);
    // An ONNX model with symbolic dims loads once they are bound.
    const bool needs_dims = result.code == 4 && result.err.find("bind the graph inputs with --dim") != std::string::npos;
    CHECK((result.code == 0 || (extension == ".onnx" && needs_dims)));
  }
}

}  // namespace
}  // namespace ckptplan
