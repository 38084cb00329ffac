// Byte sizes as users write them and as humans read them.
#ifndef CKPTPLAN_SIZE_H_
#define CKPTPLAN_SIZE_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace ckptplan {

/// Parses "40GiB", "40GB" (10^9), "1.5TiB", "512MiB", "512 KiB", "1024" or
/// "1024B" into bytes, rounding fractions to the nearest byte. Units are
/// case-sensitive IEC (KiB..PiB) or SI (KB..PB). Throws InputError (exit
/// code kExitUsage) naming `what` (e.g. "--budget") on anything else,
/// negative values, or values over 2^63-1 bytes.
int64_t ParseSize(std::string_view text, std::string_view what);

/// "12.0 GiB", "512.0 MiB", "100 B": IEC units, one decimal.
std::string FormatBytes(int64_t bytes);

}  // namespace ckptplan

#endif  // CKPTPLAN_SIZE_H_
