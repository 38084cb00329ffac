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

TEST_CASE("TuneHeap advises the heap's next step as huge pages") {
  const uint64_t advised_before = HugePageAdvisedBytes();
  const size_t advised = TuneHeap(size_t{16} << 20);
  // Whole 2 MiB pages of the 16 MiB step the heap grew by (the step's first
  // and last partial pages are left out), or 0 under another allocator.
  CHECK(advised % (size_t{2} << 20) == 0);
  CHECK(advised <= (size_t{16} << 20) + (size_t{4} << 20));
  if (advised == 0) return;  // e.g. a sanitizer's allocator: nothing to see
  CHECK(advised >= (size_t{12} << 20));
  CHECK(HugePageAdvisedBytes() >= advised_before + advised);
  // The heap still serves blocks, from the advised step among others.
  void* block = std::malloc(size_t{4} << 20);
  REQUIRE(block != nullptr);
  static_cast<volatile char*>(block)[0] = 1;
  std::free(block);
}

}  // namespace
}  // namespace ckptplan
