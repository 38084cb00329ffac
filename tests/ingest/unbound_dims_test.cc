// One cause, one message: unbound symbolic dims are named, and the tensors
// whose shapes follow from them are counted (listed under -v).
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"

namespace ckptplan {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_CASE("plan gpt2_tiny.onnx without --dim: the two dims, then one line for the rest") {
  const testing::CliResult result =
      testing::RunCli("plan sample_graphs/gpt2_tiny.onnx --budget 1GiB");
  CHECK(result.code == 4);
  const std::vector<std::string> lines = Lines(result.err);
  // The error, the two dims, the count of the rest, and the CLI edge's hint
  // naming the flags (the library names only the dims).
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] ==
        "ckptplan: error: sample_graphs/gpt2_tiny.onnx: 95 tensors have no concrete shape; the "
        "graph inputs above need sizes");
  CHECK(lines[1] == "sample_graphs/gpt2_tiny.onnx: graph input 'input_ids' dim 0 is symbolic "
                    "'batch', which is unbound");
  CHECK(lines[2] == "sample_graphs/gpt2_tiny.onnx: graph input 'input_ids' dim 1 is symbolic "
                    "'seq', which is unbound");
  CHECK(lines[3] == "sample_graphs/gpt2_tiny.onnx: and 95 tensors whose shapes depend on them "
                    "(-v lists them)");
  CHECK(lines[4] == "ckptplan: bind the graph inputs with --dim batch=N --dim seq=N");

  // -v lists each of the 95 as an info line before the same error.
  const testing::CliResult verbose =
      testing::RunCli("-v plan sample_graphs/gpt2_tiny.onnx --budget 1GiB");
  CHECK(verbose.code == 4);
  size_t listed = 0;
  for (const std::string& line : Lines(verbose.err)) {
    listed += line.rfind("ckptplan: info: sample_graphs/gpt2_tiny.onnx: tensor '", 0) == 0;
  }
  CHECK(listed == 95);
  CHECK(verbose.err.find("/wte/Gather_output_0' (output 0 of node '/wte/Gather', op Gather): "
                         "shape [?, ?, 64]") != std::string::npos);
  // Bound, it loads.
  CHECK(testing::RunCli("simulate sample_graphs/gpt2_tiny.onnx --dim batch=2 --dim seq=16").code ==
        0);
}

}  // namespace
}  // namespace ckptplan
