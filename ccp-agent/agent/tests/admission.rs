// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Concurrent planning on a shared switch link (issue: two agents that plan in the same slot
//! both read `FetchFeedback` before either's `UpdateSchedule` lands, so both can take the same
//! free capacity). The switch admits each schedule against what is left on its links, one
//! request at a time, and the agents enforce the admitted rates.
//!
//! Topology: hosts h1 (agent A) and h3 (agent B) both send to h2 through link 10 of switch s1,
//! 40 Mbit/s; NIC links at 100 Mbit/s. Each agent has one job of one flow, 600 kB per iteration
//! with 100 ms of "compute" between iterations, and more than the link can carry in the horizon
//! (5 slots of 20 ms at 40 Mbit/s = 500 kB), so both agents plan for the whole link every slot.
//! Their slots start at the same wall-clock instants. Checked while they run: the switch's
//! committed load on link 10 never exceeds 40 Mbit/s in any of the K slots (sampled every 5 ms),
//! the rates the two datapaths run at add up to at most the link (with one slot of slack at the
//! slot edges, where one agent has moved to its new rate and the other not yet), and both jobs
//! get a share: each goes through iterations and runs above the rate floor.

mod common;

use ccp_agent::config::{AgentConfig, Topology};
use common::{
    agent_toml, key, listeners, wait_for_sockets, with_progress_dir, AgentProc, MockDatapath,
    MockFlow, Rank, SwitchDaemon,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LINK_BPS: u64 = 40_000_000;

#[test]
fn two_agents_sharing_a_switch_link_never_overcommit_it() {
    common::init_tracing("ccp_agent=info");
    let (tmp, progress) = with_progress_dir("admission");
    let ([la, lb, ls], [aa, ab, as_]) = listeners();
    let topo = tmp.write(
        "topo.toml",
        &format!(
            r#"slot_ms = 20
horizon = 5
[[link]]
id = 1
capacity_mbps = 100
[[link]]
id = 2
capacity_mbps = 100
[[link]]
id = 3
capacity_mbps = 100
[[link]]
id = 10
capacity_mbps = 40
[[host]]
name = "h1"
addrs = ["10.3.0.1"]
nic = 1
agent = "{aa}"
[[host]]
name = "h2"
addrs = ["10.3.0.2"]
nic = 2
agent = "127.0.0.1:1"
[[host]]
name = "h3"
addrs = ["10.3.0.3"]
nic = 3
agent = "{ab}"
[[switch]]
name = "s1"
listen = "{as_}"
links = [10]
[[route]]
from = "h1"
to = "h2"
links = [1, 10]
[[route]]
from = "h3"
to = "h2"
links = [3, 10]
"#
        ),
    );
    let names = [
        format!("adm-a-{}", std::process::id()),
        format!("adm-b-{}", std::process::id()),
    ];
    let agent_toml = |host: &str, name: &str| {
        let extra = "rpc_timeout_ms = 15\n[pcn]\nenabled = false\n";
        agent_toml(&tmp, host, name, &topo, &progress, extra)
    };
    let cfg_a = AgentConfig::load(&agent_toml("h1", &names[0]), None, None).unwrap();
    let cfg_b = AgentConfig::load(&agent_toml("h3", &names[1]), None, None).unwrap();
    let topology = Topology::load(&topo).unwrap();

    let switch = SwitchDaemon::start(topology, ls, (20_000, 5), None);
    let agents = [AgentProc::start(cfg_a, la), AgentProc::start(cfg_b, lb)];
    wait_for_sockets(&names);

    let fa = key([10, 3, 0, 1], 40000, [10, 3, 0, 2], 5000);
    let fb = key([10, 3, 0, 3], 40001, [10, 3, 0, 2], 5000);
    let pa = Arc::new(Mutex::new(Rank::new(&progress, "ja", 0, &fa, None)));
    let pb = Arc::new(Mutex::new(Rank::new(&progress, "jb", 0, &fb, None)));
    let line = 12_500_000; // 100 Mbit/s
    let dp_a = {
        let p = pa.clone();
        MockDatapath::start(
            &names[0],
            vec![MockFlow {
                key: fa,
                line_rate: line,
            }],
            move |_, n| p.lock().unwrap().acked(n),
        )
    };
    let dp_b = {
        let p = pb.clone();
        MockDatapath::start(
            &names[1],
            vec![MockFlow {
                key: fb,
                line_rate: line,
            }],
            move |_, n| p.lock().unwrap().acked(n),
        )
    };

    let rt = common::client_rt();
    let mut samples = 0;
    let mut max_committed = 0u64;
    let mut both_planned = 0;
    let (mut rate_samples, mut rate_over) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(6);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        if let Ok(r) = rt.block_on(ccp_agent::status::switch_status(as_)) {
            let l = r.links.iter().find(|l| l.link == 10).unwrap();
            samples += 1;
            let m = l.load_bps.iter().copied().max().unwrap_or(0);
            max_committed = max_committed.max(m);
            assert!(
                m <= LINK_BPS,
                "link 10 committed above its capacity: {:?} (flows {})",
                l.load_bps,
                r.flows
            );
            if r.flows == 2 {
                both_planned += 1;
            }
        }
        let (sa, sb) = (dp_a.snapshot(), dp_b.snapshot());
        if let (Some(a), Some(b)) = (sa.rates[0].last(), sb.rates[0].last()) {
            rate_samples += 1;
            // Bytes/s; each may sit at the floor when admitted nothing.
            if (a + b) * 8 > LINK_BPS + 2 * ccp_agent::config::DEFAULT_MIN_RATE_KBPS * 1000 {
                rate_over += 1;
            }
        }
    }
    let (sa, sb) = (dp_a.snapshot(), dp_b.snapshot());
    let its = (pa.lock().unwrap().it, pb.lock().unwrap().it);
    println!(
        "samples {samples}, max committed {max_committed}, both planned in {both_planned}, \
         rates over the link in {rate_over}/{rate_samples}, iterations {its:?}\n\
         A rates {:?}\nB rates {:?}",
        sa.rates[0], sb.rates[0]
    );
    // Enough status answers for the capacity check above to mean something; the count depends
    // on how busy the machine is (5 ms sleeps over 6 s of wall time: about 1000 when idle, 99
    // seen beside two VMs and a build), so the bound is far below that.
    assert!(samples > 20, "the switch answered {samples} times");
    assert!(max_committed > 0, "the agents committed schedules");
    assert!(both_planned > 0, "both flows were in the table at once");
    assert!(
        rate_over * 5 <= rate_samples,
        "the enforced rates exceeded the link in {rate_over} of {rate_samples} samples"
    );
    // Both get a share.
    assert!(its.0 >= 2 && its.1 >= 2, "iterations {its:?}");
    for (who, rates) in [("A", &sa.rates[0]), ("B", &sb.rates[0])] {
        assert!(
            rates.iter().any(|r| *r * 8 >= 8_000_000),
            "{who} never ran above 8 Mbit/s: {rates:?}"
        );
    }

    drop(dp_a);
    drop(dp_b);
    for a in agents {
        a.stop();
    }
    // The client runtime goes first: its idle connections would hold the switch's graceful
    // shutdown.
    drop(rt);
    switch.stop();
}
