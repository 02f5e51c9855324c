// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Rank compression: the policy's job order onto the few traffic classes a fabric serves
//! strictly, stable from slot to slot.
//!
//! Per-slot pacing rates leave a port idle at every hand-over between jobs; strict priority in
//! the switches does not (a lower class sends whenever a higher one has nothing queued, so the
//! port is work-conserving by construction). A switch has 8 traffic classes (IEEE 802.1Q,
//! queues served by the transmission selection of IEEE 802.1Qaz: strict priority, or ETS
//! weights between groups of classes), of which a datacenter gives training a few, 4 by
//! default ([`DEFAULT_CLASSES`]); the policy ranks any number of jobs. Crux (Cao et al., "Crux:
//! GPU-Efficient Communication Scheduling for Deep Learning Training", SIGCOMM '24) likewise
//! compresses its job priorities onto the few priority levels the network offers, where only
//! the order of jobs that contend on a link matters; the rule here is our own: the levels of
//! [`super::priority_levels`] capped at N, plus what a per-slot scheduler needs, stability.
//!
//! # The rule
//!
//! [`TrafficClasses::assign`] takes the jobs with their ranks (lower first; ties by job) and
//! their links, and walks them in rank order. Class 0 is the highest priority, `N - 1` the
//! lowest. Of job `j`, let `floor` be the highest class number among the jobs ranked above it
//! that share a link with it (its *higher neighbours*), and `want = 0` without such a job, else
//! `min(floor + 1, N - 1)` (on a fresh state that is `min(level, N - 1)` with `level` from
//! [`super::priority_levels`]: the top `N - 1` levels keep classes of their own, the deeper ones
//! share the last, where a job loses least, since it waits behind the others anyway). Then:
//!
//! - **Hysteresis**: `j` keeps last slot's class when the order of its neighbourhood (the jobs
//!   it shares a link with, and itself, by rank) is the one of last slot, and that class is
//!   still below every higher neighbour's (or all are in the last class); otherwise it takes
//!   `want`. So an order that changes elsewhere does not move it, and neither does a change of
//!   the numeric ranks that keeps its neighbourhood's order.
//! - **No inversion**: if `a` is ranked above `b` and they share a link, `class(a) <= class(b)`;
//!   equal only when both are in the last class, which is what `N` classes force.
//!
//! A job that shares no link with a higher-ranked one is in class 0: jobs on disjoint links do
//! not compete, so the classes are reused across the fabric, as the levels are.
//!
//! # The DSCP map
//!
//! Class `c` is marked with DSCP `dscp[c]` (RFC 2474); the switches map each code point to a
//! queue and serve those queues by strict priority in class order, above or weighted against
//! other traffic (IEEE 802.1Qaz). The default map ([`DEFAULT_DSCP`]) is the four Assured
//! Forwarding classes of RFC 2597 at drop precedence 1, highest first, then class selectors
//! (RFC 2474 §4.2.2) for classes 4..=7:
//!
//! | class | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |
//! | --- | --- | --- | --- | --- | --- | --- | --- | --- |
//! | DSCP | AF41 (34) | AF31 (26) | AF21 (18) | AF11 (10) | CS4 (32) | CS3 (24) | CS2 (16) | CS1 (8) |
//!
//! It avoids CS0 (default forwarding, 0), EF (46) and CS6/CS7 (network control, RFC 4594), so
//! training never shares a queue with best effort or with the fabric's control traffic. A fabric
//! configured otherwise passes its own code points ([`TrafficClasses::with_dscp`]).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::{rank_ascending, Decisions, JobKey, RankedJob, Snapshot};
use crate::error::SchedError;
use crate::table::{FlowId, LinkId};

/// Traffic classes given to training by default: 4 of a switch's 8 (IEEE 802.1Q).
pub const DEFAULT_CLASSES: u8 = 4;

/// The most traffic classes: a switch's 8 (IEEE 802.1Q traffic classes, IEEE 802.1Qaz).
pub const MAX_CLASSES: u8 = 8;

/// The largest DSCP (a 6-bit field, RFC 2474 §3).
pub const DSCP_MAX: u8 = 63;

/// The default DSCP of each class, class 0 (highest) first (see the module documentation):
/// AF41, AF31, AF21, AF11 (RFC 2597), then CS4, CS3, CS2, CS1 (RFC 2474 §4.2.2).
pub const DEFAULT_DSCP: [u8; MAX_CLASSES as usize] = [34, 26, 18, 10, 32, 24, 16, 8];

/// One job's class in a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobClass {
    /// The job.
    pub job: JobKey,
    /// Its traffic class, 0 (highest priority) to `N - 1`.
    pub class: u8,
    /// The DSCP of that class.
    pub dscp: u8,
}

/// What a job had last slot: its class and the order of its neighbourhood.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Kept {
    class: u8,
    /// The jobs it shared a link with, and itself, in rank order.
    neighbourhood: Vec<JobKey>,
}

/// What the rates of classed flows are ([`TrafficClasses`] on): `[sched] class_rates` of
/// ccp-agent, `+class_rates=NAME` of a testbed scenario.
///
/// With strict-priority classes in the switches the order of the jobs is the switches' to
/// enforce, so a per-slot rate that holds a lower-ranked flow back only idles the port at the
/// hand-over (issue: "work-conserving priority classes"); the rates may stay as the policy
/// decided them, or be lifted to the line rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassRates {
    /// Each classed flow keeps the policy's per-slot pacing rate (the class only orders what
    /// the rates let through).
    #[default]
    Plan,
    /// Each classed flow runs unthrottled (its host's link rate, the window's ceiling at
    /// install): the switches' classes alone order the jobs; the window still backs off on
    /// loss as the datapath program's Reno does.
    Line,
}

impl ClassRates {
    /// Every mode, in the order their names are listed to users.
    pub const ALL: [ClassRates; 2] = [ClassRates::Plan, ClassRates::Line];

    /// The mode's name, as agent.toml's `[sched] class_rates` and the serde form spell it.
    pub fn name(self) -> &'static str {
        match self {
            ClassRates::Plan => "plan",
            ClassRates::Line => "line",
        }
    }
}

impl std::str::FromStr for ClassRates {
    type Err = String;

    /// Parses a [`ClassRates::name`]; the error lists the known names, quoted.
    fn from_str(s: &str) -> Result<Self, String> {
        super::by_name(&ClassRates::ALL, ClassRates::name, s)
    }
}

/// The rank compressor of the module documentation: `N` classes with their DSCPs, and each
/// job's class and neighbourhood from the last [`TrafficClasses::assign`] (the hysteresis).
/// Pure: the state is plain data; the same sequence of inputs gives the same classes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrafficClasses {
    dscp: Vec<u8>,
    kept: BTreeMap<JobKey, Kept>,
}

impl Default for TrafficClasses {
    /// [`DEFAULT_CLASSES`] classes with the default DSCPs.
    fn default() -> Self {
        TrafficClasses {
            dscp: DEFAULT_DSCP[..usize::from(DEFAULT_CLASSES)].to_vec(),
            kept: BTreeMap::new(),
        }
    }
}

impl TrafficClasses {
    /// `classes` classes (1..=[`MAX_CLASSES`]) with the first `classes` of [`DEFAULT_DSCP`].
    ///
    /// Errors: [`SchedError::InvalidParameter`] naming a count of 0 or above 8.
    pub fn new(classes: u8) -> Result<Self, SchedError> {
        if classes == 0 || classes > MAX_CLASSES {
            return Err(SchedError::InvalidParameter {
                name: "traffic classes (1..=8)",
                value: u64::from(classes),
            });
        }
        Self::with_dscp(DEFAULT_DSCP[..usize::from(classes)].to_vec())
    }

    /// One class per entry of `dscp`, class 0 (highest priority) first: 1..=8 distinct code
    /// points, each 0..=[`DSCP_MAX`].
    ///
    /// Errors: [`SchedError::InvalidParameter`] naming the count, a DSCP above 63 or one listed
    /// twice.
    pub fn with_dscp(dscp: Vec<u8>) -> Result<Self, SchedError> {
        if dscp.is_empty() || dscp.len() > usize::from(MAX_CLASSES) {
            return Err(SchedError::InvalidParameter {
                name: "traffic classes (1..=8 DSCPs)",
                value: dscp.len() as u64,
            });
        }
        if let Some(&d) = dscp.iter().find(|&&d| d > DSCP_MAX) {
            return Err(SchedError::InvalidParameter {
                name: "DSCP of a traffic class (0..=63)",
                value: u64::from(d),
            });
        }
        let mut sorted = dscp.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(SchedError::InvalidParameter {
                name: "DSCP given to two traffic classes",
                value: u64::from(w[0]),
            });
        }
        Ok(TrafficClasses {
            dscp,
            kept: BTreeMap::new(),
        })
    }

    /// The number of classes, `N`.
    pub fn classes(&self) -> u8 {
        // At most MAX_CLASSES entries (checked at construction).
        self.dscp.len() as u8
    }

    /// The DSCP of `class` (`None` beyond the last class).
    pub fn dscp(&self, class: u8) -> Option<u8> {
        self.dscp.get(usize::from(class)).copied()
    }

    /// The class `job` got at the last [`TrafficClasses::assign`], if it was listed.
    pub fn class_of(&self, job: JobKey) -> Option<u8> {
        self.kept.get(&job).map(|k| k.class)
    }

    /// Forgets every job's class (the next assignment starts fresh).
    pub fn reset(&mut self) {
        self.kept.clear();
    }

    /// Assigns this slot's classes (the rule of the module documentation) to `jobs`: each job
    /// once, with its rank (lower first, ties by job) and links. Returns (job, class, DSCP) in
    /// rank order; jobs not listed are forgotten.
    ///
    /// Errors: [`SchedError::InvalidParameter`] naming a job listed twice (the state is then
    /// unchanged).
    pub fn assign(&mut self, jobs: &[RankedJob]) -> Result<Vec<JobClass>, SchedError> {
        self.assign_jobs(jobs, false)
    }

    /// [`TrafficClasses::assign`] for part of the slot's jobs, keeping every unlisted job's
    /// class and state: `jobs` must be whole link-connected components of the slot's jobs (every
    /// job that shares a link with a listed one, directly or through others, is listed). A
    /// job's class depends only on its component (its neighbours, their classes and its own
    /// state), so assigning the components that changed and keeping the others gives what one
    /// [`TrafficClasses::assign`] of all the slot's jobs would, provided the jobs that left
    /// are forgotten ([`TrafficClasses::forget`]). For a caller that re-decides only the components a
    /// change reaches (the simulator's burst-ranked priorities, `mlcc-sim`'s `policy::priority`).
    ///
    /// Errors: those of [`TrafficClasses::assign`] (the state is then unchanged).
    pub fn assign_part(&mut self, jobs: &[RankedJob]) -> Result<Vec<JobClass>, SchedError> {
        self.assign_jobs(jobs, true)
    }

    /// Forgets `job`'s class and state (it has left the slot's jobs: the next assignment that
    /// lists it starts it fresh, as [`TrafficClasses::assign`] does for a job it was not given).
    pub fn forget(&mut self, job: JobKey) {
        self.kept.remove(&job);
    }

    /// The rule of the module documentation over `jobs`; the other jobs' state is kept
    /// (`keep_unlisted`) or forgotten.
    fn assign_jobs(
        &mut self,
        jobs: &[RankedJob],
        keep_unlisted: bool,
    ) -> Result<Vec<JobClass>, SchedError> {
        let order = rank_ascending(jobs.iter().map(|j| (j.job, j.rank)))?;
        let pos: HashMap<JobKey, usize> = order
            .iter()
            .enumerate()
            .map(|(i, (job, _))| (*job, i))
            .collect();
        // Per link, the positions (in rank order) of the jobs on it.
        let mut on_link: HashMap<LinkId, Vec<usize>> = HashMap::new();
        for j in jobs {
            let p = pos[&j.job];
            for l in &j.links {
                on_link.entry(*l).or_default().push(p);
            }
        }
        let mut neighbours: Vec<Vec<usize>> = vec![Vec::new(); order.len()];
        for ps in on_link.values_mut() {
            ps.sort_unstable();
            ps.dedup();
            for &p in ps.iter() {
                neighbours[p].extend(ps.iter().copied());
            }
        }
        let last = self.classes().saturating_sub(1);
        let mut class = vec![0u8; order.len()];
        let mut kept = BTreeMap::new();
        let mut out = Vec::with_capacity(order.len());
        for (p, (job, _)) in order.iter().enumerate() {
            let nb = &mut neighbours[p];
            nb.push(p);
            nb.sort_unstable();
            nb.dedup();
            // Neighbours ranked above come first in rank order and are assigned already.
            let floor = nb.iter().take_while(|&&q| q < p).map(|&q| class[q]).max();
            let want = floor.map_or(0, |f| f.saturating_add(1).min(last));
            let neighbourhood: Vec<JobKey> = nb.iter().map(|&q| order[q].0).collect();
            let keep = self.kept.get(job).and_then(|k| {
                let valid = k.class <= last
                    && floor.is_none_or(|f| k.class > f || (k.class == last && f == last));
                (valid && k.neighbourhood == neighbourhood).then_some(k.class)
            });
            let c = keep.unwrap_or(want);
            class[p] = c;
            out.push(JobClass {
                job: *job,
                class: c,
                dscp: self.dscp(c).unwrap_or(0),
            });
            kept.insert(
                *job,
                Kept {
                    class: c,
                    neighbourhood,
                },
            );
        }
        if keep_unlisted {
            self.kept.extend(kept);
        } else {
            self.kept = kept;
        }
        Ok(out)
    }
}

/// The policy's job order in `decisions` as [`RankedJob`]s for [`TrafficClasses::assign`]: a
/// job's rank is the planning position of its first group (under [`super::Rules::Priority`] and
/// [`super::Rules::Interleave`] that is the order of [`super::PolicyOptions::job_rank`]; under
/// [`super::Rules::Mlcc`], the paper's planning order), its links those of its decided flows
/// in `snapshot`. Only jobs with a decided flow are listed.
pub fn job_order(decisions: &Decisions, snapshot: &Snapshot) -> Vec<RankedJob> {
    let paths: HashMap<FlowId, &[LinkId]> = snapshot
        .flows
        .iter()
        .map(|f| (f.flow, f.path.as_slice()))
        .collect();
    let mut out: Vec<RankedJob> = Vec::new();
    let mut at: HashMap<JobKey, usize> = HashMap::new();
    for g in &decisions.groups {
        let i = *at.entry(g.job).or_insert_with(|| {
            out.push(RankedJob {
                job: g.job,
                rank: out.len() as u64,
                links: Vec::new(),
            });
            out.len() - 1
        });
        for f in &g.flows {
            if let Some(p) = paths.get(f) {
                out[i].links.extend_from_slice(p);
            }
        }
    }
    for j in &mut out {
        j.links.sort_unstable();
        j.links.dedup();
    }
    out
}

impl Decisions {
    /// Gives every decided flow the class of its job ([`super::GroupOutcome::classes`]; a job
    /// missing from `classes` leaves its groups' classes empty).
    pub fn set_classes(&mut self, classes: &[JobClass]) {
        let by_job: HashMap<JobKey, u8> = classes.iter().map(|c| (c.job, c.class)).collect();
        for g in &mut self.groups {
            g.classes = match by_job.get(&g.job) {
                Some(&c) => vec![c; g.flows.len()],
                None => Vec::new(),
            };
        }
    }

    /// The traffic class of `flow` (0 highest), if it was decided and classes were set
    /// ([`Decisions::set_classes`], [`super::decide_with_classes`]).
    pub fn class(&self, flow: FlowId) -> Option<u8> {
        self.groups.iter().find_map(|g| {
            let i = g.flows.iter().position(|f| *f == flow)?;
            g.classes.get(i).copied()
        })
    }
}
