#include "ckptplan/heap.h"

#include <cstdint>
#include <cstdlib>

#if defined(__GLIBC__) && defined(__linux__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace ckptplan {

size_t TuneHeap(size_t huge_bytes) {
#if defined(__GLIBC__) && defined(__linux__)
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#if defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  mallopt(M_TOP_PAD, static_cast<int>(huge_bytes));
  // A block larger than the heap's free top makes glibc grow the heap now,
  // by the block and the pad; the block goes back to the top at once.
  // (volatile: a malloc whose block is only freed may be left out.)
  const auto before = reinterpret_cast<uintptr_t>(sbrk(0));
  void* volatile probe = malloc(mallinfo2().keepcost + 4096);
  const auto after = reinterpret_cast<uintptr_t>(sbrk(0));
  free(probe);
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
  static void* gap = nullptr;
  if (gap == nullptr && begin > top + 64) gap = malloc(begin - top - 32);
  return end - begin;
#endif
#endif
  (void)huge_bytes;
  return 0;
}

}  // namespace ckptplan
