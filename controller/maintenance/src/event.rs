//! What a maintenance policy gates (M4's columns, M8's manual changes) and
//! what it never gates (M8).

use std::fmt;
use std::str::FromStr;

/// Where a change lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Plane {
    ControlPlane,
    Node,
}

/// What kind of change (M4's columns, per plane).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Change {
    Minor,
    Patch,
    /// A VM restarted or recreated by maintenance (GKE: "VM disruption
    /// due to GKE maintenance").
    VmDisruption,
}

/// One kind of maintenance event: a plane and a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Event {
    pub plane: Plane,
    pub change: Change,
}

impl Event {
    pub const fn new(plane: Plane, change: Change) -> Event {
        Event { plane, change }
    }

    /// All six, in M4's column order.
    pub const ALL: [Event; 6] = [
        Event::new(Plane::ControlPlane, Change::Minor),
        Event::new(Plane::ControlPlane, Change::Patch),
        Event::new(Plane::ControlPlane, Change::VmDisruption),
        Event::new(Plane::Node, Change::Minor),
        Event::new(Plane::Node, Change::Patch),
        Event::new(Plane::Node, Change::VmDisruption),
    ];
}

/// The spelling the CLI reads for each event.
const SPELLINGS: [(&str, Event); 9] = [
    ("node-patch", Event::new(Plane::Node, Change::Patch)),
    ("node-minor", Event::new(Plane::Node, Change::Minor)),
    (
        "node-disruption",
        Event::new(Plane::Node, Change::VmDisruption),
    ),
    ("cp-patch", Event::new(Plane::ControlPlane, Change::Patch)),
    ("cp-minor", Event::new(Plane::ControlPlane, Change::Minor)),
    (
        "cp-disruption",
        Event::new(Plane::ControlPlane, Change::VmDisruption),
    ),
    (
        "control-plane-patch",
        Event::new(Plane::ControlPlane, Change::Patch),
    ),
    (
        "control-plane-minor",
        Event::new(Plane::ControlPlane, Change::Minor),
    ),
    (
        "control-plane-disruption",
        Event::new(Plane::ControlPlane, Change::VmDisruption),
    ),
];

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown maintenance event {0:?}: expected one of node-patch, node-minor, node-disruption, cp-patch, cp-minor, cp-disruption (cp- may be written control-plane-)")]
pub struct UnknownEvent(pub String);

impl FromStr for Event {
    type Err = UnknownEvent;

    fn from_str(s: &str) -> Result<Event, UnknownEvent> {
        SPELLINGS
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, e)| *e)
            .ok_or_else(|| UnknownEvent(s.to_string()))
    }
}

impl fmt::Display for Event {
    /// The short CLI spelling, e.g. `node-patch`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plane = match self.plane {
            Plane::ControlPlane => "cp",
            Plane::Node => "node",
        };
        let change = match self.change {
            Change::Minor => "minor",
            Change::Patch => "patch",
            Change::VmDisruption => "disruption",
        };
        write!(f, "{plane}-{change}")
    }
}

/// M8: maintenance that windows and exclusions never hold back, because
/// holding it back could leave the cluster broken or unsafe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ungated {
    /// Repairs and resizing of the control plane (cannot be turned off).
    ControlPlaneRepair,
    /// Node auto-repair (may be turned off per pool, never gated).
    NodeAutoRepair,
    /// Patches for critical security vulnerabilities: GKE may override
    /// the policy for them.
    CriticalSecurityPatch,
    /// The host's (Compute Engine's) own maintenance of the node VMs.
    HostMaintenance,
}

impl Ungated {
    pub const ALL: [Ungated; 4] = [
        Ungated::ControlPlaneRepair,
        Ungated::NodeAutoRepair,
        Ungated::CriticalSecurityPatch,
        Ungated::HostMaintenance,
    ];
}

/// Who started a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// The controller's own (auto-upgrades and the like).
    Automatic,
    /// A user's request. M8: one that recreates nodes (a config change
    /// applied by recreating them) waits for the policy like automatic
    /// work; any other manual change (an explicit upgrade) runs at once.
    Manual { recreates_nodes: bool },
}

/// Anything the controller may want to start, gated or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activity {
    Maintenance { event: Event, trigger: Trigger },
    Ungated(Ungated),
}

impl Activity {
    /// Whether the maintenance policy decides when this may start (M1, M8).
    pub fn is_gated(&self) -> bool {
        match self {
            Activity::Ungated(_) => false,
            Activity::Maintenance { trigger, .. } => match trigger {
                Trigger::Automatic => true,
                Trigger::Manual { recreates_nodes } => *recreates_nodes,
            },
        }
    }

    /// The event the policy is asked about, when it is gated.
    pub fn gated_event(&self) -> Option<Event> {
        match self {
            Activity::Maintenance { event, .. } if self.is_gated() => Some(*event),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_spellings_parse_and_print_back() {
        for e in Event::ALL {
            assert_eq!(e.to_string().parse::<Event>(), Ok(e));
        }
        assert_eq!(
            "control-plane-minor".parse::<Event>(),
            Ok(Event::new(Plane::ControlPlane, Change::Minor))
        );
        for bad in [
            "",
            "node",
            "NODE-PATCH",
            "node-patch ",
            "cp-",
            "node-patch-x",
            "cp_minor",
        ] {
            let e = bad.parse::<Event>().expect_err(bad);
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
            assert!(e.to_string().contains("node-patch"), "{e}");
        }
    }

    #[test]
    fn what_is_gated() {
        // spec: M8 — repairs, security patches and host maintenance are not gated.
        for u in Ungated::ALL {
            assert!(!Activity::Ungated(u).is_gated(), "{u:?}");
            assert_eq!(Activity::Ungated(u).gated_event(), None);
        }
        let event = Event::new(Plane::Node, Change::VmDisruption);
        let with = |trigger| Activity::Maintenance { event, trigger };
        // spec: M1 — automatic maintenance is gated.
        assert!(with(Trigger::Automatic).is_gated());
        // spec: M8 — manual changes that recreate nodes wait too; others do not.
        assert!(with(Trigger::Manual {
            recreates_nodes: true
        })
        .is_gated());
        assert_eq!(
            with(Trigger::Manual {
                recreates_nodes: true
            })
            .gated_event(),
            Some(event)
        );
        assert!(!with(Trigger::Manual {
            recreates_nodes: false
        })
        .is_gated());
    }
}
