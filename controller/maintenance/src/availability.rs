//! M7's availability rule as exact interval arithmetic: at least 48 h of
//! maintenance availability in every rolling 32-day period, counting only
//! contiguous stretches of at least 4 h (a stretch counts for the part of
//! it inside the period; one under 4 h counts nowhere).
//!
//! The least availability over period starts `t` in a range is found
//! exactly from finitely many candidates: between two consecutive
//! breakpoints every stretch's share of `[t, t + 32 d)` is constant or
//! moves by one second per second, so the availability is linear there
//! and its minimum over whole seconds lies at a breakpoint (or one second
//! beside it, kept for safety). Breakpoints are where a stretch's start or
//! end meets either edge of the period.

use crate::window::{Interval, DAY, HOUR};

pub const PERIOD: i64 = 32 * DAY;
pub const NEEDED: i64 = 48 * HOUR;
pub const STRETCH: i64 = 4 * HOUR;

/// `open` with every span of `holes` cut out (both sorted or not; the
/// result is sorted and disjoint).
pub(crate) fn subtract(open: &[Interval], holes: &[Interval]) -> Vec<Interval> {
    let mut holes: Vec<Interval> = holes.to_vec();
    holes.sort_unstable();
    let mut out = Vec::new();
    for &(s, e) in open {
        let mut cur = s;
        for &(hs, he) in &holes {
            if he <= cur || hs >= e {
                continue;
            }
            if hs > cur {
                out.push((cur, hs));
            }
            cur = cur.max(he);
            if cur >= e {
                break;
            }
        }
        if cur < e {
            out.push((cur, e));
        }
    }
    out
}

/// The smallest availability of a period starting in `[from, to]`, with
/// the period's start: `(seconds, start)`.
pub(crate) fn least(open: &[Interval], from: i64, to: i64) -> (i64, i64) {
    // Stretches under 4 h never count; the rest are clipped to what any
    // period in range can see.
    let end = to.saturating_add(PERIOD);
    let spans: Vec<Interval> = open
        .iter()
        .filter(|&&(s, e)| e - s >= STRETCH)
        .map(|&(s, e)| (s.max(from), e.min(end)))
        .filter(|&(s, e)| s < e)
        .collect();
    let mut prefix = Vec::with_capacity(spans.len() + 1);
    prefix.push(0i64);
    for &(s, e) in &spans {
        prefix.push(prefix[prefix.len() - 1] + (e - s));
    }
    let at = |t: i64| available(&spans, &prefix, t);
    let mut best = (at(from), from);
    let mut consider = |t: i64| {
        if (from..=to).contains(&t) {
            let a = at(t);
            if a < best.0 {
                best = (a, t);
            }
        }
    };
    consider(to);
    for &(s, e) in &spans {
        for c in [s - PERIOD, s, e - PERIOD, e] {
            for d in [-1, 0, 1] {
                consider(c + d);
            }
        }
    }
    best
}

/// Availability of `[t, t + 32 d)`: the counted share of each stretch.
fn available(spans: &[Interval], prefix: &[i64], t: i64) -> i64 {
    let p_end = t + PERIOD;
    let first = spans.partition_point(|&(_, e)| e <= t);
    let last = spans.partition_point(|&(s, _)| s < p_end);
    if first >= last {
        return 0;
    }
    let share = |(s, e): Interval| (e.min(p_end) - s.max(t)).max(0);
    if last - first == 1 {
        return share(spans[first]);
    }
    share(spans[first]) + share(spans[last - 1]) + (prefix[last - 1] - prefix[first + 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, stretch by stretch.
    fn brute(open: &[Interval], t: i64) -> i64 {
        open.iter()
            .filter(|&&(s, e)| e - s >= STRETCH)
            .map(|&(s, e)| (e.min(t + PERIOD) - s.max(t)).max(0))
            .sum()
    }

    #[test]
    fn subtract_cuts_holes() {
        let open = [(0, 10), (20, 30)];
        assert_eq!(subtract(&open, &[(5, 25)]), vec![(0, 5), (25, 30)]);
        assert_eq!(subtract(&open, &[(0, 30)]), Vec::<Interval>::new());
        assert_eq!(
            subtract(&open, &[(12, 15), (2, 3)]),
            vec![(0, 2), (3, 10), (20, 30)]
        );
    }

    proptest! {
        // spec: M7 — the candidate search finds the true minimum of the
        // sliding 32-day availability (checked against every hour, and a
        // second either side).
        #[test]
        fn least_is_the_true_minimum(
            raw in proptest::collection::vec((0i64..2000, 1i64..200), 0..25),
            span in 0i64..1500,
        ) {
            let mut open: Vec<Interval> = raw.iter().map(|&(s, l)| (s * HOUR, (s + l) * HOUR)).collect();
            open.sort_unstable();
            let open = subtract(&open, &[]);
            let mut merged: Vec<Interval> = Vec::new();
            for (s, e) in open {
                match merged.last_mut() {
                    Some(last) if s <= last.1 => last.1 = last.1.max(e),
                    _ => merged.push((s, e)),
                }
            }
            let (from, to) = (0, span * HOUR);
            let (got, at) = least(&merged, from, to);
            let clipped = merged;
            prop_assert_eq!(got, brute(&clipped, at));
            for h in 0..=span {
                for d in [-1, 0, 1] {
                    let t = h * HOUR + d;
                    if (from..=to).contains(&t) {
                        prop_assert!(brute(&clipped, t) >= got, "t={} has {} < {}", t, brute(&clipped, t), got);
                    }
                }
            }
        }
    }
}
