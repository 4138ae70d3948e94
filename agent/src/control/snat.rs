//! The node's SNAT source ports (`--snat-port-range`), and what the agent
//! says when they run out: the datapath counts new flows it reset for
//! want of a port by Service id and endpoint; this names them and decides
//! when a log line is due.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use sluice_datapath::host::ServiceTables;
use sluice_datapath::maps::SnatExhaustKey;

use super::content::frontend_key;
use crate::state::DesiredState;

/// SNAT source ports by default. Above the kernel's default ephemeral
/// range (32768-60999), so translated flows never collide with the node's
/// own outgoing connections to the same pod. 4 536 ports per (node,
/// endpoint); the program hands a port on when its flow has ended and the
/// endpoint's TIME_WAIT would take the new SYN (`conntrack::port_use`).
pub const SNAT_PORT_MIN: u16 = 61_000;
pub const SNAT_PORT_MAX: u16 = 65_535;

/// The node's SNAT source port range (`--snat-port-range`), inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnatPorts {
    pub first: u16,
    pub last: u16,
}

impl Default for SnatPorts {
    fn default() -> Self {
        SnatPorts {
            first: SNAT_PORT_MIN,
            last: SNAT_PORT_MAX,
        }
    }
}

impl fmt::Display for SnatPorts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// Below this, ports are the node's own services' (`ip_unprivileged_port_start`).
const SNAT_PORT_FLOOR: u16 = 1024;

impl std::str::FromStr for SnatPorts {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, b) = s
            .split_once('-')
            .ok_or_else(|| format!("{s:?}: expected FIRST-LAST, e.g. 61000-65535"))?;
        let port = |t: &str| {
            t.trim()
                .parse::<u16>()
                .map_err(|_| format!("{s:?}: {t:?} is not a port (1024-65535)"))
        };
        let (first, last) = (port(a)?, port(b)?);
        if first < SNAT_PORT_FLOOR {
            return Err(format!(
                "{s:?}: ports below {SNAT_PORT_FLOOR} belong to the node's own services"
            ));
        }
        if first > last {
            return Err(format!("{s:?}: the first port is above the last"));
        }
        Ok(SnatPorts { first, last })
    }
}

impl SnatPorts {
    /// Where the range shares ports with the node's ephemeral range
    /// (`net.ipv4.ip_local_port_range`, "LOW HIGH"): a translated flow and
    /// one of the node's own connections to the same pod could then pick
    /// the same tuple.
    pub fn overlap_with_local(&self, local_port_range: &str) -> Option<(u16, u16)> {
        let mut it = local_port_range
            .split_whitespace()
            .map(|t| t.parse::<u16>());
        let (Some(Ok(low)), Some(Ok(high))) = (it.next(), it.next()) else {
            return None;
        };
        let (a, b) = (self.first.max(low), self.last.min(high));
        (a <= b).then_some((a, b))
    }
}

/// New flows to one endpoint of one Service port reset for want of a SNAT
/// port, since the agent (or, with adopted maps, the datapath) started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exhaustion {
    /// `namespace/name`, or the frontend when no Service has it any more.
    pub service: String,
    /// The Service port's name, or its number when it has none.
    pub port: String,
    pub endpoint: SocketAddr,
    pub resets: u64,
}

fn endpoint_addr(k: &SnatExhaustKey) -> SocketAddr {
    // The datapath keeps IPv4 as IPv4-mapped IPv6 (`control::to_addr`).
    let v6 = Ipv6Addr::from(k.addr);
    let ip = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
    SocketAddr::new(ip, k.port)
}

/// Each frontend id of `state` with its Service (`namespace/name`) and port
/// name: a frontend id is derived from VIP, port and protocol, so it is
/// found again by deriving the ids of `state`'s frontends.
pub fn frontend_names(state: &DesiredState) -> HashMap<u32, (String, String)> {
    let mut names = HashMap::new();
    for svc in state.services.values() {
        for port in &svc.ports {
            let port_name = if port.name.is_empty() {
                port.port.to_string()
            } else {
                port.name.clone()
            };
            for vip in &svc.vips {
                let id = ServiceTables::stable_id(&frontend_key(port, *vip));
                names.insert(id, (svc.key.clone(), port_name.clone()));
            }
        }
    }
    names
}

/// Name each count by its Service and port ([`frontend_names`]). Sorted,
/// for stable output.
pub fn name_exhaustion(
    counts: &[(SnatExhaustKey, u64)],
    names: &HashMap<u32, (String, String)>,
) -> Vec<Exhaustion> {
    let mut out: Vec<Exhaustion> = counts
        .iter()
        .map(|(k, n)| {
            let (service, port) = names
                .get(&k.svc_id)
                .cloned()
                .unwrap_or_else(|| (format!("frontend {:#010x}", k.svc_id), String::new()));
            Exhaustion {
                service,
                port,
                endpoint: endpoint_addr(k),
                resets: *n,
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.service, &a.port, a.endpoint).cmp(&(&b.service, &b.port, b.endpoint)));
    out
}

/// At most one log line per endpoint in this long.
pub const EXHAUSTION_LOG_EVERY: Duration = Duration::from_secs(10);

/// When to log about an endpoint whose SNAT ports ran out: at the first
/// reset, then at most once per [`EXHAUSTION_LOG_EVERY`] while resets go on,
/// each line with the resets since the last. Holds only the endpoints the
/// datapath still counts ([`ExhaustionLog::keep_only`]).
#[derive(Debug, Default)]
pub struct ExhaustionLog {
    logged: HashMap<(String, String, SocketAddr), (u64, Instant)>,
}

impl ExhaustionLog {
    /// The resets to report for `e` now, if a line is due.
    pub fn due(&mut self, e: &Exhaustion, now: Instant) -> Option<u64> {
        let key = (e.service.clone(), e.port.clone(), e.endpoint);
        match self.logged.get(&key) {
            Some(&(at_count, at)) => {
                if e.resets <= at_count || now.duration_since(at) < EXHAUSTION_LOG_EVERY {
                    return None;
                }
                self.logged.insert(key, (e.resets, now));
                Some(e.resets - at_count)
            }
            None => {
                self.logged.insert(key, (e.resets, now));
                Some(e.resets)
            }
        }
    }

    /// Forget endpoints no longer in `current` (their counts left the
    /// datapath's LRU map), so pods coming and going do not grow this.
    pub fn keep_only(&mut self, current: &[Exhaustion]) {
        self.logged.retain(|(service, port, endpoint), _| {
            current
                .iter()
                .any(|e| e.endpoint == *endpoint && e.service == *service && e.port == *port)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{Exhaustion, ExhaustionLog, SnatPorts, EXHAUSTION_LOG_EVERY};
    use std::time::{Duration, Instant};

    // spec: P3 (running out of SNAT ports is logged, rate-limited)
    #[test]
    fn exhaustion_is_logged_at_once_then_at_most_every_ten_seconds() {
        let mut log = ExhaustionLog::default();
        let t0 = Instant::now();
        let e = |resets| Exhaustion {
            service: "default/web".into(),
            port: "http".into(),
            endpoint: "198.19.1.10:8080".parse().expect("addr"),
            resets,
        };
        assert_eq!(log.due(&e(2), t0), Some(2));
        assert_eq!(log.due(&e(9), t0 + Duration::from_secs(1)), None);
        assert_eq!(log.due(&e(9), t0 + EXHAUSTION_LOG_EVERY), Some(7));
        // No new resets: nothing to say, however long it has been.
        assert_eq!(log.due(&e(9), t0 + 5 * EXHAUSTION_LOG_EVERY), None);
        assert_eq!(log.due(&e(10), t0 + 5 * EXHAUSTION_LOG_EVERY), Some(1));
        // An endpoint the datapath no longer counts is forgotten: when it
        // comes back, its first reset is reported at once again.
        log.keep_only(&[]);
        assert_eq!(log.due(&e(1), t0 + 5 * EXHAUSTION_LOG_EVERY), Some(1));
    }

    // spec: P3 (the SNAT range is the operator's, checked whole)
    #[test]
    fn the_range_parses_and_bad_ones_are_named() {
        assert_eq!("61000-65535".parse::<SnatPorts>(), Ok(SnatPorts::default()));
        assert_eq!(
            " 2000 - 2007 ".parse::<SnatPorts>(),
            Ok(SnatPorts {
                first: 2000,
                last: 2007
            })
        );
        for (bad, says) in [
            ("", "expected FIRST-LAST"),
            ("61000", "expected FIRST-LAST"),
            ("61000-70000", "\"70000\" is not a port"),
            ("a-b", "\"a\" is not a port"),
            ("80-90", "below 1024"),
            ("65000-61000", "above the last"),
        ] {
            let e = bad.parse::<SnatPorts>().expect_err(bad);
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn overlap_with_the_ephemeral_range_is_found() {
        let default = SnatPorts::default();
        assert_eq!(default.overlap_with_local("32768\t60999\n"), None);
        assert_eq!(
            default.overlap_with_local("32768 61999"),
            Some((61000, 61999))
        );
        let wide = SnatPorts {
            first: 1024,
            last: 65535,
        };
        assert_eq!(wide.overlap_with_local("32768 60999"), Some((32768, 60999)));
        assert_eq!(default.overlap_with_local("garbage"), None);
    }
}
