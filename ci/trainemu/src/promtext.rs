// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! `trainemu metrics`: a Prometheus text-format exposition (a `/metrics` scrape, e.g. of
//! `ccp-agent --metrics-addr`, fetched in the VM with busybox `wget`) parsed with the
//! prometheus-parse crate and printed one sample per line, `NAME{k="v",...} VALUE` (labels
//! sorted; a histogram's buckets as `NAME_bucket{le="..."} COUNT`), for shell tests to read.

use anyhow::{bail, Result};
use prometheus_parse::{LineInfo, Scrape, Value};

/// The samples of `text`, sorted. Errors: a line that is neither a comment nor a sample (the
/// parser itself skips such lines silently), or no sample at all.
pub fn samples(text: &str) -> Result<Vec<String>> {
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        let ok = t.is_empty()
            || t.starts_with('#')
            || matches!(LineInfo::parse(t), LineInfo::Sample { value, .. } if value.parse::<f64>().is_ok());
        if !ok {
            bail!("line {}: not in the Prometheus text format: {l:?}", i + 1);
        }
    }
    let s = Scrape::parse(text.lines().map(|l| Ok(l.to_string())))?;
    let mut out = Vec::new();
    for x in &s.samples {
        let mut labels: Vec<(&String, &String)> = x.labels.iter().collect();
        labels.sort();
        let show = |extra: Option<String>| {
            let mut l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            l.extend(extra);
            if l.is_empty() {
                String::new()
            } else {
                format!("{{{}}}", l.join(","))
            }
        };
        match &x.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => {
                out.push(format!("{}{} {v}", x.metric, show(None)))
            }
            Value::Histogram(b) => {
                for c in b {
                    let name = x.metric.strip_suffix("_bucket").unwrap_or(&x.metric);
                    out.push(format!(
                        "{name}_bucket{} {}",
                        show(Some(format!("le=\"{}\"", c.less_than))),
                        c.count
                    ));
                }
            }
            Value::Summary(q) => {
                for c in q {
                    out.push(format!(
                        "{}{} {}",
                        x.metric,
                        show(Some(format!("quantile=\"{}\"", c.quantile))),
                        c.count
                    ));
                }
            }
        }
    }
    if out.is_empty() {
        bail!("no sample in the exposition");
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::samples;

    #[test]
    fn samples_are_printed_and_junk_is_refused() {
        let text = "# HELP a_total A.\n# TYPE a_total counter\na_total{rpc=\"X\",b=\"y\"} 2\n# TYPE g gauge\ng 1.5\n# TYPE h histogram\nh_bucket{le=\"0.1\"} 0\nh_bucket{le=\"+Inf\"} 1\nh_sum 0.2\nh_count 1\n";
        let s = samples(text).unwrap();
        assert!(
            s.contains(&"a_total{b=\"y\",rpc=\"X\"} 2".to_string()),
            "{s:?}"
        );
        assert!(s.contains(&"g 1.5".to_string()), "{s:?}");
        assert!(s.contains(&"h_bucket{le=\"inf\"} 1".to_string()), "{s:?}");
        assert!(s.contains(&"h_count 1".to_string()), "{s:?}");
        assert!(samples("g 1\nnot a sample line at all\n").is_err());
        assert!(samples("# only a comment\n").is_err());
    }
}
