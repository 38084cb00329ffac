#include "ckptplan/base/console.h"

#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "ckptplan/base/text_escape.h"
#include "cli_util.h"

namespace ckptplan {
namespace {

TEST_CASE("Printable escapes control bytes but keeps text, newlines and UTF-8") {
  CHECK(Printable("node 'a'") == "node 'a'");
  CHECK(Printable("two\nlines\tand a tab\r") == "two\nlines\\tand a tab\\r");
  CHECK(Printable(std::string("\x1b[31mred\x7f", 9)) == "\\x1b[31mred\\x7f");
  CHECK(Printable(std::string("nul\0byte", 8)) == "nul\\x00byte");
  CHECK(Printable("caf\xc3\xa9") == "caf\xc3\xa9");
}

TEST_CASE("ShowName escapes newlines, C1 controls and bytes that are not UTF-8") {
  CHECK(ShowName("a\n::error::x") == "a\\n::error::x");
  CHECK(ShowName(std::string("\x07\x1b[31m\x7f", 7)) == "\\x07\\x1b[31m\\x7f");
  CHECK(ShowName("\xc2\x9b" "2J") == "\\u009b2J");              // C1 CSI, as UTF-8
  CHECK(ShowName("bad\xff\xc3") == "bad\\xff\\xc3");            // invalid, truncated
  CHECK(ShowName("\xed\xa0\x80") == "\\xed\\xa0\\x80");        // a surrogate
  CHECK(ShowName("\xe2\x82\xac \xf0\x9f\x98\x80") == "\xe2\x82\xac \xf0\x9f\x98\x80");  // kept
  CHECK(EscapeControls("line\nend\r\n") == "line\nend\\r\n");
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
