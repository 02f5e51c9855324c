// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Fixed-point convention shared by every MLTCP quantity.
//!
//! The kernel has no floating point, so fractions are integers scaled by `2^FX_SHIFT`, the same
//! way `net/ipv4/tcp_cubic.c` scales `beta` by `BICTCP_BETA_SCALE` = 1024: a value `v_fx`
//! stands for `v_fx / 1024`.

/// Number of fractional bits of every `*_fx` value (1/1024 resolution, ~0.1 %).
pub const FX_SHIFT: u32 = 10;

/// 1.0 in fixed point (1024).
pub const FX_ONE: u32 = 1 << FX_SHIFT;

/// Fractional-part mask of a fixed-point value (1023).
const FX_MASK: u64 = (1 << FX_SHIFT) - 1;

/// `a * b_fx` rounded down, for an integer `a` and a fixed-point factor `b_fx`, saturating at
/// `u64::MAX` instead of overflowing. Exact (no intermediate overflow) for every input.
#[inline]
pub const fn mul_fx_u64(a: u64, b_fx: u32) -> u64 {
    // (a * b) >> 10 == (a >> 10) * b + ((a & 1023) * b) >> 10, because (a >> 10) * b * 1024 is a
    // multiple of 1024. The second term is < 2^10 * 2^32 and never overflows.
    let hi = (a >> FX_SHIFT).saturating_mul(b_fx as u64);
    let lo = ((a & FX_MASK).wrapping_mul(b_fx as u64)) >> FX_SHIFT;
    hi.saturating_add(lo)
}

/// `num / den` as a fixed-point ratio clamped to `[0, FX_ONE]` (`num >= den` gives `FX_ONE`,
/// `num < den` at most `FX_ONE - 1`), rounded down, monotone in `num`; `den == 0` gives `FX_ONE` (a zero-sized whole is complete). Exact for operands
/// below 2^54; larger operands are first shifted right together (relative error < 2^-53).
#[inline]
pub const fn ratio_fx(num: u64, den: u64) -> u32 {
    if num >= den {
        return FX_ONE;
    }
    // Here num < den, so den > 0. Shift both so that num << FX_SHIFT fits in 64 bits.
    let bits = u64::BITS.wrapping_sub(den.leading_zeros());
    let shift = bits.saturating_sub(u64::BITS - FX_SHIFT);
    let n = num >> shift;
    let d = den >> shift; // >= 2^(53) when shift > 0, == den (> 0) otherwise
                          // n <= d after the shift (it preserves <=), so r <= FX_ONE; num < den keeps it below.
    match (n << FX_SHIFT).checked_div(d) {
        Some(r) if r < FX_ONE as u64 => r as u32,
        _ => FX_ONE.wrapping_sub(1),
    }
}

/// `ln 2` with 16 fractional bits (0.693147 × 65536 = 45426.1).
const LN2_Q16: u64 = 45_426;

/// The natural logarithm of `num / den` for `num >= den > 0`, with 16 fractional bits, rounded
/// down to within 2^-14 (0 when `num <= den` or `den == 0`). The binary-digit algorithm for
/// `log2` (integer part from the leading bit, then one fractional bit per squaring of the
/// normalized mantissa), times `ln 2`. 64-bit arithmetic only (no 128-bit division, which the
/// kernel does not link).
pub fn ln_ratio_q16(num: u32, den: u32) -> u64 {
    if den == 0 || num <= den {
        return 0;
    }
    // x = num/den in Q30: below 2^62.
    let x = (u64::from(num) << 30)
        .checked_div(u64::from(den))
        .unwrap_or(0);
    let int_bits = u64::from(63u32.saturating_sub(x.leading_zeros())).saturating_sub(30);
    // Mantissa in [1, 2), Q30: its square is below 2^62.
    let mut m = x >> int_bits;
    let mut log2_q16 = int_bits << 16;
    for bit in (0..16).rev() {
        m = m.wrapping_mul(m) >> 30; // m < 2^31: no wrap
        if m >= 2 << 30 {
            m >>= 1;
            log2_q16 |= 1 << bit;
        }
    }
    log2_q16.saturating_mul(LN2_Q16) >> 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_ratio_matches_f64() {
        for &(num, den) in &[
            (2u32, 1u32),
            (7, 1),
            (1792, 256),
            (65_537, 1),
            (1025, 1024),
            (3, 2),
            (1_000_000, 3),
            (u32::MAX, 1),
        ] {
            let got = ln_ratio_q16(num, den) as f64 / 65536.0;
            let want = (f64::from(num) / f64::from(den)).ln();
            assert!(
                got <= want + 1e-9 && want - got < 1.0 / 16384.0,
                "ln({num}/{den}) = {got}, want {want}"
            );
        }
        assert_eq!(ln_ratio_q16(5, 5), 0);
        assert_eq!(ln_ratio_q16(4, 5), 0);
        assert_eq!(ln_ratio_q16(5, 0), 0);
    }

    #[test]
    fn one_is_1024() {
        assert_eq!(FX_ONE, 1024);
    }

    #[test]
    fn mul_fx_is_exact() {
        for &(a, b) in &[
            (0u64, 0u32),
            (1, 1024),
            (1023, 1),
            (u64::MAX, 1024),
            (u64::MAX, 1),
            (12345, 256),
        ] {
            let exact = (a as u128 * b as u128) >> 10;
            assert_eq!(mul_fx_u64(a, b) as u128, exact.min(u64::MAX as u128));
        }
        assert_eq!(mul_fx_u64(u64::MAX, u32::MAX), u64::MAX);
    }

    #[test]
    fn ratio_bounds() {
        assert_eq!(ratio_fx(0, 0), FX_ONE);
        assert_eq!(ratio_fx(5, 0), FX_ONE);
        assert_eq!(ratio_fx(0, 10), 0);
        assert_eq!(ratio_fx(5, 10), 512);
        assert_eq!(ratio_fx(u64::MAX, u64::MAX), FX_ONE);
        assert_eq!(ratio_fx(u64::MAX / 2, u64::MAX), 511);
        assert_eq!(ratio_fx(u64::MAX - 1, u64::MAX), 1023);
        assert_eq!(ratio_fx(1 << 62, 1 << 63), 512);
    }
}
