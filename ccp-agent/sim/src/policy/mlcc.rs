// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Our scheduler: the agent's scheduling library (`mlcc-sched`) run as the mlcc paper's Sec. IV–V
//! describe, with switch load tables ("Dynamic Flow Scheduling for DNN Training Workloads in
//! Data Centers"). Nothing of the algorithm is here: this module only feeds the library. Its
//! planning rules (groups, dependencies, order, cuts, rates) are the policy layer's,
//! [`mlcc_sched::policy::decide`], called with a snapshot of the units to plan (the same entry
//! point the agent is to call); what stays here is the simulator's plan reuse, rolling plans
//! forward and pacing finishing units (speed-only shortcuts, off with `--exact`). The same
//! module runs `mlcc-il` (the layer's `Rules::Interleave`, job ranks from
//! [`mlcc_sched::rank_jobs`], spare sharing), see [`Mlcc::options`].
//!
//! - Time is slotted (default 60 ms, K = 10 slots, the paper's values, [`SlotClock`]). One
//!   [`LinkLoadTable`] holds every link of the tree: the switches' load tables put together (a
//!   path's view sums its links' rows, whichever switch owns them).
//! - At each slot boundary the table advances and every job's flows are planned as coflow
//!   groups by [`mlcc_sched::plan_group`] (Alg. 1 + Alg. 2 generalised to a group, `mlcc_sched::coflow`:
//!   the members advance by the same fraction of their bytes left per slot, Varys's MADD, and
//!   finish together; the schedules published to the table so later groups see them): a ring
//!   job's flows as one group (the pipelined ring needs all of them to progress together; a
//!   member whose predecessor is not planned now depends on its F plus one chunk); per PS, its
//!   aggregation group (F_b^max of its broadcast flows), then its broadcast group, cut by
//!   [`mlcc_sched::apply_group_reduction`] to the aggregation group's least F (F_a^min), so the broadcast
//!   pipelines behind the aggregation. Coflow units (a ring; a PS's two groups) go in the
//!   order of [`mlcc_sched::planning_key`], as in the agent: further into the iteration first, then
//!   smallest effective bottleneck first (Varys's SEBF, [`mlcc_sched::group_bottleneck_us`] at link
//!   capacity; ties by job and PS). Planned one flow at a time before, Alg. 1 gave a PS's downlink to one push
//!   for several slots: 1 PS job with 2 workers took 20.96 s against fair's 15.0
//!   (`examples/cases.rs`; now 15.0).
//! - A flow that starts inside a slot (its compute phase ended) is planned at once against the
//!   table, as the agent does when the progress interface announces a burst; the others keep their
//!   slot rates. A finished flow's schedule is taken off the table.
//! - The rate decided for the slot is the flow's cap (the CCP datapath enforces it as its pacing
//!   rate); nothing else is shared: a flow that finishes early leaves its bandwidth idle until the
//!   next slot, as a slotted scheduler does. A flow whose plan completes it in the current slot
//!   is paced at its MADD share of the available bandwidth rather than at bytes/slot:
//!   Alg. 1 fills slots "with the largest feasible rate", so its last bytes are not stretched
//!   to the slot's end (before this, one job alone took 20-33 % longer per iteration under mlcc
//!   than under any other policy, `examples/cases.rs`).
//! - No non-ML traffic is simulated, so no rate samples are recorded: each link's estimate is its
//!   capacity ([`LinkLoadTable::estimate_bps`]).
//!
//! - Plan reuse (documented approximation; [`Mlcc::exact`] turns it off): exact mode plans
//!   every unit at every slot boundary (the engine's whole-cluster decision at every change).
//!   By default the policy decides sparsely ([`Policy::is_sparse`]) and a unit is re-planned at
//!   a slot boundary only when something it was planned against changed (`Replan` names the
//!   cases; `replan_reasons` in the report counts them): it has no whole plan (new, or planned
//!   in part inside a slot), one of its network flows started or ended, a network member's
//!   bytes sent differ from its plan by more than [`REUSE_SLACK_BYTES`] plus what one engine
//!   step at a late slot start can move, bandwidth was freed on one of its network links in a
//!   later slot by at least an MTU (another unit re-planned to less, or a flow left the table
//!   with load still planned; at a slot boundary the new slot counts too), a member's plan
//!   has run out with the flow not done (`ran_out`), some network members' plans complete in
//!   the new slot while others' run on (`completing`), or its plan does not complete within
//!   the horizon and is half a horizon old while another job crosses its links (its bytes past
//!   the horizon are not booked until then; by default such a plan is rolled forward instead
//!   when nothing else asks for a re-plan, see below). A member such an incomplete plan
//!   holds at nothing (its links booked by others over the whole horizon) waits under that
//!   rule like its partners, rather than being re-planned at every slot. Otherwise it
//!   keeps the plan it published (still in the table, which only advanced) and each member
//!   takes its plan's rate for the new slot: in the simulator the bandwidth is known, so a plan
//!   that was feasible stays feasible and the flows carry what it says. A unit planned whole
//!   inside a slot (its iteration starts) keeps that plan, counted from the rest of the slot.
//!   Flows inside a server are planned with their group but, not being paced by the plan, are
//!   left out of these checks. A unit whose links another unit changed *later in the same
//!   slot's order* is re-planned at the next slot, not in the same one. What the exact mode
//!   would do differently is then the greedy's choices over the slots that join the horizon,
//!   Alg. 2's corrections for dependency deltas that moved while every flow kept to its plan,
//!   and reactions to load added (not freed) on its links. The error against `exact` is
//!   measured in docs/results/simulator.md (and bounded on small clusters in `tests/approx.rs`).
//! - Finishing without a re-plan (documented approximation, part of plan reuse): a unit that
//!   may keep its plan and whose plan completes every network member in the new slot is not
//!   re-planned; each member is paced at its group's MADD share of the slot's available
//!   bandwidth, [`group_share_now_bps`] (the library's `share_now_bps` of the same group,
//!   without planning), by the library's [`mlcc_sched::pacing_rate_bps`], as the group's
//!   re-plan paces it when its bytes left fit in the slot. What the re-plan would do
//!   differently: book the bytes actually left in the table rather than the plan's (they differ
//!   by at most the progress slack), apply Alg. 2's raise and cut (every member completes in
//!   the slot, so the group's dependencies are met but for that slack), and, if load was added
//!   on its links since it was planned, move bytes to the next slot. Counted in the report as
//!   `unit_plans_kept_finishing` (also in `unit_plans_kept`).
//! - Rolling incomplete plans forward (documented approximation, part of plan reuse; the
//!   CLI's `--no-extend` re-plans instead, as before): when the incomplete-plan rule above
//!   comes due and nothing else asks for a re-plan, the unit's plan is rolled forward by
//!   [`extend_group`], per group: the members keep their bytes in the plan's slots still in
//!   the horizon, and the slots that joined the horizon since get Alg. 1's fill against the
//!   table (every such slot filled as far as the links allow). That is what the re-plan gives
//!   while the group stays incomplete and nothing it was planned against changed (the kept
//!   slots' free capacity is what the group holds there, and MADD keeps the bound of each link
//!   as it was; `extend_group`'s tests compare the two). A group held at nothing in every kept
//!   slot is rolled forward also when it then completes (Alg. 1 cannot use those slots). A
//!   group that would complete otherwise is re-planned (Alg. 1's choice of its completion slot
//!   spans the whole horizon). What the re-plan would do differently: Alg. 2's raise and the
//!   receivers' cuts in the current slot, and the rounding of members' bytes (a byte per
//!   slot). With plans rolled forward, a member of an incomplete plan with nothing planned in
//!   a slot (its links booked by others there) is held at nothing like the waiting members
//!   above rather than counted as run out. Counted in the report as `unit_plans_extended`
//!   (also in `unit_plans_kept`).
//!
//! Besides the engine's per-decision time, each group decision (plan + reduction) is timed and
//! counted per member (its time over its member count): that
//! is the paper's "scheduling computation latency" (Sec. VII-B, Fig. 15).

use std::cell::Cell;
use std::time::Instant;

use std::collections::HashMap;

use mlcc_sched::policy::{self, group_phase, GroupPhase};
use mlcc_sched::{
    extend_group, group_share_now_bps, pacing_rate_bps, rank_jobs, Dependency, FlowId,
    FlowProgress, FlowRequest, FlowRole, FlowState, JobKey, LinkId, LinkLoadTable, PolicyOptions,
    Rules, SlotClock, Snapshot, UnitKind,
};
use serde_json::{json, Value};
use smallvec::SmallVec;

use super::{Control, Policy};
use crate::error::SimError;
use crate::sim::{Phase, Sim, TimeHist};
use crate::workload::Paradigm;

/// Plan reuse: the most a flow's bytes sent may differ from what its kept plan says by a slot
/// boundary, bytes (one MTU). Flows that keep to their rates differ by less than a byte per
/// slot (rates are rounded up to whole bit/s).
pub const REUSE_SLACK_BYTES: f64 = 1500.0;

/// True for a flow between two GPUs of one server (not paced by any plan, see `crate::sim`).
fn flow_is_internal(sim: &Sim, j: usize, f: usize) -> bool {
    let fl = &sim.jobs[j].flows[f];
    fl.src == fl.dst
}

/// Most members kept in the pool of reusable buffers.
const MEMBER_POOL_MAX: usize = 1 << 16;

/// A job found at a slot boundary to need no look ([`Mlcc::still_keeps`]).
#[derive(Clone, Copy, Debug)]
struct Verified {
    /// The slot.
    slot: u64,
    /// [`crate::sim::Job::rate_writes`] then.
    rate_writes: u64,
    /// `Mlcc::seq` then.
    seq: u64,
}

/// Slots of a member's plan held inside the member (the paper's horizon, K = 10; a longer
/// horizon spills to the heap).
const MEMBER_INLINE_SLOTS: usize = 10;

/// No rate decided (the flow is not planned).
const NO_RATE: u64 = u64::MAX;

/// One member of a kept unit plan.
#[derive(Clone, Debug)]
struct Member {
    /// Flow index in its job.
    f: usize,
    /// Bytes it had sent when planned.
    sent0: f64,
    /// Fraction of the plan's first slot left when it was planned (1 at a slot boundary; a
    /// flow that starts inside a slot sends its first slot's rate only for the rest of it).
    first: f64,
    /// Bytes and rates (bit/s; slot 0: the pacing rate given) per slot from the plan's slot,
    /// inside the member up to [`MEMBER_INLINE_SLOTS`] slots: the checks of kept plans at every
    /// slot boundary read them for every member, and in buffers of their own each was a cache
    /// miss (~8 % of the default run's late phase, perf).
    bytes: SmallVec<[u64; MEMBER_INLINE_SLOTS]>,
    rates: SmallVec<[u64; MEMBER_INLINE_SLOTS]>,
    /// `rates[0]`, and the first offset at which `rates` changes (its length if never): read
    /// at every slot boundary without touching `rates`.
    rate0: u64,
    change: usize,
    /// The last offset with bytes planned (`None`: nothing planned).
    last: Option<usize>,
}

/// Why a unit is re-planned at a slot boundary (plan reuse statistics).
#[derive(Clone, Copy, Debug)]
enum Replan {
    /// It has no whole plan (new, or planned in part inside the slot).
    NoPlan,
    /// Its plan does not complete within the horizon and is half a horizon old.
    Incomplete,
    /// A flow of it started or ended.
    Members,
    /// Some network members' plans complete in this slot while others' run on (the group's
    /// joint re-plan decides).
    Completing,
    /// A member's bytes sent differ from its plan by more than [`REUSE_SLACK_BYTES`].
    Progress,
    /// Bandwidth was freed on one of its links in a later slot.
    Freed,
    /// A member's plan ended before this slot (or planned nothing) with the flow not done.
    RanOut,
}

/// Names of [`Replan`]'s cases, in order (report).
const REPLAN_NAMES: [&str; 7] = [
    "no_plan",
    "incomplete",
    "members",
    "completing",
    "progress",
    "freed",
    "ran_out",
];

/// How a unit keeps its plan at a slot boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keep {
    /// Its members take the plan's rates for the slot.
    Runs,
    /// Every network member's plan completes it in the slot: paced at its MADD share
    /// ([`Mlcc::pace_finishing`]).
    Finishing,
    /// Incomplete and half a horizon old (a whole one when no other job crosses its links):
    /// rolled forward ([`Mlcc::extend_unit`]), or re-planned when the roll finds the unit would
    /// complete within the horizon.
    Extend,
}

/// Where a member of a kept plan stands in a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    /// Its plan has bytes for it after the slot, or holds it at nothing while the plan does
    /// not complete within the horizon (links booked by others: it waits, as a re-plan of
    /// the same load would have it wait, until the plan is re-planned for its age or freed
    /// bandwidth).
    Runs,
    /// Its plan's last bytes are in the slot.
    Finishes,
    /// Its plan ended before the slot, or planned nothing although it completes.
    Ended,
}

/// Where member `m` of plan `up` stands at offset `o` from the plan's slot.
fn member_at(up: &UnitPlan, m: &Member, o: usize) -> At {
    // Rolling plans forward: a member of an incomplete plan with nothing planned in a slot is
    // held at nothing there by its links' bookings (its bytes are not all planned), as a
    // member with nothing planned at all is below, until the plan is rolled forward (at the
    // latest when it is a whole horizon old, past its last slot).
    if up.hold && !up.complete {
        return At::Runs;
    }
    match m.last {
        Some(last) if last > o => At::Runs,
        Some(last) if last == o => At::Finishes,
        Some(_) => At::Ended,
        None if !up.complete && o < m.bytes.len() => At::Runs,
        None => At::Ended,
    }
}

/// A coflow unit's plan, kept across slots while nothing it depends on changes.
#[derive(Clone, Debug)]
struct UnitPlan {
    /// Slot it was planned in.
    slot0: u64,
    /// The first offset from `slot0` (at least 1) at which a network member's plan stops
    /// holding it ([`member_at`] other than `Runs`, or past its plan), and the offsets at which
    /// a network member's planned rate changes (bit o; `None` for a horizon past 64 slots, then
    /// the members' rates are compared): read at every slot boundary ([`Mlcc::needs_look`])
    /// without touching the members' plans.
    end_at: usize,
    changes: Option<u64>,
    /// Link-change counter after its own schedules were published.
    seq: u64,
    /// Every member's plan completes within the horizon.
    complete: bool,
    /// Made with plans rolled forward ([`Mlcc::extend`]): if incomplete, its members are held
    /// at nothing in slots their plan leaves empty ([`member_at`]).
    hold: bool,
    members: Vec<Member>,
}

impl UnitPlan {
    /// A plan of `members` made in `slot0`, with `end_at` and `changes` computed (flows inside
    /// a server, by `internal`, left out).
    fn new(
        slot0: u64,
        seq: u64,
        complete: bool,
        hold: bool,
        members: Vec<Member>,
        internal: impl Fn(usize) -> bool,
    ) -> UnitPlan {
        let mut up = UnitPlan {
            slot0,
            end_at: usize::MAX,
            changes: Some(0),
            seq,
            complete,
            hold,
            members,
        };
        for m in up.members.iter().filter(|m| !internal(m.f)) {
            let len = m.rates.len();
            let end = (1..len)
                .find(|&o| member_at(&up, m, o) != At::Runs)
                .unwrap_or(len);
            up.end_at = up.end_at.min(end.max(1));
            for o in 1..len {
                if m.rates[o] != m.rates[o - 1] {
                    up.changes = up.changes.and_then(|c| (o < 64).then(|| c | (1u64 << o)));
                }
            }
        }
        up
    }
}

/// Plan-reuse state of a job.
#[derive(Clone, Debug, Default)]
struct JobPlan {
    units: Vec<Option<UnitPlan>>,
    /// Look at its units at the next slot boundary (an event touched it).
    look: bool,
}

/// The mlcc scheduler over switch load tables.
pub struct Mlcc {
    clock: SlotClock,
    table: LinkLoadTable,
    slot: Option<u64>,
    /// Current slot rate of each planned flow, bit/s, by the engine's allocation id
    /// (`Job::flow_base` + flow index; `NO_RATE`: not planned).
    rates: Vec<u64>,
    /// Allocation ids (and table ids) of the flows with a rate (compacted now and then), and
    /// its length after the last compaction.
    planned: Vec<(usize, u64)>,
    planned_kept: usize,
    /// Liveness marks by allocation id (whole-cluster decisions).
    live_mark: Vec<u32>,
    stamp: u32,
    /// Re-plan every unit at every slot (the reference) instead of reusing plans.
    pub exact: bool,
    /// The policy layer's rule set and options ([`policy::decide`]); under
    /// [`mlcc_sched::Rules::Interleave`] the job ranks are set at each call
    /// ([`mlcc_sched::rank_jobs`] of the jobs' iterations left times their iteration time alone).
    pub options: PolicyOptions,
    /// Its name in tables and files.
    pub name: String,
    /// Plan reuse: per job, its units' kept plans; the jobs holding one; per link, the value
    /// of `seq` when a schedule on it last changed.
    plans: Vec<JobPlan>,
    live: Vec<usize>,
    in_live: Vec<bool>,
    link_seq: Vec<u64>,
    seq: u64,
    /// Members of the unit being planned (scratch).
    unit_members: Vec<Member>,
    /// Jobs placed plus jobs finished (the placements `Sim::link_jobs` reflects), and per job
    /// whether another job crosses its network links, with that count plus one when known.
    placements: u64,
    shared: Vec<Cell<(u64, bool)>>,
    /// Members of forgotten plans, and the emptied lists that held them, their buffers reused
    /// (at most [`MEMBER_POOL_MAX`] of each).
    member_pool: Vec<Member>,
    member_vecs: Vec<Vec<Member>>,
    /// Requests of the group being planned (scratch; their path buffers reused).
    req_buf: Vec<FlowRequest>,
    unit_complete: bool,
    /// A slot boundary's decision is under way.
    at_boundary: bool,
    /// Unit plans made, and unit-slots that kept their plan (plan reuse).
    pub unit_plans: u64,
    /// See `unit_plans`.
    pub unit_kept: u64,
    /// Kept unit-slots (counted in `unit_kept`) in which the plan completes every network
    /// member, paced at its MADD share without a re-plan (see the module documentation).
    pub finish_paced: u64,
    /// Roll incomplete plans forward instead of re-planning them (`Mlcc::extend_unit`; on
    /// by default, off with the CLI's `--no-extend`, unused in exact mode).
    pub extend: bool,
    /// Kept unit-slots (counted in `unit_kept`) in which an incomplete plan was rolled forward.
    pub extended: u64,
    /// Re-plans at slot boundaries by reason ([`REPLAN_NAMES`]).
    replan_reasons: [u64; 7],
    /// Per job (sized at placement), the last slot boundary at which it was found to need no
    /// look, unless it was decided since ([`Mlcc::still_keeps`]).
    verified: Vec<Option<Verified>>,
    /// Per job (sized at placement), the value of `seq` when a link it crosses last changed
    /// (0: never).
    job_link_seq: Vec<u64>,
    /// Per-flow decision times.
    pub flow_decisions: TimeHist,
    /// Refusals of the library (should stay 0).
    pub refusals: u64,
}

fn flow_id(j: usize, f: usize) -> u64 {
    ((j as u64) << 24) | f as u64
}

/// The flow index of a table id.
fn flow_of(id: u64) -> usize {
    (id & 0xFF_FFFF) as usize
}

impl Mlcc {
    /// A scheduler with slots of `slot_us` µs and horizon `k` over the links of `sim`'s tree;
    /// `exact`: re-plan every unit at every slot (no plan reuse).
    pub fn new(sim_links: &[f64], slot_us: u64, k: usize, exact: bool) -> Result<Mlcc, SimError> {
        let clock = SlotClock::new(slot_us, k).map_err(|e| SimError::Config(e.to_string()))?;
        let mut table = LinkLoadTable::new(clock, 0);
        for (l, c) in sim_links.iter().enumerate() {
            table
                .add_link(LinkId(l as u32), (c * 8.0) as u64)
                .map_err(|e| SimError::Config(format!("link {l}: {e}")))?;
        }
        Ok(Mlcc {
            clock,
            table,
            slot: None,
            rates: Vec::new(),
            planned: Vec::new(),
            planned_kept: 0,
            live_mark: Vec::new(),
            stamp: 0,
            exact,
            options: PolicyOptions::default(),
            name: "mlcc".into(),

            plans: Vec::new(),
            live: Vec::new(),
            in_live: Vec::new(),
            link_seq: vec![0; sim_links.len()],
            seq: 0,
            unit_members: Vec::new(),
            placements: 0,
            shared: Vec::new(),
            member_pool: Vec::new(),
            member_vecs: Vec::new(),
            req_buf: Vec::new(),
            unit_complete: true,
            at_boundary: false,
            unit_plans: 0,
            unit_kept: 0,
            finish_paced: 0,
            extend: true,
            extended: 0,
            replan_reasons: [0; 7],
            flow_decisions: TimeHist::default(),
            verified: Vec::new(),
            job_link_seq: Vec::new(),
            refusals: 0,
        })
    }

    fn rate(&self, sim: &Sim, j: usize, f: usize) -> u64 {
        self.rates
            .get(sim.jobs[j].flow_base as usize + f)
            .copied()
            .unwrap_or(NO_RATE)
    }

    fn set_rate(&mut self, sim: &Sim, j: usize, f: usize, r: u64) {
        let aid = sim.jobs[j].flow_base as usize + f;
        if self.rates.len() <= aid {
            self.rates.resize(aid + 1, NO_RATE);
        }
        if self.rates[aid] == NO_RATE {
            self.planned.push((aid, flow_id(j, f)));
        }
        self.rates[aid] = r;
    }

    /// Records that the load of `path`'s links changed (plan reuse), on the links and on the
    /// jobs crossing them ([`Mlcc::job_link_seq`]).
    fn links_changed(&mut self, sim: &Sim, path: &[LinkId]) {
        self.seq += 1;
        for l in path {
            if let Some(s) = self.link_seq.get_mut(l.0 as usize) {
                *s = self.seq;
            }
            for &x in sim
                .link_jobs
                .get(l.0 as usize)
                .map_or(&[][..], Vec::as_slice)
            {
                if let Some(s) = self.job_link_seq.get_mut(x) {
                    *s = self.seq;
                }
            }
        }
    }

    /// [`Mlcc::links_changed`] on the path of flow `f` of job `j`.
    fn flow_links_changed(&mut self, sim: &Sim, j: usize, f: usize) {
        let path: Vec<LinkId> = sim.jobs[j].flows[f]
            .path
            .iter()
            .map(|l| LinkId(*l))
            .collect();
        self.links_changed(sim, &path);
    }

    /// Whether the load of a link of `path` (a network member's of kept plan `up` of job `j`)
    /// changed since the plan was made. The links are looked at only when a link job `j`
    /// crosses changed since (every link a flow of the job crosses lists the job in
    /// `Sim::link_jobs`).
    fn path_changed(&self, j: usize, up: &UnitPlan, path: &[u32]) -> bool {
        self.job_link_seq.get(j).is_some_and(|s| *s > up.seq)
            && path
                .iter()
                .any(|l| self.link_seq.get(*l as usize).is_some_and(|s| *s > up.seq))
    }

    /// Takes flow `f` of job `j` off the table and forgets its rate.
    fn drop_flow(&mut self, sim: &Sim, j: usize, f: usize) {
        let aid = sim.jobs[j].flow_base as usize + f;
        if let Some(r) = self.rates.get_mut(aid) {
            *r = NO_RATE;
        }
        if let Ok(old) = self.table.remove_flow(FlowId(flow_id(j, f))) {
            // Bandwidth freed in the current slot matters to the units still to decide in it
            // only at a slot boundary (flows leaving then are dropped before any unit keeps its
            // plan); inside a slot only later slots count.
            let from = self.table.current_slot() + u64::from(!self.at_boundary);
            let internal = flow_is_internal(sim, j, f);
            if !self.exact
                && !internal
                && old
                    .rates_bps
                    .iter()
                    .enumerate()
                    .any(|(i, r)| *r > 0 && old.start_slot + i as u64 >= from)
            {
                self.flow_links_changed(sim, j, f);
            }
        }
    }

    /// The active network flows of `jobs` (in job order) without a rate, sorted.
    fn unplanned(&self, sim: &Sim, jobs: &[usize]) -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = Vec::new();
        for &j in jobs {
            for (f, fl) in sim.jobs[j].flows.iter().enumerate() {
                if !fl.done && fl.src != fl.dst && self.rate(sim, j, f) == NO_RATE {
                    v.push((j, f));
                }
            }
        }
        v.sort_unstable();
        v
    }

    /// Keeps in `planned` only the flows with a rate.
    fn compact_planned(&mut self) {
        let rates = &self.rates;
        self.planned.retain(|(aid, _)| rates[*aid] != NO_RATE);
        self.planned_kept = self.planned.len();
    }

    /// Fills the front of `buf` with the requests of the flows `fs` of job `j` (each with its
    /// dependency), reusing the entries' path buffers; returns how many it filled.
    fn requests_into(
        buf: &mut Vec<FlowRequest>,
        sim: &Sim,
        j: usize,
        fs: impl IntoIterator<Item = (usize, Dependency)>,
    ) -> usize {
        let mut n = 0;
        for (f, dependency) in fs {
            let fl = &sim.jobs[j].flows[f];
            if n == buf.len() {
                buf.push(FlowRequest {
                    flow: FlowId(0),
                    path: Vec::new(),
                    progress: FlowProgress::default(),
                    dependency,
                });
            }
            let r = &mut buf[n];
            r.flow = FlowId(flow_id(j, f));
            r.path.clear();
            r.path.extend(fl.path.iter().map(|l| LinkId(*l)));
            r.progress = FlowProgress {
                sent_bytes: fl.sent as u64,
                remaining_bytes: (fl.size - fl.sent).max(0.0).ceil() as u64,
            };
            r.dependency = dependency;
            n += 1;
        }
        n
    }

    /// Moves the members of unit `u` of job `j`'s kept plan, if any, to the pool (their
    /// buffers are reused by [`Mlcc::record`]) and forgets the plan.
    fn recycle(&mut self, j: usize, u: usize) {
        if let Some(up) = self
            .plans
            .get_mut(j)
            .and_then(|p| p.units.get_mut(u))
            .and_then(Option::take)
        {
            self.give_back(up.members);
        }
    }

    /// Moves `members` and the list that holds them to the pools (each up to
    /// [`MEMBER_POOL_MAX`]), their buffers to be reused.
    fn give_back(&mut self, mut members: Vec<Member>) {
        if self.member_pool.len() < MEMBER_POOL_MAX {
            self.member_pool.append(&mut members);
            if self.member_vecs.len() < MEMBER_POOL_MAX {
                self.member_vecs.push(members);
            }
        }
    }

    /// A member of a kept plan for flow `f` (its buffers from the pool): `sent0` bytes sent and
    /// the fraction `first` of the slot left when planned, its plan's `bytes` and `rates` per
    /// slot with `rate_now` the rate given in the first.
    fn member(
        &mut self,
        f: usize,
        sent0: f64,
        first: f64,
        bytes: &[u64],
        rates: impl IntoIterator<Item = u64>,
        rate_now: u64,
    ) -> Member {
        let mut m = self.member_pool.pop().unwrap_or(Member {
            f,
            sent0,
            first,
            bytes: SmallVec::new(),
            rates: SmallVec::new(),
            rate0: 0,
            change: 0,
            last: None,
        });
        m.f = f;
        m.sent0 = sent0;
        m.first = first;
        m.bytes.clear();
        m.bytes.extend_from_slice(bytes);
        m.rates.clear();
        m.rates.extend(rates);
        if let Some(r0) = m.rates.first_mut() {
            *r0 = rate_now;
        }
        m.rate0 = m.rates.first().copied().unwrap_or(0);
        m.last = m.bytes.iter().rposition(|b| *b > 0);
        m.change = (1..m.rates.len())
            .find(|&o| m.rates[o] != m.rates[o - 1])
            .unwrap_or(m.rates.len());
        m
    }

    /// The snapshot entry of flow `f` of job `j` for the policy layer: its role, path and
    /// progress (F: bytes sent, all of them once done); `decide`: plan it now.
    fn state(sim: &Sim, j: usize, f: usize, decide: bool) -> FlowState {
        let fl = &sim.jobs[j].flows[f];
        let progress = if fl.done {
            FlowProgress {
                sent_bytes: fl.size.round() as u64,
                remaining_bytes: 0,
            }
        } else {
            FlowProgress {
                sent_bytes: fl.sent as u64,
                remaining_bytes: (fl.size - fl.sent).max(0.0).ceil() as u64,
            }
        };
        FlowState {
            flow: FlowId(flow_id(j, f)),
            job: JobKey(j as u64),
            role: Self::state_role(sim, j, f),
            path: fl.path.iter().map(|l| LinkId(*l)).collect(),
            progress,
            iteration_bytes: fl.size as u64,
            decide,
        }
    }

    /// The role of flow `f` of job `j` in the policy layer's terms.
    fn state_role(sim: &Sim, j: usize, f: usize) -> FlowRole {
        let job = &sim.jobs[j];
        match job.flows[f].role {
            crate::sim::FlowRole::Ring { pred } => FlowRole::RingSend {
                predecessor: Some(FlowId(flow_id(j, pred))),
                chunk_bytes: job.chunk.max(0.0) as u64,
            },
            crate::sim::FlowRole::Push { ps } => FlowRole::PsPush { ps: ps as u32 },
            crate::sim::FlowRole::Pull { ps } => FlowRole::PsPull { ps: ps as u32 },
        }
    }

    /// Plans units `units` ((job, unit) pairs; their active flows that `todo` selects) in the
    /// current slot through the policy layer ([`policy::decide`]: groups, dependencies, order,
    /// cuts and rates are its rules), of which the fraction `first` is left; sets the rates and,
    /// with `keep`, keeps each unit's plan (a unit not planned whole, some of its active flows
    /// not selected, is forgotten again: planned in part inside a slot). The flows of the units'
    /// jobs that are not planned now are in the snapshot as context (their F bounds the others).
    /// Each flow's decision time is the call's time over the flows it planned.
    fn plan_units(
        &mut self,
        sim: &Sim,
        units: &[(usize, usize)],
        todo: &dyn Fn(usize, usize) -> bool,
        first: f64,
        keep: bool,
    ) {
        let mut jobs: Vec<usize> = units.iter().map(|&(j, _)| j).collect();
        jobs.sort_unstable();
        jobs.dedup();
        let mut snapshot = Snapshot {
            slot: self.table.current_slot(),
            flows: Vec::new(),
            min_rate_bps: 0,
        };
        for &j in &jobs {
            let job = &sim.jobs[j];
            let mut chosen = vec![false; job.flows.len()];
            for &(_, u) in units.iter().filter(|(k, _)| *k == j) {
                for f in Self::unit_flow_iter(sim, j, u) {
                    chosen[f] = !job.flows[f].done && todo(j, f);
                }
            }
            for (f, c) in chosen.iter().enumerate() {
                snapshot.flows.push(Self::state(sim, j, f, *c));
            }
        }
        // Plan reuse: the decided flows' schedules before, to tell whether their links' load
        // changed.
        let mut before: HashMap<u64, (u64, Vec<u64>)> = HashMap::new();
        if !self.exact {
            for s in snapshot.flows.iter().filter(|s| s.decide) {
                if let Some(x) = self.table.flow_schedule(s.flow) {
                    before.insert(s.flow.0, (x.start_slot, x.rates_bps.clone()));
                }
            }
        }
        if self.options.rules == Rules::Interleave {
            match rank_jobs(&super::job_work(sim, &jobs)) {
                Ok(r) => self.options.job_rank = r,
                Err(_) => self.refusals += 1,
            }
        }
        let t0 = Instant::now();
        let decisions = match policy::decide(&mut self.table, &snapshot, &self.options) {
            Ok(d) => d,
            Err(_) => {
                self.refusals += 1;
                return;
            }
        };
        let n: usize = decisions.groups.iter().map(|g| g.flows.len()).sum();
        let per_flow_us = t0.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64;
        for _ in 0..n {
            self.flow_decisions.add(per_flow_us);
        }
        let mut current: Option<(usize, usize)> = None;
        for g in &decisions.groups {
            let j = g.job.0 as usize;
            let u = match g.unit {
                UnitKind::Ps { ps } => ps as usize,
                UnitKind::Ring | UnitKind::Alone { .. } => 0,
            };
            if current != Some((j, u)) {
                if let Some((pj, pu)) = current {
                    self.keep_unit(sim, pj, pu, todo, keep);
                }
                current = Some((j, u));
                self.recycle(j, u);
                self.unit_members = self.member_vecs.pop().unwrap_or_default();
                self.unit_members.clear();
                self.unit_complete = true;
            }
            for (k, d) in g.decision.decisions.iter().enumerate() {
                let f = flow_of(g.flows[k].0);
                let r = g.rates_bps[k];
                self.set_rate(sim, j, f, r);
                if !self.exact {
                    let sent = sim.jobs[j].flows[f].sent;
                    let m = self.member(
                        f,
                        sent,
                        first,
                        &d.plan.bytes,
                        d.plan.rates_bps.iter().copied(),
                        r,
                    );
                    self.unit_complete &= d.plan.is_complete();
                    self.unit_members.push(m);
                }
            }
            if !self.exact {
                self.note_freed(sim, j, &g.flows, &before);
            }
        }
        if let Some((pj, pu)) = current {
            self.keep_unit(sim, pj, pu, todo, keep);
        }
        self.unit_members.clear();
    }

    /// Keeps the plan just made of unit `u` of job `j` (its members in `unit_members`), or
    /// forgets it when it is not to be kept or was planned in part.
    fn keep_unit(
        &mut self,
        sim: &Sim,
        j: usize,
        u: usize,
        todo: &dyn Fn(usize, usize) -> bool,
        keep: bool,
    ) {
        let members = std::mem::take(&mut self.unit_members);
        if !keep {
            self.give_back(members);
            return;
        }
        self.unit_plans += 1;
        let plan = UnitPlan::new(
            self.table.current_slot(),
            self.seq,
            self.unit_complete,
            self.extend,
            members,
            |f| flow_is_internal(sim, j, f),
        );
        if let Some(x) = self.plans.get_mut(j).and_then(|p| p.units.get_mut(u)) {
            *x = Some(plan);
        } else {
            self.give_back(plan.members);
            return;
        }
        let job = &sim.jobs[j];
        let whole = Self::unit_flow_iter(sim, j, u).all(|f| job.flows[f].done || todo(j, f));
        if !whole {
            self.recycle(j, u);
        }
    }

    /// Plan reuse: records that bandwidth was freed on a link of a network member of a group
    /// just planned (`flows`, of job `j`) in a later slot by at least an MTU, against its
    /// schedule `before` the plan.
    fn note_freed(
        &mut self,
        sim: &Sim,
        j: usize,
        flows: &[FlowId],
        before: &HashMap<u64, (u64, Vec<u64>)>,
    ) {
        for id in flows {
            let f = flow_of(id.0);
            if flow_is_internal(sim, j, f) {
                continue;
            }
            let slot = self.table.current_slot();
            let now = self.table.flow_schedule(*id);
            // Bandwidth freed in the current slot is of no use to plans made at the next slot
            // boundary: only later slots count, and only by at least one MTU in a slot (a rate
            // rounded by a few bit/s frees nothing a flow could send).
            let min_bps = self.clock.rate_bps_for_bytes(REUSE_SLACK_BYTES as u64);
            let freed = before.get(&id.0).is_some_and(|(start, rates)| {
                rates.iter().enumerate().any(|(i, r)| {
                    let s = start + i as u64;
                    s > slot && now.map_or(0, |n| n.rate_bps_at(s)).saturating_add(min_bps) <= *r
                })
            });
            if freed {
                self.flow_links_changed(sim, j, f);
            }
        }
    }

    /// The flows of coflow unit `u` of job `j` (ring: all; PS `u`: its pushes then its pulls),
    /// by the simulator's layout of a job's flows.
    fn unit_flow_iter(sim: &Sim, j: usize, u: usize) -> impl Iterator<Item = usize> {
        let job = &sim.jobs[j];
        let (first, second) = match job.spec.paradigm {
            Paradigm::Ring => (0..job.flows.len(), 0..0),
            // No flows (refused by Sim::new).
            Paradigm::Unknown => (0..0, 0..0),
            Paradigm::ParameterServer => {
                let w = job.spec.workers as usize;
                let p = job.spec.parameter_servers() as usize;
                (u * w..(u + 1) * w, p * w + u * w..p * w + (u + 1) * w)
            }
        };
        first.chain(second)
    }

    /// The units of `jobs` with an active flow that `todo` selects.
    fn units_of(
        sim: &Sim,
        jobs: &[usize],
        todo: &dyn Fn(usize, usize) -> bool,
    ) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for &j in jobs {
            let job = &sim.jobs[j];
            for u in 0..Self::unit_count(sim, j) {
                if Self::unit_flow_iter(sim, j, u).any(|f| !job.flows[f].done && todo(j, f)) {
                    out.push((j, u));
                }
            }
        }
        out
    }
}

/// Plan reuse.
impl Mlcc {
    /// Coflow units of job `j` (1 for a ring, one per PS).
    fn unit_count(sim: &Sim, j: usize) -> usize {
        let job = &sim.jobs[j];
        match job.spec.paradigm {
            Paradigm::Ring => 1,
            Paradigm::Unknown => 0,
            Paradigm::ParameterServer => job.spec.parameter_servers() as usize,
        }
    }

    /// Slots for which a plan of job `j` that does not complete within the horizon is kept:
    /// half the horizon when another job crosses one of its network links, so its schedule in
    /// the table always covers at least that many slots ahead (its bytes past the horizon are
    /// not booked until it is re-planned, and another unit could take those slots first); the
    /// whole horizon when no other job crosses them (nobody else books those links; it is then
    /// re-planned when its plan runs out).
    fn max_age_incomplete(&self, sim: &Sim, j: usize) -> u64 {
        let k = self.clock.horizon() as u64;
        // Cached per job until a job is placed or finishes (`Sim::link_jobs` changes only then).
        let shared = match self.shared.get(j).map(Cell::get) {
            Some((gen, shared)) if gen == self.placements + 1 => shared,
            _ => {
                let shared = sim.jobs[j]
                    .flows
                    .iter()
                    .filter(|fl| fl.src != fl.dst)
                    .any(|fl| {
                        fl.path
                            .iter()
                            .any(|&l| sim.link_jobs[l as usize].iter().any(|&x| x != j))
                    });
                if let Some(c) = self.shared.get(j) {
                    c.set((self.placements + 1, shared));
                }
                shared
            }
        };
        if shared {
            (k / 2).max(1)
        } else {
            k.max(1)
        }
    }

    /// Whether job `j` needs a look at the start of `slot` (its byte counts may be stale, its
    /// rates and phase are current): a unit to re-plan (no plan, flagged, incomplete, a link of
    /// it changed, a member done or not at the rate its plan gave it, or completing in `slot`)
    /// or a member whose planned rate changes in `slot`.
    fn needs_look(&self, sim: &Sim, j: usize, slot: u64) -> bool {
        let Some(p) = self.plans.get(j) else {
            return true;
        };
        if p.look || p.units.len() != Self::unit_count(sim, j) {
            return true;
        }
        let job = &sim.jobs[j];
        let max_age = self.max_age_incomplete(sim, j);
        for up in &p.units {
            let Some(up) = up else { return true };
            if Self::unit_due(up, slot, max_age) {
                return true;
            }
            let o = (slot - up.slot0) as usize;
            // Its network members (flows inside a server are not paced by the plan).
            for m in up.members.iter().filter(|m| !flow_is_internal(sim, j, m.f)) {
                let fl = &job.flows[m.f];
                if fl.done || (up.changes.is_none() && m.rates.get(o) != m.rates.get(o - 1)) {
                    return true;
                }
                // Its planned rate until now: `rate0` up to its first change.
                let prev = if o - 1 < m.change {
                    m.rate0
                } else {
                    m.rates.get(o - 1).copied().unwrap_or(0)
                } as f64
                    / 8.0;
                if (fl.rate - prev).abs() > 1e-9 * prev + 1e-6 {
                    return true;
                }
                if self.path_changed(j, up, &fl.path) {
                    return true;
                }
            }
        }
        false
    }

    /// Whether kept plan `up` is due for a look at the start of `slot` whatever its members did
    /// ([`Mlcc::needs_look`]): not made before `slot`, incomplete and `max_age` slots old, a
    /// network member past its plan or whose plan stops holding it, or whose planned rate
    /// changes in `slot`.
    fn unit_due(up: &UnitPlan, slot: u64, max_age: u64) -> bool {
        if slot <= up.slot0 || (!up.complete && slot - up.slot0 >= max_age) {
            return true;
        }
        let o = (slot - up.slot0) as usize;
        o >= up.end_at || up.changes.is_some_and(|c| o < 64 && (c >> o) & 1 == 1)
    }

    /// Whether job `j`, found at the previous slot boundary to need no look, still needs none at
    /// the start of `slot` (exactly what [`Mlcc::needs_look`] says then, without a pass over the
    /// members): since then the policy has not decided it (which forgets the finding, as does
    /// every flow of it that finished or changed dependency state, since the engine then
    /// touches the job), no link of it changed ([`Mlcc::links_changed`]), the engine has not
    /// written its rates, and no unit is due ([`Mlcc::unit_due`]). The members' checks of
    /// `needs_look` then give what they gave: their rates are the same, and the planned rate
    /// they are compared with did not change between the two slots (no change bit).
    fn still_keeps(&self, sim: &Sim, j: usize, slot: u64) -> bool {
        let Some(Some(v)) = self.verified.get(j) else {
            return false;
        };
        let Some(p) = self.plans.get(j) else {
            return false;
        };
        if v.slot.checked_add(1) != Some(slot)
            || v.rate_writes != sim.jobs[j].rate_writes
            || self.job_link_seq.get(j).is_some_and(|s| *s > v.seq)
            || p.look
            || p.units.len() != Self::unit_count(sim, j)
        {
            return false;
        }
        let max_age = self.max_age_incomplete(sim, j);
        p.units.iter().all(|up| {
            up.as_ref()
                .is_some_and(|up| up.changes.is_some() && !Self::unit_due(up, slot, max_age))
        })
    }

    /// Whether unit `u` of job `j` (brought up to date) keeps its plan in `slot`; if so, its
    /// members take the plan's rates for the slot.
    fn keep(&mut self, sim: &Sim, j: usize, u: usize, slot: u64) -> bool {
        match self.why_replan(sim, j, u, slot) {
            Err(r) => {
                self.replan_reasons[r as usize] += 1;
                false
            }
            Ok(Keep::Finishing) => {
                if self.pace_finishing(sim, j, u) {
                    self.finish_paced += 1;
                    true
                } else {
                    self.replan_reasons[Replan::Completing as usize] += 1;
                    false
                }
            }
            Ok(Keep::Extend) => {
                if self.extend_unit(sim, j, u, slot) {
                    self.extended += 1;
                    true
                } else {
                    self.replan_reasons[Replan::Incomplete as usize] += 1;
                    false
                }
            }
            Ok(Keep::Runs) => {
                let Some(up) = self.plans[j].units.get_mut(u).and_then(Option::take) else {
                    return false;
                };
                let o = (slot - up.slot0) as usize;
                for m in &up.members {
                    self.set_rate(sim, j, m.f, m.rates[o]);
                }
                self.plans[j].units[u] = Some(up);
                true
            }
        }
    }

    /// Why unit `u` of job `j` (brought up to date) cannot keep its plan in `slot`, if it can't
    /// (`Err`); else how it keeps it ([`Keep`]).
    fn why_replan(&self, sim: &Sim, j: usize, u: usize, slot: u64) -> Result<Keep, Replan> {
        let Some(Some(up)) = self.plans[j].units.get(u) else {
            return Err(Replan::NoPlan);
        };
        if slot <= up.slot0 {
            return Err(Replan::NoPlan);
        }
        // Half a horizon old (or a whole one) and incomplete: rolled forward when nothing
        // else asks for a re-plan ([`Mlcc::extend`]), else re-planned.
        let aged = !up.complete && slot - up.slot0 >= self.max_age_incomplete(sim, j);
        if aged && !self.extend {
            return Err(Replan::Incomplete);
        }
        let o = (slot - up.slot0) as usize;
        let job = &sim.jobs[j];
        // Members: its network flows (a flow inside a server that ends early changes nothing
        // the plan paces).
        let net = |f: usize| job.flows[f].src != job.flows[f].dst;
        let mut active = Self::unit_flow_iter(sim, j, u).filter(|&f| !job.flows[f].done && net(f));
        if !up
            .members
            .iter()
            .filter(|m| net(m.f))
            .all(|m| active.next() == Some(m.f))
            || active.next().is_some()
        {
            return Err(Replan::Members);
        }
        // Members whose plan completes them in this slot, and those it runs past.
        let (mut finishing, mut running) = (0usize, 0usize);
        // How late this decision comes after the slot's start (events closer than the engine's
        // least step are handled together), s.
        let late = self
            .clock
            .slot_start_us(slot)
            .map_or(0.0, |us| (sim.t - us as f64 / 1e6).max(0.0));
        for m in up.members.iter().filter(|m| net(m.f)) {
            let fl = &job.flows[m.f];
            match member_at(up, m, o) {
                At::Runs => running += 1,
                At::Finishes => finishing += 1,
                At::Ended => return Err(Replan::RanOut),
            }
            // A flow inside a server is planned with its group but not paced by the plan (no
            // policy controls it, see `crate::sim`): its progress is not the plan's.
            // Expected by now: the slots before this one, and, when this decision comes after
            // the slot's start, the previous slot's rate since then.
            let expected = m.sent0
                + m.bytes[0] as f64 * m.first
                + m.bytes[1..o].iter().map(|b| *b as f64).sum::<f64>()
                + late * m.rates[o - 1] as f64 / 8.0;
            // Slack: an MTU, and what a rate change at a late slot start can move (the
            // engine's least time step at the larger of the two rates).
            let r = m.rates[o - 1].max(if o >= 2 { m.rates[o - 2] } else { 0 }) as f64 / 8.0;
            if (fl.sent - expected).abs() > REUSE_SLACK_BYTES + sim.config.min_step_s * r {
                return Err(Replan::Progress);
            }
            if self.path_changed(j, up, &fl.path) {
                return Err(Replan::Freed);
            }
        }
        // Some members completing while others run on: the group's joint re-plan decides.
        if finishing > 0 && running > 0 {
            return Err(Replan::Completing);
        }
        Ok(match (aged, finishing > 0) {
            (true, false) => Keep::Extend,
            (true, true) => return Err(Replan::Incomplete),
            (false, true) => Keep::Finishing,
            (false, false) => Keep::Runs,
        })
    }

    /// The groups of unit `u` of job `j` as the policy layer plans them
    /// ([`mlcc_sched::policy::group_phase`], in its order), over its active flows.
    fn unit_groups(&self, sim: &Sim, j: usize, u: usize) -> Vec<Vec<usize>> {
        let job = &sim.jobs[j];
        let mut groups: Vec<(GroupPhase, Vec<usize>)> = Vec::new();
        for f in Self::unit_flow_iter(sim, j, u).filter(|&f| !job.flows[f].done) {
            let phase = group_phase(&Self::state_role(sim, j, f));
            match groups.iter_mut().find(|(p, _)| *p == phase) {
                Some((_, g)) => g.push(f),
                None => groups.push((phase, vec![f])),
            }
        }
        groups.sort_by_key(|(p, _)| *p);
        groups.into_iter().map(|(_, g)| g).collect()
    }

    /// Rolls the incomplete plan of unit `u` of job `j` forward at `slot` (documented
    /// approximation, see the module header): per group as [`Mlcc::plan_unit`] plans them, the
    /// members keep their plan's bytes for its slots still in the horizon and get
    /// [`extend_group`]'s fill of the slots that joined it since (what a re-plan gives there
    /// while the group stays incomplete). The unit then holds that as a plan made in `slot` and
    /// its members take its rate for the slot. False, the unit to be re-planned, when a group
    /// would complete within the horizon, an active member is not in the plan, or the library
    /// refuses.
    fn extend_unit(&mut self, sim: &Sim, j: usize, u: usize, slot: u64) -> bool {
        let Some(up) = self.plans[j].units.get_mut(u).and_then(Option::take) else {
            return false;
        };
        let o = slot.saturating_sub(up.slot0) as usize;
        let job = &sim.jobs[j];
        let mut out = self.member_vecs.pop().unwrap_or_default();
        out.clear();
        // A plan a whole horizon old keeps no slot: re-planned (Alg. 2 included), not rolled.
        let mut ok = o >= 1 && o < self.clock.horizon();
        let mut complete = true;
        let mut buf = std::mem::take(&mut self.req_buf);
        for group in self.unit_groups(sim, j, u) {
            if !ok {
                break;
            }
            if group.is_empty() {
                continue;
            }
            // The kept plan's member of each active flow of the group.
            let old: Vec<&Member> = group
                .iter()
                .filter_map(|&f| up.members.iter().find(|m| m.f == f))
                .collect();
            if old.len() != group.len() || old.iter().any(|m| m.bytes.len() < o) {
                ok = false;
                break;
            }
            let n = Self::requests_into(
                &mut buf,
                sim,
                j,
                group.iter().map(|&f| (f, Dependency::Independent)),
            );
            let kept: Vec<&[u64]> = old.iter().map(|m| &m.bytes[o..]).collect();
            match extend_group(&mut self.table, &buf[..n], &kept) {
                Ok(Some(bytes)) => {
                    for (req, b) in buf[..n].iter().zip(&bytes) {
                        complete &= b.iter().sum::<u64>() >= req.progress.remaining_bytes;
                    }
                    for (&f, b) in group.iter().zip(&bytes) {
                        let clock = self.clock;
                        let rates = b.iter().map(|x| clock.rate_bps_for_bytes(*x));
                        let now = clock.rate_bps_for_bytes(b.first().copied().unwrap_or(0));
                        out.push(self.member(f, job.flows[f].sent, 1.0, b, rates, now));
                    }
                }
                Ok(None) => ok = false,
                Err(_) => {
                    self.refusals += 1;
                    ok = false;
                }
            }
        }
        self.req_buf = buf;
        if !ok {
            self.give_back(out);
            self.plans[j].units[u] = Some(up);
            return false;
        }
        for m in &out {
            self.set_rate(sim, j, m.f, m.rate0);
        }
        self.plans[j].units[u] = Some(UnitPlan::new(slot, self.seq, complete, true, out, |f| {
            flow_is_internal(sim, j, f)
        }));
        self.give_back(up.members);
        true
    }

    /// A kept unit whose plan completes every network member in the current slot: each is paced
    /// at its group's MADD share of the slot's available bandwidth, as the group's re-plan would
    /// pace it ([`mlcc_sched::pacing_rate_bps`] with [`group_share_now_bps`], the share
    /// [`plan_group`] gives), without re-planning the group (documented approximation, see the
    /// module header). False when the library refuses (the unit is then re-planned).
    fn pace_finishing(&mut self, sim: &Sim, j: usize, u: usize) -> bool {
        let job = &sim.jobs[j];
        for group in self.unit_groups(sim, j, u) {
            if group.is_empty() {
                continue;
            }
            let mut members = std::mem::take(&mut self.req_buf);
            let n = Self::requests_into(
                &mut members,
                sim,
                j,
                group.iter().map(|&f| (f, Dependency::Independent)),
            );
            let Ok(shares) = group_share_now_bps(&self.table, &members[..n]) else {
                self.req_buf = members;
                self.refusals += 1;
                return false;
            };
            for (req, share) in members[..n].iter().zip(shares) {
                let f = flow_of(req.flow.0);
                if job.flows[f].src == job.flows[f].dst {
                    continue;
                }
                let rem = req.progress.remaining_bytes;
                let now = self.clock.rate_bps_for_bytes(rem);
                let r = pacing_rate_bps(rem, now, rem, share);
                self.set_rate(sim, j, f, r);
            }
            self.req_buf = members;
        }
        true
    }
}

impl Policy for Mlcc {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn decide(&mut self, sim: &Sim, ctl: &mut Control) -> f64 {
        let now_us = (sim.t * 1e6).round() as u64;
        let slot = self.clock.slot_at(now_us);
        // Flows no longer active leave the table.
        self.stamp = self.stamp.wrapping_add(1);
        let stamp = self.stamp;
        for &(j, f) in &sim.active {
            let aid = sim.jobs[j].flow_base as usize + f;
            if self.live_mark.len() <= aid {
                self.live_mark.resize(aid + 1, 0);
            }
            self.live_mark[aid] = stamp;
        }
        for k in 0..self.planned.len() {
            let (aid, id) = self.planned[k];
            if self.rates[aid] != NO_RATE && self.live_mark.get(aid) != Some(&stamp) {
                self.rates[aid] = NO_RATE;
                let _ = self.table.remove_flow(FlowId(id));
            }
        }
        self.compact_planned();
        let mut jobs: Vec<usize> = sim.active.iter().map(|&(j, _)| j).collect();
        jobs.dedup();
        if self.slot != Some(slot) {
            if self.table.advance_to(slot).is_err() {
                self.refusals += 1;
            }
            self.slot = Some(slot);
            let units = Self::units_of(sim, &jobs, &|_, _| true);
            self.plan_units(sim, &units, &|_, _| true, 1.0, false);
        } else {
            // Flows started inside the slot are planned at once; the others keep their rates.
            let new = self.unplanned(sim, &jobs);
            if !new.is_empty() {
                jobs.retain(|&j| new.iter().any(|&(k, _)| k == j));
                jobs.dedup();
                let todo = |j: usize, f: usize| new.binary_search(&(j, f)).is_ok();
                let units = Self::units_of(sim, &jobs, &todo);
                self.plan_units(sim, &units, &todo, 1.0, false);
            }
        }
        ctl.fair(sim.active.len());
        for (i, &(j, f)) in sim.active.iter().enumerate() {
            let r = self.rate(sim, j, f);
            ctl.cap[i] = if r == NO_RATE { 0.0 } else { r as f64 / 8.0 };
        }
        let next = self
            .clock
            .slot_start_us(slot + 1)
            .map_or(f64::INFINITY, |us| us as f64 / 1e6);
        if sim.active.is_empty() {
            f64::INFINITY
        } else {
            next
        }
    }

    fn is_sparse(&self) -> bool {
        !self.exact
    }

    fn on_job_start(&mut self, sim: &Sim, _job: usize) -> Vec<(usize, crate::sim::Align)> {
        self.placements += 1;
        if self.shared.len() < sim.jobs.len() {
            self.shared.resize(sim.jobs.len(), Cell::new((0, false)));
            self.verified.resize(sim.jobs.len(), None);
            self.job_link_seq.resize(sim.jobs.len(), 0);
        }
        Vec::new()
    }

    fn on_job_end(&mut self, _sim: &Sim, _job: usize) {
        self.placements += 1;
    }

    /// At a slot boundary, the jobs holding a unit plan that cannot simply go on (see the module
    /// documentation) or whose plan's rate changes in the new slot; none inside a slot.
    fn select_jobs(
        &mut self,
        sim: &Sim,
        _touched: &[usize],
        _at_decision: bool,
        out: &mut Vec<usize>,
    ) {
        let slot = self.clock.slot_at((sim.t * 1e6).round() as u64);
        if self.slot == Some(slot) {
            return;
        }
        for k in 0..self.live.len() {
            let j = self.live[k];
            let job = &sim.jobs[j];
            // What is found of the job at this slot; nothing when it needs a look.
            let found = if job.phase != Phase::Communicating {
                // Its flows leave the table when the engine reports it (it was touched).
                None
            } else if self.still_keeps(sim, j, slot) {
                debug_assert!(
                    !self.needs_look(sim, j, slot),
                    "job {j} found to keep its plans at slot {slot} needs a look"
                );
                self.verified[j].map(|v| Verified { slot, ..v })
            } else if self.needs_look(sim, j, slot) {
                None
            } else {
                Some(Verified {
                    slot,
                    rate_writes: job.rate_writes,
                    seq: self.seq,
                })
            };
            if found.is_none() {
                out.push(j);
            }
            if let Some(v) = self.verified.get_mut(j) {
                *v = found;
            }
        }
    }

    fn decide_jobs(
        &mut self,
        sim: &Sim,
        jobs: &[usize],
        _at_decision: bool,
        out: &mut Vec<(usize, usize, f64, f64)>,
    ) -> f64 {
        let now_us = (sim.t * 1e6).round() as u64;
        let slot = self.clock.slot_at(now_us);
        let new_slot = self.slot != Some(slot);
        if new_slot {
            if self.table.advance_to(slot).is_err() {
                self.refusals += 1;
            }
            self.slot = Some(slot);
        }
        self.at_boundary = new_slot;
        if self.plans.len() < sim.jobs.len() {
            self.plans.resize_with(sim.jobs.len(), JobPlan::default);
            self.in_live.resize(sim.jobs.len(), false);
        }
        // Flows no longer active leave the table; jobs no longer communicating drop their plans.
        // What was found of the jobs decided now no longer holds ([`Mlcc::still_keeps`]).
        for &j in jobs {
            if let Some(v) = self.verified.get_mut(j) {
                *v = None;
            }
            let job = &sim.jobs[j];
            let comm = job.phase == Phase::Communicating;
            for f in 0..job.flows.len() {
                if self.rate(sim, j, f) != NO_RATE && (!comm || job.flows[f].done) {
                    self.drop_flow(sim, j, f);
                }
            }
            if !comm {
                for u in 0..self.plans[j].units.len() {
                    self.recycle(j, u);
                }
                self.plans[j] = JobPlan::default();
            }
        }
        let comm: Vec<usize> = jobs
            .iter()
            .copied()
            .filter(|&j| sim.jobs[j].network && sim.jobs[j].phase == Phase::Communicating)
            .collect();
        if new_slot {
            // Units that keep their plan take its rate for the new slot; the others are
            // re-planned in planning order.
            let mut todo: Vec<(usize, usize)> = Vec::new();
            for &j in &comm {
                let n = Self::unit_count(sim, j);
                if self.plans[j].units.len() != n {
                    self.plans[j].units = vec![None; n];
                }
                self.plans[j].look = false;
                for u in 0..n {
                    if self.keep(sim, j, u, slot) {
                        self.unit_kept += 1;
                        continue;
                    }
                    let job = &sim.jobs[j];
                    match Self::unit_flow_iter(sim, j, u).any(|f| !job.flows[f].done) {
                        true => {
                            self.recycle(j, u);
                            todo.push((j, u));
                        }
                        // Nothing left to send in this unit: an empty plan, kept.
                        false => {
                            self.plans[j].units[u] = Some(UnitPlan::new(
                                slot,
                                self.seq,
                                true,
                                false,
                                Vec::new(),
                                |_| false,
                            ))
                        }
                    }
                }
            }
            // The policy layer orders them.
            self.plan_units(sim, &todo, &|_, _| true, 1.0, true);
        } else {
            // Inside a slot: flows that started are planned at once; a unit planned whole (its
            // iteration starts) keeps that plan, counted from the rest of the slot; every touched
            // job is looked at again at the next slot.
            let frac = self.clock.slot_start_us(slot + 1).map_or(1.0, |end| {
                ((end as f64 / 1e6 - sim.t) / (self.clock.slot_us() as f64 / 1e6)).clamp(0.0, 1.0)
            });
            for &j in &comm {
                self.plans[j].look = true;
                let n = Self::unit_count(sim, j);
                if self.plans[j].units.len() != n {
                    self.plans[j].units = vec![None; n];
                }
            }
            let new = self.unplanned(sim, &comm);
            if !new.is_empty() {
                let mut fresh: Vec<usize> = new.iter().map(|&(j, _)| j).collect();
                fresh.dedup();
                let todo = |j: usize, f: usize| new.binary_search(&(j, f)).is_ok();
                let units = Self::units_of(sim, &fresh, &todo);
                self.plan_units(sim, &units, &todo, frac, true);
            }
        }
        for &j in &comm {
            if !self.in_live[j] {
                self.in_live[j] = true;
                self.live.push(j);
            }
            let job = &sim.jobs[j];
            for (f, fl) in job.flows.iter().enumerate() {
                if !fl.done && fl.src != fl.dst {
                    let r = self.rate(sim, j, f);
                    out.push((j, f, 1.0, if r == NO_RATE { 0.0 } else { r as f64 / 8.0 }));
                }
            }
        }
        // Jobs no longer communicating leave the live list.
        let mut k = 0;
        while k < self.live.len() {
            let j = self.live[k];
            if sim.jobs[j].phase != Phase::Communicating {
                self.in_live[j] = false;
                self.live.swap_remove(k);
            } else {
                k += 1;
            }
        }
        // Compacted when it doubled since the last time (not at every decision when many
        // flows hold a rate).
        if self.planned.len() > 2 * self.planned_kept.max(sim.jobs.len()) + 4096 {
            self.compact_planned();
        }
        self.at_boundary = false;
        if self.live.is_empty() {
            f64::INFINITY
        } else {
            self.clock
                .slot_start_us(slot + 1)
                .map_or(f64::INFINITY, |us| us as f64 / 1e6)
        }
    }

    fn report(&self) -> Value {
        json!({
            "slot_us": self.clock.slot_us(),
            "horizon": self.clock.horizon(),
            "flow_decisions": self.flow_decisions.count,
            "flow_decision_us_p50": self.flow_decisions.quantile_us(0.5),
            "flow_decision_us_p90": self.flow_decisions.quantile_us(0.9),
            "flow_decision_us_p99": self.flow_decisions.quantile_us(0.99),
            "flow_decision_cdf": self.flow_decisions.cdf(),
            "library_refusals": self.refusals,
            "exact": self.exact,
            "unit_plans": self.unit_plans,
            "unit_plans_kept": self.unit_kept,
            "unit_plans_kept_finishing": self.finish_paced,
            "unit_plans_extended": self.extended,
            "replan_reasons": REPLAN_NAMES.iter().zip(self.replan_reasons).map(|(n, c)| (n.to_string(), json!(c))).collect::<serde_json::Map<String, Value>>(),
        })
    }
}
