#include "ckptplan/ci/ci_report.h"

#include <doctest/doctest.h>

namespace ckptplan {
namespace {

TEST_CASE("github message escaping: %, CR and LF only") {
  CHECK(EscapeGithubMessage("peak +4.76% over") == "peak +4.76%25 over");
  CHECK(EscapeGithubMessage("line1\nline2\r\nline3") == "line1%0Aline2%0D%0Aline3");
  // ':' and ',' are literal in a message.
  CHECK(EscapeGithubMessage("a: b, c") == "a: b, c");
  // '%' is escaped first, so an existing "%0A" stays literal text.
  CHECK(EscapeGithubMessage("%0A") == "%250A");
}

TEST_CASE("github property escaping: also : and ,") {
  CHECK(EscapeGithubProperty("ckptplan check: a,b") == "ckptplan check%3A a%2Cb");
  CHECK(EscapeGithubProperty("50%\r\n") == "50%25%0D%0A");
  CHECK(EscapeGithubProperty("models/gpt2.json") == "models/gpt2.json");
}

TEST_CASE("github command puts escaped properties and message in place") {
  std::string command = GithubCommand("error", {{"file", "m,1.json"}, {"title", "check: m"}},
                                      "grew 5%\nby a: lot, really");
  CHECK(command == "::error file=m%2C1.json,title=check%3A m::grew 5%25%0Aby a: lot, really\n");
  CHECK(GithubCommand("warning", {}, "x") == "::warning::x\n");
}

TEST_CASE("markdown cells keep the table intact") {
  CHECK(MarkdownCell("a|b\nc<d>&") == "a\\|b c&lt;d&gt;&amp;");
}

TEST_CASE("xml escaping of attributes and text") {
  CHECK(XmlEscape("<a href=\"x\">'&'</a>") ==
        "&lt;a href=&quot;x&quot;&gt;&apos;&amp;&apos;&lt;/a&gt;");
  CHECK(XmlEscape("a\nb\tc\rd") == "a&#10;b&#9;c&#13;d");
  CHECK(XmlEscape("a\nb\tc", false) == "a\nb\tc");
  // C0 controls cannot appear in XML 1.0 at all, escaped or not: they are
  // shown as text, as are bytes that are not UTF-8.
  CHECK(XmlEscape(std::string("a\x01"
                              "b\x1f\xff",
                              5)) == "a\\x01b\\x1f\\xff");
  CHECK(XmlEscape("mlp \xC3\xA9") == "mlp \xC3\xA9");  // UTF-8 passes through
}

TEST_CASE("junit document: one suite per case, counts, failure and properties") {
  JunitCase pass{"a", "ckptplan.check", "a.json", {{"peak_bytes", "10"}}, false, "", "", "", "ok"};
  JunitCase fail{"b<&>",       "ckptplan.check", "", {}, true, "FAIL b: \"x\"",
                 "regression", "line 1\nline 2", ""};
  std::string xml = JunitXml("ckptplan check", {pass, fail});
  CHECK(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0) == 0);
  CHECK(xml.find("<testsuites name=\"ckptplan check\" tests=\"2\" failures=\"1\" errors=\"0\">") !=
        std::string::npos);
  CHECK(xml.find("<testsuite name=\"a\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\" "
                 "file=\"a.json\">") != std::string::npos);
  CHECK(xml.find("<property name=\"peak_bytes\" value=\"10\"/>") != std::string::npos);
  CHECK(xml.find("<system-out>ok</system-out>") != std::string::npos);
  CHECK(xml.find("<testcase name=\"b&lt;&amp;&gt;\" classname=\"ckptplan.check\">") !=
        std::string::npos);
  CHECK(xml.find("<failure message=\"FAIL b: &quot;x&quot;\" type=\"regression\">line 1\nline "
                 "2</failure>") != std::string::npos);
  // A case without properties gets no empty <properties/>.
  CHECK(xml.find("<properties>") == xml.rfind("<properties>"));
}

}  // namespace
}  // namespace ckptplan
