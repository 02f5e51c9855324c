// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The simulation engine: jobs, their flows, placement, and time.
//!
//! Model ("Dynamic Flow Scheduling for DNN Training Workloads in Data Centers", Sec. VII): each
//! iteration of a job is a compute phase followed by its communication flows; the next iteration
//! starts when every flow of the current one has completed. Flows are fluid (no packets, losses
//! or retransmissions, as in the paper); in between two events every flow keeps a constant rate.
//!
//! Flows of a job and what they may send (the data dependencies, enforced for every policy):
//! - ring all-reduce over workers 0..W−1: flow i (worker i → i+1 mod W) carries 2(W−1)/W · G bytes
//!   in chunks of G/W. *Pipelined* (how NCCL-like libraries stream chunks): flow i may have sent
//!   at most what it received plus one chunk, `sent_i ≤ sent_{i−1} + G/W`. *Start-after* (the
//!   coflow reading of MCS): a chunk is forwarded only once it has been completely received,
//!   `sent_i ≤ (⌊sent_{i−1} / (G/W)⌋ + 1) · G/W`;
//! - parameter server with P servers: worker w pushes G/P bytes to each server p, and p sends G/P
//!   bytes back to each worker. Pipelined: p's broadcast never runs ahead of its slowest
//!   aggregation, `sent(p→w) ≤ min_w' sent(w'→p)`; start-after: p broadcasts only when every
//!   aggregation into it has completed.
//!
//! Time advances from event to event (an arrival, the end of a compute phase or of a Cassini
//! wait, a flow completing, a flow catching up with the data it depends on, a policy's own
//! decision time such as mlcc's slot boundary or MLTCP's re-evaluation of F), never by less than
//! `min_step_s` (events closer than that are handled together; the byte counts stay exact:
//! a flow never sends more than its size or its dependency allows).
//!
//! Where jobs go: [`placement`] ([`Placement`], the rule and the candidates it offers); the
//! event queues: `events`; the decision-time histogram: [`TimeHist`] (`hist`).
//!
//! A flow between two GPUs of one server crosses only that server's internal links
//! ([`crate::topo`]): it is allocated and bound by its dependencies like any flow, but no policy
//! controls it (weight 1, no cap: NCCL and ps-lite move it over PCIe or shared memory, not over
//! a TCP connection that a congestion controller or the mlcc agent could pace), and a job whose
//! flows all stay inside servers never enters a whole-cluster policy's decision.
//!
//! A job that does not fit waits in a FIFO queue, launched as soon as enough GPUs free up (the
//! mlcc paper, Sec. VI-A: "Jobs are queued if GPUs are not available").

use std::cell::RefCell;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

use serde::Serialize;

use crate::alloc::IncMaxMin;
use crate::error::SimError;
use crate::policy::{Control, DepMode, Policy};
use crate::topo::{Path, Tree};
use crate::workload::{JobSpec, Paradigm};
pub use mltcp_job_kinds::Role;

mod events;
mod hist;
pub mod placement;

use events::{JobEvent, Timer};
pub use hist::TimeHist;
pub use placement::Placement;

/// What a flow is in its job. A flow's role, with the engine's indices; the role of a process
/// (worker, parameter server) is [`Role`], the shared definition, which
/// [`FlowRole::sender`] and [`FlowRole::receiver`] give for the flow's two ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FlowRole {
    /// Ring flow from worker `i` to worker `i+1`; `pred` is the flow into worker `i`.
    Ring {
        /// Index of the predecessor's flow in the job.
        pred: usize,
    },
    /// Aggregation flow of a worker to parameter server `ps`.
    Push {
        /// Parameter-server index in the job.
        ps: usize,
    },
    /// Broadcast flow of parameter server `ps` to a worker.
    Pull {
        /// Parameter-server index in the job.
        ps: usize,
    },
}

impl FlowRole {
    /// The role of the flow's sending process: a worker, except a parameter server's broadcast.
    pub fn sender(self) -> Role {
        match self {
            FlowRole::Ring { .. } | FlowRole::Push { .. } => Role::Worker,
            FlowRole::Pull { .. } => Role::ParameterServer,
        }
    }

    /// The role of the flow's receiving process: a worker, except an aggregation into a
    /// parameter server.
    pub fn receiver(self) -> Role {
        match self {
            FlowRole::Ring { .. } | FlowRole::Pull { .. } => Role::Worker,
            FlowRole::Push { .. } => Role::ParameterServer,
        }
    }
}

/// One flow of a job (the same flows run in every iteration).
#[derive(Clone, Debug, Serialize)]
pub struct Flow {
    /// Sending server.
    pub src: u32,
    /// Receiving server.
    pub dst: u32,
    /// Links crossed, in order.
    pub path: Path,
    /// Bytes per iteration.
    pub size: f64,
    /// Bytes sent in the current iteration.
    pub sent: f64,
    /// Bytes it had sent in this iteration when a per-job policy last decided it
    /// ([`Policy::flow_control`]), e.g. where MLTCP last took its F.
    pub decided_sent: f64,
    /// Current rate, bytes/s.
    pub rate: f64,
    /// Its role.
    pub role: FlowRole,
    /// Done in this iteration.
    pub done: bool,
}

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Phase {
    /// Not arrived yet, or waiting for GPUs.
    Waiting,
    /// Computing until the given time.
    Computing(f64),
    /// Its flows are running.
    Communicating,
    /// Held back by a time shift until the given time.
    Shifted(f64),
    /// All iterations done.
    Done,
}

/// A one-time alignment of a job's next iteration start (Cassini time shifts): the next iteration
/// starts at the first instant ≥ its natural start that is ≡ `at_s` modulo `period_s`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Align {
    /// Reference instant, seconds.
    pub at_s: f64,
    /// The job's profiled iteration time, seconds.
    pub period_s: f64,
}

/// A job in the simulation.
#[derive(Clone, Debug, Serialize)]
pub struct Job {
    /// As submitted.
    pub spec: JobSpec,
    /// Server of each GPU it holds: workers first, then parameter servers (a server appears
    /// once per GPU of the job on it).
    pub servers: Vec<u32>,
    /// True when some of its flows cross the network (not only servers' internal links).
    pub network: bool,
    /// Its flows.
    pub flows: Vec<Flow>,
    /// Ring chunk G/W (ring jobs), bytes.
    pub chunk: f64,
    /// Where it is.
    pub phase: Phase,
    /// Iterations completed.
    pub iterations_done: u32,
    /// When it was launched (placed), seconds.
    pub start_s: f64,
    /// When it finished, seconds.
    pub finish_s: f64,
    /// Iteration time alone on its placement (fair sharing, nothing else running), seconds.
    pub alone_iter_s: f64,
    /// Communication time alone, seconds.
    pub alone_comm_s: f64,
    /// Per-link bytes per iteration (link, bytes).
    pub link_bytes: Vec<(u32, f64)>,
    /// Pending alignment of its next iteration start.
    pub align: Option<Align>,
    /// Time spent held back by alignments, seconds.
    pub shifted_s: f64,
    /// Start of each iteration's communication phase, seconds (only with `SimConfig::record`).
    pub comm_starts: Vec<f64>,
    /// Start of its current (or last) communication phase, seconds; NaN before the first.
    pub comm_start_s: f64,
    /// Allocation id of its first flow (flow f has id `flow_base + f`), set at placement.
    pub flow_base: u32,
    /// Its communication slowdown, smoothed over its finished bursts (each burst's time over
    /// [`Job::alone_comm_s`]): what `priority-sedf` scales deadlines by
    /// ([`mlcc_sched::JobOrder::SlowdownDeadline`]).
    pub comm_slowdown: mlcc_sched::CommSlowdown,
    /// How many times the engine has written its flows' rates (the allocation, or a new
    /// iteration's start): a policy that saw this count knows the rates did not move since.
    #[serde(skip)]
    pub rate_writes: u64,
}

/// Engine parameters.
#[derive(Clone, Debug, Serialize)]
pub struct SimConfig {
    /// How jobs are put on GPUs.
    pub placement: Placement,
    /// Smallest time step, seconds (events closer than this are handled together).
    pub min_step_s: f64,
    /// Stop simulating at this time, seconds (jobs unfinished then are reported as such).
    pub max_time_s: f64,
    /// Record every iteration's communication start of every job ([`Job::comm_starts`]).
    pub record: bool,
    /// Re-solve the whole max-min allocation at every event instead of only what the event's
    /// changes reach (the reference the incremental allocation is tested against).
    pub full_alloc: bool,
    /// How the applications forward data, whatever the policy's own reading
    /// ([`Policy::deps`]); `None` = the policy's. A testbed scenario sets
    /// [`DepMode::StartAfter`]: trainemu's ring workers send a step's chunk only once the
    /// previous step's chunk has arrived, and its parameter server broadcasts only once every
    /// push has arrived (`ci/trainemu`, emu.rs).
    pub deps: Option<DepMode>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            placement: Placement::Packed,
            min_step_s: 1e-4,
            max_time_s: 1.0e7,
            record: false,
            full_alloc: false,
            deps: None,
        }
    }
}

/// [`Sim::allocate`]'s scratch buffers: flow ids that left the allocation, that a solve moved,
/// that any solve of this allocation moved, the backfill's links and the jobs of the refinement
/// rounds.
#[derive(Clone, Debug, Default)]
struct AllocScratch {
    gone: Vec<u32>,
    changed: Vec<u32>,
    moved: Vec<u32>,
    links: Vec<u32>,
    touched_jobs: Vec<usize>,
}

/// The state of one run.
pub struct Sim {
    /// The network.
    pub tree: Tree,
    /// Parameters.
    pub config: SimConfig,
    /// Current time, seconds.
    pub t: f64,
    /// All jobs, in arrival order.
    pub jobs: Vec<Job>,
    /// Active flows (job, flow) that cross the network, rebuilt when the set changes: what a
    /// whole-cluster policy decides (flows inside a server are not controlled by any policy).
    pub active: Vec<(usize, usize)>,
    /// Jobs present on each server (launched, not finished).
    pub server_jobs: Vec<Vec<usize>>,
    /// Jobs whose flows cross each link (launched, not finished).
    pub link_jobs: Vec<Vec<usize>>,
    /// Bytes carried by each link so far.
    pub link_bytes: Vec<f64>,
    /// Dependency mode in force (from the policy).
    pub deps: DepMode,
    /// Time spent in the policy's decisions, per call.
    pub decisions: TimeHist,
    /// Number of events processed.
    pub events: u64,
    free_gpus: Vec<u32>,
    queue: VecDeque<usize>,
    next_arrival: usize,
    timers: BinaryHeap<Timer>,
    inc: IncMaxMin,
    back: Option<IncMaxMin>,
    /// Allocation ids of the flows of the last allocation, and a scratch mark per id.
    next_flow_id: u32,
    ctl: Control,
    flows_changed: bool,
    next_decision: f64,
    /// Per allocation id: the job, the flow it waits on (pipelined, caught up), the policy's
    /// cap, and whether it was dependency-blocked at its last allocation.
    id_job: Vec<u32>,
    up_of: Vec<Option<u32>>,
    base_cap: Vec<f64>,
    blocked_flag: Vec<bool>,
    /// Per allocation id: a whole-cluster policy's last (weight, cap) for the flow.
    pol: Vec<(f64, f64)>,
    /// Ids that got an upstream cap (a superset of those that have one, compacted now and
    /// then), and how many have one.
    with_up: Vec<u32>,
    n_up: usize,
    /// Per job: how many of its ids have an upstream cap.
    job_up: Vec<u32>,
    /// Jobs an event touched (their flows are re-decided and re-allocated).
    dirty: Vec<usize>,
    is_dirty: Vec<bool>,
    /// Per job: time its byte counts are up to date to, seconds; version of its queued event.
    upd: Vec<f64>,
    job_ver: Vec<u32>,
    job_events: BinaryHeap<JobEvent>,
    scratch: Vec<f64>,
    mins: Vec<(f64, Option<usize>)>,
    /// [`Sim::allocate`]'s buffers, kept between calls so an allocation allocates nothing once
    /// they have grown.
    alloc_scratch: AllocScratch,
    /// Scratch lists of a sparse policy's decision (jobs decided, jobs it selected).
    touched: Vec<usize>,
    selected: Vec<usize>,
    /// Per job: when the policy's next decision about it is due (a per-job policy's
    /// [`Policy::job_next_decision`], `f64::INFINITY`: none) and the interval it was scheduled
    /// with, seconds (for [`Policy::coalesce_within`]).
    dec_at: Vec<f64>,
    dec_iv: Vec<f64>,
    /// Per link: the first active flow of a job seen on it, [`UNSEEN`] between calls, and the
    /// links set ([`Sim::weights_inert`]'s scratch).
    link_first: RefCell<(Vec<u32>, Vec<u32>)>,
}

/// An unset entry of [`Sim::weights_inert`]'s scratch.
const UNSEEN: u32 = u32::MAX;

/// Bytes of slack when comparing byte counts: a flow within one byte of its size is complete
/// (bytes are whole; the fluid arithmetic leaves fractions).
const EPS_BYTES: f64 = 1.0;

impl Sim {
    /// A run of `jobs` (sorted by arrival) on `tree`. Refuses a job needing more GPUs than the
    /// cluster has (or, with [`Placement::Spread`], more than there are servers).
    pub fn new(tree: Tree, config: SimConfig, jobs: Vec<JobSpec>) -> Result<Sim, SimError> {
        let servers = tree.config.servers;
        let (room, what) = match config.placement {
            Placement::Spread => (
                u64::from(servers),
                "servers (one GPU each with --placement spread)",
            ),
            Placement::Packed => (
                u64::from(servers) * u64::from(tree.config.gpus_per_server),
                "GPUs",
            ),
        };
        for (i, j) in jobs.iter().enumerate() {
            if u64::from(j.gpus()) > room {
                return Err(SimError::Unplaceable(format!(
                    "job {i} ({} x{} {:?}) needs {} GPUs, the cluster has {room} {what}",
                    j.model,
                    j.workers,
                    j.paradigm,
                    j.gpus()
                )));
            }
            if j.paradigm.known().is_none() {
                return Err(SimError::Config(format!(
                    "job {i}: paradigm = {}: expected ring or ps",
                    j.paradigm.name()
                )));
            }
            if j.workers < 2 {
                return Err(SimError::Config(format!(
                    "job {i}: workers = {}: at least 2",
                    j.workers
                )));
            }
            if let Some(h) = &j.hosts {
                let want_ps = usize::from(j.paradigm == Paradigm::ParameterServer);
                if h.len() < j.workers as usize + want_ps
                    || (j.paradigm == Paradigm::Ring && h.len() != j.workers as usize)
                {
                    return Err(SimError::Config(format!(
                        "job {i}: hosts = {h:?}: needs one server per worker ({}){}",
                        j.workers,
                        if want_ps == 1 {
                            ", then at least one parameter server"
                        } else {
                            ""
                        }
                    )));
                }
                if let Some(s) = h.iter().find(|s| **s >= servers) {
                    return Err(SimError::Config(format!(
                        "job {i}: hosts contains server {s}, the cluster has {servers}"
                    )));
                }
            }
        }
        if !(config.min_step_s.is_finite() && config.min_step_s > 0.0) {
            return Err(SimError::Config(format!(
                "min_step_s = {}: must be > 0",
                config.min_step_s
            )));
        }
        let links = tree.links();
        let njobs = jobs.len();
        let jobs: Vec<Job> = jobs
            .into_iter()
            .map(|spec| Job {
                chunk: spec.gradient_bytes / f64::from(spec.workers),
                spec,
                servers: Vec::new(),
                network: false,
                flows: Vec::new(),
                phase: Phase::Waiting,
                iterations_done: 0,
                start_s: f64::NAN,
                finish_s: f64::NAN,
                alone_iter_s: f64::NAN,
                alone_comm_s: f64::NAN,
                link_bytes: Vec::new(),
                align: None,
                shifted_s: 0.0,
                comm_starts: Vec::new(),
                comm_start_s: f64::NAN,
                flow_base: 0,
                comm_slowdown: mlcc_sched::CommSlowdown::new(),
                rate_writes: 0,
            })
            .collect();
        Ok(Sim {
            free_gpus: vec![tree.config.gpus_per_server; servers as usize],
            server_jobs: vec![Vec::new(); servers as usize],
            link_jobs: vec![Vec::new(); links],
            link_bytes: vec![0.0; links],
            inc: IncMaxMin::new(&tree.capacity),
            back: None,
            next_flow_id: 0,
            tree,
            config,
            t: 0.0,
            jobs,
            active: Vec::new(),
            deps: DepMode::Pipelined,
            decisions: TimeHist::default(),
            events: 0,
            queue: VecDeque::new(),
            next_arrival: 0,
            timers: BinaryHeap::new(),
            ctl: Control::default(),
            flows_changed: true,
            next_decision: 0.0,
            id_job: Vec::new(),
            up_of: Vec::new(),
            base_cap: Vec::new(),
            blocked_flag: Vec::new(),
            pol: Vec::new(),
            with_up: Vec::new(),
            n_up: 0,
            job_up: vec![0; njobs],
            dirty: Vec::new(),
            is_dirty: vec![false; njobs],
            upd: vec![0.0; njobs],
            job_ver: vec![0; njobs],
            job_events: BinaryHeap::new(),
            scratch: Vec::new(),
            mins: Vec::new(),
            alloc_scratch: AllocScratch::default(),
            touched: Vec::new(),
            selected: Vec::new(),
            link_first: RefCell::new((vec![UNSEEN; links], Vec::new())),
            dec_at: vec![f64::INFINITY; njobs],
            dec_iv: vec![f64::INFINITY; njobs],
        })
    }

    /// The flows of `spec` placed on `servers` (workers first, then parameter servers).
    pub fn build_flows(tree: &Tree, spec: &JobSpec, servers: &[u32]) -> Vec<Flow> {
        let w = spec.workers as usize;
        let g = spec.gradient_bytes;
        let mk = |src: u32, dst: u32, size: f64, role: FlowRole| Flow {
            src,
            dst,
            path: tree.path(src, dst),
            size,
            sent: 0.0,
            decided_sent: 0.0,
            rate: 0.0,
            role,
            done: false,
        };
        let mut flows = Vec::new();
        match spec.paradigm {
            Paradigm::Ring => {
                let size = 2.0 * (w as f64 - 1.0) / w as f64 * g;
                for i in 0..w {
                    flows.push(mk(
                        servers[i],
                        servers[(i + 1) % w],
                        size,
                        FlowRole::Ring {
                            pred: (i + w - 1) % w,
                        },
                    ));
                }
            }
            // No flows: Sim::new refuses such a job.
            Paradigm::Unknown => {}
            Paradigm::ParameterServer => {
                let p = spec.parameter_servers() as usize;
                let size = g / p as f64;
                for ps in 0..p {
                    for wk in 0..w {
                        flows.push(mk(
                            servers[wk],
                            servers[w + ps],
                            size,
                            FlowRole::Push { ps },
                        ));
                    }
                }
                for ps in 0..p {
                    for wk in 0..w {
                        flows.push(mk(
                            servers[w + ps],
                            servers[wk],
                            size,
                            FlowRole::Pull { ps },
                        ));
                    }
                }
            }
        }
        flows
    }

    /// Jobs whose flows cross server `s`'s network link (up or down), in job order.
    pub fn server_nic_jobs(&self, s: u32) -> Vec<usize> {
        let (up, down) = (
            &self.link_jobs[2 * s as usize],
            &self.link_jobs[2 * s as usize + 1],
        );
        let mut v: Vec<usize> = up.iter().chain(down.iter()).copied().collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Per-link bytes per iteration of flows.
    pub fn bytes_per_link(flows: &[Flow]) -> Vec<(u32, f64)> {
        let mut v: Vec<(u32, f64)> = Vec::new();
        for f in flows {
            for &l in &f.path {
                match v.iter_mut().find(|(x, _)| *x == l) {
                    Some(e) => e.1 += f.size,
                    None => v.push((l, f.size)),
                }
            }
        }
        v.sort_by_key(|e| e.0);
        v
    }

    /// Communication time of `flows` alone on the network (fair sharing; dependencies `deps`,
    /// pipelined when `None`), seconds: the "job running alone" reference.
    pub fn alone_comm_s(tree: &Tree, spec: &JobSpec, flows: &[Flow], deps: Option<DepMode>) -> f64 {
        let mut one = spec.clone();
        one.arrival_s = 0.0;
        one.iterations = 1;
        one.compute_s = 0.0;
        let config = SimConfig {
            deps,
            ..SimConfig::default()
        };
        let Ok(mut sim) = Sim::new(tree.clone(), config, vec![one]) else {
            return f64::NAN;
        };
        sim.next_arrival = 1; // placed by hand, not through the queue
        sim.jobs[0].flows = flows.to_vec();
        sim.next_flow_id = flows.len() as u32;
        let mut fair = crate::policy::fair::Fair;
        sim.start_iteration_comm(0);
        sim.flows_changed = true;
        while sim.jobs[0].phase == Phase::Communicating && sim.t < 1e7 {
            sim.step(&mut fair);
        }
        sim.t
    }

    fn place(&mut self, j: usize, policy: &mut dyn Policy) -> bool {
        let cands = self.candidates(j, policy.placement_candidates());
        if cands.is_empty() {
            return false;
        }
        let k = if cands.len() > 1 {
            policy
                .choose_placement(self, j, &cands)
                .min(cands.len() - 1)
        } else {
            0
        };
        let servers = cands[k].clone();
        let flows = Sim::build_flows(&self.tree, &self.jobs[j].spec, &servers);
        let comm = Sim::alone_comm_s(&self.tree, &self.jobs[j].spec, &flows, self.config.deps);
        for &s in &servers {
            self.free_gpus[s as usize] -= 1;
            if self.server_jobs[s as usize].last() != Some(&j) {
                self.server_jobs[s as usize].push(j);
            }
        }
        let lb = Sim::bytes_per_link(&flows);
        for (l, _) in &lb {
            self.link_jobs[*l as usize].push(j);
        }
        let job = &mut self.jobs[j];
        job.flow_base = self.next_flow_id;
        self.next_flow_id += flows.len() as u32;
        job.servers = servers;
        job.network = flows.iter().any(|f| f.src != f.dst);
        job.flows = flows;
        job.link_bytes = lb;
        job.alone_comm_s = comm;
        job.alone_iter_s = job.spec.compute_s_mean() + comm;
        job.start_s = self.t;
        let until = self.t + job.spec.compute_s_of(job.iterations_done);
        job.phase = Phase::Computing(until);
        self.timers.push(Timer(until, j));
        for (k, a) in policy.on_job_start(self, j) {
            self.jobs[k].align = Some(a);
        }
        self.all_dirty_if_local(policy);
        true
    }

    fn finish(&mut self, j: usize, policy: &mut dyn Policy) {
        let servers = std::mem::take(&mut self.jobs[j].servers);
        for &s in &servers {
            self.free_gpus[s as usize] += 1;
            self.server_jobs[s as usize].retain(|x| *x != j);
        }
        for (l, _) in &self.jobs[j].link_bytes {
            self.link_jobs[*l as usize].retain(|x| *x != j);
        }
        self.jobs[j].servers = servers;
        self.jobs[j].phase = Phase::Done;
        self.jobs[j].finish_s = self.t;
        self.mark_dirty(j);
        policy.on_job_end(self, j);
        self.all_dirty_if_local(policy);
    }

    /// A per-job policy's decisions may depend on which jobs are present (CCML's levels): every
    /// communicating job is re-decided when a job starts or ends.
    fn all_dirty_if_local(&mut self, policy: &dyn Policy) {
        if policy.is_local() {
            for k in 0..self.jobs.len() {
                if self.jobs[k].phase == Phase::Communicating {
                    self.mark_dirty(k);
                }
            }
        }
    }

    fn start_iteration_comm(&mut self, j: usize) {
        let job = &mut self.jobs[j];
        for f in &mut job.flows {
            f.sent = 0.0;
            f.decided_sent = 0.0;
            f.done = f.size <= EPS_BYTES;
            f.rate = 0.0;
        }
        job.rate_writes += 1;
        job.phase = Phase::Communicating;
        job.comm_start_s = self.t;
        if self.config.record {
            job.comm_starts.push(self.t);
        }
        self.upd[j] = self.t;
        self.flows_changed |= job.network;
        self.mark_dirty(j);
    }

    fn start_compute(&mut self, j: usize) {
        self.mark_dirty(j);
        let job = &self.jobs[j];
        let until = self.t + job.spec.compute_s_of(job.iterations_done);
        self.jobs[j].phase = Phase::Computing(until);
        self.timers.push(Timer(until, j));
    }

    /// The most flow `f` of job `j` may have sent now, and the flow it waits on (if bounded).
    pub fn bound(&self, j: usize, f: usize, deps: DepMode) -> (f64, Option<usize>) {
        self.bound_in(j, f, deps, &[])
    }

    /// For each parameter server of job `j` (none for a ring job), the least bytes sent by the
    /// aggregation flows into it and the first flow at that least, into `out`: what each of its
    /// broadcast flows is bound by, computed once for all of them.
    fn ps_mins(&self, j: usize, out: &mut Vec<(f64, Option<usize>)>) {
        out.clear();
        let job = &self.jobs[j];
        if job.spec.paradigm != Paradigm::ParameterServer {
            return;
        }
        out.extend((0..job.spec.parameter_servers() as usize).map(|ps| self.ps_min(j, ps)));
    }

    /// The least bytes sent by the aggregation flows of job `j` into parameter server `ps`, and
    /// the first flow at that least.
    fn ps_min(&self, j: usize, ps: usize) -> (f64, Option<usize>) {
        let job = &self.jobs[j];
        let w = job.spec.workers as usize;
        let (mut min, mut arg) = (f64::INFINITY, None);
        for k in ps * w..(ps + 1) * w {
            let s = job.flows[k].sent;
            if s < min {
                min = s;
                arg = Some(k);
            }
        }
        (min, arg)
    }

    /// [`Sim::bound`] with the job's [`Sim::ps_mins`] given (`mins` empty: computed here).
    fn bound_in(
        &self,
        j: usize,
        f: usize,
        deps: DepMode,
        mins: &[(f64, Option<usize>)],
    ) -> (f64, Option<usize>) {
        let job = &self.jobs[j];
        let fl = &job.flows[f];
        match fl.role {
            FlowRole::Push { .. } => (fl.size, None),
            FlowRole::Ring { pred } => {
                let up = job.flows[pred].sent;
                let b = match deps {
                    DepMode::Pipelined => up + job.chunk,
                    DepMode::StartAfter => {
                        ((up + EPS_BYTES) / job.chunk).floor() * job.chunk + job.chunk
                    }
                };
                if b >= fl.size - EPS_BYTES {
                    (fl.size, None)
                } else {
                    (b, Some(pred))
                }
            }
            FlowRole::Pull { ps } => {
                let (min, arg) = mins.get(ps).copied().unwrap_or_else(|| self.ps_min(j, ps));
                let b = match deps {
                    DepMode::Pipelined => min,
                    DepMode::StartAfter => {
                        if min >= fl.size - EPS_BYTES {
                            fl.size
                        } else {
                            0.0
                        }
                    }
                };
                if b >= fl.size - EPS_BYTES {
                    (fl.size, None)
                } else {
                    (b, arg)
                }
            }
        }
    }

    /// True when every flow of job `j` capped at the rate of the flow it waits on has that
    /// rate as its cap already: re-allocating the job would not move it (the engine's two
    /// refinement rounds per allocation follow longer chains over several allocations).
    fn caps_settled(&self, j: usize) -> bool {
        (0..self.jobs[j].flows.len()).all(|f| {
            let id = self.flow_id(j, f);
            match self.up_of.get(id as usize).copied().flatten() {
                Some(u) if self.inc.contains(id) => {
                    self.inc.cap(id) == self.base_cap[id as usize].min(self.inc.rate(u))
                }
                _ => true,
            }
        })
    }

    /// True when job `j`'s network weights cannot move any rate while nothing else changes:
    /// no other launched job crosses a link of its active network flows ([`Sim::link_jobs`]), and the
    /// active flows sharing a link have the same size, bytes sent, rate and bytes sent at their
    /// last decision ([`Flow::decided_sent`]), so weights that depend only on a flow's size and
    /// bytes sent, such as MLTCP's F, are equal on every link they share and stay so until the
    /// job's next event. A flow alone on its links is the simplest case.
    ///
    /// Why no rate moves when such weights are re-evaluated: the job's flows then form
    /// components of the max-min problem of their own (no other flow on their links), and in
    /// each component (flows linked by shared links) every weight is multiplied by the same
    /// factor; weighted max-min with caps is invariant under scaling every weight of a component
    /// by one factor (the fill level scales by its inverse, every rate `w · λ` and every cap
    /// reached stays the same). Up to rounding. And false while a flow of the job capped at the
    /// rate of the flow it waits on does not have that rate as its cap yet (a re-allocation
    /// would move it).
    pub fn weights_inert(&self, j: usize) -> bool {
        let job = &self.jobs[j];
        if self.job_up[j] > 0 && !self.caps_settled(j) {
            return false;
        }
        let mut guard = self.link_first.borrow_mut();
        let (first, seen) = &mut *guard;
        seen.clear();
        let mut inert = true;
        // Flows inside a server cross only its internal links, never a network flow's: they
        // have no say here.
        'flows: for (f, fl) in job.flows.iter().enumerate() {
            if fl.done || fl.src == fl.dst {
                continue;
            }
            for &l in &fl.path {
                let li = l as usize;
                if self.link_jobs[li].iter().any(|&k| k != j) {
                    inert = false;
                    break 'flows;
                }
                match first[li] {
                    UNSEEN => {
                        first[li] = f as u32;
                        seen.push(l);
                    }
                    g => {
                        let o = &job.flows[g as usize];
                        if o.size != fl.size
                            || o.sent != fl.sent
                            || o.rate != fl.rate
                            || o.decided_sent != fl.decided_sent
                        {
                            inert = false;
                            break 'flows;
                        }
                    }
                }
            }
        }
        for &l in seen.iter() {
            first[l as usize] = UNSEEN;
        }
        inert
    }

    /// True when flow `f` of job `j` has sent everything its dependency allows for now.
    pub fn blocked(&self, j: usize, f: usize) -> bool {
        let (b, up) = self.bound(j, f, self.deps);
        up.is_some() && self.jobs[j].flows[f].sent >= b - EPS_BYTES
    }

    fn rebuild_active(&mut self) {
        self.active.clear();
        for (j, job) in self.jobs.iter().enumerate() {
            if job.network && job.phase == Phase::Communicating {
                for (f, fl) in job.flows.iter().enumerate() {
                    if !fl.done && fl.src != fl.dst {
                        self.active.push((j, f));
                    }
                }
            }
        }
    }

    /// Indices of job `j`'s flows that are active network flows (not done, between two
    /// servers), as in [`Sim::active`] while the job communicates.
    pub fn network_flows(&self, j: usize) -> impl Iterator<Item = usize> + '_ {
        self.jobs[j]
            .flows
            .iter()
            .enumerate()
            .filter(|(_, fl)| !fl.done && fl.src != fl.dst)
            .map(|(f, _)| f)
    }

    /// Stable allocation id of flow `f` of job `j`.
    fn flow_id(&self, j: usize, f: usize) -> u32 {
        self.jobs[j].flow_base + f as u32
    }

    /// Statistics of the incremental allocation: (solves, rounds, flows re-solved, full solves).
    pub fn alloc_stats(&self) -> (u64, u64, u64, u64) {
        (
            self.inc.solves,
            self.inc.rounds,
            self.inc.solved_flows,
            self.inc.full_solves,
        )
    }

    /// Flows in the current allocation (the active flows as of the last allocation).
    pub fn allocated_flows(&self) -> usize {
        self.inc.len()
    }

    /// Sets the flow that id `id` is capped by (pipelined, caught up), keeping the count.
    fn set_up(&mut self, id: u32, up: Option<u32>) {
        let old = &mut self.up_of[id as usize];
        let j = self.id_job[id as usize] as usize;
        match (old.is_some(), up.is_some()) {
            (false, true) => {
                self.n_up += 1;
                self.job_up[j] += 1;
                self.with_up.push(id);
            }
            (true, false) => {
                self.n_up -= 1;
                self.job_up[j] -= 1;
            }
            _ => {}
        }
        *old = up;
        if self.with_up.len() > 2 * self.n_up + 4096 {
            self.compact_up();
        }
    }

    /// Leaves in `with_up` exactly the ids with an upstream cap, each once.
    fn compact_up(&mut self) {
        let up_of = &self.up_of;
        self.with_up.retain(|id| up_of[*id as usize].is_some());
        self.with_up.sort_unstable();
        self.with_up.dedup();
    }

    fn mark_dirty(&mut self, j: usize) {
        if !self.is_dirty[j] {
            self.is_dirty[j] = true;
            self.dirty.push(j);
        }
    }

    /// Brings job `j`'s byte counts to the current time: its flows kept their rates since the
    /// job was last brought up to date (rates only change at allocations, which bring the jobs
    /// they change up to date first). A flow never sends more than its size, nor more than its
    /// dependency allows by the end of the step (the bound at the start, plus what the flow it
    /// waits on sends meanwhile).
    fn materialise(&mut self, j: usize) {
        let dt = self.t - self.upd[j];
        self.upd[j] = self.t;
        if dt.is_nan() || dt <= 0.0 || self.jobs[j].phase != Phase::Communicating {
            return;
        }
        let deps = self.deps;
        let mut lim = std::mem::take(&mut self.scratch);
        lim.clear();
        let mut mins = std::mem::take(&mut self.mins);
        self.ps_mins(j, &mut mins);
        let job = &self.jobs[j];
        for (f, fl) in job.flows.iter().enumerate() {
            if fl.done || fl.rate <= 0.0 {
                lim.push(fl.sent);
                continue;
            }
            let (b, up) = self.bound_in(j, f, deps, &mins);
            let limit = match (up, deps) {
                (Some(u), DepMode::Pipelined) => (b + job.flows[u].rate * dt).min(fl.size),
                _ => b,
            };
            lim.push(limit);
        }
        for (f, &limit) in lim.iter().enumerate() {
            let fl = &self.jobs[j].flows[f];
            if fl.done || fl.rate <= 0.0 {
                continue;
            }
            let d = (fl.rate * dt)
                .min(limit - fl.sent)
                .min(fl.size - fl.sent)
                .max(0.0);
            if d > 0.0 {
                for &l in &fl.path {
                    self.link_bytes[l as usize] += d;
                }
                self.jobs[j].flows[f].sent += d;
            }
        }
        self.scratch = lim;
        self.mins = mins;
    }

    /// Brings every communicating job with network flows up to date (before a whole-cluster
    /// policy reads the byte counts).
    fn materialise_all(&mut self) {
        for j in 0..self.jobs.len() {
            if self.jobs[j].network && self.jobs[j].phase == Phase::Communicating {
                self.materialise(j);
            }
        }
    }

    /// Rates for the flows of the dirty jobs from the policy's control, the dependencies and
    /// max-min; the jobs whose rates the change reaches are brought up to date first and get
    /// their next event anew.
    ///
    /// Weighted max-min with the policy's caps, where a pipelined flow that has caught up with
    /// the data it forwards is also capped at its upstream flow's rate (two refinement rounds,
    /// enough for chains of the length the dependencies form between two events; the first
    /// round starts from the upstream's rate of the previous allocation), then, when the policy
    /// asks for it, what is left idle is shared max-min among the flows that may send
    /// (backfill). Both allocations are incremental ([`IncMaxMin`]): only what the changes since
    /// the last event reach is re-solved; `SimConfig::full_alloc` re-solves everything instead.
    ///
    /// `decided`: the weight and cap of each active flow of the dirty jobs.
    fn allocate(
        &mut self,
        policy: &dyn Policy,
        decided: &[(usize, usize, f64, f64)],
        backfill: bool,
    ) {
        let deps = self.deps;
        let full = self.config.full_alloc;
        self.inc.always_full = full;
        self.id_job.resize(self.next_flow_id as usize, 0);
        self.up_of.resize(self.next_flow_id as usize, None);
        self.base_cap
            .resize(self.next_flow_id as usize, f64::INFINITY);
        self.blocked_flag.resize(self.next_flow_id as usize, false);
        // Flows of the dirty jobs that are no longer active leave the allocation.
        let mut sc = std::mem::take(&mut self.alloc_scratch);
        sc.gone.clear();
        for k in 0..self.dirty.len() {
            let j = self.dirty[k];
            let comm = self.jobs[j].phase == Phase::Communicating;
            for f in 0..self.jobs[j].flows.len() {
                let id = self.flow_id(j, f);
                if (!comm || self.jobs[j].flows[f].done) && self.inc.contains(id) {
                    self.inc.remove(id);
                    if let Some(b) = &mut self.back {
                        b.remove(id);
                    }
                    self.set_up(id, None);
                    self.blocked_flag[id as usize] = false;
                    sc.gone.push(id);
                }
            }
        }
        let mut mins = std::mem::take(&mut self.mins);
        let mut mins_of = usize::MAX;
        for &(j, f, w, cap0) in decided {
            let id = self.flow_id(j, f);
            self.id_job[id as usize] = j as u32;
            let mut cap = cap0;
            if mins_of != j {
                self.ps_mins(j, &mut mins);
                mins_of = j;
            }
            let (b, u) = self.bound_in(j, f, deps, &mins);
            let mut upi = None;
            let mut blocked = false;
            if let Some(u) = u {
                if self.jobs[j].flows[f].sent >= b - EPS_BYTES {
                    blocked = true;
                    match deps {
                        DepMode::StartAfter => cap = 0.0,
                        DepMode::Pipelined => {
                            if self.jobs[j].flows[u].done {
                                cap = 0.0;
                            } else {
                                upi = Some(self.flow_id(j, u));
                            }
                        }
                    }
                }
            }
            let now = match upi {
                Some(u) => cap.min(self.inc.rate(u)),
                None => cap,
            };
            self.inc.set(id, &self.jobs[j].flows[f].path, w, now);
            self.set_up(id, upi);
            self.base_cap[id as usize] = cap;
            self.blocked_flag[id as usize] = blocked;
        }
        self.mins = mins;
        sc.moved.clear();
        self.inc.solve(&mut sc.changed);
        sc.moved.extend_from_slice(&sc.changed);
        // Blocked flows go no faster than what they wait on (two refinements for chains): the
        // blocked flows just decided, and those whose upstream's rate moved.
        if self.n_up > 0 {
            sc.touched_jobs.clear();
            sc.touched_jobs.extend(decided.iter().map(|d| d.0));
            for _ in 0..2 {
                for &id in &sc.changed {
                    sc.touched_jobs.push(self.id_job[id as usize] as usize);
                }
                sc.touched_jobs.sort_unstable();
                sc.touched_jobs.dedup();
                for &j in &sc.touched_jobs {
                    if self.jobs[j].phase != Phase::Communicating || self.job_up[j] == 0 {
                        continue;
                    }
                    for f in 0..self.jobs[j].flows.len() {
                        let id = self.flow_id(j, f);
                        if let Some(u) = self.up_of[id as usize] {
                            if self.inc.contains(id) {
                                let (w, c) = (
                                    self.inc.weight(id),
                                    self.base_cap[id as usize].min(self.inc.rate(u)),
                                );
                                self.inc.set(id, &[], w, c);
                            }
                        }
                    }
                }
                sc.touched_jobs.clear();
                self.inc.solve(&mut sc.changed);
                sc.moved.extend_from_slice(&sc.changed);
            }
        }
        if backfill {
            // Work conservation: what the caps left idle is shared max-min among the flows that
            // may send. The backfill's link capacities are the main allocation's residuals.
            let back = self
                .back
                .get_or_insert_with(|| IncMaxMin::new(&self.tree.capacity));
            back.always_full = full;
            sc.links.clear();
            for &id in sc.moved.iter().chain(sc.gone.iter()) {
                sc.links.extend_from_slice(self.inc.path_of(id));
            }
            if full {
                sc.links.extend(0..self.tree.links() as u32);
            }
            sc.links.sort_unstable();
            sc.links.dedup();
            for &l in &sc.links {
                back.set_link_cap(
                    l,
                    (self.tree.capacity[l as usize] - self.inc.load(l)).max(0.0),
                );
            }
            for &(j, f, _, _) in decided {
                let id = self.jobs[j].flow_base + f as u32;
                let c = if self.blocked_flag[id as usize] {
                    0.0
                } else {
                    f64::INFINITY
                };
                back.set(id, &self.jobs[j].flows[f].path, 1.0, c);
            }
            back.solve(&mut sc.changed);
            sc.moved.extend_from_slice(&sc.changed);
        } else {
            self.back = None;
        }
        // Jobs whose rates may have moved: up to date at their old rates, then the new ones.
        let mut jobs: Vec<usize> = std::mem::take(&mut self.dirty);
        for &j in &jobs {
            self.is_dirty[j] = false;
        }
        for &id in &sc.moved {
            let j = self.id_job[id as usize] as usize;
            if !self.is_dirty[j] {
                self.is_dirty[j] = true;
                jobs.push(j);
            }
        }
        for &j in &jobs {
            self.is_dirty[j] = false;
            self.materialise(j);
            if self.jobs[j].phase == Phase::Communicating {
                self.jobs[j].rate_writes += 1;
                for f in 0..self.jobs[j].flows.len() {
                    if self.jobs[j].flows[f].done {
                        continue;
                    }
                    let id = self.flow_id(j, f);
                    let extra = self.back.as_ref().map_or(0.0, |b| b.rate(id));
                    self.jobs[j].flows[f].rate = self.inc.rate(id) + extra;
                }
            }
            self.schedule(j, policy);
        }
        jobs.clear();
        self.dirty = jobs;
        self.alloc_scratch = sc;
    }

    /// Time until the next flow event of job `j` (a completion, a flow catching up with its
    /// dependency, or a start-after bound moving), seconds.
    /// `mins`: scratch for [`Sim::ps_mins`].
    fn job_next_event(&self, j: usize, mins: &mut Vec<(f64, Option<usize>)>) -> f64 {
        let mut dt = f64::INFINITY;
        let job = &self.jobs[j];
        if job.phase != Phase::Communicating {
            return dt;
        }
        self.ps_mins(j, mins);
        let mins = &mins[..];
        for (f, fl) in job.flows.iter().enumerate() {
            if fl.done {
                continue;
            }
            let (b, up) = self.bound_in(j, f, self.deps, mins);
            // Already complete, or its dependency state moved since it was decided (when the
            // job was brought up to date by an allocation): handle it at once.
            let id = (job.flow_base + f as u32) as usize;
            let blocked_now = up.is_some() && fl.sent >= b - EPS_BYTES;
            if fl.sent >= fl.size - EPS_BYTES
                || self.blocked_flag.get(id).copied().unwrap_or(false) != blocked_now
            {
                return 0.0;
            }
            if fl.rate > 0.0 {
                dt = dt.min((fl.size - fl.sent).max(0.0) / fl.rate);
            }
            if let Some(u) = up {
                let ur = job.flows[u].rate;
                let blocked = fl.sent >= b - EPS_BYTES;
                match self.deps {
                    DepMode::Pipelined => {
                        if !blocked && fl.rate > ur {
                            dt = dt.min((b - fl.sent) / (fl.rate - ur));
                        }
                        // A pull's bound is the least of several pushes: any of them may
                        // become the least.
                        if let FlowRole::Pull { ps } = fl.role {
                            let w = job.spec.workers as usize;
                            for k in ps * w..(ps + 1) * w {
                                let p = &job.flows[k];
                                if !blocked && fl.rate > p.rate && p.sent > fl.sent {
                                    dt = dt.min((p.sent - fl.sent) / (fl.rate - p.rate));
                                }
                            }
                        }
                    }
                    DepMode::StartAfter => {
                        if blocked {
                            if let FlowRole::Ring { .. } = fl.role {
                                if ur > 0.0 {
                                    let upf = &job.flows[u];
                                    let next = ((upf.sent + EPS_BYTES) / job.chunk).floor()
                                        * job.chunk
                                        + job.chunk;
                                    dt = dt.min((next - upf.sent).max(0.0) / ur);
                                }
                            }
                        } else if fl.rate > 0.0 {
                            dt = dt.min((b - fl.sent).max(0.0) / fl.rate);
                        }
                    }
                }
            }
        }
        dt
    }

    /// Queues job `j`'s next flow event, or the policy's next decision about it if earlier
    /// (replacing the one queued before).
    fn schedule(&mut self, j: usize, policy: &dyn Policy) {
        self.job_ver[j] = self.job_ver[j].wrapping_add(1);
        let mut mins = std::mem::take(&mut self.mins);
        let mut dt = self.job_next_event(j, &mut mins);
        self.mins = mins;
        self.dec_at[j] = f64::INFINITY;
        if policy.is_local() && self.jobs[j].network && self.jobs[j].phase == Phase::Communicating {
            let at = policy.job_next_decision(self, j);
            self.dec_at[j] = at;
            self.dec_iv[j] = at - self.t;
            dt = dt.min((at - self.t).max(0.0));
        }
        if dt.is_finite() {
            self.job_events
                .push(JobEvent(self.t + dt, j, self.job_ver[j]));
        }
    }

    /// The earliest queued flow event that is still current, seconds.
    fn next_job_event(&mut self) -> f64 {
        while let Some(&JobEvent(t, j, v)) = self.job_events.peek() {
            if v != self.job_ver[j] {
                self.job_events.pop();
                continue;
            }
            return t;
        }
        f64::INFINITY
    }

    /// One event: decide, allocate, advance to the next event, handle what happened there.
    /// Returns false when nothing is left to do.
    ///
    /// A policy that decides per job ([`Policy::flow_control`]) is asked only about the jobs an
    /// event touched, and only their flows (and those the allocation's change reaches) are
    /// brought up to date; any other policy sees the whole cluster's network flows, brought up
    /// to date, at each of its decisions, and then only the jobs an event touched, those whose
    /// weight or cap it moved and those with a flow capped at its upstream's rate are
    /// re-allocated (the others' inputs are unchanged; `SimConfig::full_alloc` re-solves all).
    /// A sparse whole-cluster policy ([`Policy::is_sparse`]: MCS and mlcc unless exact) is
    /// asked which jobs to re-decide besides those an event touched ([`Policy::select_jobs`]);
    /// only those are brought up to date, decided ([`Policy::decide_jobs`]) and re-allocated, as
    /// for a per-job policy.
    pub fn step(&mut self, policy: &mut dyn Policy) -> bool {
        self.events += 1;
        self.deps = self.config.deps.unwrap_or_else(|| policy.deps());
        let local = policy.is_local();
        if local {
            if self.flows_changed {
                self.flows_changed = false;
                self.next_decision = f64::INFINITY;
            }
            if !self.dirty.is_empty() {
                let frac = policy.coalesce_within();
                if frac > 0.0 {
                    self.coalesce(frac);
                }
                let t0 = Instant::now();
                let mut decided = Vec::new();
                for k in 0..self.dirty.len() {
                    let j = self.dirty[k];
                    self.materialise(j);
                    if self.jobs[j].phase != Phase::Communicating {
                        continue;
                    }
                    for f in 0..self.jobs[j].flows.len() {
                        let fl = &self.jobs[j].flows[f];
                        if fl.done {
                            continue;
                        }
                        let (w, c) = if fl.src == fl.dst {
                            (1.0, f64::INFINITY) // inside a server: no policy controls it
                        } else {
                            policy
                                .flow_control(self, j, f)
                                .unwrap_or((1.0, f64::INFINITY))
                        };
                        self.jobs[j].flows[f].decided_sent = self.jobs[j].flows[f].sent;
                        decided.push((j, f, w, c));
                    }
                }
                self.decisions.add(t0.elapsed().as_secs_f64() * 1e6);
                self.allocate(&*policy, &decided, false);
            }
        } else if policy.is_sparse() {
            let at = self.t >= self.next_decision - 1e-12;
            if at || self.flows_changed || !self.dirty.is_empty() {
                self.flows_changed = false;
                let t0 = Instant::now();
                let touched = std::mem::take(&mut self.touched);
                let mut sel = std::mem::take(&mut self.selected);
                sel.clear();
                policy.select_jobs(self, &self.dirty, at, &mut sel);
                for &j in &sel {
                    self.mark_dirty(j);
                }
                let mut t_policy = t0.elapsed().as_secs_f64();
                // Only the touched and selected jobs are brought up to date and decided; the
                // others keep their decision and their allocation.
                for k in 0..self.dirty.len() {
                    let j = self.dirty[k];
                    self.materialise(j);
                }
                let mut jobs = touched;
                jobs.clear();
                jobs.extend_from_slice(&self.dirty);
                let mut decided: Vec<(usize, usize, f64, f64)> = Vec::new();
                let t1 = Instant::now();
                self.next_decision = policy.decide_jobs(self, &jobs, at, &mut decided);
                t_policy += t1.elapsed().as_secs_f64();
                self.decisions.add(t_policy * 1e6);
                self.touched = jobs;
                self.selected = sel;
                self.decide_intra(&mut decided);
                let backfill = policy.backfill();
                self.allocate(&*policy, &decided, backfill);
            }
        } else if self.flows_changed
            || self.t >= self.next_decision - 1e-12
            || policy.decide_every_event()
        {
            self.materialise_all();
            self.rebuild_active();
            let mut ctl = std::mem::take(&mut self.ctl);
            let t0 = Instant::now();
            self.next_decision = policy.decide(self, &mut ctl);
            self.decisions.add(t0.elapsed().as_secs_f64() * 1e6);
            self.ctl = ctl;
            self.flows_changed = false;
            // Only the jobs an event touched and those with a flow whose weight or cap moved
            // are re-allocated: the others' inputs to the allocation are what they were, and
            // the weighted max-min allocation with caps is unique.
            self.pol
                .resize(self.next_flow_id as usize, (f64::NAN, f64::NAN));
            for i in 0..self.active.len() {
                let (j, f) = self.active[i];
                let d = (
                    self.ctl.weight.get(i).copied().unwrap_or(1.0),
                    self.ctl.cap.get(i).copied().unwrap_or(f64::INFINITY),
                );
                let id = self.flow_id(j, f);
                if self.config.full_alloc || !self.inc.contains(id) || self.pol[id as usize] != d {
                    self.mark_dirty(j);
                }
                self.pol[id as usize] = d;
            }
            // A flow capped at the rate of the flow it waits on takes that rate anew whenever
            // its job is allocated (the refinement rounds follow chains only two links deep):
            // such jobs are re-allocated at every decision, as when every job was.
            self.compact_up();
            for k in 0..self.with_up.len() {
                let j = self.id_job[self.with_up[k] as usize] as usize;
                if self.jobs[j].phase == Phase::Communicating {
                    self.mark_dirty(j);
                }
            }
            let mut decided: Vec<(usize, usize, f64, f64)> = Vec::new();
            for &(j, f) in &self.active {
                if self.is_dirty[j] {
                    let d = self.pol[self.flow_id(j, f) as usize];
                    decided.push((j, f, d.0, d.1));
                }
            }
            self.decide_intra(&mut decided);
            let backfill = self.ctl.backfill;
            self.allocate(&*policy, &decided, backfill);
        } else if !self.dirty.is_empty() {
            // Jobs whose network flows changed between two decisions of a global policy keep
            // their decision; only a finished iteration's flows leave the allocation. Flows
            // inside servers need no decision and join at once.
            let mut decided = Vec::new();
            self.decide_intra(&mut decided);
            let backfill = self.ctl.backfill;
            self.allocate(&*policy, &decided, backfill);
        }
        // Next event.
        let mut next = self.t + (self.next_job_event() - self.t).max(0.0);
        if !local {
            next = next.min(self.next_decision);
        }
        if let Some(a) = self.jobs.get(self.next_arrival) {
            next = next.min(a.spec.arrival_s);
        }
        if let Some(tm) = self.timers.peek() {
            next = next.min(tm.0);
        }
        if !next.is_finite() {
            return false;
        }
        let dt = (next - self.t).max(self.config.min_step_s);
        self.t += dt;
        self.handle_events(policy);
        true
    }

    /// Marks dirty every communicating job that shares a network link with a dirty job and whose
    /// next decision is due within `frac` of the interval it was scheduled with
    /// ([`Policy::coalesce_within`]).
    fn coalesce(&mut self, frac: f64) {
        let t = self.t;
        for k in 0..self.dirty.len() {
            let j = self.dirty[k];
            if !self.jobs[j].network {
                continue;
            }
            for x in 0..self.jobs[j].link_bytes.len() {
                let l = self.jobs[j].link_bytes[x].0;
                if self.tree.is_intra(l) {
                    continue;
                }
                for y in 0..self.link_jobs[l as usize].len() {
                    let m = self.link_jobs[l as usize][y];
                    // (A job with no decision due, `f64::INFINITY`, is never pulled in.)
                    if !self.is_dirty[m]
                        && self.dec_at[m].is_finite()
                        && self.dec_at[m] - t <= frac * self.dec_iv[m]
                        && self.jobs[m].phase == Phase::Communicating
                    {
                        self.mark_dirty(m);
                    }
                }
            }
        }
    }

    /// Adds the active flows inside a server of the dirty jobs to `decided` at weight 1, no
    /// cap (no policy controls them), bringing those jobs up to date first.
    fn decide_intra(&mut self, decided: &mut Vec<(usize, usize, f64, f64)>) {
        for k in 0..self.dirty.len() {
            let j = self.dirty[k];
            if self.jobs[j].phase != Phase::Communicating {
                continue;
            }
            self.materialise(j);
            for (f, fl) in self.jobs[j].flows.iter().enumerate() {
                if !fl.done && fl.src == fl.dst {
                    decided.push((j, f, 1.0, f64::INFINITY));
                }
            }
        }
    }

    fn handle_events(&mut self, policy: &mut dyn Policy) {
        let t = self.t;
        // Jobs with a flow event due: up to date, then completions and dependency changes.
        let mut ended: Vec<usize> = Vec::new();
        while let Some(&JobEvent(te, j, v)) = self.job_events.peek() {
            if v != self.job_ver[j] {
                self.job_events.pop();
                continue;
            }
            if te > t + 1e-12 {
                break;
            }
            self.job_events.pop();
            self.materialise(j);
            let mut changed = false;
            let mut mins = std::mem::take(&mut self.mins);
            self.ps_mins(j, &mut mins);
            for f in 0..self.jobs[j].flows.len() {
                let fl = &self.jobs[j].flows[f];
                if fl.done {
                    continue;
                }
                if fl.sent >= fl.size - EPS_BYTES {
                    self.jobs[j].flows[f].done = true;
                    changed = true;
                    continue;
                }
                // A flow becoming bound by (or freed from) its dependency is a change too.
                let id = self.flow_id(j, f);
                let (b, up) = self.bound_in(j, f, self.deps, &mins);
                let blocked_now = up.is_some() && self.jobs[j].flows[f].sent >= b - EPS_BYTES;
                if self.blocked_flag.get(id as usize).copied().unwrap_or(false) != blocked_now {
                    changed = true;
                }
            }
            self.mins = mins;
            if changed {
                self.flows_changed |= self.jobs[j].network;
                self.mark_dirty(j);
                ended.push(j);
            } else {
                // The policy's own decision time for the job (MLTCP's next F), or rounding left
                // it short of the event: decide and look again.
                self.mark_dirty(j);
            }
        }
        for j in ended {
            if self.jobs[j].phase != Phase::Communicating
                || self.jobs[j].flows.iter().any(|f| !f.done)
            {
                continue;
            }
            // The burst ended: its slowdown, for `priority-sedf` (seconds to ns).
            let job = &mut self.jobs[j];
            let ns = |s: f64| {
                if s.is_finite() && s > 0.0 {
                    (s * 1e9) as u64
                } else {
                    0
                }
            };
            let (alone_ns, took_ns) = (ns(job.alone_comm_s), ns(t - job.comm_start_s));
            job.comm_slowdown.on_burst(alone_ns, took_ns);
            self.jobs[j].iterations_done += 1;
            if self.jobs[j].iterations_done >= self.jobs[j].spec.iterations {
                self.finish(j, policy);
                self.place_queued(policy);
            } else if let Some(a) = self.jobs[j].align.take() {
                let mut wait = (a.at_s - t).rem_euclid(a.period_s);
                if wait > a.period_s - 1e-9 {
                    wait = 0.0; // rounding: already aligned
                }
                if wait > 1e-9 {
                    self.jobs[j].shifted_s += wait;
                    self.jobs[j].phase = Phase::Shifted(t + wait);
                    self.timers.push(Timer(t + wait, j));
                } else {
                    self.start_compute(j);
                }
            } else {
                self.start_compute(j);
            }
        }
        // Timers.
        while let Some(tm) = self.timers.peek().copied() {
            if tm.0 > t + 1e-12 {
                break;
            }
            self.timers.pop();
            match self.jobs[tm.1].phase {
                Phase::Computing(_) => {
                    self.start_iteration_comm(tm.1);
                    if self.jobs[tm.1].flows.iter().all(|f| f.done) {
                        // Nothing to send (flows of at most one byte): next iteration.
                        self.jobs[tm.1].iterations_done += 1;
                        if self.jobs[tm.1].iterations_done >= self.jobs[tm.1].spec.iterations {
                            self.finish(tm.1, policy);
                        } else {
                            self.start_compute(tm.1);
                        }
                    }
                }
                Phase::Shifted(_) => self.start_compute(tm.1),
                _ => {}
            }
        }
        // Arrivals.
        while let Some(a) = self.jobs.get(self.next_arrival) {
            if a.spec.arrival_s > t + 1e-12 {
                break;
            }
            self.queue.push_back(self.next_arrival);
            self.next_arrival += 1;
        }
        self.place_queued(policy);
    }

    fn place_queued(&mut self, policy: &mut dyn Policy) {
        while let Some(&j) = self.queue.front() {
            if !self.place(j, policy) {
                break;
            }
            self.queue.pop_front();
        }
    }

    /// Sizes of the connected components of the active flows (flows linked by a shared link or
    /// by belonging to the same job), largest first.
    pub fn component_sizes(&self) -> Vec<usize> {
        let mut active: Vec<(usize, usize)> = Vec::new();
        for (j, job) in self.jobs.iter().enumerate() {
            if job.phase == Phase::Communicating {
                active.extend(
                    job.flows
                        .iter()
                        .enumerate()
                        .filter(|(_, fl)| !fl.done)
                        .map(|(f, _)| (j, f)),
                );
            }
        }
        let n = active.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        let mut owner_link: Vec<usize> = vec![usize::MAX; self.tree.links()];
        let mut owner_job: std::collections::HashMap<usize, usize> =
            std::collections::HashMap::new();
        for (i, &(j, f)) in active.iter().enumerate() {
            let o = *owner_job.entry(j).or_insert(i);
            let (a, b) = (find(&mut parent, o), find(&mut parent, i));
            parent[a] = b;
            for &l in &self.jobs[j].flows[f].path {
                let o = owner_link[l as usize];
                if o == usize::MAX {
                    owner_link[l as usize] = i;
                } else {
                    let (a, b) = (find(&mut parent, o), find(&mut parent, i));
                    parent[a] = b;
                }
            }
        }
        let mut size = vec![0usize; n];
        for i in 0..n {
            let r = find(&mut parent, i);
            size[r] += 1;
        }
        let mut v: Vec<usize> = size.into_iter().filter(|s| *s > 0).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v
    }

    /// True when every job has finished.
    pub fn all_done(&self) -> bool {
        self.jobs.iter().all(|j| j.phase == Phase::Done)
    }

    /// Takes in the jobs arriving at time 0 (call once before stepping by hand).
    pub fn start(&mut self, policy: &mut dyn Policy) {
        self.handle_events(policy);
    }

    /// Runs to the end (or `max_time_s`), calling `progress(t)` now and then.
    pub fn run(&mut self, policy: &mut dyn Policy, progress: &mut dyn FnMut(&Sim)) {
        self.start(policy);
        let mut k = 0u64;
        while !self.all_done() && self.t < self.config.max_time_s {
            if !self.step(policy) {
                break;
            }
            k += 1;
            if k % 4096 == 0 {
                progress(self);
            }
        }
        progress(self);
    }
}
