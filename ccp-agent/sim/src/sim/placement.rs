// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Placement of a job's workers and parameter servers on GPUs: the rule ([`Placement`]) and the
//! candidate placements it offers a policy ([`Sim::candidates`]).
//!
//! Placement (documented choices, [`Placement`]): every worker and parameter server takes one GPU
//! (the paper, Sec. VII: "each GPU can be allocated to a worker or PS"). The default,
//! [`Placement::Packed`], puts a job on as few servers as it can, the way Sec. III describes
//! fragmentation ("Workers (PSs) of a job could be assigned to one or multiple servers, due to
//! resource fragmentation"):
//! 1. on one server if any has enough free GPUs: best fit (the fewest free GPUs that suffice,
//!    then the lowest index);
//! 2. else inside one rack, then one edge switch, then the whole cluster (the smallest domain
//!    where it fits): in each candidate domain, its servers by free GPUs (most first, then lowest
//!    index) are taken greedily until the job fits; the domain needing the fewest servers wins
//!    (then the fewest GPUs left over on them, then the lowest index);
//! 3. GPUs are handed out in that server order: workers first (so ring neighbours share a
//!    server), then parameter servers.
//!
//! [`Placement::Spread`] (the earlier default, kept so its results stay reproducible) puts every
//! worker and parameter server on a distinct server, servers taken first-fit in index order, so
//! every flow crosses the network.
//!
//! Either way, a job that does not fit waits in a FIFO queue, launched as soon as enough GPUs
//! free up (the mlcc paper, Sec. VI-A: "Jobs are queued if GPUs are not available").

use crate::error::SimError;
use serde::Serialize;

use super::Sim;

/// How a job's workers and parameter servers are put on GPUs (see the module header).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// GPU-level packing: one server if possible, else the fewest servers of one rack, one edge,
    /// the cluster.
    #[default]
    Packed,
    /// One GPU on each of distinct servers, first-fit in server order (the earlier placement).
    Spread,
}

impl std::str::FromStr for Placement {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Self, SimError> {
        match s {
            "packed" => Ok(Placement::Packed),
            "spread" => Ok(Placement::Spread),
            other => Err(SimError::Config(format!(
                "placement = '{other}': expected 'packed' or 'spread'"
            ))),
        }
    }
}

impl Sim {
    /// Candidate placements for job `j` (up to `n`, distinct; the server of each of its GPUs,
    /// workers first); the first is the one the placement rule picks. Empty when the job does
    /// not fit.
    ///
    /// [`Placement::Packed`]: the options of the first step of the rule (module header) that
    /// has any, best first, then those of the next steps; [`Placement::Spread`]: candidate c
    /// takes, first-fit in server order, the servers with a free GPU after skipping the first
    /// `c · need` of them (c = 0 is plain first-fit), wrapping around; so all candidates stay in
    /// the packed region the placement policy would use, as Themis's candidates share its
    /// fairness (thesis Sec. 4.4.2).
    ///
    /// A job with a fixed placement ([`JobSpec::hosts`](crate::workload::JobSpec::hosts), a testbed scenario's) has that one
    /// candidate, once each of its servers has a free GPU per worker or parameter server on it.
    pub fn candidates(&self, j: usize, n: usize) -> Vec<Vec<u32>> {
        if let Some(hosts) = &self.jobs[j].spec.hosts {
            let fits = hosts.iter().all(|s| {
                let wanted = hosts.iter().filter(|x| *x == s).count();
                self.free_gpus
                    .get(*s as usize)
                    .is_some_and(|free| *free as usize >= wanted)
            });
            return if fits {
                vec![hosts.clone()]
            } else {
                Vec::new()
            };
        }
        let need = self.jobs[j].spec.gpus() as usize;
        match self.config.placement {
            Placement::Spread => self.candidates_spread(need, n),
            Placement::Packed => self.candidates_packed(need, n),
        }
    }

    fn candidates_spread(&self, need: usize, n: usize) -> Vec<Vec<u32>> {
        let free: Vec<u32> = (0..self.free_gpus.len())
            .filter(|s| self.free_gpus[*s] > 0)
            .map(|s| s as u32)
            .collect();
        if free.len() < need || need == 0 {
            return Vec::new();
        }
        let mut out: Vec<Vec<u32>> = Vec::new();
        for c in 0..n.max(1) {
            let skip = (c * need) % free.len();
            let mut pick: Vec<u32> = (0..need).map(|k| free[(skip + k) % free.len()]).collect();
            pick.sort_unstable();
            if !out.contains(&pick) {
                out.push(pick);
            }
        }
        out
    }

    fn candidates_packed(&self, need: usize, n: usize) -> Vec<Vec<u32>> {
        let n = n.max(1);
        let free = &self.free_gpus;
        let total: usize = free.iter().map(|g| *g as usize).sum();
        if need == 0 || total < need {
            return Vec::new();
        }
        let mut out: Vec<Vec<u32>> = Vec::new();
        // Step 1: one server, best fit.
        let mut single: Vec<(u32, u32)> = (0..free.len() as u32)
            .filter(|s| free[*s as usize] as usize >= need)
            .map(|s| (free[s as usize], s))
            .collect();
        single.sort_unstable();
        for (_, s) in single.into_iter().take(n) {
            out.push(vec![s; need]);
        }
        // Steps 2-4: the fewest servers of one rack, one edge switch, the cluster.
        let cfg = &self.tree.config;
        let per_rack = cfg.servers_per_rack as usize;
        let per_edge = per_rack * cfg.racks_per_edge as usize;
        for size in [per_rack, per_edge, free.len()] {
            if out.len() >= n {
                break;
            }
            let mut opts: Vec<(usize, usize, usize, Vec<u32>)> = Vec::new();
            for lo in (0..free.len()).step_by(size.max(1)) {
                let hi = (lo + size).min(free.len());
                let mut srv: Vec<u32> = (lo as u32..hi as u32)
                    .filter(|s| free[*s as usize] > 0)
                    .collect();
                srv.sort_by(|a, b| free[*b as usize].cmp(&free[*a as usize]).then(a.cmp(b)));
                let mut pick = Vec::with_capacity(need);
                let mut used = 0;
                for &s in &srv {
                    if pick.len() >= need {
                        break;
                    }
                    let take = (free[s as usize] as usize).min(need - pick.len());
                    pick.extend(std::iter::repeat_n(s, take));
                    used += 1;
                    if pick.len() == need {
                        let left = free[s as usize] as usize - take;
                        opts.push((used, left, lo, std::mem::take(&mut pick)));
                        break;
                    }
                }
            }
            opts.sort_by_key(|a| (a.0, a.1, a.2));
            for o in opts {
                if out.len() >= n {
                    break;
                }
                if !out.contains(&o.3) {
                    out.push(o.3);
                }
            }
        }
        out
    }
}
