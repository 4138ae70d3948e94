//! One zone's members for one Service: upstream's "min removals" pick.
//!
//! Previous members that are still candidates stay (the lowest ranks among
//! them if the zone's quota shrank below their number); the rest of the
//! quota goes to the lowest-ranked other candidates. Keeping members is
//! what makes a NEG stable: a node joining the cluster never displaces one,
//! and a node leaving is replaced by exactly one.

use crate::rank::rank;
use crate::table::{NodeTable, Slot};

/// Appends to `out` the `quota` members chosen among `candidates`, given
/// `kept` (previous members, all of them in `candidates`).
///
/// Scans `candidates` once, keeping the best `need` in a short sorted
/// list: with a quota of 8 out of 5 000 candidates almost every candidate
/// is rejected by one comparison against the list's last entry, so no
/// candidate list is sorted or copied.
pub(crate) fn select_zone(
    table: &NodeTable,
    salt: u64,
    candidates: &[Slot],
    kept: &[Slot],
    quota: usize,
    out: &mut Vec<Slot>,
) {
    if quota >= candidates.len() {
        out.extend_from_slice(candidates);
        return;
    }
    let ranked = |slot: Slot| (table.entry(slot).map_or(0, |e| rank(e.hash, salt)), slot);
    if kept.len() >= quota {
        let mut keep: Vec<(u64, Slot)> = kept.iter().map(|&s| ranked(s)).collect();
        keep.sort_by(|&a, &b| order(table, a, b));
        out.extend(keep.iter().take(quota).map(|&(_, s)| s));
        return;
    }
    out.extend_from_slice(kept);
    let need = quota - kept.len();
    let mut best: Vec<(u64, Slot)> = Vec::with_capacity(need + 1);
    for &slot in candidates {
        let candidate = ranked(slot);
        if best.len() == need
            && !best
                .last()
                .is_some_and(|&last| table.before(candidate, last))
        {
            continue;
        }
        if kept.contains(&slot) {
            continue;
        }
        let at = best.partition_point(|&b| table.before(b, candidate));
        best.insert(at, candidate);
        best.truncate(need);
    }
    out.extend(best.iter().map(|&(_, s)| s));
}

fn order(table: &NodeTable, a: (u64, Slot), b: (u64, Slot)) -> std::cmp::Ordering {
    if table.before(a, b) {
        std::cmp::Ordering::Less
    } else if table.before(b, a) {
        std::cmp::Ordering::Greater
    } else {
        std::cmp::Ordering::Equal
    }
}
