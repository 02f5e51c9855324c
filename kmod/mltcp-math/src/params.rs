// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! MLTCP tunables and their validation.
//!
//! The kernel module exposes each field as a writable module parameter; its `set` callback runs
//! the per-parameter validator below and refuses an out-of-range value with `-EINVAL`, so the
//! per-ACK code can rely on [`Params::validate`] holding (it still never panics if it does not).
//!
//! [`PARAMS`] is the one table of the module's parameters (name, default, range, unit, meaning):
//! [`Params::DEFAULT`], the validators, the module's `module_param!` defaults and checks, the
//! scenario parser and the module reference's table ([`write_markdown_table`]) all come from it.

use core::fmt;

use super::dctcp::{DCTCP_MAX_ALPHA, DEFAULT_ALPHA_ON_INIT, DEFAULT_SHIFT_G};
use super::fixed::FX_ONE;
use super::reno::DecreaseScaling;

/// Largest slope and intercept accepted: 64.0. F stays below 128.0, i.e. at most 128 segments of
/// window growth per RTT in congestion avoidance, and `slope_fx * FX_ONE` fits easily in 32 bits.
pub const MAX_COEFF_FX: u32 = 64 * FX_ONE;

/// Smallest idle gap accepted, µs. Below 100 µs a gap cannot be told apart from scheduling jitter
/// of the sending application (and from the ms granularity of `tcp_jiffies32` at HZ=1000 the
/// kernel measures with, the floor is in practice the 2·SRTT term anyway).
pub const MIN_IDLE_GAP_US: u32 = 100;

/// Largest idle gap accepted, µs (10 s): longer than any compute phase of a training iteration we
/// know of; a larger value would make every pause look like one long iteration.
pub const MAX_IDLE_GAP_US: u32 = 10_000_000;

/// MLTCP tunables, all fractions in fixed point with [`FX_ONE`] = 1.0.
///
/// Source: Rajasekaran, MIT thesis, ch. 1 and 5 (MLTCP); `F(bytes_ratio) = slope * bytes_ratio +
/// intercept`. The paper does not publish default values nor how the kernel finds iteration
/// boundaries; `idle_gap_us` and `ewma_weight_fx` are this project's design (see
/// [`super::iteration`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Slope of F, fixed point (1536 = 1.5). Range `[0, 64*FX_ONE]`; 0 turns MLTCP into a constant
    /// gain `intercept` (with `intercept_fx = FX_ONE`: plain Reno/CUBIC).
    pub slope_fx: u32,
    /// Intercept of F, i.e. F at the start of an iteration, fixed point (256 = 0.25). Range
    /// `[1, 64*FX_ONE]`: F must stay > 0 or a flow at the start of its iteration would never grow.
    pub intercept_fx: u32,
    /// Idle time, µs, after which the next send starts a new training iteration (the boundary is
    /// `max(idle_gap_us, 2*SRTT)`). Range `[100, 10_000_000]`.
    pub idle_gap_us: u32,
    /// Weight of the newest complete iteration in the EWMA of bytes per iteration, fixed point
    /// (256 = 1/4). Range `[1, FX_ONE]`; `FX_ONE` = use the last iteration only.
    pub ewma_weight_fx: u32,
    /// 1: F also scales the slow-start increase (capped at 1.0, so slow start is never faster
    /// than Linux's; [`super::iteration::slow_start_gain_fx`]); 0: Linux's slow start, F acts in
    /// congestion avoidance only. Range `[0, 1]`.
    pub scale_slow_start: u32,
    /// 1: MLTCP-Reno's multiplicative decrease is scaled by F too: a loss keeps `1 − 1/(2F)` of
    /// the window (Reno's half at F = 1), within `[1/8, 7/8]`
    /// ([`super::reno::mltcp_ssthresh`]), so the flow further into its iteration keeps more of
    /// its window and the weighting holds from the first loss on; 0: Reno's half, as the thesis
    /// has it ("multiplicative decrease is unchanged"); 2: raise only, at least Reno's half
    /// (only a flow with F > 1 keeps more: [`super::reno::DecreaseScaling::RaiseOnly`]). This
    /// project's extension, `mltcp` only ([`Params::decrease_scaling`]). Range `[0, 2]`.
    /// Default 2 (raise only), chosen by measurement: docs/results/module-params.md.
    pub scale_decrease: u32,
}

impl Params {
    /// The defaults: slope 1.5, intercept 0.25, idle gap 20 ms, EWMA weight 1/4, slow-start
    /// scaling on, decrease scaling 2 (raise only); each field's value is its [`PARAMS`] entry's.
    ///
    /// Why slope 1.5 / intercept 0.25 (REFERENCE.md §2, HotNets '24 Eq. 2): for two jobs with
    /// iteration time `T`, communication fraction `a` and start gap `Δ`, one iteration moves the
    /// gap by `Shift(Δ) = slope·Δ·(aT − Δ) / (aT·intercept + Δ·slope)`.
    /// - Fairness toward non-ML traffic: bytes_ratio runs from 0 to 1 linearly in bytes over an
    ///   iteration, so the byte-weighted mean of F is `intercept + slope/2` = 0.25 + 0.75 = 1.0.
    ///   Over an iteration an MLTCP flow is on average exactly as aggressive as Reno/CUBIC.
    /// - Speed: among pairs with mean 1.0, a larger slope/intercept ratio moves the gap faster.
    ///   At `Δ = aT/2` one iteration shifts the gap by 1.5·0.25/(0.25+0.75) = 0.375·aT, against
    ///   0.167·aT for slope = intercept = 1 (the naive choice, whose mean F is 1.5). For small Δ
    ///   the gap grows by a factor `1 + slope/intercept` = 7 per iteration (2 for 1/1).
    /// - Intercept 0.25 (not smaller): at the start of an iteration the flow still grows by a
    ///   quarter segment per RTT, so a lone job is not starved at the beginning of each iteration.
    ///
    /// `idle_gap_us` = 20 ms: longer than the short pauses between the chunks of a ring
    /// all-reduce (sub-millisecond to a few ms) and shorter than a compute phase (tens of ms or
    /// more); the `2*SRTT` floor keeps ordinary ACK-clock gaps from splitting an iteration on long
    /// paths; chosen by measurement (docs/results/module-params.md).
    /// `ewma_weight_fx` = 1/4: the estimate follows a change of iteration size within
    /// ~10 iterations (0.75^10 ≈ 6 % left) while one odd iteration moves it only by a quarter.
    ///
    /// `scale_slow_start` = 1: with Linux's `tcp_slow_start_after_idle` every communication phase
    /// starts in slow start; scaling its increase by `min(F, 1)` lets the job further into its
    /// iteration keep the link. Chosen by measurement, as the other defaults were checked:
    /// docs/results/module-params.md.
    pub const DEFAULT: Params = Params {
        slope_fx: SLOPE_FX.default,
        intercept_fx: INTERCEPT_FX.default,
        idle_gap_us: IDLE_GAP_US.default,
        ewma_weight_fx: EWMA_WEIGHT_FX.default,
        scale_slow_start: SCALE_SLOW_START.default,
        scale_decrease: SCALE_DECREASE.default,
    };

    /// How `mltcp`'s multiplicative decrease is scaled by F: `None` for Reno's half
    /// (`scale_decrease = 0`), else [`DecreaseScaling::Both`] (1) or
    /// [`DecreaseScaling::RaiseOnly`] (2; also any larger value, which [`Params::validate`]
    /// refuses).
    pub fn decrease_scaling(&self) -> Option<DecreaseScaling> {
        match self.scale_decrease {
            0 => None,
            1 => Some(DecreaseScaling::Both),
            _ => Some(DecreaseScaling::RaiseOnly),
        }
    }

    /// The field named `name` (a [`ParamSpec::name`]), `None` for a parameter that is not a
    /// field here (the CCP and DCTCP ones).
    pub fn get(&self, name: &str) -> Option<u32> {
        Some(match name {
            "slope_fx" => self.slope_fx,
            "intercept_fx" => self.intercept_fx,
            "idle_gap_us" => self.idle_gap_us,
            "ewma_weight_fx" => self.ewma_weight_fx,
            "scale_slow_start" => self.scale_slow_start,
            "scale_decrease" => self.scale_decrease,
            _ => return None,
        })
    }

    /// Sets the field named `name` (a [`ParamSpec::name`]) to `v`, unchecked; false (and nothing
    /// changed) for a parameter that is not a field here. The inverse of [`Params::get`].
    pub fn set(&mut self, name: &str, v: u32) -> bool {
        let field = match name {
            "slope_fx" => &mut self.slope_fx,
            "intercept_fx" => &mut self.intercept_fx,
            "idle_gap_us" => &mut self.idle_gap_us,
            "ewma_weight_fx" => &mut self.ewma_weight_fx,
            "scale_slow_start" => &mut self.scale_slow_start,
            "scale_decrease" => &mut self.scale_decrease,
            _ => return false,
        };
        *field = v;
        true
    }

    /// Checks every field against its range; returns the first offending one.
    pub fn validate(&self) -> Result<(), ParamError> {
        validate_slope_fx(self.slope_fx)?;
        validate_intercept_fx(self.intercept_fx)?;
        validate_idle_gap_us(self.idle_gap_us)?;
        validate_ewma_weight_fx(self.ewma_weight_fx)?;
        validate_scale_slow_start(self.scale_slow_start)?;
        validate_scale_decrease(self.scale_decrease)?;
        Ok(())
    }
}

impl Default for Params {
    fn default() -> Self {
        Params::DEFAULT
    }
}

/// What a parameter's value counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Fixed point with [`FX_ONE`] = 1024 = 1.0.
    Fixed,
    /// Microseconds.
    Micros,
    /// Milliseconds.
    Millis,
    /// One of a few numbered settings (a flag is 0 or 1).
    Choice,
    /// A power of two's exponent.
    Shift,
}

impl Unit {
    /// The unit as the module reference's table names it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Unit::Fixed => "fixed point, 1024 = 1.0",
            Unit::Micros => "µs",
            Unit::Millis => "ms",
            Unit::Choice => "setting",
            Unit::Shift => "exponent",
        }
    }
}

/// One module parameter of `tcp_mltcp` (`/sys/module/tcp_mltcp/parameters/NAME`): its name,
/// default, accepted range (inclusive; the module's `set` callback refuses anything else with
/// `-EINVAL`), unit and a one-line description. [`PARAMS`] lists them all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    /// Name under `/sys/module/tcp_mltcp/parameters/`.
    pub name: &'static str,
    /// Value at module load.
    pub default: u32,
    /// Smallest accepted value.
    pub min: u32,
    /// Largest accepted value.
    pub max: u32,
    /// What the value counts.
    pub unit: Unit,
    /// One line, for the module reference's table.
    pub description: &'static str,
}

/// `slope_fx`: the slope of F ([`Params::slope_fx`]).
pub const SLOPE_FX: ParamSpec = ParamSpec {
    name: "slope_fx",
    default: 1536,
    min: 0,
    max: MAX_COEFF_FX,
    unit: Unit::Fixed,
    description: "slope of F",
};

/// `intercept_fx`: the intercept of F ([`Params::intercept_fx`]).
pub const INTERCEPT_FX: ParamSpec = ParamSpec {
    name: "intercept_fx",
    default: 256,
    min: 1,
    max: MAX_COEFF_FX,
    unit: Unit::Fixed,
    description: "intercept of F (F at the start of an iteration)",
};

/// `idle_gap_us`: the idle gap that starts an iteration ([`Params::idle_gap_us`]).
pub const IDLE_GAP_US: ParamSpec = ParamSpec {
    name: "idle_gap_us",
    default: 20_000,
    min: MIN_IDLE_GAP_US,
    max: MAX_IDLE_GAP_US,
    unit: Unit::Micros,
    description: "a send after an idle gap longer than this (and than 2 smoothed RTTs) starts a new iteration",
};

/// `ewma_weight_fx`: the newest iteration's weight in the bytes average
/// ([`Params::ewma_weight_fx`]).
pub const EWMA_WEIGHT_FX: ParamSpec = ParamSpec {
    name: "ewma_weight_fx",
    default: 256,
    min: 1,
    max: FX_ONE,
    unit: Unit::Fixed,
    description: "weight of the newest iteration in the bytes-per-iteration average",
};

/// `scale_slow_start`: whether F scales slow start ([`Params::scale_slow_start`]).
pub const SCALE_SLOW_START: ParamSpec = ParamSpec {
    name: "scale_slow_start",
    default: 1,
    min: 0,
    max: 1,
    unit: Unit::Choice,
    description: "1: F also scales the slow-start increase (capped at 1.0, never faster than Linux's slow start)",
};

/// `scale_decrease`: how F scales `mltcp`'s decrease ([`Params::scale_decrease`]).
pub const SCALE_DECREASE: ParamSpec = ParamSpec {
    name: "scale_decrease",
    default: 2,
    min: 0,
    max: 2,
    unit: Unit::Choice,
    description: "`mltcp` at a loss: 0 keeps Reno's half; 1 keeps `1 − 1/(2F)` (within 1/8..7/8); 2 keeps the larger of the two (more than half only when F > 1)",
};

/// `ccp_heartbeat_ms`: the CCP path's fallback timeout (the module's, not a [`Params`] field).
pub const CCP_HEARTBEAT_MS: ParamSpec = ParamSpec {
    name: "ccp_heartbeat_ms",
    default: 0,
    min: 0,
    max: 600_000,
    unit: Unit::Millis,
    description:
        "CCP: flows go back to native MLTCP when the agent sent nothing for this long; 0 = off",
};

/// `ccp_interpret`: which path runs the CCP datapath's programs (the module's, not a [`Params`]
/// field; the core's `ExecMode`).
pub const CCP_INTERPRET: ParamSpec = ParamSpec {
    name: "ccp_interpret",
    default: 0,
    min: 0,
    max: 1,
    unit: Unit::Choice,
    description: "CCP: 0 runs each agent program in its compiled form (built at install); 1 forces the interpreter, the reference (same results, more CPU per ACK)",
};

/// `dctcp_shift_g`: `mltcp_dctcp`'s alpha gain exponent ([`super::dctcp::DEFAULT_SHIFT_G`]).
pub const DCTCP_SHIFT_G: ParamSpec = ParamSpec {
    name: "dctcp_shift_g",
    default: DEFAULT_SHIFT_G,
    min: 0,
    max: 10,
    unit: Unit::Shift,
    description: "`mltcp_dctcp`: alpha's gain g = 1/2^shift_g (tcp_dctcp.c's `dctcp_shift_g`)",
};

/// `dctcp_alpha_on_init`: `mltcp_dctcp`'s initial alpha ([`super::dctcp::DEFAULT_ALPHA_ON_INIT`]).
pub const DCTCP_ALPHA_ON_INIT: ParamSpec = ParamSpec {
    name: "dctcp_alpha_on_init",
    default: DEFAULT_ALPHA_ON_INIT,
    min: 0,
    max: DCTCP_MAX_ALPHA,
    unit: Unit::Fixed,
    description: "`mltcp_dctcp`: initial alpha (tcp_dctcp.c's `dctcp_alpha_on_init`)",
};

/// `dctcp_scale_cut`: how F scales `mltcp_dctcp`'s ECN cut ([`super::dctcp::Dctcp::ssthresh_scaled`]).
pub const DCTCP_SCALE_CUT: ParamSpec = ParamSpec {
    name: "dctcp_scale_cut",
    default: 0,
    min: 0,
    max: 3,
    unit: Unit::Choice,
    description: "`mltcp_dctcp` on an ECN cut: 0 cuts `cwnd·alpha/2` as DCTCP; 1 cuts `cwnd·alpha/(2F)` (at most half); 2 the same with F below 1 counted as 1; 3 cuts `cwnd·alpha·L/(2F)`, L the log-mean of F over an iteration (DCTCP's cut on average)",
};

/// Every module parameter of `tcp_mltcp`, in the order of the module reference's table: the one
/// list the kernel module's defaults and checks, the scenario parser (`mltcp[name=value]`) and
/// the documentation come from (a test pins the module's `module_param!` names to it).
pub const PARAMS: &[ParamSpec] = &[
    SLOPE_FX,
    INTERCEPT_FX,
    IDLE_GAP_US,
    EWMA_WEIGHT_FX,
    SCALE_SLOW_START,
    SCALE_DECREASE,
    DCTCP_SHIFT_G,
    DCTCP_ALPHA_ON_INIT,
    DCTCP_SCALE_CUT,
    CCP_HEARTBEAT_MS,
    CCP_INTERPRET,
];

/// A parameter value outside its range (the kernel's `set` callback turns it into `-EINVAL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamError {
    /// Parameter name as exposed under `/sys/module/tcp_mltcp/parameters/`.
    pub name: &'static str,
    /// The refused value.
    pub value: u32,
    /// Smallest accepted value (inclusive).
    pub min: u32,
    /// Largest accepted value (inclusive).
    pub max: u32,
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} = {} is out of range [{}, {}]",
            self.name, self.value, self.min, self.max
        )
    }
}

impl ParamSpec {
    /// `Ok(v)` when `v` is within `[min, max]`, else the [`ParamError`] naming this parameter.
    pub const fn check(&self, v: u32) -> Result<u32, ParamError> {
        if v >= self.min && v <= self.max {
            Ok(v)
        } else {
            Err(ParamError {
                name: self.name,
                value: v,
                min: self.min,
                max: self.max,
            })
        }
    }
}

/// The parameter of `name` in [`PARAMS`], if the module has one.
pub fn spec(name: &str) -> Option<&'static ParamSpec> {
    PARAMS.iter().find(|p| p.name == name)
}

/// Validates `slope_fx` (fixed point, 1024 = 1.0): range `[0, 64*FX_ONE]`.
pub fn validate_slope_fx(v: u32) -> Result<u32, ParamError> {
    SLOPE_FX.check(v)
}

/// Validates `intercept_fx` (fixed point, 1024 = 1.0): range `[1, 64*FX_ONE]`, so F > 0 always.
pub fn validate_intercept_fx(v: u32) -> Result<u32, ParamError> {
    INTERCEPT_FX.check(v)
}

/// Validates `idle_gap_us` (µs): range `[100, 10_000_000]`.
pub fn validate_idle_gap_us(v: u32) -> Result<u32, ParamError> {
    IDLE_GAP_US.check(v)
}

/// Validates `ewma_weight_fx` (fixed point, weight of the newest iteration): range `[1, FX_ONE]`.
pub fn validate_ewma_weight_fx(v: u32) -> Result<u32, ParamError> {
    EWMA_WEIGHT_FX.check(v)
}

/// Validates `scale_decrease`: 0 (off), 1 (both ways) or 2 (raise only).
pub fn validate_scale_decrease(v: u32) -> Result<u32, ParamError> {
    SCALE_DECREASE.check(v)
}

/// Validates `scale_slow_start` (a flag): 0 or 1.
pub fn validate_scale_slow_start(v: u32) -> Result<u32, ParamError> {
    SCALE_SLOW_START.check(v)
}

/// Writes [`PARAMS`] as the Markdown table of the module's reference (columns parameter,
/// default, range, unit, meaning; a fixed-point default also as a decimal). `core::fmt` only, so
/// it builds wherever this crate does; `String` callers pass a `String`.
///
/// # Errors
/// Only those of `out`.
pub fn write_markdown_table(out: &mut impl fmt::Write) -> fmt::Result {
    writeln!(out, "| parameter | default | range | unit | meaning |")?;
    writeln!(out, "| --- | --- | --- | --- | --- |")?;
    for p in PARAMS {
        write!(out, "| `{}` | {}", p.name, p.default)?;
        if p.unit == Unit::Fixed {
            // 1024 = 1.0: the quotient, then the fraction's decimals without trailing zeros.
            let whole = p.default / FX_ONE;
            let mut frac = p.default % FX_ONE;
            write!(out, " ({whole}.")?;
            if frac == 0 {
                write!(out, "0")?;
            }
            while frac != 0 {
                let d = frac.saturating_mul(10);
                write!(out, "{}", d / FX_ONE)?;
                frac = d % FX_ONE;
            }
            write!(out, ")")?;
        }
        writeln!(
            out,
            " | {}..{} | {} | {} |",
            p.min,
            p.max,
            p.unit.as_str(),
            p.description
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

    use super::*;

    #[test]
    fn default_is_valid() {
        assert_eq!(Params::DEFAULT.validate(), Ok(()));
        assert_eq!(Params::default(), Params::DEFAULT);
    }

    #[test]
    fn table_and_default_agree() {
        let mut fields = 0;
        for (i, p) in PARAMS.iter().enumerate() {
            assert!(p.min <= p.default && p.default <= p.max, "{p:?}");
            assert_eq!(p.check(p.default), Ok(p.default));
            assert!(
                PARAMS[..i].iter().all(|q| q.name != p.name),
                "{} twice",
                p.name
            );
            assert_eq!(spec(p.name), Some(p));
            if let Some(v) = Params::DEFAULT.get(p.name) {
                assert_eq!(v, p.default, "{}", p.name);
                fields += 1;
            }
        }
        // Every field of Params is in the table.
        assert_eq!(fields, 6);
        // `set` is `get`'s inverse, field by field.
        for p in PARAMS {
            let mut q = Params::DEFAULT;
            let is_field = Params::DEFAULT.get(p.name).is_some();
            assert_eq!(q.set(p.name, 7), is_field, "{}", p.name);
            assert_eq!(q.get(p.name), is_field.then_some(7), "{}", p.name);
        }
        assert_eq!(
            spec("dctcp_shift_g").map(|p| p.default),
            Some(DEFAULT_SHIFT_G)
        );
        assert_eq!(spec("nosuch"), None);
    }

    #[test]
    fn mean_f_is_one() {
        // Byte-weighted mean of F over an iteration: intercept + slope/2.
        let p = Params::DEFAULT;
        assert_eq!(p.intercept_fx + p.slope_fx / 2, FX_ONE);
    }

    #[test]
    fn ranges() {
        assert!(validate_slope_fx(0).is_ok());
        assert!(validate_slope_fx(64 * 1024).is_ok());
        assert!(validate_slope_fx(64 * 1024 + 1).is_err());
        assert!(validate_intercept_fx(0).is_err());
        assert!(validate_intercept_fx(1).is_ok());
        assert!(validate_intercept_fx(65537).is_err());
        assert!(validate_idle_gap_us(99).is_err());
        assert!(validate_idle_gap_us(100).is_ok());
        assert!(validate_idle_gap_us(10_000_000).is_ok());
        assert!(validate_idle_gap_us(10_000_001).is_err());
        assert!(validate_ewma_weight_fx(0).is_err());
        assert!(validate_ewma_weight_fx(1024).is_ok());
        assert!(validate_ewma_weight_fx(1025).is_err());
        assert!(validate_scale_slow_start(0).is_ok());
        assert!(validate_scale_slow_start(1).is_ok());
        assert!(validate_scale_slow_start(2).is_err());
        assert!(validate_scale_decrease(0).is_ok());
        assert!(validate_scale_decrease(1).is_ok());
        assert!(validate_scale_decrease(2).is_ok());
        assert!(validate_scale_decrease(3).is_err());
        let with = |scale_decrease| Params {
            scale_decrease,
            ..Params::DEFAULT
        };
        assert_eq!(with(0).decrease_scaling(), None);
        assert_eq!(with(1).decrease_scaling(), Some(DecreaseScaling::Both));
        assert_eq!(with(2).decrease_scaling(), Some(DecreaseScaling::RaiseOnly));
        let e = validate_ewma_weight_fx(0).unwrap_err();
        assert_eq!(
            e,
            ParamError {
                name: "ewma_weight_fx",
                value: 0,
                min: 1,
                max: 1024
            }
        );
        assert_eq!(
            e.to_string(),
            "ewma_weight_fx = 0 is out of range [1, 1024]"
        );
        let bad = Params {
            intercept_fx: 0,
            idle_gap_us: 1,
            ..Params::DEFAULT
        };
        assert_eq!(bad.validate().unwrap_err().name, "intercept_fx");
    }

    /// One iteration of the HotNets '24 Eq. 2 recurrence in integer arithmetic (units of aT/10^6).
    fn shift(p: &Params, at: u64, d: u64) -> u64 {
        let s = p.slope_fx as u64;
        let i = p.intercept_fx as u64;
        let num = s * d * (at - d);
        let den = at * i + d * s;
        num / den
    }

    fn iterations_to_interleave(p: &Params, start: u64) -> (u32, u64) {
        let at = 1_000_000u64;
        let mut d = start;
        let mut n = 0;
        while d < at * 99 / 100 && n < 1000 {
            d += shift(p, at, d);
            assert!(d <= at, "overshoot");
            n += 1;
        }
        (n, d)
    }

    #[test]
    fn convergence_recurrence() {
        let at = 1_000_000u64;
        let p = Params::DEFAULT;
        // Δ = 0 is a fixed point (two jobs in lockstep stay in lockstep without noise).
        assert_eq!(shift(&p, at, 0), 0);
        // Δ = aT is the other fixed point (fully interleaved).
        assert_eq!(shift(&p, at, at), 0);
        // At Δ = aT/2: 0.375·aT for the defaults, 0.167·aT for slope = intercept = 1.
        assert_eq!(shift(&p, at, at / 2), 375_000);
        let naive = Params {
            slope_fx: 1024,
            intercept_fx: 1024,
            ..p
        };
        assert_eq!(shift(&naive, at, at / 2), 166_666);
        // From a 1 % gap the defaults interleave (Δ >= 0.99·aT) within a few tens of iterations.
        let (n_def, d) = iterations_to_interleave(&p, at / 100);
        assert!(n_def <= 30 && d >= at * 99 / 100, "{n_def} {d}");
        let (n_naive, _) = iterations_to_interleave(&naive, at / 100);
        assert!(n_def < n_naive, "{n_def} vs {n_naive}");
        // Even from a 1 ppm gap.
        let (n_tiny, _) = iterations_to_interleave(&p, 1);
        assert!(n_tiny <= 30, "{n_tiny}");
        std::println!(
            "iterations from 1%: default {n_def}, slope=intercept=1 {n_naive}; from 1ppm {n_tiny}"
        );
    }
}
