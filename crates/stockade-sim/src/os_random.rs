//! The operating system's randomness, from the seed on a simulation's
//! thread.
//!
//! Hash maps (`std`'s `RandomState`, and `DashMap`, which uses it) iterate
//! in an order drawn from the OS once per thread; the service iterates some
//! of them where the order shows (the engine's outbox, the in-flight
//! orders, the acknowledger's groups), so a run would not replay from its
//! seed. This module defines the C library's `getrandom` and `getentropy`
//! in the binaries that link the simulator: on a thread marked with
//! [`seed_this_thread`] they answer from the seed, everywhere else they are
//! the kernel's `getrandom(2)` as before, so nothing outside a simulation
//! (the `serve` of a tool build, a token made by a test) loses real
//! randomness.
//!
//! A thread's hash keys are drawn the first time it makes a hash map, so a
//! run marks a fresh thread before anything else happens on it
//! ([`crate::run::run`] starts one per run).
#![allow(unsafe_code)] // the C symbols std and the getrandom crate call

use std::cell::Cell;

thread_local! {
    /// The simulation's stream on this thread (splitmix64 state), if any.
    static STREAM: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Marks this thread a simulation's: from now on its OS randomness (its
/// hash maps' keys among it) comes from `seed`.
pub fn seed_this_thread(seed: u64) {
    STREAM.with(|stream| stream.set(Some(seed)));
}

/// The next eight bytes of this thread's stream, if it is a simulation's.
fn next() -> Option<u64> {
    STREAM.with(|stream| {
        let state = stream.get()?.wrapping_add(0x9e37_79b9_7f4a_7c15);
        stream.set(Some(state));
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Some(z ^ (z >> 31))
    })
}

/// Fills `buf` from this thread's stream; false if it has none.
fn fill(buf: &mut [u8]) -> bool {
    if STREAM.with(Cell::get).is_none() {
        return false;
    }
    for chunk in buf.chunks_mut(8) {
        let word = next().unwrap_or_default().to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
    true
}

/// `getrandom(2)`: the seed's bytes on a simulation's thread, the kernel's
/// elsewhere.
///
/// # Safety
/// `buf` must be valid for writes of `len` bytes, as the C function asks.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getrandom(buf: *mut u8, len: usize, flags: u32) -> isize {
    if len > 0 {
        // SAFETY: the caller gives a buffer of `len` writable bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(buf, len) };
        if fill(bytes) {
            return len as isize;
        }
    }
    // SAFETY: the kernel's own call, with the caller's arguments.
    unsafe { libc::syscall(libc::SYS_getrandom, buf, len, flags) as isize }
}

/// `getentropy(3)`: at most 256 bytes, all or an error.
///
/// # Safety
/// `buf` must be valid for writes of `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getentropy(buf: *mut u8, len: usize) -> i32 {
    if len > 256 {
        // SAFETY: writing the thread's errno, as the C function does.
        unsafe { *libc::__errno_location() = libc::EIO };
        return -1;
    }
    let mut done = 0;
    while done < len {
        // SAFETY: within the caller's buffer.
        let got = unsafe { getrandom(buf.add(done), len - done, 0) };
        if got < 0 {
            return -1;
        }
        done += got as usize;
    }
    0
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The order a fresh thread's hash map iterates in.
    fn order_on_a_fresh_thread(seed: Option<u64>) -> Vec<u32> {
        std::thread::spawn(move || {
            if let Some(seed) = seed {
                seed_this_thread(seed);
            }
            let map: HashMap<u32, ()> = (0..64).map(|k| (k, ())).collect();
            map.keys().copied().collect()
        })
        .join()
        .unwrap()
    }

    #[test]
    fn a_seeded_thread_iterates_its_hash_maps_the_same_every_time() {
        let first = order_on_a_fresh_thread(Some(7));
        assert_eq!(first, order_on_a_fresh_thread(Some(7)));
        assert_ne!(
            first,
            order_on_a_fresh_thread(Some(8)),
            "another seed, another order"
        );
    }

    #[test]
    fn an_unseeded_thread_keeps_the_kernels_randomness() {
        let orders: Vec<Vec<u32>> = (0..4).map(|_| order_on_a_fresh_thread(None)).collect();
        assert!(
            orders.windows(2).any(|w| w[0] != w[1]),
            "four unseeded threads iterated alike: {orders:?}"
        );
    }
}
