use mlcc_sim::sim::{Sim, SimConfig};
use mlcc_sim::topo::{Tree, TreeConfig};
use mlcc_sim::workload::{JobSpec, Paradigm};
use mlcc_sim::{make_policy, PolicyConfig};
fn main() {
    let tree = Tree::new(TreeConfig { servers: 4, servers_per_rack: 2, racks_per_edge: 1, gpus_per_server: 2, ..TreeConfig::default() }).unwrap();
    let specs = vec![JobSpec { arrival_s: 0.0, model: "t".into(), paradigm: Paradigm::Ps, workers: 2, iterations: 3, gradient_bytes: 0.153631361153181 * 1.25e9, compute_s: 0.0 }];
    let cfg = PolicyConfig { slot_us: 20_000, ..PolicyConfig::default() };
    let name = std::env::args().nth(1).unwrap_or("mlcc".into());
    let mut p = make_policy(&name, &cfg, &tree.capacity).unwrap();
    let mut sim = Sim::new(tree.clone(), SimConfig::default(), specs).unwrap();
    sim.start(p.as_mut());
    for k in 0..2000 {
        if sim.all_done() { println!("done t={}", sim.t); return; }
        sim.step(p.as_mut());
        let j = &sim.jobs[0];
        if k > 60 && k < 100 {
        println!("k={k} t={:.4} phase={:?} it={} flows={:?}", sim.t, j.phase, j.iterations_done, j.flows.iter().map(|f| (f.sent as u64, (f.rate/1e6) as u64, f.done)).collect::<Vec<_>>());
        }
    }
}
