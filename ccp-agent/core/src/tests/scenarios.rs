// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Scenario tests: two agents, switch s1 and a simulated datapath ([`super::sim`]) carry two
//! ring jobs and a parameter-server job that share link 10. Checked: no job starves, the
//! dependency notices go where the dependencies are, every controlled flow gets its rate every
//! slot, flows close cleanly, and a failing or slow switch degrades the planning without losing
//! a flow.

use super::sim::{Sim, Tweak, FIRST_SLOT};
use crate::proto::notice_kind;
use crate::Action;
use mlcc_sched::{JobOrder, Rules};
use mltcp_progress::{FlowKind, Paradigm, Role};
use std::collections::HashMap;

/// The workload: ring "ra" over h1 → h3 → h1, ring "rb" over h2 → h4 → h2, PS job "ps" with
/// its server on h4 and workers on h1 and h2. Every flow crosses link 10 (100 Mbit/s, 250 kB a
/// slot); one round of all three jobs is 2.4 MB, about 10 slots of the link.
fn workload(sim: &mut Sim) {
    sim.ring("ra", &[1, 3], 400_000, 3);
    sim.ring("rb", &[2, 4], 400_000, 3);
    sim.ps("ps", 4, &[1, 2], 200_000, 3);
    sim.create_flows();
}

/// Runs `slots` slots and checks that every open, controlled flow got a Rate in each.
fn run(sim: &mut Sim, slots: u64) {
    for _ in 0..slots {
        sim.step();
        let slot = sim.slot - 1;
        for f in sim.flows.iter().filter(|f| !f.closed && f.installed) {
            assert_eq!(
                f.last_set_slot,
                Some(slot),
                "{} had no Rate in slot {slot}",
                f.key
            );
        }
    }
}

fn completed(sim: &Sim) -> Vec<u64> {
    sim.jobs.iter().map(|j| j.completed).collect()
}

/// No job starves: each completed at least `min` iterations, and the slowest at least half as
/// many as the fastest.
fn assert_no_starvation(done: &[u64], min: u64) {
    let (lo, hi) = (done.iter().min().copied(), done.iter().max().copied());
    let (Some(lo), Some(hi)) = (lo, hi) else {
        panic!("no job")
    };
    assert!(lo >= min && lo * 2 >= hi, "iterations per job: {done:?}");
}

#[test]
fn ring_and_ps_jobs_share_a_link_and_none_starves() {
    let mut sim = Sim::two_agents(|_| ());
    workload(&mut sim);
    assert!(sim.flows.iter().all(|f| f.installed));
    run(&mut sim, 300);
    assert_no_starvation(&completed(&sim), 10);
    // The switch's table holds every flow once, and the agents' schedules for the current
    // slot fit link 10.
    assert_eq!(sim.switch.table.len(), sim.flows.len());
    let now: u64 = sim
        .switch
        .table
        .values()
        .map(|(_, start, rates)| {
            let i = usize::try_from(sim.slot - 1 - start).unwrap_or(usize::MAX);
            rates.get(i).copied().unwrap_or(0)
        })
        .sum();
    assert!(
        now <= super::sim::SHARED_BPS,
        "{now} bit/s planned on link 10"
    );
    for a in &sim.agents {
        let st = a.status.as_ref().expect("a status");
        assert_eq!((st.mode.as_str(), st.slot), ("switch", sim.slot - 1));
        assert_eq!(st.flows.len(), 4, "{st:?}");
    }
}

#[test]
fn dependency_notices_follow_the_dependencies() {
    let mut sim = Sim::two_agents(|_| ());
    workload(&mut sim);
    run(&mut sim, 100);
    for (a, agent) in sim.agents.iter().enumerate() {
        assert!(!agent.notices_sent.is_empty(), "agent {a} sent no notice");
        for (peer, n) in &agent.notices_sent {
            // The flow the notice describes: sent by this agent's host, from rank to rank.
            let f = sim
                .flows
                .iter()
                .find(|f| {
                    f.agent == a
                        && f.reg.job == n.job
                        && f.reg.rank == n.from_rank
                        && f.reg.peer_rank == n.to_rank
                })
                .unwrap_or_else(|| panic!("a notice of no flow of agent {a}: {n:?}"));
            // It goes to the agent of the receiver...
            let receiver = sim
                .flows
                .iter()
                .find(|g| g.key.src == f.key.dst)
                .map(|g| g.agent);
            assert_eq!(
                receiver.map(|r| sim.agents[r].cfg.listen),
                Some(*peer),
                "{n:?}"
            );
            // ...with the kind of dependency the paradigm implies, and never more bytes than
            // the flow carries per iteration.
            let kind = match (f.reg.paradigm, f.reg.role, f.reg.kind) {
                (Paradigm::Ring, _, FlowKind::RingSend) => notice_kind::RING,
                (Paradigm::ParameterServer, Role::Worker, FlowKind::PsPush) => {
                    notice_kind::PS_AGGREGATION
                }
                (Paradigm::ParameterServer, Role::ParameterServer, FlowKind::PsPull) => {
                    notice_kind::PS_BROADCAST
                }
                other => panic!("a notice for {other:?}"),
            };
            assert_eq!(n.kind, kind, "{n:?}");
            assert!(
                n.accumulated_bytes <= f.reg.iteration_bytes.unwrap_or(0),
                "{n:?}"
            );
            // A PS's broadcast notice carries F_b^max over its broadcasts.
            assert!(n.bound_bytes >= n.accumulated_bytes, "{n:?}");
        }
    }
    // Every job went through iterations: the dependencies never deadlocked a job.
    assert!(
        completed(&sim).iter().all(|c| *c >= 3),
        "{:?}",
        completed(&sim)
    );
}

#[test]
fn flows_close_cleanly() {
    let mut sim = Sim::two_agents(|_| ());
    workload(&mut sim);
    run(&mut sim, 40);
    assert!(!sim.switch.table.is_empty());
    sim.close_all();
    // `run` checks that no closed flow gets a Rate (the simulated datapath refuses it).
    run(&mut sim, 2);
    assert!(sim.switch.table.is_empty(), "{:?}", sim.switch.table);
    for a in &sim.agents {
        assert_eq!(a.core.counts(), (0, 0));
        let st = a.status.as_ref().expect("a status");
        assert!(st.flows.is_empty() && st.native_flows == 0, "{st:?}");
    }
}

#[test]
fn a_failing_switch_degrades_to_nic_planning_without_losing_flows() {
    let mut sim = Sim::two_agents(|_| ());
    workload(&mut sim);
    run(&mut sim, 40);
    let before = completed(&sim);
    sim.switch.failing = true;
    // `run` checks that every flow keeps getting its Rate in every slot of the outage.
    run(&mut sim, 150);
    let during: Vec<u64> = completed(&sim)
        .iter()
        .zip(&before)
        .map(|(a, b)| a - b)
        .collect();
    assert_no_starvation(&during, 5);
    for a in &sim.agents {
        assert_eq!(a.core.counts(), (4, 4), "no flow lost");
        assert_eq!(a.status.as_ref().map(|s| s.flows.len()), Some(4));
    }
    // The switch comes back: the agents' schedules return to its table.
    sim.switch.failing = false;
    sim.switch.table.clear();
    run(&mut sim, 3);
    assert_eq!(sim.switch.table.len(), sim.flows.len());
}

#[test]
fn nic_only_agents_share_the_link_too() {
    let mut sim = Sim::two_agents(|c| c.nic_only = true);
    workload(&mut sim);
    run(&mut sim, 300);
    assert_no_starvation(&completed(&sim), 10);
    assert_eq!(
        sim.switch.answered, 0,
        "no RPC to a switch in NIC-only mode"
    );
}

#[test]
fn slow_switch_answers_do_not_hold_the_datapath() {
    // The switch answers after every agent's tick: each slot's rates come late, the reports
    // of the slot are taken meanwhile, and the jobs still go through iterations.
    let mut slow = Sim::two_agents(|_| ());
    slow.slow_switch = true;
    workload(&mut slow);
    run(&mut slow, 200);
    assert_no_starvation(&completed(&slow), 7);
    assert_eq!(slow.slot, FIRST_SLOT + 200);
    for a in &slow.agents {
        let st = a.status.as_ref().expect("a status");
        assert!(st.flows.iter().any(|f| f.achieved_bps > 0), "{st:?}");
    }
}

#[test]
fn one_agent_for_every_host_decides_both_ends_of_each_dependency_together() {
    // As in the VM testbed: one agent serves every host, so every dependency is between flows
    // of one snapshot of the policy layer, decided (and cut) together; no notice goes out, and
    // none is needed. Under every rule set (and priority by earliest deadline), no job starves.
    let cases: [(&str, Tweak); 5] = [
        ("one-mlcc", |_| ()),
        ("one-interleave", |c| c.rules = Rules::Interleave),
        ("one-priority", |c| c.rules = Rules::Priority),
        ("one-priority-edf", |c| {
            c.rules = Rules::Priority;
            c.job_order = JobOrder::EarliestDeadline;
        }),
        ("one-priority-strict", |c| {
            c.rules = Rules::Priority;
            c.strict_rates = true;
        }),
    ];
    for (tag, extra) in cases {
        let cfg = super::sim::config(&["h1", "h2", "h3", "h4"], extra);
        let mut sim = Sim::with_configs(vec![cfg]);
        workload(&mut sim);
        assert!(sim.flows.iter().all(|f| f.installed));
        run(&mut sim, 300);
        assert_no_starvation(&completed(&sim), 10);
        assert!(
            sim.agents[0].notices_sent.is_empty(),
            "{tag}: {:?}",
            sim.agents[0].notices_sent.first()
        );
        let st = sim.agents[0].status.as_ref().expect("a status");
        assert_eq!(st.flows.len(), 8, "{tag}: {st:?}");
        println!(
            "{tag}: iterations per job {:?}, overbooked slots {}",
            completed(&sim),
            sim.overbooked_slots
        );
        if tag == "one-priority-strict" {
            // Strict rates reserve the floors of the flows held behind the first-ranked job:
            // the shared link is never asked for more than it carries (189 of 300 slots
            // without, every sender losing bytes in them).
            assert_eq!(sim.overbooked_slots, 0, "{tag}");
        }
    }
}

/// The scenarios of the comparisons below: two agents with switch s1 under the `mlcc` rules,
/// and one agent for every host under `priority`, NIC-only (its re-plans within the slot).
const COMPARED: [(&str, bool, Tweak); 2] = [
    ("two-agents-mlcc", false, |_| ()),
    ("one-agent-priority-nic-only", true, |c| {
        c.rules = Rules::Priority;
        c.nic_only = true;
    }),
];

/// Runs scenario `one_agent`/`extra` of [`COMPARED`] (with `classes` traffic classes) for
/// `slots` slots.
fn compared_run(one_agent: bool, extra: Tweak, classes: u8, slots: u64) -> Sim {
    let mut cfgs = if one_agent {
        vec![super::sim::config(&["h1", "h2", "h3", "h4"], extra)]
    } else {
        Sim::two_agents(extra)
            .agents
            .into_iter()
            .map(|a| a.cfg)
            .collect()
    };
    for c in &mut cfgs {
        c.classes = classes;
    }
    let mut sim = Sim::with_configs(cfgs);
    workload(&mut sim);
    run(&mut sim, slots);
    sim
}

/// Every agent's actions as text, one line each, to compare runs: the RTT maps in flow order
/// (a map keeps none), without what traffic classes add (the SetClass actions, the flows'
/// DSCPs in the status) and without a zero scavenger target.
fn rendered(sim: &Sim) -> Vec<String> {
    let mut out = Vec::new();
    for (a, agent) in sim.agents.iter().enumerate() {
        for act in &agent.actions {
            let line = match act {
                Action::SetClass { .. } => continue,
                Action::Rtts(r) => {
                    let mut r: Vec<_> = r.iter().collect();
                    r.sort_unstable();
                    format!("Rtts({r:?})")
                }
                Action::Status(s) => {
                    let mut s = s.clone();
                    for f in &mut s.flows {
                        f.dscp = None;
                    }
                    format!("{:?}", Action::Status(s)).replace(", dscp: None", "")
                }
                // The scavenger target, 0 unless `held_flows = "scavenger"`, is left out, so
                // the digests recorded before it existed still pin the floor mode's actions.
                other => format!("{other:?}").replace(", scavenge_us: 0 }", " }"),
            };
            out.push(format!("{a} {line}"));
        }
    }
    out
}

/// FNV-1a (64 bits) of `lines`, each ended by a newline.
fn digest(lines: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in lines.iter().flat_map(|l| l.bytes().chain([b'\n'])) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[test]
fn without_classes_the_actions_are_those_of_the_core_before_classes() {
    // (actions, digest of `rendered`) of 100 slots of each scenario, recorded with the core
    // as it was before traffic classes (plain `mlcc_sched::policy::decide`, no class state);
    // the switch scenario's again when the spare share joined the schedule the switch admits
    // (`Planned::requested`: its `UpdateSchedule`s ask for it, the other agent's feedback
    // counts it), the NIC-only one's unchanged; the NIC-only one's again when idle members
    // with bytes they can send took their priority shares before idle members without
    // (`mlcc_sched::policy`'s `SharePass`), the switch scenario's unchanged; the switch
    // scenario's again when a shortfall stopped lowering the estimate of a NIC behind a
    // narrower switch link (`measure::may_bottleneck`), and the NIC-only one's with it.
    let before: [(usize, u64); 2] = [(3222, 0x01fd_64b5_fca7_7c59), (1201, 0x0018_d39e_28f1_ecc4)];
    for ((tag, one_agent, extra), want) in COMPARED.into_iter().zip(before) {
        let sim = compared_run(one_agent, extra, 0, 100);
        let lines = rendered(&sim);
        let set_class = sim.agents.iter().flat_map(|a| &a.actions);
        assert!(
            !set_class
                .clone()
                .any(|a| matches!(a, Action::SetClass { .. })),
            "{tag}: classes off set a class"
        );
        assert_eq!((lines.len(), digest(&lines)), want, "{tag}");
    }
}

#[test]
fn classes_change_no_rate_no_plan_and_no_rpc() {
    for (tag, one_agent, extra) in COMPARED {
        let off = rendered(&compared_run(one_agent, extra, 0, 100));
        for classes in [1, 4, 8] {
            let sim = compared_run(one_agent, extra, classes, 100);
            assert_eq!(rendered(&sim), off, "{tag}, {classes} classes");
            // Each flow's class is set when first planned, then again only when it changes
            // (the policy's order moves with the bursts here; with 1 class it never does).
            let mut sent = 0;
            for (a, agent) in sim.agents.iter().enumerate() {
                let mut last: HashMap<u64, Option<u8>> = HashMap::new();
                for act in &agent.actions {
                    if let Action::SetClass { flow, dscp } = act {
                        let before = last.insert(*flow, *dscp);
                        assert_ne!(before, Some(*dscp), "{tag}: agent {a} flow {flow}");
                        assert!(dscp.is_some(), "{tag}: every flow stays planned");
                        sent += 1;
                    }
                }
                assert_eq!(
                    last.len(),
                    sim.flows.iter().filter(|f| f.agent == a).count()
                );
            }
            if classes == 1 {
                assert_eq!(sent, sim.flows.len(), "{tag}");
            }
            assert!(
                sim.flows.iter().all(|f| f.dscp.is_some()),
                "{tag}, {classes} classes"
            );
        }
    }
}
