//! The global allocator of the static musl build that `install.sh` makes.
//!
//! git starts grantguard six times per `git commit` through the hook stubs,
//! so the installed binary is static musl, which starts without a loader and
//! without glibc's start-up probes of the CPU. musl's own allocator, though,
//! maps and unmaps pages for small allocations (49 `mmap` and 32 `munmap`
//! calls in one `pre-commit` on a small repository) and made `verify` about
//! a quarter slower than with glibc. dlmalloc (a Rust port of Doug Lea's
//! allocator, the one Rust's standard library uses on wasm) takes memory
//! from the system in large segments instead. It sits behind the standard
//! library's mutex, which costs one atomic operation when uncontended (the
//! crate's own global wrapper uses a pthread mutex, a tenth of `verify`'s
//! time in musl's implementation).
//!
//! The allocator is compiled on every target so that its tests run
//! everywhere; `main.rs` installs it only in musl builds.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// dlmalloc behind a mutex, usable as the global allocator.
pub struct Allocator(Mutex<dlmalloc::Dlmalloc>);

impl Allocator {
    /// An allocator that has not taken any memory from the system yet.
    pub const fn new() -> Allocator {
        Allocator(Mutex::new(dlmalloc::Dlmalloc::new()))
    }

    fn heap(&self) -> MutexGuard<'_, dlmalloc::Dlmalloc> {
        // Nothing panics while the lock is held; a poisoned lock would still
        // guard a consistent heap.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for Allocator {
    fn default() -> Allocator {
        Allocator::new()
    }
}

// SAFETY: each method forwards to dlmalloc's method of the same contract,
// which the `GlobalAlloc` caller's guarantees satisfy, with the heap locked.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { self.heap().malloc(layout.size(), layout.align()) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { self.heap().free(ptr, layout.size(), layout.align()) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe { self.heap().calloc(layout.size(), layout.align()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe {
            self.heap()
                .realloc(ptr, layout.size(), layout.align(), new_size)
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

    /// Mostly small sizes (dlmalloc's bins), some past its threshold for
    /// blocks of their own mapping (256 KiB).
    fn size() -> impl Strategy<Value = usize> {
        prop_oneof![8 => 0usize..4_096, 1 => 200_000usize..400_000]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Random allocations, reallocations and frees, each filled with its
        /// own byte: every block keeps its alignment and contents while
        /// others come and go, and zeroed blocks start zeroed.
        #[test]
        fn blocks_keep_their_alignment_and_contents(
            ops in prop::collection::vec((0u8..4, size(), 0u32..8, any::<u8>()), 1..150)
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

    #[test]
    fn threads_share_one_heap() {
        static HEAP: Allocator = Allocator::new();
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..2_000usize {
                        let layout = Layout::from_size_align(1 + (i * 37) % 5_000, 8).unwrap();
                        // SAFETY: a non-zero size; freed once below.
                        unsafe {
                            let p = HEAP.alloc(layout);
                            assert!(!p.is_null());
                            p.write_bytes(t, layout.size());
                            assert!(
                                std::slice::from_raw_parts(p, layout.size())
                                    .iter()
                                    .all(|&b| b == t)
                            );
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
}
