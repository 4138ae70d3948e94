//! M4's table: which exclusion scope blocks which event.

use sluice_model::cluster::ExclusionScope;

use crate::event::{Change, Event, Plane};

/// Whether an active exclusion of `scope` blocks `event` (M4).
pub fn blocks(scope: ExclusionScope, event: Event) -> bool {
    match scope {
        ExclusionScope::NoUpgrades => true,
        ExclusionScope::NoMinorUpgrades => event.change == Change::Minor,
        ExclusionScope::NoMinorOrNodeUpgrades => {
            event.change == Change::Minor || event.plane == Plane::Node
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table() {
        // spec: M4 — rows: scopes; columns: CP minor, CP patch, CP VM
        // disruption, node minor, node patch, node VM disruption.
        let table = [
            (
                ExclusionScope::NoUpgrades,
                [true, true, true, true, true, true],
            ),
            (
                ExclusionScope::NoMinorUpgrades,
                [true, false, false, true, false, false],
            ),
            (
                ExclusionScope::NoMinorOrNodeUpgrades,
                [true, false, false, true, true, true],
            ),
        ];
        for (scope, row) in table {
            for (event, expected) in Event::ALL.into_iter().zip(row) {
                assert_eq!(blocks(scope, event), expected, "{scope:?} {event}");
            }
        }
    }
}
