//! The global allocator of the static musl build that `install.sh` makes.
//!
//! git starts grantguard six times per `git commit` through the hook stubs,
//! so the installed binary is static musl, which starts without a loader and
//! without glibc's start-up probes of the CPU. musl's own allocator, though,
//! maps and unmaps pages for small allocations (49 `mmap` and 32 `munmap`
//! calls in one `pre-commit` on a small repository) and made `verify` about
//! a quarter slower than with glibc. dlmalloc (a Rust port of Doug Lea's
//! allocator, the one Rust's standard library uses on wasm) takes memory
//! from the system in large segments instead.
//!
//! One dlmalloc behind one lock was the next bottleneck: `verify` runs gix's
//! status on every core beside a walk of its own, and on the 100,000-file
//! benchmark repository the threads spent a sixth of their time waiting for
//! that lock or moving its cache line between cores (the static build took
//! 475 ms where the glibc one took 289 ms). So there are heaps, each a
//! dlmalloc behind the standard library's mutex (one atomic operation when
//! uncontended; the crate's own global wrapper uses a pthread mutex, a tenth
//! of `verify`'s time in musl's implementation), one per CPU: a thread
//! allocates from the heap of the CPU it ran on when it last asked
//! (`sched_getcpu`, asked again every [`REFRESH`] allocations: a vDSO call
//! on x86_64, but a system call on aarch64), so two threads rarely meet on
//! a lock (when one moved to another CPU since it asked, or was preempted
//! holding it, or on more than [`HEAPS`] CPUs). Per CPU rather than per
//! thread: the memory a heap keeps after
//! frees serves whichever thread runs there next, so `verify`'s short-lived
//! worker threads do not each leave a heap's worth behind (on the
//! benchmark repository after `git gc`, whose whole store `verify` proves on
//! many threads, a heap per thread peaked at 75 MiB, a heap per CPU at
//! 49–67 MiB, in the same time). A
//! block may be freed on another CPU than the one that made it, so each
//! block carries its heap's number in a header of [`header_len`] bytes in
//! front of it, and goes back to that heap.
//!
//! A block of [`MAPPED_FROM`] bytes or more is a mapping of its own
//! instead (as glibc's `malloc` does from 128 KiB): dlmalloc keeps what is
//! freed in the middle of a heap, so a large buffer freed by one phase of
//! `verify` (the index's bytes, a decoded index, a table of 100,000
//! paths) stayed in that CPU's heap, and whether the next phase's large
//! buffers could reuse it depended on which CPU its threads ran on. On
//! the benchmark repository after `git gc`, verify's peak resident memory
//! varied from 43.8 to 63.4 MiB over 12 runs (64.2 in a bench run, over
//! the 64 MiB budget); a mapping goes back to the system when freed, and
//! grows in place or moves without a copy (`mremap`). Its header names no
//! heap but [`MAPPED`].
//!
//! The allocator is compiled on every Linux target so that its tests run
//! everywhere; `main.rs` installs it only in musl builds.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// How many heaps there are at most: CPUs beyond this share them.
pub const HEAPS: usize = 16;

/// How many allocations a thread makes from one heap before it asks again
/// which CPU it runs on.
pub const REFRESH: u32 = 64;

/// Blocks of at least this many bytes, header included, are mappings of
/// their own (see the module docs).
pub const MAPPED_FROM: usize = 1 << 20;

/// The heap number in the header of a block that is a mapping of its own.
const MAPPED: usize = usize::MAX;

/// The largest alignment a mapping gives: every page size is a multiple
/// of it. A block that needs more comes from a heap, whatever its size.
const MAPPING_ALIGN: usize = 4096;

/// Whether a block of `total` bytes (header included) with `align` is a
/// mapping of its own.
fn is_mapped_size(total: usize, align: usize) -> bool {
    total >= MAPPED_FROM && align <= MAPPING_ALIGN
}

thread_local! {
    /// This thread's heap and the allocations left before it asks again. A
    /// `Cell` with a constant initializer and no destructor: readable at
    /// any point of a thread's life, its teardown included, which a global
    /// allocator needs.
    static CHOSEN: Cell<(usize, u32)> = const { Cell::new((0, 0)) };
}

/// dlmalloc heaps behind a mutex each, usable as the global allocator.
pub struct Allocator {
    heaps: [Mutex<dlmalloc::Dlmalloc>; HEAPS],
}

/// The bytes in front of a block with `align`: a multiple of `align` (so
/// the block keeps its alignment) and of 16, with room for the heap's
/// number in its last word.
fn header_len(align: usize) -> usize {
    align.max(16)
}

impl Allocator {
    /// An allocator that has not taken any memory from the system yet.
    pub const fn new() -> Allocator {
        Allocator {
            heaps: [const { Mutex::new(dlmalloc::Dlmalloc::new()) }; HEAPS],
        }
    }

    /// The heap of the CPU this thread ran on when it last asked (the
    /// first heap when the kernel does not say).
    fn own_heap(&self) -> usize {
        CHOSEN.with(|chosen| {
            let (heap, left) = chosen.get();
            if left > 0 {
                chosen.set((heap, left - 1));
                return heap;
            }
            // SAFETY: no arguments; it only reads which CPU runs the caller.
            let cpu = unsafe { libc::sched_getcpu() };
            let heap = usize::try_from(cpu).map_or(0, |cpu| cpu % HEAPS);
            chosen.set((heap, REFRESH - 1));
            heap
        })
    }

    fn heap(&self, index: usize) -> MutexGuard<'_, dlmalloc::Dlmalloc> {
        // Nothing panics while a lock is held; a poisoned lock would still
        // guard a consistent heap.
        self.heaps[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Allocates `layout` plus its header from this thread's CPU's heap and
    /// returns the block after the header, `zeroed` or not.
    unsafe fn allocate(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        let header = header_len(layout.align());
        let Some(size) = layout.size().checked_add(header) else {
            return std::ptr::null_mut();
        };
        if is_mapped_size(size, layout.align()) {
            return unsafe { map_block(size, header) };
        }
        let index = self.own_heap();
        let mut heap = self.heap(index);
        // SAFETY: a non-zero size and a power-of-two alignment, as
        // `GlobalAlloc` promises for `layout` (the header keeps both).
        let base = unsafe {
            if zeroed {
                heap.calloc(size, header)
            } else {
                heap.malloc(size, header)
            }
        };
        drop(heap);
        if base.is_null() {
            return base;
        }
        // SAFETY: `base` holds `size` bytes, aligned to `header`, which is
        // at least 16: the block starts `header` bytes in, and the word
        // before it is inside the header and aligned.
        unsafe {
            let block = base.add(header);
            block.cast::<usize>().sub(1).write(index);
            block
        }
    }

    /// The start of the allocation holding `block` (made with `align`), its
    /// size with the header, and the heap it came from.
    unsafe fn owner(block: *mut u8, layout: Layout) -> (*mut u8, usize, usize) {
        let header = header_len(layout.align());
        // SAFETY: `block` came from `allocate` with this layout, which wrote
        // the heap's number in the word before it.
        unsafe {
            let index = block.cast::<usize>().sub(1).read();
            (block.sub(header), layout.size() + header, index)
        }
    }
}

/// A mapping of `total` bytes whose block starts `header` bytes in, its
/// header naming [`MAPPED`]; null when the system has no memory. Fresh
/// anonymous pages are zero, so the block is zeroed too.
unsafe fn map_block(total: usize, header: usize) -> *mut u8 {
    // SAFETY: a private anonymous mapping; it aliases nothing.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            total,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    // SAFETY: the mapping is page-aligned and holds `total` bytes, more
    // than `header`; the word before the block is in the header, aligned.
    unsafe {
        let block = base.cast::<u8>().add(header);
        block.cast::<usize>().sub(1).write(MAPPED);
        block
    }
}

impl Allocator {
    /// Gives the system back what each heap holds free at its top, and its
    /// segments that hold nothing.
    pub fn trim(&self) {
        for index in 0..HEAPS {
            // SAFETY: the heap is locked; trimming only releases memory no
            // block occupies.
            unsafe { self.heap(index).trim(0) };
        }
    }
}

/// The heap of threads that keep what they allocate ([`keep_apart`]).
const APART: usize = HEAPS - 1;

/// Makes the calling thread allocate from a heap of its own choosing
/// rather than its CPU's, for good: a thread whose blocks live on while
/// other threads allocate and free much beside it (`verify`'s worktree
/// scan keeps every directory's names, while the proof of a rewritten
/// store runs) would otherwise leave them scattered among the freed
/// blocks, and [`release_free_memory`] could give little back. (CPUs
/// beyond [`HEAPS`] share that heap too; it is one heap like the others.)
pub fn keep_apart() {
    CHOSEN.with(|chosen| chosen.set((APART, u32::MAX)));
}

/// The process's allocator in the static musl build (see the module docs).
#[cfg(target_env = "musl")]
#[global_allocator]
static GLOBAL: Allocator = Allocator::new();

/// Gives the system back the memory the heaps hold free, after a phase
/// whose threads allocated much and freed it all (the proof of a
/// rewritten store). A heap is a CPU's: what one phase's threads freed in
/// one heap does not serve the next phase's allocations from another, so
/// their peaks added up. On the benchmark repository after `git gc`,
/// verify's peak resident memory was 38.5 to 69.5 MiB (median 67, 7 of 12
/// runs over the 64 MiB budget); with this and [`keep_apart`] for the
/// worktree scan, 39.4 to 64.2 MiB (median 52, 2 of 16 runs over by at
/// most 0.2 MiB); since blocks of 1 MiB or more are mappings of their own
/// (`map_block`), 38.8 to 39.8 MiB over 12 runs (twenty-second stop on
/// issue 29, docs/performance.md).
/// Nothing in other builds, whose allocator is the system's.
pub fn release_free_memory() {
    #[cfg(target_env = "musl")]
    GLOBAL.trim();
}

impl Default for Allocator {
    fn default() -> Allocator {
        Allocator::new()
    }
}

// SAFETY: every block comes from one heap's dlmalloc with the size and
// alignment that `header_len` adds to the caller's layout, and goes back to
// that heap (named in its header) with the same, with the heap locked; the
// `GlobalAlloc` caller's guarantees on `layout` and `ptr` give dlmalloc's.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { self.allocate(layout, false) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe {
            let (base, size, index) = Allocator::owner(ptr, layout);
            if index == MAPPED {
                // The whole mapping, made with this size by `map_block`
                // or `realloc`.
                libc::munmap(base.cast(), size);
                return;
            }
            self.heap(index)
                .free(base, size, header_len(layout.align()));
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe { self.allocate(layout, true) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let header = header_len(layout.align());
        let Some(new_total) = new_size.checked_add(header) else {
            return std::ptr::null_mut();
        };
        unsafe {
            let (base, size, index) = Allocator::owner(ptr, layout);
            let mapped = is_mapped_size(new_total, layout.align());
            if index == MAPPED && mapped {
                // The pages move with the header; none is copied.
                let moved = libc::mremap(base.cast(), size, new_total, libc::MREMAP_MAYMOVE);
                if moved == libc::MAP_FAILED {
                    return std::ptr::null_mut();
                }
                return moved.cast::<u8>().add(header);
            }
            if index == MAPPED || mapped {
                // Between a heap and a mapping: a new block, the contents
                // copied, the old block freed.
                let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                let new = self.allocate(new_layout, false);
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                return new;
            }
            // The same heap: the header, copied with the block, stays true.
            let moved = self.heap(index).realloc(base, size, header, new_total);
            if moved.is_null() {
                return moved;
            }
            moved.add(header)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One live allocation: its pointer, layout and the byte it was filled
    /// with.
    struct Live(*mut u8, Layout, u8);

    fn check(live: &Live) {
        let Live(ptr, layout, byte) = *live;
        assert_eq!(ptr as usize % layout.align(), 0, "misaligned");
        // SAFETY: `ptr` is a live allocation of `layout.size()` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, layout.size()) };
        assert!(bytes.iter().all(|&b| b == byte), "contents changed");
    }

    /// Mostly small sizes (dlmalloc's bins), some of dlmalloc's large
    /// chunks (past 256 KiB), some on either side of [`MAPPED_FROM`].
    fn size() -> impl Strategy<Value = usize> {
        prop_oneof![
            8 => 0usize..4_096,
            1 => 200_000usize..400_000,
            1 => (MAPPED_FROM - 40_000)..(MAPPED_FROM + 3_000_000),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Random allocations, reallocations and frees, each filled with its
        /// own byte: every block keeps its alignment and contents while
        /// others come and go, and zeroed blocks start zeroed.
        #[test]
        fn blocks_keep_their_alignment_and_contents(
            ops in prop::collection::vec((0u8..5, size(), 0u32..13, any::<u8>()), 1..150)
        ) {
            let heap = Allocator::new();
            let mut live: Vec<Live> = Vec::new();
            for (op, size, align_log, byte) in ops {
                let size = size.max(1);
                let layout = Layout::from_size_align(size, 1 << align_log).unwrap();
                match op {
                    0 | 1 => {
                        // SAFETY: a non-zero size.
                        let ptr = unsafe {
                            if op == 0 { heap.alloc(layout) } else { heap.alloc_zeroed(layout) }
                        };
                        prop_assert!(!ptr.is_null());
                        if op == 1 {
                            check(&Live(ptr, layout, 0));
                        }
                        // SAFETY: `ptr` holds `size` bytes.
                        unsafe { ptr.write_bytes(byte, size) };
                        live.push(Live(ptr, layout, byte));
                    }
                    2 if !live.is_empty() => {
                        let Live(ptr, old, fill) = live.swap_remove(byte as usize % live.len());
                        // SAFETY: `ptr` was allocated with `old`.
                        let new = unsafe { heap.realloc(ptr, old, size) };
                        prop_assert!(!new.is_null());
                        let kept = Layout::from_size_align(old.size().min(size), old.align()).unwrap();
                        check(&Live(new, kept, fill));
                        // SAFETY: `new` holds `size` bytes.
                        unsafe { new.write_bytes(fill, size) };
                        live.push(Live(new, Layout::from_size_align(size, old.align()).unwrap(), fill));
                    }
                    4 => {
                        // Giving free memory back leaves every live block.
                        heap.trim();
                        for block in &live {
                            check(block);
                        }
                    }
                    _ if !live.is_empty() => {
                        let block = live.swap_remove(byte as usize % live.len());
                        check(&block);
                        // SAFETY: allocated with this layout, freed once.
                        unsafe { heap.dealloc(block.0, block.1) };
                    }
                    _ => {}
                }
            }
            for block in live {
                check(&block);
                // SAFETY: as above.
                unsafe { heap.dealloc(block.0, block.1) };
            }
        }
    }

    /// A block of [`MAPPED_FROM`] bytes or more is a mapping of its own,
    /// grows and shrinks as one, moves to a heap when it shrinks below,
    /// and back; one that needs more alignment than a page comes from a
    /// heap, whatever its size.
    #[test]
    fn large_blocks_are_mappings_of_their_own() {
        let heap = Allocator::new();
        let big = Layout::from_size_align(2 << 20, 64).unwrap();
        // SAFETY: non-zero sizes; each block is used within its size and
        // freed once, with its layout.
        unsafe {
            let p = heap.alloc_zeroed(big);
            assert!(!p.is_null());
            check(&Live(p, big, 0));
            assert_eq!(Allocator::owner(p, big).2, MAPPED);
            p.write_bytes(0x5a, big.size());
            let grown_layout = Layout::from_size_align(5 << 20, 64).unwrap();
            let grown = heap.realloc(p, big, grown_layout.size());
            assert_eq!(Allocator::owner(grown, grown_layout).2, MAPPED);
            check(&Live(grown, big, 0x5a));
            let small_layout = Layout::from_size_align(100, 64).unwrap();
            let small = heap.realloc(grown, grown_layout, small_layout.size());
            assert_ne!(Allocator::owner(small, small_layout).2, MAPPED);
            check(&Live(small, small_layout, 0x5a));
            let again = heap.realloc(small, small_layout, big.size());
            assert_eq!(Allocator::owner(again, big).2, MAPPED);
            check(&Live(again, small_layout, 0x5a));
            heap.dealloc(again, big);
            let aligned = Layout::from_size_align(2 << 20, 2 * MAPPING_ALIGN).unwrap();
            let q = heap.alloc(aligned);
            assert_eq!(q as usize % aligned.align(), 0);
            assert_ne!(Allocator::owner(q, aligned).2, MAPPED);
            heap.dealloc(q, aligned);
        }
    }

    /// A thread kept apart allocates from its own heap wherever it runs,
    /// and its blocks go back there; other threads stay with their CPU's.
    #[test]
    fn a_thread_kept_apart_allocates_from_its_own_heap() {
        /// The heap one allocation of the calling thread came from.
        fn heap_of(heap: &Allocator) -> usize {
            let layout = Layout::from_size_align(64, 8).unwrap();
            // SAFETY: a non-zero size; the block is freed once, with its
            // layout.
            unsafe {
                let block = heap.alloc(layout);
                let index = Allocator::owner(block, layout).2;
                heap.dealloc(block, layout);
                index
            }
        }
        let heap = std::sync::Arc::new(Allocator::new());
        let shared = heap.clone();
        let apart = std::thread::spawn(move || {
            keep_apart();
            (0..1000).map(|_| heap_of(&shared)).collect::<Vec<_>>()
        })
        .join()
        .unwrap();
        assert!(apart.iter().all(|&i| i == APART));
        let other = std::thread::spawn(move || heap_of(&heap)).join().unwrap();
        // Unless a CPU it may run on shares the heap kept apart.
        if cpus().iter().all(|cpu| cpu % HEAPS != APART) {
            assert_ne!(other, APART);
        }
    }

    /// Pins the calling thread to `cpu`, and makes its next allocation ask
    /// which CPU it runs on; `false` where pinning is not allowed.
    fn pin_to(cpu: usize) -> bool {
        // SAFETY: a zeroed `cpu_set_t` is an empty set; the calls only read
        // it.
        let pinned = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) == 0
        };
        CHOSEN.with(|chosen| chosen.set((0, 0)));
        pinned
    }

    /// The CPUs this process may run on.
    fn cpus() -> Vec<usize> {
        // SAFETY: as in `pin_to`; the kernel fills the set.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
                .collect()
        }
    }

    /// Threads on different CPUs allocate from different heaps, and many
    /// threads at once (more than CPUs) keep every block's contents.
    #[test]
    fn threads_allocate_from_the_heap_of_their_cpu() {
        static HEAP: Allocator = Allocator::new();
        let cpus = cpus();
        let threads: Vec<_> = (0..4 * cpus.len())
            .map(|t| {
                let cpu = cpus[t % cpus.len()];
                std::thread::spawn(move || {
                    let pinned = pin_to(cpu);
                    for i in 0..2_000usize {
                        let layout = Layout::from_size_align(1 + (i * 37) % 5_000, 8).unwrap();
                        // SAFETY: a non-zero size; freed once below.
                        unsafe {
                            let p = HEAP.alloc(layout);
                            assert!(!p.is_null());
                            p.write_bytes(t as u8, layout.size());
                            check(&Live(p, layout, t as u8));
                            if pinned {
                                assert_eq!(Allocator::owner(p, layout).2, cpu % HEAPS);
                            }
                            HEAP.dealloc(p, layout);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    /// A block made on one thread and grown or freed on another goes back
    /// to the heap that made it: the heap named in its header, whichever
    /// thread holds it now.
    #[test]
    fn blocks_return_to_their_heap_from_any_thread() {
        static HEAP: Allocator = Allocator::new();
        let layouts = [
            Layout::from_size_align(24, 8).unwrap(),
            Layout::from_size_align(300_000, 16).unwrap(),
            Layout::from_size_align(100, 4096).unwrap(),
        ];
        let cpus = cpus();
        let (first, second) = (cpus[0], *cpus.last().unwrap());
        let made = std::thread::spawn(move || {
            let pinned = pin_to(first);
            let made = layouts.map(|layout| {
                // SAFETY: non-zero sizes.
                let p = unsafe { HEAP.alloc(layout) };
                assert!(!p.is_null());
                // SAFETY: `p` holds `layout.size()` bytes.
                unsafe { p.write_bytes(0xa5, layout.size()) };
                // SAFETY: just made with `layout`.
                (p as usize, unsafe { Allocator::owner(p, layout) }.2)
            });
            (made, pinned)
        })
        .join()
        .unwrap();
        let (made, pinned_first) = made;
        std::thread::spawn(move || {
            let pinned = pin_to(second) && pinned_first;
            for ((p, heap), layout) in made.into_iter().zip(layouts) {
                let p = p as *mut u8;
                assert_eq!(p as usize % layout.align(), 0);
                // SAFETY: made with `layout`; the header is intact.
                let (_, _, owner) = unsafe { Allocator::owner(p, layout) };
                assert_eq!(owner, heap);
                if pinned && first % HEAPS != second % HEAPS {
                    // This thread allocates elsewhere: the block still
                    // goes back where it came from.
                    assert_eq!(heap, first % HEAPS);
                    assert_eq!(HEAP.own_heap(), second % HEAPS);
                }
                // SAFETY: made with `layout`, grown once, freed once.
                unsafe {
                    let grown = HEAP.realloc(p, layout, layout.size() * 2);
                    assert!(!grown.is_null());
                    assert_eq!(grown as usize % layout.align(), 0);
                    check(&Live(grown, layout, 0xa5));
                    let grown_layout =
                        Layout::from_size_align(layout.size() * 2, layout.align()).unwrap();
                    assert_eq!(Allocator::owner(grown, grown_layout).2, heap);
                    HEAP.dealloc(grown, grown_layout);
                }
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_size_no_heap_can_hold_with_its_header_is_refused() {
        let heap = Allocator::new();
        let layout = Layout::from_size_align(isize::MAX as usize - 15, 16).unwrap();
        // SAFETY: a non-zero size; null is the expected answer.
        assert!(unsafe { heap.alloc(layout) }.is_null());
    }
}
