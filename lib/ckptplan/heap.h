// How the ckptplan process asks glibc and the kernel for memory.
#ifndef CKPTPLAN_HEAP_H_
#define CKPTPLAN_HEAP_H_

#include <cstddef>

namespace ckptplan {

/// Every block comes from the heap (no mmap threshold) and freed memory
/// stays there (no trim); call first thing in main. Planning frees and
/// allocates step-sized buffers, tens of MB at 10^6 nodes, again and again.
/// By default glibc maps each from the OS and unmaps it on free, and every
/// reuse faults its pages in anew: about a second of a 10^6-node plan on a
/// VM (bench_scale.py). Elsewhere than on glibc it does nothing.
void TuneHeap();

/// Grows the heap by at least `bytes` now and advises that step to the
/// kernel as transparent huge pages (madvise(2) MADV_HUGEPAGE; used where
/// /sys/kernel/mm/transparent_hugepage/enabled is "madvise" or "always").
/// Later growth is by `bytes` at least, not advised; it calls TuneHeap
/// (its probe must neither be mapped alone nor trimmed away). Acts once;
/// returns the bytes advised (0 on later calls, off glibc and Linux, or
/// where the heap did not grow here, e.g. under a sanitizer's allocator).
///
/// On the Firecracker VMs this was measured on, the first touch of a 4 KiB
/// page costs about 11 us, and the 512 of one huge page about 0.3 us each:
/// GPT-2's plan faulted 126 times, about 1.4 ms of 10.5.
size_t AdviseHugePages(size_t bytes);

/// What the one call of AdviseHugePages advised (0 if none did).
size_t HugePagesAdvised();

}  // namespace ckptplan

#endif  // CKPTPLAN_HEAP_H_
