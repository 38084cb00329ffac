#include "ckptplan/heap.h"

#include <cstdint>
#include <cstdlib>

#if defined(__GLIBC__) && defined(__linux__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace ckptplan {

void TuneHeap() {
#if defined(__GLIBC__) && defined(__linux__)
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

namespace {
bool advice_done = false;
size_t advised_bytes = 0;
}  // namespace

size_t HugePagesAdvised() { return advised_bytes; }

size_t AdviseHugePages(size_t bytes) {
  if (advice_done) return 0;
  advice_done = true;
#if defined(__GLIBC__) && defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  // The probe below must come from the heap, not from a mapping of its
  // own, and its free must not trim the heap back (TuneHeap).
  TuneHeap();
  mallopt(M_TOP_PAD, static_cast<int>(bytes));
  // A block larger than all the heap's free memory together fits in no free
  // chunk: glibc grows the heap now, by the block and the pad. The block
  // goes back at once (address space only: its pages are not touched).
  // (volatile: a malloc whose block is only freed may be left out.)
  const auto before = reinterpret_cast<uintptr_t>(sbrk(0));
  void* volatile probe = malloc(mallinfo2().fordblks + 4096);
  free(probe);
  const auto after = reinterpret_cast<uintptr_t>(sbrk(0));
  // Another allocator (a sanitizer's) maps its own memory: the program
  // break stays where it was and nothing is advised.
  if (after <= before) return 0;
  const uintptr_t begin = (before + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = after & ~(kHugePage - 1);
  if (begin >= end || madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) != 0) {
    return 0;
  }
  // The heap's free top starts where the probe did, up to 2 MiB short of
  // the first huge page (the heap's start is random). A block that is never
  // freed covers the gap, so that what is allocated next lands in huge pages
  // rather than in up to 512 small ones. It costs address space and a page.
  const auto top = reinterpret_cast<uintptr_t>(probe);
  static void* volatile gap = nullptr;  // (volatile: kept, not left out)
  if (begin > top + 64) gap = malloc(begin - top - 32);
  (void)gap;
  advised_bytes = end - begin;
  return advised_bytes;
#else
  (void)bytes;
  return 0;
#endif
}

}  // namespace ckptplan
