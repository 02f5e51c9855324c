// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The rows `mltcp-stat` prints: one per socket, as an aligned text table or as one JSON object
//! per line (serde_json).

use serde::Serialize;

use crate::diag::{state_name, SockEntry};
use crate::info::{decode_mltcp_info, decode_tcp_info, fx_to_f64, MltcpInfo};

/// Congestion-control names of `tcp_mltcp.ko`: the sockets listed without `--all`.
pub const MLTCP_ALGORITHMS: [&str; 2] = ["mltcp", "mltcp_cubic"];

/// Whether `e` uses one of [`MLTCP_ALGORITHMS`].
pub fn is_mltcp(e: &SockEntry) -> bool {
    e.cong
        .as_deref()
        .is_some_and(|c| MLTCP_ALGORITHMS.contains(&c))
}

/// The MLTCP block as printed in JSON.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MltcpJson {
    /// Completed iterations.
    pub iterations: u32,
    /// `bytes_ratio` as a fraction.
    pub bytes_ratio: f64,
    /// `bytes_ratio`, fixed point (1024 = 1.0), as sent by the kernel.
    pub bytes_ratio_fx: u16,
    /// `F` as a fraction.
    pub f: f64,
    /// `F`, fixed point (1024 = 1.0), as sent by the kernel.
    pub f_fx: u16,
    /// Bytes per iteration in use (0 = none yet).
    pub bytes_per_iteration: u64,
    /// Bytes per iteration handed down by an agent.
    pub pinned: bool,
}

impl From<&MltcpInfo> for MltcpJson {
    fn from(i: &MltcpInfo) -> Self {
        MltcpJson {
            iterations: i.iterations,
            bytes_ratio: fx_to_f64(i.bytes_ratio_fx),
            bytes_ratio_fx: i.bytes_ratio_fx,
            f: fx_to_f64(i.f_fx),
            f_fx: i.f_fx,
            bytes_per_iteration: i.bytes_per_iteration,
            pinned: i.pinned(),
        }
    }
}

/// One socket, decoded: a line of output.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// Local `address:port` (IPv6 in brackets).
    pub local: String,
    /// Remote `address:port`.
    pub remote: String,
    /// TCP state as `ss` names it (`ESTAB`, ...).
    pub state: &'static str,
    /// Congestion-control algorithm (`INET_DIAG_CONG`), null when the kernel sent none.
    pub cc: Option<String>,
    /// `tcpi_snd_cwnd`, segments.
    pub cwnd: Option<u32>,
    /// `tcpi_rtt`, microseconds.
    pub srtt_us: Option<u32>,
    /// The MLTCP block, null when the socket has none (another algorithm, or not decodable).
    pub mltcp: Option<MltcpJson>,
    /// Wall-clock time of the dump, milliseconds since the Unix epoch (`--watch` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<u64>,
    /// Why a record could not be decoded (absent when all went well).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl Row {
    /// Decodes one dump entry; undecodable records are reported in `errors`, not fatal.
    pub fn from_entry(e: &SockEntry) -> Row {
        let mut errors = Vec::new();
        let tcp = e.tcp_info.as_deref().and_then(|b| {
            decode_tcp_info(b)
                .map_err(|err| errors.push(err.to_string()))
                .ok()
        });
        let mltcp = e.mltcp.as_deref().and_then(|b| {
            decode_mltcp_info(b)
                .map_err(|err| errors.push(err.to_string()))
                .ok()
        });
        Row {
            local: e.local.to_string(),
            remote: e.remote.to_string(),
            state: state_name(e.state),
            cc: e.cong.clone(),
            cwnd: tcp.map(|t| t.cwnd),
            srtt_us: tcp.map(|t| t.srtt_us),
            mltcp: mltcp.as_ref().map(MltcpJson::from),
            time_ms: None,
            errors,
        }
    }

    /// The row as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a Row always serializes")
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// The rows as an aligned table with a header line.
pub fn text_table(rows: &[Row]) -> String {
    let wl = rows
        .iter()
        .map(|r| r.local.len())
        .max()
        .unwrap_or(0)
        .max("Local".len());
    let wr = rows
        .iter()
        .map(|r| r.remote.len())
        .max()
        .unwrap_or(0)
        .max("Peer".len());
    let mut s = format!(
        "{:<10} {:<wl$} {:<wr$} {:<11} {:>6} {:>10} {:>6} {:>6} {:>6} {:>12} {}\n",
        "State",
        "Local",
        "Peer",
        "CC",
        "cwnd",
        "srtt_ms",
        "iters",
        "ratio",
        "F",
        "bytes/iter",
        "pinned"
    );
    for r in rows {
        let srtt = r.srtt_us.map(|us| format!("{:.3}", f64::from(us) / 1000.0));
        let (it, ratio, f, bpi, pinned) = match &r.mltcp {
            Some(m) => (
                m.iterations.to_string(),
                format!("{:.3}", m.bytes_ratio),
                format!("{:.3}", m.f),
                m.bytes_per_iteration.to_string(),
                if m.pinned { "yes" } else { "no" }.to_string(),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into(), "-".into()),
        };
        s += &format!(
            "{:<10} {:<wl$} {:<wr$} {:<11} {:>6} {:>10} {:>6} {:>6} {:>6} {:>12} {}",
            r.state,
            r.local,
            r.remote,
            r.cc.as_deref().unwrap_or("-"),
            opt(r.cwnd),
            opt(srtt),
            it,
            ratio,
            f,
            bpi,
            pinned
        );
        for e in &r.errors {
            s += &format!("  [{e}]");
        }
        s.push('\n');
    }
    s
}

/// The sockets' MLTCP state in the Prometheus text format (version 0.0.4, as encoded by
/// `prometheus-client`), one sample per socket and metric, labelled by the socket's 4-tuple
/// (`local`, `remote`: `address:port`) and `cc`: `mltcp_socket_bytes_ratio` and `mltcp_socket_f`
/// (fractions, 1.0 = 1024 in the kernel's fixed point), `mltcp_socket_bytes_per_iteration_bytes`
/// (0: none yet), `mltcp_socket_pinned` (1: bytes per iteration handed down by an agent) and
/// `mltcp_socket_iterations_total` (iterations completed). Sockets without an MLTCP block are
/// left out; `mltcp_stat_sockets` counts every row given.
pub fn prometheus(rows: &[Row]) -> String {
    use prometheus_client::encoding::prometheus_text::encode;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::registry::Registry;
    use std::sync::atomic::AtomicU64;

    type Labels = Vec<(&'static str, String)>;
    let ratio = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let f = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let bpi = Family::<Labels, Gauge>::default();
    let pinned = Family::<Labels, Gauge>::default();
    let iterations = Family::<Labels, Counter>::default();
    let sockets = Gauge::<i64>::default();
    sockets.set(i64::try_from(rows.len()).unwrap_or(i64::MAX));
    for r in rows {
        let Some(m) = &r.mltcp else { continue };
        let l: Labels = vec![
            ("local", r.local.clone()),
            ("remote", r.remote.clone()),
            ("cc", r.cc.clone().unwrap_or_default()),
        ];
        ratio.get_or_create(&l).set(m.bytes_ratio);
        f.get_or_create(&l).set(m.f);
        bpi.get_or_create(&l)
            .set(i64::try_from(m.bytes_per_iteration).unwrap_or(i64::MAX));
        pinned.get_or_create(&l).set(i64::from(m.pinned));
        iterations.get_or_create(&l).inc_by(u64::from(m.iterations));
    }
    let mut reg = Registry::default();
    reg.register(
        "mltcp_stat_sockets",
        "Sockets listed (with or without an MLTCP block)",
        sockets,
    );
    reg.register(
        "mltcp_socket_bytes_ratio",
        "bytes_ratio of the socket's current iteration, as a fraction",
        ratio,
    );
    reg.register(
        "mltcp_socket_f",
        "F(bytes_ratio), the window-increase factor, as a fraction",
        f,
    );
    reg.register(
        "mltcp_socket_bytes_per_iteration_bytes",
        "Bytes per iteration in use, bytes (0: none yet)",
        bpi,
    );
    reg.register(
        "mltcp_socket_pinned",
        "1 when the bytes per iteration were handed down by an agent",
        pinned,
    );
    reg.register(
        "mltcp_socket_iterations",
        "Iterations the socket completed",
        iterations,
    );
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &reg);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn entry(cong: &str, mltcp: Option<Vec<u8>>) -> SockEntry {
        let mut ti = vec![0u8; 232];
        ti[68..72].copy_from_slice(&2500u32.to_ne_bytes());
        ti[80..84].copy_from_slice(&10u32.to_ne_bytes());
        SockEntry {
            local: "10.0.0.1:40000".parse::<SocketAddr>().unwrap(),
            remote: "[::1]:5201".parse::<SocketAddr>().unwrap(),
            state: 1,
            cong: Some(cong.into()),
            tcp_info: Some(ti),
            mltcp,
        }
    }

    /// 3 iterations, bytes_ratio 0.25, F 0.625, 2 MB per iteration, not pinned.
    fn sample_info() -> MltcpInfo {
        MltcpInfo {
            iterations: 3,
            bytes_ratio_fx: 256,
            f_fx: 640,
            bytes_per_iteration: 2_000_000,
            flags: 0,
        }
    }

    #[test]
    fn json_row() {
        let info = sample_info();
        let e = entry("mltcp", Some(info.encode().to_vec()));
        assert!(is_mltcp(&e));
        assert_eq!(
            Row::from_entry(&e).to_json(),
            r#"{"local":"10.0.0.1:40000","remote":"[::1]:5201","state":"ESTAB","cc":"mltcp","cwnd":10,"srtt_us":2500,"mltcp":{"iterations":3,"bytes_ratio":0.25,"bytes_ratio_fx":256,"f":0.625,"f_fx":640,"bytes_per_iteration":2000000,"pinned":false}}"#
        );
    }

    #[test]
    fn prometheus_exposition_parses_with_the_socket_labels() {
        let info = sample_info();
        let rows = [
            Row::from_entry(&entry("mltcp", Some(info.encode().to_vec()))),
            Row::from_entry(&entry("cubic", None)),
        ];
        let text = prometheus(&rows);
        let s = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
        let get = |name: &str| {
            let x: Vec<_> = s.samples.iter().filter(|x| x.metric == name).collect();
            assert_eq!(x.len(), 1, "{name}: {text}");
            assert_eq!(x[0].labels.get("local"), Some("10.0.0.1:40000"));
            assert_eq!(x[0].labels.get("remote"), Some("[::1]:5201"));
            assert_eq!(x[0].labels.get("cc"), Some("mltcp"));
            match x[0].value {
                prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Counter(v) => v,
                ref other => panic!("{name}: {other:?}"),
            }
        };
        assert_eq!(get("mltcp_socket_bytes_ratio"), 0.25);
        assert_eq!(get("mltcp_socket_f"), 0.625);
        assert_eq!(get("mltcp_socket_bytes_per_iteration_bytes"), 2e6);
        assert_eq!(get("mltcp_socket_pinned"), 0.0);
        assert_eq!(get("mltcp_socket_iterations_total"), 3.0);
        let n = s
            .samples
            .iter()
            .find(|x| x.metric == "mltcp_stat_sockets")
            .unwrap();
        assert_eq!(n.value, prometheus_parse::Value::Gauge(2.0));
    }

    #[test]
    fn other_algorithm_and_bad_block() {
        let e = entry("cubic", None);
        assert!(!is_mltcp(&e));
        let r = Row::from_entry(&e);
        assert_eq!(r.mltcp, None);
        assert!(r.to_json().ends_with(r#""mltcp":null}"#));
        let r = Row::from_entry(&entry("mltcp_cubic", Some(vec![0; 12])));
        assert_eq!(r.mltcp, None);
        assert!(r.errors[0].contains("12 bytes"), "{:?}", r.errors);
        let t = text_table(&[r]);
        assert!(t.starts_with("State"));
        assert!(
            t.contains("mltcp_cubic") && t.contains("2.500") && t.contains("12 bytes"),
            "{t}"
        );
    }
}
