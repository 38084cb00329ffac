// What ckptplan prints on the terminal: messages carry names from input
// files, which a hostile file can fill with control characters (terminal
// escape sequences). They are shown escaped.
#ifndef CKPTPLAN_CONSOLE_H_
#define CKPTPLAN_CONSOLE_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/logger.h>

namespace ckptplan {

/// `text` with every control character but newline escaped, and bytes that are
/// not UTF-8 written as \xNN (EscapeControls in text_escape.h).
std::string Printable(std::string_view text);

/// The logger for stderr, prefixing "ckptplan: LEVEL: " and passing each
/// message through Printable.
std::shared_ptr<spdlog::logger> MakeStderrLogger();

/// Seconds from `start` to now, for the times in log lines and --timings.
double SecondsSince(std::chrono::steady_clock::time_point start);

}  // namespace ckptplan

#endif  // CKPTPLAN_CONSOLE_H_
