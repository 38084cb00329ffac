#include "ckptplan/base/console.h"

#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "cli_util.h"

namespace ckptplan {
namespace {

TEST_CASE("Printable escapes control bytes but keeps text, newlines, tabs and UTF-8") {
  CHECK(Printable("node 'a'") == "node 'a'");
  CHECK(Printable("two\nlines\tand a tab") == "two\nlines\tand a tab");
  CHECK(Printable(std::string("\x1b[31mred\x7f", 9)) == "\\x1b[31mred\\x7f");
  CHECK(Printable(std::string("nul\0byte", 8)) == "nul\\x00byte");
  CHECK(Printable("caf\xc3\xa9") == "caf\xc3\xa9");
}

TEST_CASE("error messages show a hostile name escaped") {
  // A tensor named with an escape sequence, declared twice.
  const std::string dir = testing::ScratchDir("console_escape");
  const std::string path = dir + "/g.json";
  std::ofstream(path) << R"({"format":"ckptplan.graph","version":1,
"tensors":[{"id":"\u001b[2Jx","bytes":4},{"id":"\u001b[2Jx","bytes":4}],"nodes":[]})";
  auto result = testing::RunCli("simulate " + path);
  CHECK(result.code == 4);
  CHECK(result.err.find("\\x1b[2Jx") != std::string::npos);
  CHECK(result.err.find('\x1b') == std::string::npos);
}

}  // namespace
}  // namespace ckptplan
