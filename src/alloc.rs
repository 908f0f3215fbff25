//! The process's allocator: mimalloc, asked for plain blocks whenever a plain block is aligned
//! enough.
//!
//! Events are allocated on the proxy's threads and freed on the hub's and the view's: mimalloc
//! handles that cross-thread churn far better than the system allocator. The `mimalloc` crate's
//! own `GlobalAlloc` asks for every block through mimalloc's aligned entry points, whatever the
//! alignment; those take a slower path for blocks over 1 KiB, and for smaller ones whenever the
//! thread's page has no free block at hand, and there, unless the size class is a power of
//! two, they over-allocate by the alignment. A
//! plain `mi_malloc` block is already aligned to [`PLAIN_ALIGN`] when larger than 8 bytes
//! (mimalloc's size classes are whole multiples of two words) and to 8 otherwise, so a layout
//! asking no more than that takes the plain entry points, as Rust's own system allocator does
//! with `malloc`.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// The alignment of every plain mimalloc block larger than 8 bytes (`MI_MAX_ALIGN_SIZE`).
pub const PLAIN_ALIGN: usize = 16;

/// mimalloc, through its plain entry points when the layout allows it (see the module).
#[derive(Debug, Default, Clone, Copy)]
pub struct Allocator;

/// Whether a block of `size` bytes from the plain entry points satisfies `align`: a block of
/// 8 bytes or less is aligned to 8 only, so the alignment must not exceed the size either.
#[inline]
fn plain(size: usize, align: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

// SAFETY: every block comes from mimalloc and goes back to it (`mi_free` takes blocks from the
// plain and the aligned entry points alike); a block is aligned as its layout asks, by the
// plain entry points' guarantee or by the aligned ones.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        // SAFETY: plain FFI calls; mimalloc accepts any size and power-of-two alignment.
        unsafe {
            if plain(size, align) {
                libmimalloc_sys::mi_malloc(size).cast()
            } else {
                libmimalloc_sys::mi_malloc_aligned(size, align).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        // SAFETY: as in `alloc`.
        unsafe {
            if plain(size, align) {
                libmimalloc_sys::mi_zalloc(size).cast()
            } else {
                libmimalloc_sys::mi_zalloc_aligned(size, align).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator, hence by mimalloc.
        unsafe { libmimalloc_sys::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        // SAFETY: `ptr` was allocated by this allocator with `layout`; the new block keeps its
        // alignment (plain blocks of `new_size` are aligned enough when `plain` holds).
        unsafe {
            if plain(new_size, align) {
                libmimalloc_sys::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                libmimalloc_sys::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, align).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `p` is a block aligned to `align`.
    fn aligned(p: *mut u8, align: usize) -> bool {
        !p.is_null() && (p as usize).is_multiple_of(align)
    }

    /// Every size and alignment a program asks for comes back aligned as asked, through
    /// allocation, zeroed allocation and growth or shrinking, across the sizes where mimalloc's
    /// size classes change (small, 1 KiB, pages, huge).
    #[test]
    fn every_block_is_aligned_as_its_layout_asks() {
        let sizes = [
            1usize,
            2,
            7,
            8,
            15,
            16,
            17,
            24,
            31,
            32,
            48,
            63,
            64,
            80,
            100,
            1000,
            1023,
            1024,
            1025,
            1100,
            4095,
            4096,
            8192,
            65_537,
            1 << 20,
            5 << 20,
        ];
        let aligns = [1usize, 2, 4, 8, 16, 32, 64, 128, 4096];
        let a = Allocator;
        for &size in &sizes {
            for &align in &aligns {
                let layout = Layout::from_size_align(size, align).expect("a valid layout");
                // SAFETY: non-zero sizes; each block is freed with its own layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(aligned(p, align), "{size} / {align}");
                    p.write_bytes(0xA5, size);
                    let z = a.alloc_zeroed(layout);
                    assert!(aligned(z, align), "zeroed {size} / {align}");
                    assert!((0..size).all(|i| *z.add(i) == 0), "zeroed {size} / {align}");
                    // Shrunk, grown past its size class, and back.
                    let (mut cur, mut cur_layout) = (z, layout);
                    for new_size in [size / 2 + 1, size * 3 + 5, size] {
                        cur = a.realloc(cur, cur_layout, new_size);
                        assert!(aligned(cur, align), "{size} -> {new_size} / {align}");
                        cur_layout = Layout::from_size_align(new_size, align).expect("valid");
                    }
                    a.dealloc(cur, cur_layout);
                    let kept = a.realloc(p, layout, size * 3 + 5);
                    assert!(
                        (0..size).all(|i| *kept.add(i) == 0xA5),
                        "contents kept {size} / {align}"
                    );
                    a.dealloc(
                        kept,
                        Layout::from_size_align(size * 3 + 5, align).expect("valid"),
                    );
                }
            }
        }
    }
}
