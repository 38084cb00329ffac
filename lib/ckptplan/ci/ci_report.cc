#include "ckptplan/ci/ci_report.h"

#include "ckptplan/base/text_escape.h"

namespace ckptplan {
namespace {

// `text` with control characters other than those in `keep`, and bytes that
// are not UTF-8, written as escapes (EscapeControls); the formats below
// encode the kept ones their own way.
std::string WithoutControls(std::string_view text, std::string_view keep) {
  std::string out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && keep.find(text[i]) == std::string_view::npos) continue;
    out += EscapeControls(text.substr(start, i - start));
    if (i < text.size()) out += text[i];
    start = i + 1;
  }
  return out;
}

}  // namespace

std::string EscapeGithubMessage(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : WithoutControls(text, "\r\n")) {
    switch (c) {
      case '%': out += "%25"; break;
      case '\r': out += "%0D"; break;
      case '\n': out += "%0A"; break;
      default: out += c;
    }
  }
  return out;
}

std::string EscapeGithubProperty(std::string_view text) {
  // A property is a message that must also keep ':' and ',' out.
  std::string out;
  for (char c : EscapeGithubMessage(text)) {
    switch (c) {
      case ':': out += "%3A"; break;
      case ',': out += "%2C"; break;
      default: out += c;
    }
  }
  return out;
}

std::string GithubCommand(std::string_view level, const Properties& properties,
                          std::string_view message) {
  std::string out = "::" + std::string(level);
  for (size_t i = 0; i < properties.size(); ++i) {
    out += (i == 0 ? " " : ",") + properties[i].first + "=" +
           EscapeGithubProperty(properties[i].second);
  }
  out += "::" + EscapeGithubMessage(message) + "\n";
  return out;
}

std::string MarkdownCell(std::string_view text) {
  std::string out;
  for (char c : WithoutControls(text, "\r\n")) {
    switch (c) {
      case '|': out += "\\|"; break;
      case '\n': out += ' '; break;
      case '\r': break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string XmlEscape(std::string_view text, bool attribute) {
  std::string out;
  out.reserve(text.size());
  // Control characters and bytes that are not UTF-8 as escapes: XML 1.0 can
  // write neither.
  for (char c : WithoutControls(text, "\r\n\t")) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\r': out += "&#13;"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      default:
        // XML 1.0 has no way to write the other C0 controls, even escaped.
        if (u < 0x20) {
          out += "\xEF\xBF\xBD";
        } else {
          out += c;
        }
    }
  }
  return out;
}

namespace {

std::string Attribute(std::string_view name, std::string_view value) {
  return " " + std::string(name) + "=\"" + XmlEscape(value) + "\"";
}

std::string CaseXml(const JunitCase& test) {
  std::string out = "  <testsuite" + Attribute("name", test.name) + Attribute("tests", "1") +
                    Attribute("failures", test.failed ? "1" : "0") + Attribute("errors", "0") +
                    Attribute("skipped", "0");
  if (!test.file.empty()) out += Attribute("file", test.file);
  out += ">\n";
  if (!test.properties.empty()) {
    out += "    <properties>\n";
    for (const auto& [name, value] : test.properties) {
      out += "      <property" + Attribute("name", name) + Attribute("value", value) + "/>\n";
    }
    out += "    </properties>\n";
  }
  out += "    <testcase" + Attribute("name", test.name) + Attribute("classname", test.classname) +
         ">\n";
  if (test.failed) {
    out += "      <failure" + Attribute("message", test.failure_message) +
           Attribute("type", test.failure_type) + ">" + XmlEscape(test.failure_text, false) +
           "</failure>\n";
  }
  if (!test.system_out.empty()) {
    out += "      <system-out>" + XmlEscape(test.system_out, false) + "</system-out>\n";
  }
  out += "    </testcase>\n  </testsuite>\n";
  return out;
}

}  // namespace

std::string JunitXml(std::string_view name, const std::vector<JunitCase>& cases) {
  size_t failures = 0;
  for (const JunitCase& test : cases) failures += test.failed ? 1 : 0;
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites" +
                    Attribute("name", name) + Attribute("tests", std::to_string(cases.size())) +
                    Attribute("failures", std::to_string(failures)) + Attribute("errors", "0") +
                    ">\n";
  for (const JunitCase& test : cases) out += CaseXml(test);
  out += "</testsuites>\n";
  return out;
}

}  // namespace ckptplan
