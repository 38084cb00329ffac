#include "ckptplan/base/size.h"

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "ckptplan/base/errors.h"

namespace ckptplan {
namespace {

struct Unit {
  const char* name;
  int64_t factor;
};

constexpr Unit kUnits[] = {
    {"B", 1},
    {"KiB", int64_t{1} << 10},     {"MiB", int64_t{1} << 20},
    {"GiB", int64_t{1} << 30},     {"TiB", int64_t{1} << 40},
    {"PiB", int64_t{1} << 50},     {"KB", 1000},
    {"MB", 1000 * 1000},           {"GB", int64_t{1000} * 1000 * 1000},
    {"TB", int64_t{1000} * 1000 * 1000 * 1000},
    {"PB", int64_t{1000} * 1000 * 1000 * 1000 * 1000},
};

[[noreturn]] void Fail(std::string_view what, std::string_view text,
                       std::string_view why) {
  throw InputError(std::string(what) + ": cannot parse size '" +
                       std::string(text) + "': " + std::string(why) +
                       " (expected e.g. 40GiB, 40GB, 1.5TiB, 512MiB or bytes)",
                   kExitUsage);
}

}  // namespace

int64_t ParseSize(std::string_view text, std::string_view what) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) {
    if (text[i] == '-') Fail(what, text, "size is negative");
    ++i;
  }
  // Exact decimal: mantissa = digits / 10^scale, kept in 128 bits.
  unsigned __int128 digits = 0;
  int scale = 0;
  bool any_digit = false, seen_point = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.' && !seen_point) {
      seen_point = true;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    any_digit = true;
    if (digits > (static_cast<unsigned __int128>(1) << 70)) {
      Fail(what, text, "number is too large");
    }
    digits = digits * 10 + static_cast<unsigned>(c - '0');
    if (seen_point) ++scale;
    if (scale > 18) Fail(what, text, "too many decimal places");
  }
  if (!any_digit) Fail(what, text, "no number");
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  std::string_view unit_text = text.substr(i);
  while (!unit_text.empty() &&
         std::isspace(static_cast<unsigned char>(unit_text.back()))) {
    unit_text.remove_suffix(1);
  }
  int64_t factor = 1;
  if (!unit_text.empty()) {
    bool found = false;
    for (const Unit& unit : kUnits) {
      if (unit_text == unit.name) {
        factor = unit.factor;
        found = true;
        break;
      }
    }
    if (!found) Fail(what, text, "unknown unit '" + std::string(unit_text) + "'");
  }
  unsigned __int128 pow10 = 1;
  for (int s = 0; s < scale; ++s) pow10 *= 10;
  unsigned __int128 scaled = digits * static_cast<unsigned __int128>(factor);
  unsigned __int128 bytes = (scaled + pow10 / 2) / pow10;
  if (bytes > static_cast<unsigned __int128>(INT64_MAX)) {
    Fail(what, text, "larger than 2^63-1 bytes");
  }
  return static_cast<int64_t>(bytes);
}

std::string FormatBytes(int64_t bytes) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const char* sign = bytes < 0 ? "-" : "";
  // Negate in unsigned space so INT64_MIN does not overflow.
  uint64_t magnitude = bytes < 0 ? 0 - static_cast<uint64_t>(bytes)
                                 : static_cast<uint64_t>(bytes);
  char buffer[64];
  if (magnitude < 1024) {
    std::snprintf(buffer, sizeof(buffer), "%s%" PRIu64 " B", sign, magnitude);
    return buffer;
  }
  double value = static_cast<double>(magnitude);
  int unit = 0;
  while (value >= 1024.0 && unit < 6) {
    value /= 1024.0;
    ++unit;
  }
  std::snprintf(buffer, sizeof(buffer), "%s%.1f %s", sign, value, kNames[unit]);
  return buffer;
}

}  // namespace ckptplan
