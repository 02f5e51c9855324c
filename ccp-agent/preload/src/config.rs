// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! The shim's configuration from the environment, and the socket filter. Pure: strings in,
//! decisions out (unit tested without any socket).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Environment variable naming the congestion control to set (default [`DEFAULT_CC`]).
pub const ENV_CC: &str = "MLTCP_CC";
/// Environment variable with the port ranges to act on.
pub const ENV_PORTS: &str = "MLTCP_PORTS";
/// Environment variable with the destination prefixes to act on.
pub const ENV_DSTS: &str = "MLTCP_DSTS";
/// Environment variable: "1" logs every decision to stderr.
pub const ENV_DEBUG: &str = "MLTCP_PRELOAD_DEBUG";
/// Algorithm set when `MLTCP_CC` is unset.
pub const DEFAULT_CC: &str = "mltcp";
/// Longest algorithm name the kernel accepts (`TCP_CA_NAME_MAX` - 1), in bytes.
pub const CC_NAME_MAX: usize = 15;

/// An inclusive port range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    /// First port.
    pub lo: u16,
    /// Last port (inclusive).
    pub hi: u16,
}

impl PortRange {
    fn contains(&self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }
}

/// An address prefix (CIDR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    /// Network address (host bits may be set; they are ignored).
    pub addr: IpAddr,
    /// Prefix length in bits (0..=32 for IPv4, 0..=128 for IPv6).
    pub len: u8,
}

impl Prefix {
    /// Whether `ip` is inside the prefix. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what an
    /// IPv6 socket sees of an IPv4 peer) matches IPv4 prefixes.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                let mask = if self.len == 0 {
                    0
                } else {
                    u32::MAX << (32 - self.len as u32)
                };
                u32::from(net) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                let mask = if self.len == 0 {
                    0
                } else {
                    u128::MAX << (128 - self.len as u32)
                };
                u128::from(net) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// What the shim does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The algorithm name to set (1..=[`CC_NAME_MAX`] bytes).
    pub cc: String,
    /// Port ranges; empty = every port.
    pub ports: Vec<PortRange>,
    /// Destination prefixes; empty = every destination.
    pub dsts: Vec<Prefix>,
    /// Log every decision to stderr.
    pub debug: bool,
}

impl Config {
    /// The configuration from the variables' values (`None` = unset). `Ok(None)`: the shim is
    /// off (`MLTCP_CC` set to "" or "none"). `Err`: a value that does not parse, with the
    /// variable and the item named.
    pub fn from_vars(
        cc: Option<&str>,
        ports: Option<&str>,
        dsts: Option<&str>,
        debug: Option<&str>,
    ) -> Result<Option<Config>, String> {
        let cc = cc.map(str::trim).unwrap_or(DEFAULT_CC);
        if cc.is_empty() || cc == "none" {
            return Ok(None);
        }
        if cc.len() > CC_NAME_MAX || !cc.bytes().all(|c| c.is_ascii_graphic()) {
            return Err(format!(
                "{ENV_CC}={cc:?}: not an algorithm name (1..={CC_NAME_MAX} printable characters)"
            ));
        }
        Ok(Some(Config {
            cc: cc.to_string(),
            ports: parse_list(ports, ENV_PORTS, parse_ports)?,
            dsts: parse_list(dsts, ENV_DSTS, parse_prefix)?,
            debug: debug.is_some_and(|d| d.trim() == "1"),
        }))
    }

    /// The configuration of this process's environment.
    pub fn from_env() -> Result<Option<Config>, String> {
        let get = |k| std::env::var(k).ok();
        Self::from_vars(
            get(ENV_CC).as_deref(),
            get(ENV_PORTS).as_deref(),
            get(ENV_DSTS).as_deref(),
            get(ENV_DEBUG).as_deref(),
        )
    }

    /// Whether a TCP socket to `peer`, bound to `local_port` (0 = not bound yet), gets the
    /// algorithm: its peer's port or its own port is in a range (or no ranges are given), and the
    /// peer's address is in a prefix (or no prefixes are given).
    pub fn wants(&self, peer: SocketAddr, local_port: u16) -> bool {
        let port_ok = self.ports.is_empty()
            || self
                .ports
                .iter()
                .any(|r| r.contains(peer.port()) || (local_port != 0 && r.contains(local_port)));
        let dst_ok = self.dsts.is_empty() || self.dsts.iter().any(|p| p.contains(peer.ip()));
        port_ok && dst_ok
    }
}

fn parse_list<T>(
    v: Option<&str>,
    var: &str,
    item: fn(&str) -> Option<T>,
) -> Result<Vec<T>, String> {
    let Some(v) = v else { return Ok(Vec::new()) };
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| item(s).ok_or_else(|| format!("{var}: bad item {s:?}")))
        .collect()
}

/// "N" or "A-B" (A <= B).
fn parse_ports(s: &str) -> Option<PortRange> {
    let (lo, hi) = match s.split_once('-') {
        Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
        None => {
            let p = s.parse().ok()?;
            (p, p)
        }
    };
    (lo <= hi).then_some(PortRange { lo, hi })
}

/// "ADDR/LEN" or a bare address (a host prefix).
fn parse_prefix(s: &str) -> Option<Prefix> {
    let (a, len) = match s.split_once('/') {
        Some((a, l)) => (a.trim(), Some(l.trim().parse::<u8>().ok()?)),
        None => (s, None),
    };
    let addr: IpAddr = a.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some(Prefix { addr, len })
}

/// The IP socket address in a `sockaddr` of `len` bytes, if it is `AF_INET` or `AF_INET6`.
///
/// # Safety
/// `sa` is null or points to `len` readable bytes.
pub unsafe fn sockaddr_to_std(
    sa: *const libc::sockaddr,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    if sa.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: at least the family field is readable (checked above); read unaligned since the
    // caller's buffer may be any byte buffer.
    let family = unsafe { std::ptr::read_unaligned(sa as *const libc::sa_family_t) } as libc::c_int;
    match family {
        libc::AF_INET if len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: `len` covers a whole sockaddr_in (checked), read unaligned.
            let a = unsafe { std::ptr::read_unaligned(sa as *const libc::sockaddr_in) };
            Some(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr))),
                u16::from_be(a.sin_port),
            ))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: `len` covers a whole sockaddr_in6 (checked), read unaligned.
            let a = unsafe { std::ptr::read_unaligned(sa as *const libc::sockaddr_in6) };
            Some(SocketAddr::new(
                IpAddr::V6(Ipv6Addr::from(a.sin6_addr.s6_addr)),
                u16::from_be(a.sin6_port),
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(
        cc: Option<&str>,
        ports: Option<&str>,
        dsts: Option<&str>,
    ) -> Result<Option<Config>, String> {
        Config::from_vars(cc, ports, dsts, None)
    }

    #[test]
    fn defaults_and_off() {
        let c = cfg(None, None, None).unwrap().unwrap();
        assert_eq!(c.cc, "mltcp");
        assert!(c.ports.is_empty() && c.dsts.is_empty());
        assert!(c.wants("1.2.3.4:5".parse().unwrap(), 0));
        assert_eq!(cfg(Some(""), None, None).unwrap(), None);
        assert_eq!(cfg(Some("none"), None, None).unwrap(), None);
        assert_eq!(cfg(Some(" reno "), None, None).unwrap().unwrap().cc, "reno");
        assert!(cfg(Some("a_name_far_too_long"), None, None).is_err());
        assert!(cfg(Some("two words"), None, None).is_err());
    }

    #[test]
    fn ports() {
        let c = cfg(Some("reno"), Some("5000-5100, 29500,,"), None)
            .unwrap()
            .unwrap();
        assert_eq!(
            c.ports,
            vec![
                PortRange { lo: 5000, hi: 5100 },
                PortRange {
                    lo: 29500,
                    hi: 29500
                }
            ]
        );
        assert!(c.wants("10.0.0.1:5000".parse().unwrap(), 0));
        assert!(c.wants("10.0.0.1:5100".parse().unwrap(), 0));
        assert!(c.wants("10.0.0.1:29500".parse().unwrap(), 0));
        assert!(!c.wants("10.0.0.1:5101".parse().unwrap(), 0));
        // Accept side: the peer's ephemeral port misses, our listening port matches.
        assert!(c.wants("10.0.0.1:40000".parse().unwrap(), 29500));
        assert!(!c.wants("10.0.0.1:40000".parse().unwrap(), 0));
        for bad in ["x", "5-", "-5", "5100-5000", "70000", "1-2-3"] {
            let e = cfg(None, Some(bad), None).unwrap_err();
            assert!(e.contains("MLTCP_PORTS") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn prefixes() {
        let c = cfg(None, None, Some("10.0.0.0/24,fd00::/8, 192.168.1.7"))
            .unwrap()
            .unwrap();
        assert!(c.wants("10.0.0.200:1".parse().unwrap(), 0));
        assert!(!c.wants("10.0.1.1:1".parse().unwrap(), 0));
        assert!(c.wants("[fd12::1]:1".parse().unwrap(), 0));
        assert!(!c.wants("[fe80::1]:1".parse().unwrap(), 0));
        assert!(c.wants("192.168.1.7:1".parse().unwrap(), 0));
        assert!(!c.wants("192.168.1.8:1".parse().unwrap(), 0));
        // An IPv4 peer seen through an IPv6 socket.
        assert!(c.wants("[::ffff:10.0.0.5]:1".parse().unwrap(), 0));
        let all = cfg(None, None, Some("0.0.0.0/0")).unwrap().unwrap();
        assert!(all.wants("8.8.8.8:1".parse().unwrap(), 0));
        assert!(!all.wants("[2001:db8::1]:1".parse().unwrap(), 0));
        for bad in [
            "10.0.0.0/33",
            "fd00::/129",
            "10.0.0/8",
            "host",
            "10.0.0.0/x",
        ] {
            let e = cfg(None, None, Some(bad)).unwrap_err();
            assert!(e.contains("MLTCP_DSTS"), "{e}");
        }
    }

    #[test]
    fn ports_and_prefixes_both_apply() {
        let c = cfg(None, Some("29500"), Some("10.0.0.0/8"))
            .unwrap()
            .unwrap();
        assert!(c.wants("10.1.1.1:29500".parse().unwrap(), 0));
        assert!(!c.wants("11.1.1.1:29500".parse().unwrap(), 0));
        assert!(!c.wants("10.1.1.1:29501".parse().unwrap(), 0));
    }

    #[test]
    fn sockaddrs() {
        // SAFETY: all-zero is a valid sockaddr_in.
        let mut a: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        a.sin_family = libc::AF_INET as libc::sa_family_t;
        a.sin_port = 5000u16.to_be();
        a.sin_addr.s_addr = u32::from(Ipv4Addr::new(10, 0, 0, 1)).to_be();
        let p = &a as *const _ as *const libc::sockaddr;
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `p` points to `len` bytes.
        let got = unsafe { sockaddr_to_std(p, len) };
        assert_eq!(got, Some("10.0.0.1:5000".parse().unwrap()));
        // SAFETY: as above, shorter length.
        assert_eq!(unsafe { sockaddr_to_std(p, 4) }, None);
        // SAFETY: null is accepted.
        assert_eq!(unsafe { sockaddr_to_std(std::ptr::null(), 16) }, None);
        a.sin_family = libc::AF_UNIX as libc::sa_family_t;
        let p = &a as *const _ as *const libc::sockaddr;
        // SAFETY: `p` points to `len` bytes.
        assert_eq!(unsafe { sockaddr_to_std(p, len) }, None);
    }
}
