// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Weighted max-min fair sharing with per-flow rate caps (progressive filling / water-filling).
//!
//! Every flow f gets `min(cap_f, w_f · λ_f)`, where the fill level λ rises for all unfrozen flows
//! together until a link saturates (its flows freeze at that level) or a flow reaches its cap
//! (it freezes at the cap). With unit weights and no caps this is plain max-min fairness, the
//! steady state of TCP-like flows sharing a network ("Flows that traverse the same link share
//! the available bandwidth equally", the mlcc paper, Sec. VII); with weights it is the share of
//! flows whose window increase is scaled by their weight (MLTCP: F(bytes_ratio), thesis ch. 5).
//! Rates in bytes/s.

use std::collections::BinaryHeap;

/// Reusable scratch space for [`MaxMin::solve`] (sized by the number of links).
#[derive(Clone, Debug)]
pub struct MaxMin {
    res: Vec<f64>,
    wsum: Vec<f64>,
    cnt: Vec<u32>,
    local: Vec<u32>,
    touched: Vec<u32>,
    link_flows: Vec<Vec<u32>>,
}

const UNSET: u32 = u32::MAX;

/// A heap entry: (saturation level, local link index, version), least level first.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Level(f64, u32, u32);
impl Eq for Level {}
impl PartialOrd for Level {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Level {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

impl MaxMin {
    /// Scratch space for a network of `links` links.
    pub fn new(links: usize) -> Self {
        MaxMin {
            res: vec![0.0; links],
            wsum: vec![0.0; links],
            cnt: vec![0; links],
            local: vec![UNSET; links],
            touched: Vec::new(),
            link_flows: Vec::new(),
        }
    }

    /// Rates for flows `paths[i]` (link indices) with weights `w[i]` and caps `cap[i]` (bytes/s,
    /// `f64::INFINITY` for none) on links of capacity `link_cap` (bytes/s), written to `out`.
    /// A flow with an empty path (inside one server) gets its cap (or 0 when uncapped, meaning the
    /// caller must treat it separately); weight or cap ≤ 0 gives 0. Links outside `link_cap`
    /// are ignored.
    pub fn solve(&mut self, link_cap: &[f64], paths: &[&[u32]], w: &[f64], cap: &[f64], out: &mut Vec<f64>) {
        let n = paths.len();
        out.clear();
        out.resize(n, 0.0);
        let mut frozen = vec![false; n];
        self.touched.clear();
        let mut remaining = 0usize;
        for f in 0..n {
            let (wf, cf) = (w.get(f).copied().unwrap_or(0.0), cap.get(f).copied().unwrap_or(0.0));
            let path = paths.get(f).copied().unwrap_or(&[]);
            let usable: Vec<u32> = path.iter().copied().filter(|l| (*l as usize) < link_cap.len()).collect();
            if wf <= 0.0 || cf <= 0.0 || usable.is_empty() || wf.is_nan() || cf.is_nan() {
                frozen[f] = true;
                out[f] = if usable.is_empty() && cf.is_finite() && cf > 0.0 { cf } else { 0.0 };
                continue;
            }
            remaining += 1;
            for l in usable {
                let li = l as usize;
                if self.local[li] == UNSET {
                    self.local[li] = self.touched.len() as u32;
                    self.touched.push(l);
                    if self.link_flows.len() < self.touched.len() {
                        self.link_flows.push(Vec::new());
                    }
                    self.link_flows[self.touched.len() - 1].clear();
                    self.res[li] = link_cap[li];
                    self.wsum[li] = 0.0;
                    self.cnt[li] = 0;
                }
                self.wsum[li] += wf;
                self.cnt[li] += 1;
                let k = self.local[li] as usize;
                self.link_flows[k].push(f as u32);
            }
        }
        // Capped flows in increasing order of the level at which they reach their cap.
        let mut capped: Vec<(f64, u32)> = (0..n)
            .filter(|f| !frozen[*f] && cap[*f].is_finite())
            .map(|f| (cap[f] / w[f], f as u32))
            .collect();
        capped.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut next_cap = 0usize;
        // Links by the level at which they saturate (lazy heap: an entry is stale when the
        // link's version moved on).
        let mut version: Vec<u32> = vec![0; self.touched.len()];
        let mut heap: BinaryHeap<Level> = BinaryHeap::with_capacity(self.touched.len());
        for (k, &l) in self.touched.iter().enumerate() {
            let li = l as usize;
            if self.cnt[li] > 0 {
                heap.push(Level(self.res[li].max(0.0) / self.wsum[li], k as u32, 0));
            }
        }
        let mut changed: Vec<u32> = Vec::new();
        while remaining > 0 {
            // The least saturation level among links with unfrozen flows.
            let mut top = None;
            while let Some(&Level(lv, k, v)) = heap.peek() {
                let li = self.touched[k as usize] as usize;
                if v != version[k as usize] || self.cnt[li] == 0 {
                    heap.pop();
                    continue;
                }
                top = Some((lv, k));
                break;
            }
            let lmin = top.map_or(f64::INFINITY, |t| t.0);
            changed.clear();
            // A flow reaching its cap before any link saturates freezes at the cap.
            if let Some(&(level, f)) = capped.get(next_cap) {
                if level <= lmin {
                    next_cap += 1;
                    let f = f as usize;
                    if !frozen[f] {
                        self.freeze(f, cap[f], w[f], paths[f], link_cap.len(), &mut frozen, out, &mut changed);
                        remaining -= 1;
                    }
                    self.requeue(&mut changed, &mut version, &mut heap);
                    continue;
                }
            }
            let Some((_, k)) = top else { break };
            heap.pop();
            let flows = std::mem::take(&mut self.link_flows[k as usize]);
            for &f in &flows {
                let f = f as usize;
                if !frozen[f] {
                    self.freeze(f, w[f] * lmin, w[f], paths[f], link_cap.len(), &mut frozen, out, &mut changed);
                    remaining -= 1;
                }
            }
            self.link_flows[k as usize] = flows;
            self.requeue(&mut changed, &mut version, &mut heap);
        }
        for &l in &self.touched {
            self.local[l as usize] = UNSET;
        }
    }

    /// New heap entries for the links whose load changed.
    fn requeue(&self, changed: &mut Vec<u32>, version: &mut [u32], heap: &mut BinaryHeap<Level>) {
        changed.sort_unstable();
        changed.dedup();
        for &l in changed.iter() {
            let li = l as usize;
            let k = self.local[li] as usize;
            version[k] += 1;
            if self.cnt[li] > 0 {
                heap.push(Level(self.res[li].max(0.0) / self.wsum[li], k as u32, version[k]));
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn freeze(
        &mut self,
        f: usize,
        rate: f64,
        wf: f64,
        path: &[u32],
        links: usize,
        frozen: &mut [bool],
        out: &mut [f64],
        changed: &mut Vec<u32>,
    ) {
        frozen[f] = true;
        out[f] = rate;
        for &l in path {
            let li = l as usize;
            if li < links {
                changed.push(l);
                self.res[li] -= rate;
                self.wsum[li] -= wf;
                self.cnt[li] = self.cnt[li].saturating_sub(1);
                if self.cnt[li] == 0 {
                    self.wsum[li] = 0.0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solve(caps: &[f64], paths: &[&[u32]], w: &[f64], cap: &[f64]) -> Vec<f64> {
        let mut m = MaxMin::new(caps.len());
        let mut out = Vec::new();
        m.solve(caps, paths, w, cap, &mut out);
        out
    }

    #[test]
    fn classic_max_min() {
        // Link 0 (10) shared by A and B; link 1 (4) carries B and C.
        let inf = f64::INFINITY;
        let r = solve(&[10.0, 4.0], &[&[0], &[0, 1], &[1]], &[1.0; 3], &[inf; 3]);
        assert_eq!(r, vec![8.0, 2.0, 2.0]);
        // Weights 3:1 on one link.
        let r = solve(&[8.0], &[&[0], &[0]], &[3.0, 1.0], &[inf, inf]);
        assert_eq!(r, vec![6.0, 2.0]);
        // A cap frees bandwidth for the other flow.
        let r = solve(&[8.0], &[&[0], &[0]], &[1.0, 1.0], &[1.0, inf]);
        assert_eq!(r, vec![1.0, 7.0]);
        // Zero cap, empty path, unknown link.
        let r = solve(&[8.0], &[&[0], &[], &[0], &[9]], &[1.0; 4], &[0.0, 5.0, inf, inf]);
        assert_eq!(r, vec![0.0, 5.0, 8.0, 0.0]);
    }

    proptest::proptest! {
        /// Weighted max-min optimality: no link is over capacity, and every flow is either at its
        /// cap or crosses a saturated link on which no flow has a larger rate per weight.
        #[test]
        fn weighted_max_min_conditions(
            caps in proptest::collection::vec(1.0f64..100.0, 1..6),
            flows in proptest::collection::vec(
                (proptest::collection::vec(0u32..6, 1..4), 0.1f64..4.0, proptest::option::of(0.0f64..50.0)),
                1..10,
            ),
        ) {
            let paths: Vec<Vec<u32>> = flows
                .iter()
                .map(|(p, _, _)| {
                    let mut p: Vec<u32> = p.iter().map(|l| l % caps.len() as u32).collect();
                    p.sort_unstable();
                    p.dedup();
                    p
                })
                .collect();
            let refs: Vec<&[u32]> = paths.iter().map(|p| p.as_slice()).collect();
            let w: Vec<f64> = flows.iter().map(|f| f.1).collect();
            let cap: Vec<f64> = flows.iter().map(|f| f.2.unwrap_or(f64::INFINITY)).collect();
            let r = solve(&caps, &refs, &w, &cap);
            let mut load = vec![0.0; caps.len()];
            for (f, p) in paths.iter().enumerate() {
                for &l in p {
                    load[l as usize] += r[f];
                }
            }
            for (l, x) in load.iter().enumerate() {
                proptest::prop_assert!(*x <= caps[l] * (1.0 + 1e-9), "link {} at {} > {}", l, x, caps[l]);
            }
            for (f, p) in paths.iter().enumerate() {
                proptest::prop_assert!(r[f] <= cap[f] * (1.0 + 1e-9));
                if r[f] >= cap[f] * (1.0 - 1e-9) {
                    continue;
                }
                let ok = p.iter().any(|&l| {
                    load[l as usize] >= caps[l as usize] * (1.0 - 1e-9)
                        && paths.iter().enumerate().all(|(g, q)| !q.contains(&l) || r[g] / w[g] <= r[f] / w[f] * (1.0 + 1e-9))
                });
                proptest::prop_assert!(ok, "flow {} at {} has no bottleneck", f, r[f]);
            }
        }
    }
}
