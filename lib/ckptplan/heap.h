// How the ckptplan process asks glibc and the kernel for memory.
#ifndef CKPTPLAN_HEAP_H_
#define CKPTPLAN_HEAP_H_

#include <cstddef>

namespace ckptplan {

/// Sets up the heap for planning; call first thing in main. Elsewhere than
/// on glibc and Linux it does nothing.
///
/// - Every block comes from the heap (no mmap threshold) and freed memory
///   stays there (no trim). Planning frees and allocates step-sized buffers,
///   tens of MB at 10^6 nodes, again and again. By default glibc maps each
///   from the OS and unmaps it on free, and every reuse faults its pages in
///   anew: about a second of a 10^6-node plan on a VM (bench_scale.py).
/// - The heap grows by at least `huge_bytes` at once, and its first such
///   step is advised to the kernel as transparent huge pages (madvise(2)
///   MADV_HUGEPAGE; used where /sys/kernel/mm/transparent_hugepage/enabled
///   is "madvise" or "always"). On the Firecracker VMs this was measured on,
///   the first touch of a 4 KiB page costs about 11 us, the 512 of one huge
///   page about 0.3 us each. GPT-2's plan faulted 126 times; with the advice
///   it plans in 8.9 ms instead of 10.5 (medians of 21 alternating runs).
///   Returns the bytes advised (0 where the heap did not grow here, e.g.
///   under a sanitizer's allocator).
size_t TuneHeap(size_t huge_bytes = size_t{64} << 20);

}  // namespace ckptplan

#endif  // CKPTPLAN_HEAP_H_
