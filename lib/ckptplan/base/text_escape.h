// Names from input files in human-readable output. A hostile file can put a
// newline and "::error::" in a tensor id (a GitHub workflow command), terminal
// escape sequences, or bytes that are not UTF-8 (ONNX names are unchecked);
// what ckptplan prints shows them escaped, so they start no line and move no
// cursor.
#ifndef CKPTPLAN_TEXT_ESCAPE_H_
#define CKPTPLAN_TEXT_ESCAPE_H_

#include <string>
#include <string_view>

namespace ckptplan {

/// `name` with every control character escaped: C0 (newline, tab and carriage
/// return as \n, \t, \r, the rest as \xNN), DEL, C1 (U+0080..U+009F, as
/// \u0080..) and each byte that is not part of valid UTF-8 (\xNN). Printable
/// UTF-8 is kept.
std::string ShowName(std::string_view name);

/// Text ckptplan writes, made safe as ShowName makes a name, except that
/// newlines (the line ends ckptplan writes) are kept.
std::string EscapeControls(std::string_view text);

}  // namespace ckptplan

#endif  // CKPTPLAN_TEXT_ESCAPE_H_
