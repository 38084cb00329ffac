#include "ckptplan/base/limits.h"

#include <doctest/doctest.h>

#include <string>

#include "ckptplan/base/errors.h"

namespace ckptplan {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("CheckJsonDepth counts nesting outside strings only") {
  CHECK_NOTHROW(CheckJsonDepth("[[[]]]", 3, "a.json"));
  CHECK_THROWS_WITH_AS(CheckJsonDepth("[[[[]]]]", 3, "a.json"),
                       "a.json: JSON nests deeper than 3 levels at byte 3", InputError);
  CHECK_THROWS_WITH_AS(CheckJsonDepth("[[[[]]]]", 3, "a.json", "raise it with --max-depth"),
                       "a.json: JSON nests deeper than 3 levels at byte 3 (raise it with "
                       "--max-depth)",
                       InputError);
  // Brackets in strings, including after an escaped quote, are text.
  CHECK_NOTHROW(CheckJsonDepth(R"([{"k": "[[[[\"[[[["}])", 2, "a.json"));
  // An escaped backslash ends the escape: the quote after it closes the string.
  CHECK_THROWS_AS(CheckJsonDepth(R"(["\\", [[]]])", 2, "a.json"), InputError);
  // Unbalanced closers never go below zero.
  CHECK_NOTHROW(CheckJsonDepth("]]]][[", 2, "a.json"));
}

TEST_CASE("CheckReserve rejects reserves over 2^62 as a usage error") {
  try {
    CheckReserve(kMaxReserveBytes + 1, "--reserve");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.exit_code() == kExitUsage);
    CHECK(Contains(e.what(), "--reserve: reserve 4.0 EiB is over the limit of 4.0 EiB"));
  }
}

}  // namespace
}  // namespace ckptplan
