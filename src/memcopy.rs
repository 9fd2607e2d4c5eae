//! `memcpy` and `memmove` of the static musl build that `install.sh` makes
//! (see [`crate::allocator`] for why that build).
//!
//! musl's x86_64 `memcpy` is one `rep movsq` after a byte loop that aligns
//! the destination, whatever the size. Starting a string instruction costs
//! tens of cycles, and most of the copies Rust code makes are a path or a
//! name of a few dozen bytes: on the 100,000-file benchmark repository
//! `memcpy` was 15% of `verify`'s time in the static build against 1% in
//! the glibc one. These two functions replace musl's there: copies of up to
//! 128 bytes are a few unaligned loads and stores of 1 to 16 bytes (every
//! load before the first store, so overlap is harmless), longer ones one
//! `rep movsq` and an 8-byte tail. musl's `memmove` calls its `memcpy` by a
//! private name, so both are defined here, and the linker then takes
//! neither of musl's.
//!
//! There is no loop in either function: a loop of loads and stores is what
//! the compiler turns back into a call to `memcpy`, which here would be a
//! call to itself. The functions are compiled on every target so that their
//! tests run everywhere; only musl builds export them under the C names.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};

/// Copies `n` bytes from `src` to `dst`, which may overlap.
///
/// # Safety
///
/// `src` must be readable and `dst` writable for `n` bytes.
#[cfg(target_arch = "x86_64")]
#[cfg_attr(all(target_env = "musl", not(test)), unsafe(no_mangle))]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's promise; `copy` handles any overlap.
    unsafe { copy(dst, src, n) };
    dst
}

/// Copies `n` bytes from `src` to `dst`. (Overlap is allowed here, although
/// C's `memcpy` does not promise it.)
///
/// # Safety
///
/// `src` must be readable and `dst` writable for `n` bytes.
#[cfg(target_arch = "x86_64")]
#[cfg_attr(all(target_env = "musl", not(test)), unsafe(no_mangle))]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's promise.
    unsafe { copy(dst, src, n) };
    dst
}

/// Copies `n` bytes, choosing the way by size and overlap.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn copy(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY (all arms): each load reads inside `src[..n]` and each store
    // writes inside `dst[..n]`, the caller's ranges; within an arm every
    // load comes before the first store, so an overlap cannot change what
    // is read.
    unsafe {
        match n {
            0 => {}
            1 => *dst = *src,
            2..=3 => ends::<u16>(dst, src, n),
            4..=7 => ends::<u32>(dst, src, n),
            8..=16 => ends::<u64>(dst, src, n),
            17..=32 => {
                let (a, b) = (load(src, 0), load(src, n - 16));
                store(dst, 0, a);
                store(dst, n - 16, b);
            }
            33..=64 => {
                let (a, b) = (load(src, 0), load(src, 16));
                let (c, d) = (load(src, n - 32), load(src, n - 16));
                store(dst, 0, a);
                store(dst, 16, b);
                store(dst, n - 32, c);
                store(dst, n - 16, d);
            }
            65..=128 => {
                let (a, b) = (load(src, 0), load(src, 16));
                let (c, d) = (load(src, 32), load(src, 48));
                let (e, f) = (load(src, n - 64), load(src, n - 48));
                let (g, h) = (load(src, n - 32), load(src, n - 16));
                store(dst, 0, a);
                store(dst, 16, b);
                store(dst, 32, c);
                store(dst, 48, d);
                store(dst, n - 64, e);
                store(dst, n - 48, f);
                store(dst, n - 32, g);
                store(dst, n - 16, h);
            }
            _ if overlaps_from_below(dst, src, n) => backward(dst, src, n),
            _ => forward(dst, src, n),
        }
    }
}

/// Whether `dst` starts inside `src[..n]` after its start: the one overlap
/// an ascending copy would overwrite bytes before reading them.
#[cfg(target_arch = "x86_64")]
fn overlaps_from_below(dst: *mut u8, src: *const u8, n: usize) -> bool {
    let (d, s) = (dst as usize, src as usize);
    d > s && d - s < n
}

/// The first and the last `T` of `src[..n]` (`size_of::<T>() <= n <= 2 *
/// size_of::<T>()`, so together they cover it) to the same places of `dst`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn ends<T: Copy>(dst: *mut u8, src: *const u8, n: usize) {
    let last = n - size_of::<T>();
    // SAFETY: both `T`s lie inside the caller's ranges; loads first.
    unsafe {
        let a = src.cast::<T>().read_unaligned();
        let b = src.add(last).cast::<T>().read_unaligned();
        dst.cast::<T>().write_unaligned(a);
        dst.add(last).cast::<T>().write_unaligned(b);
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn load(src: *const u8, at: usize) -> __m128i {
    // SAFETY: the caller keeps `at + 16` inside its range; SSE2 is part of
    // x86_64.
    unsafe { _mm_loadu_si128(src.add(at).cast()) }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn store(dst: *mut u8, at: usize, v: __m128i) {
    // SAFETY: as for `load`.
    unsafe { _mm_storeu_si128(dst.add(at).cast(), v) }
}

/// An ascending copy of more than 16 bytes: the last 8 bytes are read first
/// and written last, and `rep movsq` copies the whole 8-byte words before
/// them. musl's own `memmove` copies with `rep movsq` ascending wherever
/// `dst` is below `src`, overlapping or not.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn forward(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the tail lies inside both ranges (n > 16); `rep movsq` moves
    // `n / 8` words, at most `n` bytes, ascending (the direction flag is
    // clear at every call, as the ABI requires).
    unsafe {
        let tail = src.add(n - 8).cast::<u64>().read_unaligned();
        std::arch::asm!(
            "rep movsq",
            inout("rcx") n / 8 => _,
            inout("rdi") dst => _,
            inout("rsi") src => _,
            options(nostack, preserves_flags)
        );
        dst.add(n - 8).cast::<u64>().write_unaligned(tail);
    }
}

/// A descending copy, byte by byte (`std; rep movsb; cld`): for the rare
/// long copy whose destination starts inside its source (a `Vec::insert`
/// near the front of a long vector).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn backward(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: `rep movsb` with the direction flag set moves `n` bytes from
    // the last one down, inside both ranges; the flag is cleared again
    // before anything else runs.
    unsafe {
        std::arch::asm!(
            "std",
            "rep movsb",
            "cld",
            inout("rcx") n => _,
            inout("rdi") dst.add(n - 1) => _,
            inout("rsi") src.add(n - 1) => _,
            options(nostack)
        );
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Moves `len` bytes at `from` to `to` in a buffer of `size` bytes with
    /// `memmove` (or `memcpy`), against `copy_within`.
    fn check(size: usize, from: usize, to: usize, len: usize, use_memcpy: bool) {
        let original: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
        let mut expected = original.clone();
        expected.copy_within(from..from + len, to);
        let mut buf = original;
        let base = buf.as_mut_ptr();
        // SAFETY: both ranges lie inside `buf`.
        unsafe {
            let (dst, src) = (base.add(to), base.add(from).cast_const());
            let returned = if use_memcpy {
                memcpy(dst, src, len)
            } else {
                memmove(dst, src, len)
            };
            assert_eq!(returned, dst);
        }
        assert_eq!(buf, expected, "from {from} to {to}, {len} bytes");
    }

    /// Every length up to past the string-instruction threshold, at every
    /// distance in both directions within 40 bytes and far apart.
    #[test]
    fn moves_every_length_at_every_near_offset() {
        for len in 0..=300 {
            for shift in -40i64..=40 {
                let from = 64usize;
                let to = (64 + shift) as usize;
                check(len + 200, from, to, len, false);
            }
            check(2 * len + 100, 0, len + 50, len, true);
            check(2 * len + 100, len + 50, 0, len, true);
        }
    }

    proptest! {
        #[test]
        fn moves_like_copy_within(
            size in 1usize..20_000,
            a in any::<prop::sample::Index>(),
            b in any::<prop::sample::Index>(),
            l in any::<prop::sample::Index>(),
        ) {
            let len = l.index(size + 1);
            let from = a.index(size - len + 1);
            let to = b.index(size - len + 1);
            check(size, from, to, len, false);
        }
    }
}
