//! `math.random` and `math.randomseed` as Redis replaces them: its own
//! 48-bit generator (`lrand48`'s), one per server and seeded the same at
//! every start, so scripts draw the same numbers on every run and the
//! simulation owes nothing to the C library's `rand`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use mlua::{Lua, Table, Variadic};

/// The generator's state before any seed: `x2 x1 x0` = 0x1234 0xABCD
/// 0x330E.
const START: u64 = 0x1234_ABCD_330E;
const MULTIPLIER: u64 = 0x5_DEEC_E66D;
const INCREMENT: u64 = 0xB;
const MASK: u64 = (1 << 48) - 1;
/// `REDIS_LRAND48_MAX`.
const MAX: f64 = 2_147_483_647.0;

/// Installs both functions in `math`.
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let state = Arc::new(AtomicU64::new(START));
    let math: Table = lua.globals().raw_get("math")?;
    let draw = Arc::clone(&state);
    math.raw_set(
        "random",
        lua.create_function(move |_, args: Variadic<f64>| {
            let x = (draw.load(Ordering::Relaxed).wrapping_mul(MULTIPLIER) + INCREMENT) & MASK;
            draw.store(x, Ordering::Relaxed);
            let r = ((x >> 17) as f64 % MAX) / MAX;
            match args.as_slice() {
                [] => Ok(r),
                [upper] => {
                    let upper = upper.trunc();
                    if upper < 1.0 {
                        return Err(mlua::Error::runtime(
                            "bad argument #1 to 'random' (interval is empty)",
                        ));
                    }
                    Ok((r * upper).floor() + 1.0)
                }
                [lower, upper] => {
                    let (lower, upper) = (lower.trunc(), upper.trunc());
                    if lower > upper {
                        return Err(mlua::Error::runtime(
                            "bad argument #2 to 'random' (interval is empty)",
                        ));
                    }
                    Ok((r * (upper - lower + 1.0)).floor() + lower)
                }
                _ => Err(mlua::Error::runtime("wrong number of arguments")),
            }
        })?,
    )?;
    math.raw_set(
        "randomseed",
        lua.create_function(move |_, seed: f64| {
            let seed = u64::from(seed as i32 as u32);
            state.store(0x330E | (seed << 16), Ordering::Relaxed);
            Ok(())
        })?,
    )?;
    Ok(())
}
