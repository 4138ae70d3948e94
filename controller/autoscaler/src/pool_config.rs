//! What the autoscaler needs of a pool that `NodePool` does not carry yet:
//! its price, GKE's reservation affinity, a TPU slice topology, the pool
//! kind and the per-zone sizes the autoscaler last set. The loop fills
//! these from the model's fields once they exist; until then they default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sluice_model::policy::eviction::PoolKind;

use crate::error::ConfigError;

/// One pool's extra inputs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolExtras {
    /// Price of one node per hour; absent: [`crate::price::default_node_price`]
    /// from the pool's capacity, with the spot discount.
    pub price_per_hour: Option<f64>,
    pub reservation_affinity: ReservationAffinity,
    /// A TPU slice: multi-host slices grow and shrink all or nothing (C10).
    pub tpu: Option<TpuSlice>,
    /// Standard or Autopilot-style: what `safe-to-evict: "false"` buys (E2, E5).
    pub kind: PoolKind,
    /// The per-zone node counts the autoscaler last set, as the pool holds
    /// them; a zone absent here is at its reconciler's target.
    pub target_sizes: BTreeMap<String, i32>,
}

/// GKE's `reservationAffinity.consumeReservationType`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ReservationAffinity {
    /// `ANY_RESERVATION`, GKE's default: any matching reservation is used.
    #[default]
    Any,
    /// `SPECIFIC_RESERVATION` with the reservations' names (`values`).
    Specific(Vec<String>),
    /// `NO_RESERVATION`.
    None,
}

/// A Compute Engine reservation, reduced to what matching needs: machines
/// of one shape in one zone, some of them in use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    pub name: String,
    pub zone: String,
    /// The machine shape reserved, compared with a pool's capacity.
    pub cpu_milli: i128,
    pub memory_bytes: i128,
    pub count: u32,
    pub in_use: u32,
    /// `specificReservationRequired`: only pools naming it may use it.
    #[serde(default)]
    pub specific_only: bool,
}

impl Reservation {
    /// Machines still free.
    pub fn unused(&self) -> u32 {
        self.count.saturating_sub(self.in_use)
    }
}

impl ReservationAffinity {
    /// Whether a pool with this affinity may consume `r`.
    pub fn admits(&self, r: &Reservation) -> bool {
        match self {
            ReservationAffinity::Any => !r.specific_only,
            ReservationAffinity::Specific(names) => names.contains(&r.name),
            ReservationAffinity::None => false,
        }
    }
}

/// GKE's `tpuTopology` (`2x2x1`, `16x16`) and the chips one host carries
/// (4 for `ct5lp-hightpu-4t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TpuSlice {
    pub topology: String,
    pub chips_per_host: u32,
}

impl TpuSlice {
    /// How many hosts (nodes) the slice takes: chips over chips per host,
    /// which must divide evenly. `16x16` of 4-chip hosts is 64 nodes.
    pub fn hosts(&self) -> Result<u32, ConfigError> {
        let bad = |why: String| ConfigError::TpuTopology(why);
        if self.chips_per_host == 0 {
            return Err(bad("chips per host must be positive".into()));
        }
        let mut chips: u64 = 1;
        for part in self.topology.split('x') {
            let n: u64 = part.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                bad(format!(
                    "{:?} is not of the form AxB or AxBxC",
                    self.topology
                ))
            })?;
            chips = chips.saturating_mul(n);
        }
        let dims = self.topology.split('x').count();
        if !(2..=3).contains(&dims) {
            return Err(bad(format!(
                "{:?} is not of the form AxB or AxBxC",
                self.topology
            )));
        }
        let per = u64::from(self.chips_per_host);
        if !chips.is_multiple_of(per) {
            return Err(bad(format!(
                "{:?} has {chips} chips, which do not divide into hosts of {per}",
                self.topology
            )));
        }
        u32::try_from(chips / per).map_err(|_| bad("too many hosts".into()))
    }

    /// A slice of more than one host: it exists whole or not at all.
    pub fn multi_host(&self) -> bool {
        self.hosts().is_ok_and(|h| h > 1)
    }
}
