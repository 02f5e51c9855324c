//! `forge`: drop privileges and send well-formed CCP messages to the kernel (and, optionally, to
//! group 22), to show that an unprivileged sender changes nothing.
//!
//! The kernel's `NETLINK_USERSOCK` socket accepts unicast from anyone (the protocol is
//! pre-registered with non-root send allowed), so the module itself must check the sender:
//! it drops messages from senders without CAP_NET_ADMIN and logs "dropped a message from a
//! sender without CAP_NET_ADMIN". This command builds UPDATE_FIELDS messages exactly as portus
//! serialises them (setting the implicit `Rate` register, and optionally `Cwnd`) for a list of
//! socket ids and sends them to port id 0 after setgroups/setgid/setuid.

use crate::nl;
use anyhow::{anyhow, Context, Result};
use clap::Args;
use nix::unistd::{setgid, setgroups, setuid, Gid, Uid};

/// Arguments of `forge`.
#[derive(Args, Debug, Clone)]
pub struct ForgeArgs {
    /// The user id to become before sending (e.g. 65534, nobody).
    #[arg(long)]
    pub uid: u32,
    /// The group id to become before sending.
    #[arg(long, default_value_t = 65534)]
    pub gid: u32,
    /// Socket ids to target (repeatable); default: 1..=64 in generation 1 (0x0001_0001...).
    #[arg(long = "sid")]
    pub sids: Vec<u32>,
    /// The rate to set, bytes/s.
    #[arg(long, default_value_t = 1000)]
    pub rate: u64,
    /// Also set `Cwnd` to this many bytes.
    #[arg(long)]
    pub cwnd: Option<u64>,
    /// Also multicast a forged CREATE (sid 0xdead) to group 22, which an agent must ignore.
    #[arg(long)]
    pub multicast_create: bool,
}

/// CCP message type of UPDATE_FIELDS.
const UPDATE_FIELDS: u16 = 3;
/// Register type of the implicit registers.
const REG_IMPLICIT: u8 = 2;
/// Implicit register index of `Cwnd`.
const IMPLICIT_CWND: u32 = 4;
/// Implicit register index of `Rate`.
const IMPLICIT_RATE: u32 = 5;

/// Serialises UPDATE_FIELDS for `sid`: header (u16 type, u16 len, u32 sid), u32 count, then
/// packed {u8 reg type, u32 index, u64 value} entries, little-endian (portus 0.9's layout).
pub fn update_fields(sid: u32, updates: &[(u8, u32, u64)]) -> Vec<u8> {
    let len = 8 + 4 + 13 * updates.len();
    let mut b = Vec::with_capacity(len);
    b.extend_from_slice(&UPDATE_FIELDS.to_le_bytes());
    b.extend_from_slice(&(len as u16).to_le_bytes());
    b.extend_from_slice(&sid.to_le_bytes());
    b.extend_from_slice(&(updates.len() as u32).to_le_bytes());
    for &(t, i, v) in updates {
        b.push(t);
        b.extend_from_slice(&i.to_le_bytes());
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// A CREATE for `sid` (6 × u32 + a 64-byte NUL-padded name "mltcp").
fn create(sid: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + 24 + 64);
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&((8 + 24 + 64) as u16).to_le_bytes());
    b.extend_from_slice(&sid.to_le_bytes());
    for v in [14480u32, 1448, 0x0100_007f, 0x3930, 0x0100_007f, 0x3930] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    let mut name = [0u8; 64];
    name[..5].copy_from_slice(b"mltcp");
    b.extend_from_slice(&name);
    b
}

fn cap_eff() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("CapEff:"))
                .map(|l| l[7..].trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

/// Drops privileges, sends the forged messages and prints what happened (one line each).
pub fn run(a: &ForgeArgs) -> Result<()> {
    // Open the socket after dropping privileges: nothing privileged is carried over.
    setgroups(&[]).context("setgroups([])")?;
    setgid(Gid::from_raw(a.gid)).with_context(|| format!("setgid({})", a.gid))?;
    setuid(Uid::from_raw(a.uid)).with_context(|| format!("setuid({})", a.uid))?;
    println!(
        "forge: now uid {} gid {} (CapEff {})",
        nix::unistd::getuid(),
        nix::unistd::getgid(),
        cap_eff()
    );
    let mut sock = nl::open_usersock().map_err(|e| anyhow!(e.0))?;
    nl::bind_auto(&mut sock).map_err(|e| anyhow!(e.0))?;
    let sids: Vec<u32> = if a.sids.is_empty() {
        (1..=64).map(|i| (1 << 16) | i).collect()
    } else {
        a.sids.clone()
    };
    let mut updates = vec![(REG_IMPLICIT, IMPLICIT_RATE, a.rate)];
    if let Some(c) = a.cwnd {
        updates.push((REG_IMPLICIT, IMPLICIT_CWND, c));
    }
    let (mut sent, mut failed) = (0, 0);
    for &sid in &sids {
        match nl::send_to_kernel(&sock, &update_fields(sid, &updates)) {
            Ok(_) => sent += 1,
            Err(e) => {
                failed += 1;
                println!("forge: UPDATE_FIELDS sid {sid:#x}: send failed: {e}");
            }
        }
    }
    println!(
        "forge: sent {sent} UPDATE_FIELDS (Rate = {} B/s{}) to the kernel for {} sids ({failed} failed)",
        a.rate,
        a.cwnd.map(|c| format!(", Cwnd = {c} B")).unwrap_or_default(),
        sids.len()
    );
    if a.multicast_create {
        let payload = create(0xdead);
        let r = nl::send_framed(&sock, &payload, 1 << (nl::CCP_GROUP - 1));
        if let Err(e) = r {
            println!("forge: multicast CREATE to group {}: {e}", nl::CCP_GROUP);
        } else {
            println!(
                "forge: multicast a forged CREATE (sid 0xdead) to group {}",
                nl::CCP_GROUP
            );
        }
    }
    Ok(())
}
