// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The text of the agent-side Reno's datapath program, dependency-free so that the datapath's
//! per-ACK benchmark (`kmod/ccp-datapath/benches/invoke.rs`, through `#[path]`) runs the very
//! program `ccp-test-agent reno` installs (`crate::algs::reno_program`).

/// `Report.inflight` under the kernel's window rule: the most packets in flight just before any
/// ACK since the last report (`crate::algs::GrowRule::Kernel`).
pub const INFLIGHT_KERNEL: &str =
    "(max Report.inflight (+ Flow.packets_in_flight Ack.packets_acked))";
/// `Report.inflight`: the most packets in flight just after any ACK since the last report
/// (`crate::algs::GrowRule::HalfPeak`).
pub const INFLIGHT_HALF_PEAK: &str = "(max Report.inflight Flow.packets_in_flight)";
/// `Report.inflight`: the packets in flight just after the reporting ACK
/// (`crate::algs::GrowRule::HalfAtReport`).
pub const INFLIGHT_HALF_AT_REPORT: &str = "Flow.packets_in_flight";

/// The per-RTT program: accumulates acked bytes and losses, and `Report.inflight` as
/// `inflight_expr` measures it (one of the constants above); reports once per smoothed RTT (or
/// per `min_report_us` when that is longer, and the floor is not 0), or at once on a loss or a
/// timeout.
pub fn text(min_report_us: u32, inflight_expr: &str) -> String {
    let period = if min_report_us == 0 {
        String::from("Flow.rtt_sample_us")
    } else {
        format!("(max Flow.rtt_sample_us {min_report_us})")
    };
    format!(
        "
    (def (Report (volatile acked 0) (volatile loss 0) (volatile timeout false) (volatile rtt 0)
                 (volatile inflight 0)))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Report.loss (+ Report.loss Ack.lost_pkts_sample))
        (:= Report.timeout Flow.was_timeout)
        (:= Report.rtt Flow.rtt_sample_us)
        (:= Report.inflight {inflight_expr})
        (fallthrough))
    (when (|| Report.timeout (> Report.loss 0)) (report) (:= Micros 0))
    (when (> Micros {period}) (report) (:= Micros 0))"
    )
}
