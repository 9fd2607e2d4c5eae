//! `memcmp` and `bcmp` of the static musl build that `install.sh` makes
//! (see [`crate::allocator`] for why that build, and [`crate::memcopy`]
//! for its `memcpy`).
//!
//! musl's `memcmp` compares a byte at a time. Rust compares and orders
//! byte strings through it: every ref name looked up in a map of 100,000
//! refs, every name compared with its neighbour in `packed-refs` or in
//! git's listing, every path gix compares. In a verify that reads every
//! one of 100,000 refs it was 5% of the static build's time, the largest
//! function after SHA-256. These replace musl's there: 16 bytes at a time
//! with SSE2 (part of x86_64), shorter ones as one or two overlapping
//! words compared as big-endian numbers (whose order is the order of their
//! bytes). musl's `bcmp` calls `memcmp`; both are defined here so that the
//! linker takes neither of musl's.
//!
//! The long case loops over SSE2 intrinsics, and the short cases have no
//! loop: a byte loop is what the compiler turns back into a call to
//! `memcmp`, which here would be a call to itself. Compiled on every
//! target so that the tests run everywhere; only musl builds export the C
//! names.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8};

/// Compares `n` bytes at `a` and `b` as unsigned bytes: negative, zero or
/// positive as `a` sorts before, with or after `b`.
///
/// # Safety
///
/// `a` and `b` must be readable for `n` bytes.
#[cfg(target_arch = "x86_64")]
#[cfg_attr(all(target_env = "musl", not(test)), unsafe(no_mangle))]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the caller's promise.
    unsafe { compare(a, b, n) }
}

/// [`memcmp`] where only zero or not matters (what the compiler calls for
/// `==` on byte strings).
///
/// # Safety
///
/// `a` and `b` must be readable for `n` bytes.
#[cfg(target_arch = "x86_64")]
#[cfg_attr(all(target_env = "musl", not(test)), unsafe(no_mangle))]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the caller's promise.
    unsafe { compare(a, b, n) }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn compare(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY (all arms): every load lies inside `a[..n]` and `b[..n]`.
    unsafe {
        match n {
            0 => 0,
            1 => i32::from(*a) - i32::from(*b),
            2..=3 => ends(a, b, n - 2, be16),
            4..=7 => ends(a, b, n - 4, be32),
            8..=15 => ends(a, b, n - 8, be64),
            _ => blocks(a, b, n),
        }
    }
}

/// The word at the start and the one at `last` (the end's: together they
/// cover the bytes) read by `word` as big-endian numbers, compared in that
/// order: when the first words are equal, so is their overlap with the
/// last ones, and the last words differ where the bytes first differ.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn ends(a: *const u8, b: *const u8, last: usize, word: unsafe fn(*const u8) -> u64) -> i32 {
    // SAFETY: both words lie inside the caller's ranges.
    let (first, then) = unsafe {
        (
            word(a).cmp(&word(b)),
            word(a.add(last)).cmp(&word(b.add(last))),
        )
    };
    match first.then(then) {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    }
}

/// The 2, 4 or 8 bytes at `p` as a big-endian number.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn be16(p: *const u8) -> u64 {
    // SAFETY: the caller's range holds the word.
    u64::from(u16::from_be(unsafe { p.cast::<u16>().read_unaligned() }))
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn be32(p: *const u8) -> u64 {
    // SAFETY: as for `be16`.
    u64::from(u32::from_be(unsafe { p.cast::<u32>().read_unaligned() }))
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn be64(p: *const u8) -> u64 {
    // SAFETY: as for `be16`.
    u64::from_be(unsafe { p.cast::<u64>().read_unaligned() })
}

/// 16 bytes at a time, the last 16 overlapping the block before them;
/// `n >= 16`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn blocks(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: each 16-byte load starts at most at `n - 16`.
    unsafe {
        let mut at = 0;
        loop {
            let x = _mm_loadu_si128(a.add(at).cast());
            let y = _mm_loadu_si128(b.add(at).cast());
            // One bit per byte, set where the bytes are equal.
            let equal = _mm_movemask_epi8(_mm_cmpeq_epi8(x, y)) as u32;
            if equal != 0xffff {
                let first = at + (!equal).trailing_zeros() as usize;
                return i32::from(*a.add(first)) - i32::from(*b.add(first));
            }
            if at == n - 16 {
                return 0;
            }
            at = (at + 16).min(n - 16);
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `memcmp` and `bcmp` of `a` and `b`, against the order of slices.
    fn check(a: &[u8], b: &[u8]) {
        assert_eq!(a.len(), b.len());
        let expected = a.cmp(b);
        // SAFETY: both slices have `len` bytes.
        let (ordered, equal) = unsafe {
            (
                memcmp(a.as_ptr(), b.as_ptr(), a.len()),
                bcmp(a.as_ptr(), b.as_ptr(), a.len()),
            )
        };
        assert_eq!(ordered.cmp(&0), expected, "{a:?} against {b:?}");
        assert_eq!(equal == 0, a == b, "{a:?} against {b:?}");
    }

    /// Every length through a few blocks, a difference at every place (and
    /// none), each way round, high bytes included: a signed comparison
    /// would order 0x80 before 0x7f.
    #[test]
    fn orders_every_length_with_a_difference_anywhere() {
        for len in 0..=80 {
            let a: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            check(&a, &a.clone());
            for at in 0..len {
                for (x, y) in [(0x7f, 0x80), (0x00, 0xff), (0x41, 0x42)] {
                    let (mut lo, mut hi) = (a.clone(), a.clone());
                    lo[at] = x;
                    hi[at] = y;
                    check(&lo, &hi);
                    check(&hi, &lo);
                    // A second difference after the first does not count.
                    if at + 1 < len {
                        lo[at + 1] = 0xff;
                        hi[at + 1] = 0x00;
                        check(&lo, &hi);
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn orders_like_slices(
            a in proptest::collection::vec(any::<u8>(), 0..300),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
            offset in 0usize..16,
        ) {
            // Mostly equal inputs (few flips), at unaligned addresses.
            let mut b = a.clone();
            for (at, byte) in flips {
                if !b.is_empty() {
                    let at = at.index(b.len());
                    b[at] = byte;
                }
            }
            let mut shifted = vec![0u8; offset];
            shifted.extend_from_slice(&b);
            check(&a, &shifted[offset..]);
        }
    }
}
