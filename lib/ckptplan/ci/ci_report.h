// Formats CI systems read: GitHub Actions workflow commands, Markdown for the
// job summary, and JUnit XML. Pure text in, text out; `check` decides what to
// say and writes the files.
#ifndef CKPTPLAN_CI_REPORT_H_
#define CKPTPLAN_CI_REPORT_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckptplan {

/// Escapes a workflow command's message: % -> %25, CR -> %0D, LF -> %0A.
std::string EscapeGithubMessage(std::string_view text);
/// Escapes a workflow command's property value: as the message, and also
/// : -> %3A and , -> %2C.
std::string EscapeGithubProperty(std::string_view text);

using Properties = std::vector<std::pair<std::string, std::string>>;

/// "::LEVEL name=value,...::message\n" with both parts escaped. `level` is
/// error, warning or notice; properties are file, line, title...
std::string GithubCommand(std::string_view level, const Properties& properties,
                          std::string_view message);

/// Text safe inside a Markdown table cell: | escaped, newlines as spaces,
/// and < > & as HTML entities.
std::string MarkdownCell(std::string_view text);

/// Escapes XML attribute values (`attribute`) or character data: & < > " '
/// as entities, CR as a character reference (and LF, TAB too in attributes,
/// so that parsers keep them), and the characters XML 1.0 cannot carry
/// (the other C0 controls) as U+FFFD.
std::string XmlEscape(std::string_view text, bool attribute = true);

/// One JUnit test case, wrapped in its own test suite so that its properties
/// sit where the JUnit schema (Jenkins/Surefire junit-10) allows them: on
/// the suite, which holds only this case.
struct JunitCase {
  std::string name;
  std::string classname;
  std::string file;  ///< the input it checked; empty: none
  Properties properties;
  bool failed = false;
  std::string failure_message;  ///< one line
  std::string failure_type;
  std::string failure_text;  ///< details, several lines
  std::string system_out;    ///< the case's full report
};

/// A JUnit XML document: <testsuites name=...> with one <testsuite> per case.
/// No timings or timestamps, so that equal input gives equal bytes.
std::string JunitXml(std::string_view name, const std::vector<JunitCase>& cases);

}  // namespace ckptplan

#endif  // CKPTPLAN_CI_REPORT_H_
