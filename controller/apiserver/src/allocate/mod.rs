//! Service allocations as kube-apiserver makes them: cluster IPs from
//! `--service-cluster-ip-range`, node ports and health-check node ports
//! from `--service-node-port-range`. Pure: the flags (`range.rs`,
//! `ports.rs`), what a create or an update of a Service claims, needs
//! chosen and releases (`transitions.rs`, `families.rs`), and the choice
//! of a free value (`choose`). The store side, where each value held is a
//! key created in the same transaction as the Service, is
//! `api/services.rs`.

pub mod families;
pub mod ports;
pub mod range;
pub mod repair;
pub mod transitions;
mod view;

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;

use axum::http::StatusCode;
use serde_json::{json, Value};

pub use ports::PortRange;
pub use range::{Family, IpRange};
pub use view::{PortView, ServiceView};

/// The ranges a server hands out from, read from its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// One or two (dual-stack) ranges, the primary family first.
    pub ips: Vec<IpRange>,
    pub ports: PortRange,
}

impl Config {
    /// From the flags' values; an error names the flag at fault.
    pub fn from_flags(ip_ranges: &str, node_ports: &str) -> Result<Config, String> {
        Ok(Config {
            ips: range::parse_flag(ip_ranges)?,
            ports: PortRange::parse(node_ports)?,
        })
    }

    pub fn primary(&self) -> Family {
        self.ips.first().map_or(Family::V4, IpRange::family)
    }

    pub fn range(&self, f: Family) -> Option<&IpRange> {
        self.ips.iter().find(|r| r.family() == f)
    }

    pub fn dual_stack(&self) -> bool {
        self.ips.len() == 2
    }

    /// The choice of a free value from `pool`, none of `taken`, starting
    /// at `seed` (random): in the dynamic block first, the static block
    /// only once that is full (KEP-3070, KEP-3668); `None` when the pool
    /// is full.
    pub fn choose(&self, pool: Pool, taken: &BTreeSet<Alloc>, seed: u128) -> Option<Alloc> {
        match pool {
            Pool::Ip(f) => {
                let r = self.range(f)?;
                let used = taken
                    .iter()
                    .filter_map(|a| match a {
                        Alloc::Ip(ip) => r.offset(ip),
                        Alloc::Port(_) => None,
                    })
                    .collect();
                choose_offset(r.size(), r.static_size(), &used, seed).map(|o| Alloc::Ip(r.at(o)))
            }
            Pool::Port => {
                let r = &self.ports;
                let used = taken
                    .iter()
                    .filter_map(|a| match a {
                        Alloc::Port(p) => r.offset(*p),
                        Alloc::Ip(_) => None,
                    })
                    .collect();
                choose_offset(r.size(), r.static_size(), &used, seed).map(|o| Alloc::Port(r.at(o)))
            }
        }
    }

    /// Whether `a` is one this server hands out (else the text of its range).
    pub fn in_range(&self, a: &Alloc) -> Result<(), String> {
        match a {
            Alloc::Ip(ip) => match self.range(Family::of(ip)) {
                Some(r) if r.offset(ip).is_some() => Ok(()),
                Some(r) => Err(r.to_string()),
                None => Err(self
                    .ips
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")),
            },
            Alloc::Port(p) if self.ports.offset(*p).is_some() => Ok(()),
            Alloc::Port(_) => Err(self.ports.to_string()),
        }
    }
}

/// One value a Service holds: a cluster IP or a node port (node ports are
/// one pool whatever the protocol, as in kube-apiserver).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Alloc {
    Ip(IpAddr),
    Port(u16),
}

impl fmt::Display for Alloc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Alloc::Ip(ip) => ip.fmt(f),
            Alloc::Port(p) => p.fmt(f),
        }
    }
}

/// Where a value is chosen from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pool {
    Ip(Family),
    Port,
}

/// Where a chosen value goes in the Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// `spec.clusterIPs[i]` (and `spec.clusterIP` for 0).
    ClusterIp(usize),
    /// `spec.ports[i].nodePort` for each of these (one port number on
    /// TCP and UDP shares its node port).
    NodePort(Vec<usize>),
    HealthCheck,
}

/// A value to choose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub slot: Slot,
    pub pool: Pool,
}

impl Need {
    /// What kube-apiserver answers when the pool is full (a 500).
    pub fn full(&self) -> Refusal {
        let what = match self.slot {
            Slot::ClusterIp(_) => "a serviceIP",
            Slot::NodePort(_) => "a nodePort",
            Slot::HealthCheck => "a HealthCheck NodePort",
        };
        Refusal::Internal(format!("failed to allocate {what}: range is full"))
    }
}

/// A value the client asked for that the Service did not hold before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub alloc: Alloc,
    pub slot: Slot,
    /// The field to name when it cannot be had.
    pub field: String,
}

impl Claim {
    fn refuse(&self, why: &str) -> Refusal {
        match (&self.slot, self.alloc) {
            (Slot::ClusterIp(_), Alloc::Ip(ip)) => Refusal::invalid(
                &self.field,
                json!(ip.to_string()),
                format!("failed to allocate IP {ip}: {why}"),
            ),
            (Slot::HealthCheck, a) => Refusal::Internal(format!(
                "failed to allocate requested HealthCheck NodePort {a}: {why}"
            )),
            (_, a) => Refusal::invalid(&self.field, json!(a.to_string().parse::<u16>().ok()), why),
        }
    }

    /// Held by another Service.
    pub fn taken(&self) -> Refusal {
        match self.alloc {
            Alloc::Ip(_) => self.refuse("provided IP is already allocated"),
            Alloc::Port(_) => self.refuse("provided port is already allocated"),
        }
    }

    /// Outside `range` (the text of the range of its kind).
    pub fn out_of_range(&self, range: &str) -> Refusal {
        match self.alloc {
            Alloc::Ip(ip) => self.refuse(&format!(
                "the provided IP ({ip}) is not in the valid range. The range of valid IPs is {range}"
            )),
            Alloc::Port(_) => self.refuse(&format!(
                "provided port is not in the valid range. The range of valid ports is {range}"
            )),
        }
    }
}

/// A fault in one field, as kube-apiserver's `field.Error`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub field: String,
    /// `Invalid value: <value>`, or `None` for `Forbidden`.
    pub value: Option<Value>,
    pub message: String,
}

impl FieldError {
    pub fn invalid(field: impl Into<String>, value: Value, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            value: Some(value),
            message: message.into(),
        }
    }

    pub fn forbidden(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            value: None,
            message: message.into(),
        }
    }

    /// `spec.clusterIP: Invalid value: "198.18.0.9": field is immutable`.
    pub fn text(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }

    /// The text without the field (a cause's message).
    pub fn body(&self) -> String {
        match &self.value {
            Some(v) => format!("Invalid value: {v}: {}", self.message),
            None => format!("Forbidden: {}", self.message),
        }
    }

    pub fn reason(&self) -> &'static str {
        if self.value.is_some() {
            "FieldValueInvalid"
        } else {
            "FieldValueForbidden"
        }
    }
}

/// Why a Service cannot be written: a 422 naming fields, or a 500.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    Invalid(Vec<FieldError>),
    Internal(String),
}

impl Refusal {
    pub fn invalid(field: &str, value: Value, message: impl Into<String>) -> Refusal {
        Refusal::Invalid(vec![FieldError::invalid(field, value, message)])
    }

    /// The answer, for the Service `name`.
    pub fn status(&self, name: &str) -> crate::status::ApiError {
        use crate::status::ApiError;
        match self {
            Refusal::Invalid(errs) => {
                let texts: Vec<String> = errs.iter().map(FieldError::text).collect();
                let message = if texts.len() == 1 {
                    format!("Service {name:?} is invalid: {}", texts[0])
                } else {
                    format!("Service {name:?} is invalid: [{}]", texts.join(", "))
                };
                let mut e = ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message);
                let causes: Vec<Value> = errs
                    .iter()
                    .map(|f| json!({"reason": f.reason(), "message": f.body(), "field": f.field}))
                    .collect();
                e.details =
                    Some(json!({"name": name, "group": "", "kind": "Service", "causes": causes}));
                e
            }
            Refusal::Internal(m) => {
                let mut e = ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalError",
                    format!("Internal error occurred: {m}"),
                );
                e.details = Some(json!({"causes": [{"message": m}]}));
                e
            }
        }
    }
}

/// What a write of a Service does to its allocations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Values asked for, new to the Service: created with it.
    pub claims: Vec<Claim>,
    /// Values to choose, created with it.
    pub needs: Vec<Need>,
    /// Values it held and holds no more: deleted with it.
    pub releases: Vec<Alloc>,
}

/// Put a chosen value in its slot.
pub fn fill(svc: &mut ServiceView, slot: &Slot, a: Alloc) {
    match (slot, a) {
        (Slot::ClusterIp(i), Alloc::Ip(ip)) => {
            if let Some(v) = svc.cluster_ips.get_mut(*i) {
                *v = ip.to_string();
            }
            if *i == 0 {
                svc.cluster_ip = ip.to_string();
            }
        }
        (Slot::NodePort(idx), Alloc::Port(p)) => {
            for i in idx {
                if let Some(port) = svc.ports.get_mut(*i) {
                    port.node_port = i64::from(p);
                }
            }
        }
        (Slot::HealthCheck, Alloc::Port(p)) => svc.health_check = i64::from(p),
        _ => {}
    }
}

/// kube-apiserver's static block: min(max(low, size / step), high), and
/// none when the whole range is `low` values or fewer.
fn static_block(size: u128, low: u128, high: u128, step: u128) -> u128 {
    if size <= low {
        0
    } else {
        (size / step).clamp(low, high)
    }
}

/// Free values a block may have for the choice to be uniform among them:
/// when few are left, concurrent writers choosing from one list of what
/// is taken spread over all of them instead of meeting on the first free
/// value after a run of taken ones.
const UNIFORM_BELOW: u128 = 4096;

/// A free offset in the dynamic block `[static_size, size)`, else in the
/// static block, picked by `seed`: uniformly among the free ones when
/// they are few, else the first free one from a random start (wrapping
/// around). Looks at no more offsets than are used plus that bound, so a
/// large IPv6 range costs nothing.
fn choose_offset(size: u128, static_size: u128, used: &BTreeSet<u128>, seed: u128) -> Option<u128> {
    let in_block = |lo: u128, hi: u128| -> Option<u128> {
        if hi <= lo {
            return None;
        }
        let taken = used.range(lo..hi).count() as u128;
        let free = (hi - lo).checked_sub(taken).filter(|f| *f > 0)?;
        if free <= UNIFORM_BELOW {
            let mut k = seed % free;
            let mut next_used = used.range(lo..hi).peekable();
            for at in lo..hi {
                if next_used.peek() == Some(&&at) {
                    next_used.next();
                } else if k == 0 {
                    return Some(at);
                } else {
                    k -= 1;
                }
            }
            return None;
        }
        let start = lo + seed % (hi - lo);
        let mut at = start;
        loop {
            if !used.contains(&at) {
                return Some(at);
            }
            at = if at + 1 == hi { lo } else { at + 1 };
            if at == start {
                return None;
            }
        }
    };
    in_block(static_size, size).or_else(|| in_block(0, static_size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dynamic_block_is_used_before_the_static_one() {
        let used = BTreeSet::new();
        for seed in 0..200 {
            let o = choose_offset(100, 16, &used, seed).expect("free");
            assert!((16..100).contains(&o), "{o}");
        }
        // The dynamic block full: the static block, then nothing.
        let mut used: BTreeSet<u128> = (16..100).collect();
        let o = choose_offset(100, 16, &used, 7).expect("static");
        assert!(o < 16);
        used.extend(0..16);
        assert_eq!(choose_offset(100, 16, &used, 7), None);
    }

    #[test]
    fn the_few_free_values_left_are_picked_uniformly() {
        // 2 of 84 dynamic offsets free: every seed lands on one of them,
        // and the seeds spread over both.
        let used: BTreeSet<u128> = (16..100).filter(|o| *o != 20 && *o != 90).collect();
        let picks: BTreeSet<u128> = (0..10)
            .map(|seed| choose_offset(100, 16, &used, seed).expect("free"))
            .collect();
        assert_eq!(picks, [20, 90].into_iter().collect());
    }

    #[test]
    fn a_taken_offset_is_skipped_wrapping_around_in_a_large_block() {
        let size = UNIFORM_BELOW * 4;
        let used: BTreeSet<u128> = [size - 2, size - 1].into_iter().collect();
        assert_eq!(choose_offset(size, 0, &used, size - 2), Some(0));
        // A huge range with much taken costs what is taken.
        let used: BTreeSet<u128> = (0..1000).collect();
        assert_eq!(choose_offset(1 << 100, 0, &used, 0), Some(1000));
    }

    #[test]
    fn choices_come_from_the_pool_asked_and_skip_what_is_taken() {
        let cfg =
            Config::from_flags("198.18.0.0/29,fd00:198:18::/120", "30000-30003").expect("cfg");
        let mut taken = BTreeSet::new();
        for _ in 0..6 {
            let a = cfg.choose(Pool::Ip(Family::V4), &taken, 3).expect("free");
            assert!(matches!(a, Alloc::Ip(IpAddr::V4(_))));
            assert!(cfg.in_range(&a).is_ok());
            assert!(taken.insert(a), "{a} twice");
        }
        assert_eq!(cfg.choose(Pool::Ip(Family::V4), &taken, 3), None);
        assert!(cfg.choose(Pool::Ip(Family::V6), &taken, 3).is_some());
        for _ in 0..4 {
            let p = cfg.choose(Pool::Port, &taken, 1).expect("port");
            assert!(taken.insert(p));
        }
        assert_eq!(cfg.choose(Pool::Port, &taken, 1), None);
        assert_eq!(
            cfg.in_range(&Alloc::Port(30004)),
            Err("30000-30003".to_string())
        );
        assert_eq!(
            cfg.in_range(&Alloc::Ip("198.18.0.7".parse().expect("ip"))),
            Err("198.18.0.0/29".to_string())
        );
    }

    #[test]
    fn refusals_read_as_kube_apiserver_words_them() {
        let claim = Claim {
            alloc: Alloc::Port(30080),
            slot: Slot::NodePort(vec![0]),
            field: "spec.ports[0].nodePort".into(),
        };
        let Refusal::Invalid(errs) = claim.taken() else {
            panic!("not a 422");
        };
        assert_eq!(
            errs[0].text(),
            "spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
        );
        let e = claim.taken().status("web");
        assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            e.body()["details"]["causes"][0]["field"],
            "spec.ports[0].nodePort"
        );
        let full = Need {
            slot: Slot::ClusterIp(0),
            pool: Pool::Ip(Family::V4),
        }
        .full()
        .status("web");
        assert_eq!(full.code, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(full
            .message
            .contains("failed to allocate a serviceIP: range is full"));
    }
}
