// The streaming (SAX) path of json_loader: member order and fallbacks.
#include <doctest/doctest.h>

#include <string>

#include "ckptplan/base/errors.h"
#include "ckptplan/ingest/json_loader.h"

namespace ckptplan {
namespace {

constexpr const char* kHeader = R"("format":"ckptplan.graph","version":1)";
constexpr const char* kTensors =
    R"("tensors":[{"id":"x","bytes":4,"kind":"input"},{"id":"a","bytes":8},{"id":"da","bytes":8}])";
constexpr const char* kNodes =
    R"("nodes":[{"id":"f","op":"relu","phase":"forward","inputs":["x"],"outputs":["a"]},)"
    R"({"id":"b","op":"relu_bwd","phase":"backward","inputs":["a"],"outputs":["da"]}])";

std::string Message(const std::string& text) {
  try {
    ParseJsonGraph(text, "g.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("members may come in any order") {
  // Nodes name tensors, so nodes before tensors are held back until then.
  for (const std::string& text :
       {"{" + std::string(kHeader) + "," + kTensors + "," + kNodes + "}",
        "{" + std::string(kNodes) + "," + kTensors + "," + kHeader + "}",
        "{" + std::string(kTensors) + "," + kHeader + "," + kNodes + "}"}) {
    Graph graph = ParseJsonGraph(text, "g.json");
    REQUIRE(graph.nodes.size() == 2);
    CHECK(graph.nodes[1].inputs.size() == 1);
    CHECK(graph.tensors[graph.nodes[1].inputs[0]].name == "a");
    CHECK(graph.tensors[1].producer == 0);
  }
}

TEST_CASE("a bad header is reported alone, wherever it sits") {
  // The entries' problems (unknown tensor 'y') wait for a valid header.
  const std::string nodes =
      R"("nodes":[{"id":"f","op":"relu","phase":"forward","inputs":["y"],"outputs":["a"]}])";
  std::string message =
      Message("{" + std::string(kTensors) + "," + nodes + R"(,"format":"other","version":1})");
  CHECK(message.find("\"format\" must be") != std::string::npos);
  CHECK(message.find("unknown tensor") == std::string::npos);
  message = Message("{" + std::string(kHeader) + "," + kTensors + "," + nodes + "}");
  CHECK(message.find("inputs names unknown tensor 'y'") != std::string::npos);
}

TEST_CASE("documents the stream does not expect take the DOM path") {
  CHECK(Message("[1,2]").find("top level must be a JSON object, got array") !=
        std::string::npos);
  // A repeated "tensors" key: the last one counts, as in a DOM parse.
  Graph graph = ParseJsonGraph("{" + std::string(kHeader) + R"(,"tensors":[],)" + kTensors +
                                   "," + kNodes + "}",
                               "g.json");
  CHECK(graph.tensors.size() == 3);
  CHECK(Message("{" + std::string(kHeader) + "," + kTensors + "," + kNodes +
                R"(,"tensors":5})")
            .find("\"tensors\" must be an array") != std::string::npos);
}

TEST_CASE("malformed JSON inside an entry names the byte") {
  std::string text = "{" + std::string(kHeader) + R"(,"tensors":[{"id":"x",}]})";
  CHECK(Message(text).find("g.json: malformed JSON at byte") != std::string::npos);
}

}  // namespace
}  // namespace ckptplan
