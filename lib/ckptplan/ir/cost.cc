#include "ckptplan/ir/cost.h"

#include <cmath>
#include <cstdio>

namespace ckptplan {

std::string CostText(CostUnit unit, double cost) {
  char buffer[64];
  if (unit == CostUnit::kMicroseconds) {
    std::snprintf(buffer, sizeof(buffer), "%.1f us", cost);
  } else {
    static const char* kPrefixes[] = {"", "K", "M", "G", "T", "P", "E"};
    int prefix = 0;
    while (std::fabs(cost) >= 1000.0 && prefix < 6) {
      cost /= 1000.0;
      ++prefix;
    }
    std::snprintf(buffer, sizeof(buffer), "%.1f %sFLOP", cost, kPrefixes[prefix]);
  }
  return buffer;
}

double Percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

std::string PercentText(double part, double whole) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2f%%", Percent(part, whole));
  return buffer;
}

}  // namespace ckptplan
