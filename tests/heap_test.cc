#include "ckptplan/heap.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ckptplan {
namespace {

// Bytes of the mappings /proc/self/smaps marks "hg" (advised MADV_HUGEPAGE).
uint64_t HugePageAdvisedBytes() {
  std::ifstream smaps("/proc/self/smaps");
  uint64_t total = 0, begin = 0, end = 0;
  for (std::string line; std::getline(smaps, line);) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    const size_t dash = first.find('-');
    if (dash != std::string::npos && first.find(':') == std::string::npos) {
      begin = std::stoull(first.substr(0, dash), nullptr, 16);
      end = std::stoull(first.substr(dash + 1), nullptr, 16);
    } else if (first == "VmFlags:") {
      for (std::string flag; fields >> flag;) {
        if (flag == "hg") total += end - begin;
      }
    }
  }
  return total;
}

TEST_CASE("AdviseHugePages advises a step of the heap as huge pages, once") {
  // Planning a small graph in an earlier test may have made the one call.
  const size_t returned = AdviseHugePages(size_t{16} << 20);
  CHECK(AdviseHugePages(size_t{16} << 20) == 0);
  const size_t advised = HugePagesAdvised();
  CHECK((returned == 0 || returned == advised));
  CHECK(advised % (size_t{2} << 20) == 0);
#if defined(__SANITIZE_ADDRESS__)
  const bool expected = false;  // its allocator maps its own memory
#else
  const bool expected = std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good();
#endif
  if (!expected) {
    CHECK(advised == 0);
    return;
  }
  // Whole 2 MiB pages of a step of 16 (or 64, by RunPlan) MiB: its first
  // and last partial pages are left out. The kernel marks them "hg".
  CHECK(advised >= (size_t{12} << 20));
  CHECK(HugePageAdvisedBytes() >= advised);
  // The heap still serves blocks, from the advised step among others.
  void* block = std::malloc(size_t{4} << 20);
  REQUIRE(block != nullptr);
  static_cast<volatile char*>(block)[0] = 1;
  std::free(block);
}

}  // namespace
}  // namespace ckptplan
