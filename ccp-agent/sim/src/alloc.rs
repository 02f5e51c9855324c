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

use crate::topo::Path;

/// Reusable scratch space for [`MaxMin::solve`] (sized by the number of links; the per-flow and
/// per-solve buffers are kept between calls so a solve allocates nothing once they have grown).
#[derive(Clone, Debug)]
pub struct MaxMin {
    res: Vec<f64>,
    wsum: Vec<f64>,
    cnt: Vec<u32>,
    local: Vec<u32>,
    touched: Vec<u32>,
    link_flows: Vec<Vec<u32>>,
    frozen: Vec<bool>,
    capped: Vec<(f64, u32)>,
    version: Vec<u32>,
    /// Per local link: already in `changed` (requeue's dedup).
    queued: Vec<bool>,
    heap: BinaryHeap<Level>,
    changed: Vec<u32>,
    /// Per local link in scan mode (at most [`MaxMin::SCAN_MAX`] links): its saturation level
    /// and whether it still has unfrozen flows; empty in heap mode.
    lvl: Vec<(f64, bool)>,
    /// Most links for scan mode ([`MaxMin::SCAN_MAX`]; tests lower it to exercise the heap).
    scan_max: usize,
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
    /// Most links for which a solve finds the next saturating link by scanning an array of
    /// levels instead of keeping a heap (same choice, cheaper for few links).
    pub const SCAN_MAX: usize = 64;

    /// Scratch space for a network of `links` links.
    pub fn new(links: usize) -> Self {
        MaxMin {
            res: vec![0.0; links],
            wsum: vec![0.0; links],
            cnt: vec![0; links],
            local: vec![UNSET; links],
            touched: Vec::new(),
            link_flows: Vec::new(),
            frozen: Vec::new(),
            capped: Vec::new(),
            version: Vec::new(),
            queued: Vec::new(),
            heap: BinaryHeap::new(),
            changed: Vec::new(),
            lvl: Vec::new(),
            scan_max: Self::SCAN_MAX,
        }
    }

    /// Rates for flows `paths[i]` (link indices) with weights `w[i]` and caps `cap[i]` (bytes/s,
    /// `f64::INFINITY` for none) on links of capacity `link_cap` (bytes/s), written to `out`.
    /// A flow with an empty path (inside one server) gets its cap (or 0 when uncapped, meaning the
    /// caller must treat it separately); weight or cap ≤ 0 gives 0. Links outside `link_cap`
    /// are ignored.
    pub fn solve(
        &mut self,
        link_cap: &[f64],
        paths: &[&[u32]],
        w: &[f64],
        cap: &[f64],
        out: &mut Vec<f64>,
    ) {
        self.solve_by(
            link_cap,
            paths.len(),
            |f| paths.get(f).copied().unwrap_or(&[]),
            |f| w.get(f).copied().unwrap_or(0.0),
            |f| cap.get(f).copied().unwrap_or(0.0),
            out,
        );
    }

    /// [`MaxMin::solve`] for `n` flows given by accessors: flow `f` (in `0..n`) crosses
    /// `path(f)` with weight `w(f)` and cap `cap(f)` (bytes/s). The flows are visited in index
    /// order, as `solve` visits its slices, so both give the same rates to the last bit.
    pub fn solve_by<'p>(
        &mut self,
        link_cap: &[f64],
        n: usize,
        path: impl Fn(usize) -> &'p [u32],
        w: impl Fn(usize) -> f64,
        cap: impl Fn(usize) -> f64,
        out: &mut Vec<f64>,
    ) {
        out.clear();
        out.resize(n, 0.0);
        let mut frozen = std::mem::take(&mut self.frozen);
        frozen.clear();
        frozen.resize(n, false);
        self.touched.clear();
        let mut remaining = 0usize;
        for f in 0..n {
            let (wf, cf) = (w(f), cap(f));
            let usable = path(f)
                .iter()
                .copied()
                .filter(|l| (*l as usize) < link_cap.len());
            let no_link = usable.clone().next().is_none();
            if wf <= 0.0 || cf <= 0.0 || no_link || wf.is_nan() || cf.is_nan() {
                frozen[f] = true;
                out[f] = if no_link && cf.is_finite() && cf > 0.0 {
                    cf
                } else {
                    0.0
                };
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
        // Capped flows in increasing order of the level at which they reach their cap (a
        // stable sort: equal levels keep the flows' order).
        let mut capped = std::mem::take(&mut self.capped);
        capped.clear();
        capped.extend(
            (0..n)
                .filter(|f| !frozen[*f] && cap(*f).is_finite())
                .map(|f| (cap(f) / w(f), f as u32)),
        );
        capped.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut next_cap = 0usize;
        // Links by the level at which they saturate (lazy heap: an entry is stale when the
        // link's version moved on).
        let nl = self.touched.len();
        let mut version = std::mem::take(&mut self.version);
        version.clear();
        version.resize(nl, 0);
        self.queued.clear();
        self.queued.resize(nl, false);
        let mut heap = std::mem::take(&mut self.heap);
        heap.clear();
        // Few links: their levels in an array, the least found by a scan (what the heap would
        // give: least level by `total_cmp`, then least local index); many: the heap.
        let scan = nl <= self.scan_max;
        self.lvl.clear();
        for (k, &l) in self.touched.iter().enumerate() {
            let li = l as usize;
            let lv = if self.cnt[li] > 0 {
                self.res[li].max(0.0) / self.wsum[li]
            } else {
                f64::NAN
            };
            if scan {
                self.lvl.push((lv, self.cnt[li] > 0));
            } else if self.cnt[li] > 0 {
                heap.push(Level(lv, k as u32, 0));
            }
        }
        let mut changed = std::mem::take(&mut self.changed);
        while remaining > 0 {
            // The least saturation level among links with unfrozen flows.
            let mut top: Option<(f64, u32)> = None;
            if scan {
                for (k, &(lv, live)) in self.lvl.iter().enumerate() {
                    if live && top.is_none_or(|(b, _)| lv.total_cmp(&b).is_lt()) {
                        top = Some((lv, k as u32));
                    }
                }
            }
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
                        frozen[f] = true;
                        self.freeze(f, cap(f), w(f), path(f), link_cap.len(), out, &mut changed);
                        remaining -= 1;
                    }
                    self.requeue(&mut changed, &mut version, &mut heap);
                    continue;
                }
            }
            let Some((_, k)) = top else { break };
            if !scan {
                heap.pop();
            }
            let flows = std::mem::take(&mut self.link_flows[k as usize]);
            for &f in &flows {
                let f = f as usize;
                if !frozen[f] {
                    frozen[f] = true;
                    let wf = w(f);
                    self.freeze(f, wf * lmin, wf, path(f), link_cap.len(), out, &mut changed);
                    remaining -= 1;
                }
            }
            self.link_flows[k as usize] = flows;
            self.requeue(&mut changed, &mut version, &mut heap);
        }
        for &l in &self.touched {
            self.local[l as usize] = UNSET;
        }
        self.frozen = frozen;
        self.capped = capped;
        self.version = version;
        self.heap = heap;
        self.changed = changed;
    }

    /// New heap entries for the links whose load changed (each once: a link's version moves
    /// once per call; the order of the pushes does not matter, the heap orders its entries by
    /// level and link and skips stale versions).
    fn requeue(
        &mut self,
        changed: &mut Vec<u32>,
        version: &mut [u32],
        heap: &mut BinaryHeap<Level>,
    ) {
        if !self.lvl.is_empty() {
            // Scan mode: the array holds every link's current level.
            for &l in changed.iter() {
                let li = l as usize;
                let k = self.local[li] as usize;
                self.lvl[k] = if self.cnt[li] > 0 {
                    (self.res[li].max(0.0) / self.wsum[li], true)
                } else {
                    (f64::NAN, false)
                };
            }
            changed.clear();
            return;
        }
        for &l in changed.iter() {
            let li = l as usize;
            let k = self.local[li] as usize;
            if std::mem::replace(&mut self.queued[k], true) {
                continue;
            }
            version[k] += 1;
            if self.cnt[li] > 0 {
                heap.push(Level(
                    self.res[li].max(0.0) / self.wsum[li],
                    k as u32,
                    version[k],
                ));
            }
        }
        for &l in changed.iter() {
            self.queued[self.local[l as usize] as usize] = false;
        }
        changed.clear();
    }

    /// Freezes flow `f` (already marked frozen) at `rate`: its links lose its rate and weight.
    #[allow(clippy::too_many_arguments)]
    fn freeze(
        &mut self,
        f: usize,
        rate: f64,
        wf: f64,
        path: &[u32],
        links: usize,
        out: &mut [f64],
        changed: &mut Vec<u32>,
    ) {
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

/// Relative tolerance of the optimality checks of [`IncMaxMin`] (saturation, equal levels).
const TOL: f64 = 1e-9;

/// Incremental weighted max-min with caps over flows with stable ids.
///
/// Keeps the last allocation and, when some flows change (added, removed, new weight or cap, a
/// link's capacity changed), re-solves only a growing set S of flows with the others' rates held:
/// S starts with the changed flows; after each partial solve (water-filling of S on the capacity
/// the held flows leave), every flow sharing a link with S is checked against the optimality
/// conditions of weighted max-min with caps (each flow is at its cap, or crosses a saturated link
/// on which no flow has a larger rate per weight). Flows that fail join S, and so do held flows
/// with a larger rate per weight on a saturated link of a failing flow of S; when nothing fails,
/// the allocation satisfies the conditions everywhere (flows whose links S does not touch keep
/// their links' loads, so their conditions still hold), and since the weighted max-min allocation
/// with caps is unique, it is the one a full solve gives (up to rounding). When S grows past half
/// of the flows, or after [`IncMaxMin::MAX_ROUNDS`] rounds, it solves all flows at once.
///
/// Why not connected components alone: with the simulator's first-fit placement every active
/// flow of the default run is in one component (docs/results/simulator.md), while a change usually moves the
/// rates of only the flows that share a *saturated* link with it, and the flows those share one
/// with, until the change is absorbed by a flow bottlenecked elsewhere.
#[derive(Clone, Debug)]
pub struct IncMaxMin {
    link_cap: Vec<f64>,
    load: Vec<f64>,
    link_flows: Vec<Vec<u32>>,
    /// Per flow id, its links, inline ([`Path`]): the solves walk the paths of every flow they
    /// touch, and one buffer per flow was a pointer to chase each time (~5 % of MLTCP's and
    /// MCS's default runs).
    path: Vec<Path>,
    w: Vec<f64>,
    cap: Vec<f64>,
    rate: Vec<f64>,
    present: Vec<bool>,
    n_present: usize,
    in_s: Vec<bool>,
    s: Vec<u32>,
    touched_links: Vec<u32>,
    link_mark: Vec<bool>,
    solver: MaxMin,
    scratch_cap: Vec<f64>,
    /// Per-solve scratch (kept to avoid allocating): S's links, whether each was saturated,
    /// flows joining S, a per-link mark for deduplicating `s_links`, the solver's output.
    s_links: Vec<u32>,
    pre: Vec<bool>,
    add: Vec<u32>,
    s_mark: Vec<bool>,
    out: Vec<f64>,
    /// Per link: the least level of a flow of S for which its flows were scanned in this round
    /// (`f64::INFINITY`: not scanned), and the links scanned.
    scanned: Vec<f64>,
    scanned_links: Vec<u32>,
    /// Per link: the largest rate per weight among its flows, valid when `link_stamp` equals
    /// `stamp` (rates changed since bump the stamp).
    link_max: Vec<f64>,
    link_stamp: Vec<u32>,
    stamp: u32,
    /// Flows re-solved in the last [`IncMaxMin::solve`] (for statistics).
    pub last_solved: usize,
    /// Solves that fell back to all flows.
    pub full_solves: u64,
    /// Calls of [`IncMaxMin::solve`], rounds of growing S over all calls, and flows re-solved
    /// over all calls (statistics).
    pub solves: u64,
    /// See `solves`.
    pub rounds: u64,
    /// See `solves`.
    pub solved_flows: u64,
    /// Force every solve to be a full one (reference mode for tests and comparisons).
    pub always_full: bool,
    /// Solve all flows once S holds more than this fraction of them (default 0.5).
    pub full_above: f64,
    /// Rounds of growing S before a full solve (default [`IncMaxMin::MAX_ROUNDS`]).
    pub max_rounds: usize,
}

impl IncMaxMin {
    /// Default rounds of growing S before a full solve.
    pub const MAX_ROUNDS: usize = 12;

    /// An empty allocation on links of capacity `link_cap` (bytes/s).
    pub fn new(link_cap: &[f64]) -> Self {
        let links = link_cap.len();
        IncMaxMin {
            link_cap: link_cap.to_vec(),
            load: vec![0.0; links],
            link_flows: vec![Vec::new(); links],
            path: Vec::new(),
            w: Vec::new(),
            cap: Vec::new(),
            rate: Vec::new(),
            present: Vec::new(),
            n_present: 0,
            in_s: Vec::new(),
            s: Vec::new(),
            touched_links: Vec::new(),
            link_mark: vec![false; links],
            solver: MaxMin::new(links),
            scratch_cap: link_cap.to_vec(),
            s_links: Vec::new(),
            pre: Vec::new(),
            add: Vec::new(),
            s_mark: vec![false; links],
            out: Vec::new(),
            scanned: vec![f64::INFINITY; links],
            scanned_links: Vec::new(),
            link_max: vec![0.0; links],
            link_stamp: vec![0; links],
            stamp: 1,
            last_solved: 0,
            full_solves: 0,
            solves: 0,
            rounds: 0,
            solved_flows: 0,
            always_full: false,
            full_above: 0.5,
            max_rounds: Self::MAX_ROUNDS,
        }
    }

    fn grow(&mut self, id: usize) {
        if id >= self.w.len() {
            let n = id + 1;
            self.path.resize(n, Path::new());
            self.w.resize(n, 0.0);
            self.cap.resize(n, 0.0);
            self.rate.resize(n, 0.0);
            self.present.resize(n, false);
            self.in_s.resize(n, false);
        }
    }

    fn mark(&mut self, id: u32) {
        let i = id as usize;
        if !self.in_s[i] {
            self.in_s[i] = true;
            self.s.push(id);
        }
    }

    fn touch_link(&mut self, l: u32) {
        if !self.link_mark[l as usize] {
            self.link_mark[l as usize] = true;
            self.touched_links.push(l);
        }
    }

    /// Adds flow `id` on `path` (link indices, valid for the links given to [`IncMaxMin::new`]),
    /// or updates its weight and cap (bytes/s, `f64::INFINITY` for none); the path of a present
    /// flow never changes. Marks it for the next solve when anything changed.
    pub fn set(&mut self, id: u32, path: &[u32], w: f64, cap: f64) {
        let i = id as usize;
        self.grow(i);
        if !self.present[i] {
            self.present[i] = true;
            self.n_present += 1;
            self.path[i].clear();
            self.path[i].extend(
                path.iter()
                    .copied()
                    .filter(|l| (*l as usize) < self.link_cap.len()),
            );
            self.rate[i] = 0.0;
            for k in 0..self.path[i].len() {
                let l = self.path[i][k];
                self.link_flows[l as usize].push(id);
            }
            self.w[i] = w;
            self.cap[i] = cap;
            self.mark(id);
        } else if self.w[i] != w || self.cap[i] != cap {
            self.w[i] = w;
            self.cap[i] = cap;
            self.mark(id);
        }
    }

    /// Removes flow `id` (its bandwidth goes back to its links at the next solve).
    pub fn remove(&mut self, id: u32) {
        let i = id as usize;
        if i >= self.present.len() || !self.present[i] {
            return;
        }
        self.present[i] = false;
        self.n_present -= 1;
        for k in 0..self.path[i].len() {
            let l = self.path[i][k];
            let li = l as usize;
            self.load[li] -= self.rate[i];
            self.link_flows[li].retain(|x| *x != id);
            self.touch_link(l);
        }
        self.rate[i] = 0.0;
    }

    /// Sets link `l`'s capacity (bytes/s); its flows are re-checked at the next solve.
    pub fn set_link_cap(&mut self, l: u32, c: f64) {
        let li = l as usize;
        if li < self.link_cap.len() && self.link_cap[li] != c {
            self.link_cap[li] = c;
            self.scratch_cap[li] = c;
            self.touch_link(l);
        }
    }

    /// Capacity of link `l`, bytes/s.
    pub fn link_cap(&self, l: u32) -> f64 {
        self.link_cap[l as usize]
    }

    /// Sum of the rates on link `l`, bytes/s.
    pub fn load(&self, l: u32) -> f64 {
        self.load[l as usize]
    }

    /// Number of flows in the allocation.
    pub fn len(&self) -> usize {
        self.n_present
    }

    /// True when no flow is in the allocation.
    pub fn is_empty(&self) -> bool {
        self.n_present == 0
    }

    /// True when flow `id` is in the allocation.
    pub fn contains(&self, id: u32) -> bool {
        self.present.get(id as usize).copied().unwrap_or(false)
    }

    /// Weight of flow `id`.
    pub fn weight(&self, id: u32) -> f64 {
        self.w.get(id as usize).copied().unwrap_or(0.0)
    }

    /// Cap of flow `id`, bytes/s (0 when never added).
    pub fn cap(&self, id: u32) -> f64 {
        self.cap.get(id as usize).copied().unwrap_or(0.0)
    }

    /// Path of flow `id` (empty when it was never added).
    pub fn path_of(&self, id: u32) -> &[u32] {
        self.path.get(id as usize).map_or(&[], |p| p.as_slice())
    }

    /// Current rate of flow `id`, bytes/s (0 when absent).
    pub fn rate(&self, id: u32) -> f64 {
        self.rate.get(id as usize).copied().unwrap_or(0.0)
    }

    fn at_cap(&self, i: usize) -> bool {
        let (w, c) = (self.w[i], self.cap[i]);
        !(w > 0.0 && c > 0.0) || self.path[i].is_empty() || self.rate[i] >= c * (1.0 - TOL)
    }

    fn saturated(&self, l: usize) -> bool {
        self.load[l] >= self.link_cap[l] * (1.0 - TOL) - 1e-6
    }

    /// The largest rate per weight on link `l` (cached until the rates change).
    fn max_level(&mut self, li: usize) -> f64 {
        if self.link_stamp[li] != self.stamp {
            let mut m = 0.0f64;
            for &g in &self.link_flows[li] {
                let g = g as usize;
                if self.w[g] > 0.0 {
                    m = m.max(self.rate[g] / self.w[g]);
                }
            }
            self.link_max[li] = m;
            self.link_stamp[li] = self.stamp;
        }
        self.link_max[li]
    }

    /// The flow's condition: at its cap, or on a saturated link where it has the largest rate
    /// per weight.
    fn ok(&mut self, i: usize) -> bool {
        if self.at_cap(i) {
            return true;
        }
        let lv = self.rate[i] / self.w[i];
        for k in 0..self.path[i].len() {
            let li = self.path[i][k] as usize;
            if self.saturated(li) && self.max_level(li) <= lv * (1.0 + TOL) + 1e-9 {
                return true;
            }
        }
        false
    }

    /// Brings the allocation up to date with the changes since the last call; `changed` gets
    /// the ids whose rate may have changed (the final S).
    pub fn solve(&mut self, changed: &mut Vec<u32>) {
        // Links of removed flows and of changed link capacities: their flows are checked.
        let touched = std::mem::take(&mut self.touched_links);
        for &l in &touched {
            self.link_mark[l as usize] = false;
        }
        let mut check_links = touched;
        // Flows marked and then removed before this solve.
        let present = &self.present;
        let in_s = &mut self.in_s;
        self.s.retain(|&f| {
            let keep = present[f as usize];
            if !keep {
                in_s[f as usize] = false;
            }
            keep
        });
        if self.solves % 4096 == 4095 {
            // Loads kept by differences drift by rounding: recompute them exactly now and then.
            for (li, fl) in self.link_flows.iter().enumerate() {
                self.load[li] = fl.iter().map(|&g| self.rate[g as usize]).sum();
            }
        }
        let mut rounds = 0;
        loop {
            if self.always_full
                || self.s.len() as f64 > self.full_above * self.n_present as f64
                || rounds >= self.max_rounds
            {
                self.solve_all();
                break;
            }
            // S's links and whether each was saturated before this round: a held flow can lose
            // its bottleneck only on a link that was saturated and then unsaturates or carries
            // a flow of S with a larger level than every held flow there (a held flow with that
            // link as its bottleneck had the largest level on it; its other links keep their
            // loads and levels).
            // (Their order does not matter: the links to check are sorted below.)
            let mut s_links = std::mem::take(&mut self.s_links);
            self.s_links_of_s(&mut s_links);
            let mut pre = std::mem::take(&mut self.pre);
            pre.clear();
            pre.extend(s_links.iter().map(|&l| self.saturated(l as usize)));
            if !self.s.is_empty() {
                self.solve_s(&s_links);
            }
            self.stamp = self.stamp.wrapping_add(1);
            rounds += 1;
            let before = self.s.len();
            let mut add = std::mem::take(&mut self.add);
            add.clear();
            // Links whose held flows are all checked: those given at the start (removals,
            // capacity changes), and S's links as above.
            for (k, &l) in s_links.iter().enumerate() {
                let li = l as usize;
                let over = self.load[li] > self.link_cap[li] * (1.0 + TOL) + 1e-6;
                let check = over
                    || (pre[k]
                        && (!self.saturated(li) || {
                            let (mut top_s, mut top_held) = (0.0f64, 0.0f64);
                            for &g in &self.link_flows[li] {
                                let gi = g as usize;
                                if self.w[gi] > 0.0 {
                                    let lv = self.rate[gi] / self.w[gi];
                                    if self.in_s[gi] {
                                        top_s = top_s.max(lv);
                                    } else {
                                        top_held = top_held.max(lv);
                                    }
                                }
                            }
                            top_s > top_held * (1.0 + TOL) + 1e-9
                        }));
                if check {
                    check_links.push(l);
                }
            }
            check_links.sort_unstable();
            check_links.dedup();
            for &l in &check_links {
                let li = l as usize;
                if self.load[li] > self.link_cap[li] * (1.0 + TOL) + 1e-6 {
                    // Over capacity (its capacity went down): all its flows are re-solved.
                    add.extend_from_slice(&self.link_flows[li]);
                    continue;
                }
                for x in 0..self.link_flows[li].len() {
                    let g = self.link_flows[li][x];
                    let gi = g as usize;
                    if !self.in_s[gi] && !self.ok(gi) {
                        add.push(g);
                    }
                }
            }
            // Flows of S without a bottleneck: held flows with a larger level on their
            // saturated links give way.
            for k in 0..self.s.len() {
                let gi = self.s[k] as usize;
                if self.ok(gi) {
                    continue;
                }
                let lv = self.rate[gi] / self.w[gi];
                for x in 0..self.path[gi].len() {
                    let m = self.path[gi][x];
                    // No flow on the link above the level (the cached maximum): none to add.
                    if self.max_level(m as usize) <= lv * (1.0 + TOL) {
                        continue;
                    }
                    // Already scanned in this round at a level at most this one: every flow
                    // this scan would add is already in `add`, in the same order of first
                    // appearance.
                    let seen = &mut self.scanned[m as usize];
                    if *seen <= lv {
                        continue;
                    }
                    if seen.is_infinite() {
                        self.scanned_links.push(m);
                    }
                    *seen = lv;
                    for &h in &self.link_flows[m as usize] {
                        let hi = h as usize;
                        if !self.in_s[hi]
                            && self.w[hi] > 0.0
                            && self.rate[hi] / self.w[hi] > lv * (1.0 + TOL)
                        {
                            add.push(h);
                        }
                    }
                }
            }
            for &l in &self.scanned_links {
                self.scanned[l as usize] = f64::INFINITY;
            }
            self.scanned_links.clear();
            for &g in &add {
                self.mark(g);
            }
            self.add = add;
            self.s_links = s_links;
            self.pre = pre;
            if self.s.len() == before {
                break;
            }
            check_links.clear();
        }
        check_links.clear();
        self.touched_links = check_links;
        self.last_solved = self.s.len();
        self.solves += 1;
        self.rounds += rounds as u64;
        self.solved_flows += self.s.len() as u64;
        for &f in &self.s {
            self.in_s[f as usize] = false;
        }
        changed.clear();
        changed.extend_from_slice(&self.s);
        self.s.clear();
    }

    /// The links of S's flows, each once, into `links` (in no particular order).
    fn s_links_of_s(&mut self, links: &mut Vec<u32>) {
        links.clear();
        for &f in &self.s {
            for &l in &self.path[f as usize] {
                if !std::mem::replace(&mut self.s_mark[l as usize], true) {
                    links.push(l);
                }
            }
        }
        for &l in links.iter() {
            self.s_mark[l as usize] = false;
        }
    }

    /// Water-fills the flows of S on `link_cap`, into `self.out` (in S's order).
    fn fill_s(&mut self, link_cap: &[f64]) {
        let (s, path, w, cap) = (&self.s, &self.path, &self.w, &self.cap);
        self.solver.solve_by(
            link_cap,
            s.len(),
            |k| path[s[k] as usize].as_slice(),
            |k| w[s[k] as usize],
            |k| cap[s[k] as usize],
            &mut self.out,
        );
    }

    /// Re-solves S with the other flows' rates held; `links`: S's links, each once.
    fn solve_s(&mut self, links: &[u32]) {
        // Capacity the held flows leave on the links of S: the loads without S's rates (loads
        // are kept up to date by differences, and recomputed exactly at every full solve).
        for &f in &self.s {
            let fi = f as usize;
            for &l in &self.path[fi] {
                self.load[l as usize] -= self.rate[fi];
            }
        }
        for &l in links {
            let li = l as usize;
            self.scratch_cap[li] = (self.link_cap[li] - self.load[li]).max(0.0);
        }
        let scratch_cap = std::mem::take(&mut self.scratch_cap);
        self.fill_s(&scratch_cap);
        self.scratch_cap = scratch_cap;
        for (k, &f) in self.s.iter().enumerate() {
            let fi = f as usize;
            self.rate[fi] = self.out[k];
            for &l in &self.path[fi] {
                self.load[l as usize] += self.out[k];
            }
        }
        for &l in links {
            let li = l as usize;
            self.scratch_cap[li] = self.link_cap[li];
        }
    }

    fn solve_all(&mut self) {
        self.full_solves += 1;
        for i in 0..self.present.len() {
            if self.present[i] {
                self.mark(i as u32);
            }
        }
        let link_cap = std::mem::take(&mut self.link_cap);
        self.fill_s(&link_cap);
        self.link_cap = link_cap;
        for (k, &f) in self.s.iter().enumerate() {
            self.rate[f as usize] = self.out[k];
        }
        for (li, fl) in self.link_flows.iter().enumerate() {
            self.load[li] = fl.iter().map(|&g| self.rate[g as usize]).sum();
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
        let r = solve(
            &[8.0],
            &[&[0], &[], &[0], &[9]],
            &[1.0; 4],
            &[0.0, 5.0, inf, inf],
        );
        assert_eq!(r, vec![0.0, 5.0, 8.0, 0.0]);
    }

    /// One operation on an incremental allocation: add or update a flow, remove one, or change
    /// a link's capacity.
    #[derive(Clone, Debug)]
    enum Op {
        Set(u32, Vec<u32>, f64, Option<f64>),
        Remove(u32),
        LinkCap(u32, f64),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0u32..24, proptest::collection::vec(0u32..8, 1..4), 0.1f64..4.0, proptest::option::of(0.0f64..50.0))
                .prop_map(|(i, p, w, c)| Op::Set(i, p, w, c)),
            2 => (0u32..24).prop_map(Op::Remove),
            1 => (0u32..8, 0.0f64..100.0).prop_map(|(l, c)| Op::LinkCap(l, c)),
        ]
    }

    /// A generated flow: links (taken modulo the number of links), weight, cap (none: uncapped).
    type GenFlow = (Vec<u32>, f64, Option<f64>);

    /// Paths (sorted, without repeats), weights and caps of generated flows on `links` links.
    fn network(links: usize, flows: &[GenFlow]) -> (Vec<Vec<u32>>, Vec<f64>, Vec<f64>) {
        let paths = flows
            .iter()
            .map(|(p, _, _)| {
                let mut p: Vec<u32> = p.iter().map(|l| l % links as u32).collect();
                p.sort_unstable();
                p.dedup();
                p
            })
            .collect();
        let w = flows.iter().map(|f| f.1).collect();
        let cap = flows.iter().map(|f| f.2.unwrap_or(f64::INFINITY)).collect();
        (paths, w, cap)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]
        /// The scan over an array of levels (few links) and the heap (many links) give the same
        /// rates to the bit.
        #[test]
        fn scan_equals_heap(
            caps in proptest::collection::vec(1.0f64..100.0, 1..12),
            flows in proptest::collection::vec(
                (proptest::collection::vec(0u32..12, 1..4), 0.1f64..4.0, proptest::option::of(0.0f64..50.0)),
                1..24,
            ),
        ) {
            let (paths, w, cap) = network(caps.len(), &flows);
            let refs: Vec<&[u32]> = paths.iter().map(|p| p.as_slice()).collect();
            let scan = solve(&caps, &refs, &w, &cap);
            let mut m = MaxMin::new(caps.len());
            m.scan_max = 0;
            let mut heap = Vec::new();
            m.solve(&caps, &refs, &w, &cap, &mut heap);
            proptest::prop_assert_eq!(scan, heap);
        }

        /// The incremental allocation equals a full recomputation after every batch of changes,
        /// on random small networks (8 links, up to 24 flows).
        #[test]
        fn incremental_equals_full(
            caps in proptest::collection::vec(1.0f64..100.0, 8),
            batches in proptest::collection::vec(proptest::collection::vec(op(), 1..5), 1..30),
            fallback in proptest::bool::ANY,
        ) {
            let mut inc = IncMaxMin::new(&caps);
            if !fallback {
                // Exercise the growth of S alone, never the full-solve fallback.
                inc.full_above = f64::INFINITY;
                inc.max_rounds = usize::MAX;
            }
            let mut link_cap = caps.clone();
            // The reference's view: id -> (path, w, cap).
            let mut flows: std::collections::BTreeMap<u32, (Vec<u32>, f64, f64)> = Default::default();
            let mut changed = Vec::new();
            for batch in batches {
                for o in batch {
                    match o {
                        Op::Set(i, p, w, c) => {
                            let mut p = p;
                            p.sort_unstable();
                            p.dedup();
                            let c = c.unwrap_or(f64::INFINITY);
                            // A present flow keeps its path.
                            let path = flows.get(&i).map_or(p, |e| e.0.clone());
                            inc.set(i, &path, w, c);
                            flows.insert(i, (path, w, c));
                        }
                        Op::Remove(i) => {
                            inc.remove(i);
                            flows.remove(&i);
                        }
                        Op::LinkCap(l, c) => {
                            inc.set_link_cap(l, c);
                            link_cap[l as usize] = c;
                        }
                    }
                }
                inc.solve(&mut changed);
                let ids: Vec<u32> = flows.keys().copied().collect();
                let paths: Vec<&[u32]> = flows.values().map(|e| e.0.as_slice()).collect();
                let w: Vec<f64> = flows.values().map(|e| e.1).collect();
                let cap: Vec<f64> = flows.values().map(|e| e.2).collect();
                let full = solve(&link_cap, &paths, &w, &cap);
                for (k, id) in ids.iter().enumerate() {
                    let (a, b) = (inc.rate(*id), full[k]);
                    proptest::prop_assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "flow {}: incremental {} vs full {}", id, a, b);
                }
            }
        }

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
            let (paths, w, cap) = network(caps.len(), &flows);
            let refs: Vec<&[u32]> = paths.iter().map(|p| p.as_slice()).collect();
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
