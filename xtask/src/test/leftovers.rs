//! What a test run left on the host: network namespaces, links in the
//! host's namespace and bpffs pins that were not there when it began.
//!
//! Every test removes what it makes, also on failure (its guards). A test
//! binary stopped for its time (`lanes::watchdog`) or killed outright runs
//! no guard, and a test with a leaking guard is a bug to see. So the run
//! compares the host before and after: what appeared and is named after
//! one of the run's processes (the tests name what they make
//! `sl-<tag>-<pid>-<n>`) is removed and fails the run; anything else that
//! appeared (a lab started meanwhile, say) is named and left alone.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Result};

/// Where the tests pin their maps and programs.
const PIN_ROOT: &str = "/sys/fs/bpf/sluice";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Netns,
    Link,
    Pin,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Netns => "network namespace",
            Kind::Link => "link in the host's namespace",
            Kind::Pin => "bpffs pin",
        })
    }
}

/// The host's namespaces, links and pins at one moment.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Snapshot {
    entries: BTreeSet<(Kind, String)>,
}

fn names_in(dir: &str) -> impl Iterator<Item = String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
}

impl Snapshot {
    pub fn take() -> Snapshot {
        let mut entries = BTreeSet::new();
        entries.extend(names_in("/run/netns").map(|n| (Kind::Netns, n)));
        entries.extend(names_in("/sys/class/net").map(|n| (Kind::Link, n)));
        entries.extend(names_in(PIN_ROOT).map(|n| (Kind::Pin, n)));
        Snapshot { entries }
    }

    #[cfg(test)]
    fn of(entries: &[(Kind, &str)]) -> Snapshot {
        Snapshot {
            entries: entries.iter().map(|(k, n)| (*k, n.to_string())).collect(),
        }
    }
}

/// Something that appeared during the run and is still there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    pub kind: Kind,
    pub name: String,
    /// Named after one of the run's processes: a test's, to be removed.
    pub ours: bool,
}

/// Whether one of the numbers in `name` is one of `pids`.
fn names_a_pid(name: &str, pids: &[u32]) -> bool {
    name.split(|c: char| !c.is_ascii_digit())
        .filter_map(|t| t.parse::<u32>().ok())
        .any(|n| pids.contains(&n))
}

/// What is in `after` and was not in `before`.
pub fn leftovers(before: &Snapshot, after: &Snapshot, pids: &[u32]) -> Vec<Leftover> {
    after
        .entries
        .difference(&before.entries)
        .map(|(kind, name)| Leftover {
            kind: *kind,
            name: name.clone(),
            ours: names_a_pid(name, pids),
        })
        .collect()
}

fn remove(l: &Leftover) -> Result<()> {
    let ok = match l.kind {
        Kind::Netns => Command::new("ip")
            .args(["netns", "delete", &l.name])
            .status()?
            .success(),
        Kind::Link => Command::new("ip")
            .args(["link", "delete", &l.name])
            .status()?
            .success(),
        Kind::Pin => {
            let p = Path::new(PIN_ROOT).join(&l.name);
            if p.is_dir() {
                std::fs::remove_dir_all(&p)?;
            } else {
                std::fs::remove_file(&p)?;
            }
            true
        }
    };
    if !ok {
        bail!("could not remove the {} {}", l.kind, l.name);
    }
    Ok(())
}

/// Compare the host with `before`, remove what the run's processes
/// (`pids`) left, and fail naming it; name anything else that appeared.
pub fn sweep(before: &Snapshot, pids: &[u32]) -> Result<()> {
    let found = leftovers(before, &Snapshot::take(), pids);
    let mut ours = Vec::new();
    for l in &found {
        if l.ours {
            let how = match remove(l) {
                Ok(()) => "removed".to_string(),
                Err(e) => format!("{e:#}"),
            };
            println!("left behind by a test: {} {} ({how})", l.kind, l.name);
            ours.push(format!("{} {}", l.kind, l.name));
        } else {
            println!(
                "appeared during the run, not named after a test process, left alone: {} {}",
                l.kind, l.name
            );
        }
    }
    if !ours.is_empty() {
        bail!(
            "the tests left {} thing{} behind: {}",
            ours.len(),
            if ours.len() == 1 { "" } else { "s" },
            ours.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_appeared_is_a_leftover_and_a_tests_pid_makes_it_ours() {
        let before = Snapshot::of(&[(Kind::Netns, "lab-a"), (Kind::Link, "lo")]);
        let after = Snapshot::of(&[
            (Kind::Netns, "lab-a"),
            (Kind::Link, "lo"),
            (Kind::Netns, "sl-lbk-4242-3"),
            (Kind::Netns, "lab-b"),
            (Kind::Pin, "lbk-4242-0-n"),
            (Kind::Link, "veth4243"),
        ]);
        let found = leftovers(&before, &after, &[4242, 77]);
        let named: Vec<(Kind, &str, bool)> = found
            .iter()
            .map(|l| (l.kind, l.name.as_str(), l.ours))
            .collect();
        assert_eq!(
            named,
            vec![
                (Kind::Netns, "lab-b", false),
                (Kind::Netns, "sl-lbk-4242-3", true),
                (Kind::Link, "veth4243", false),
                (Kind::Pin, "lbk-4242-0-n", true),
            ]
        );
    }

    #[test]
    fn a_pid_must_be_a_whole_number_in_the_name() {
        assert!(names_a_pid("sl-x-42-1", &[42]));
        assert!(!names_a_pid("sl-x-420-1", &[42]));
        assert!(!names_a_pid("sl-x-4-2", &[42]));
        assert!(!names_a_pid("sl-x", &[42]));
        assert!(!names_a_pid("sl-99999999999999999999", &[42]));
    }

    #[test]
    fn nothing_new_is_nothing_left() {
        let s = Snapshot::of(&[(Kind::Netns, "a")]);
        assert!(leftovers(&s, &s, &[1]).is_empty());
        // Something removed during the run is not a leftover either.
        assert!(leftovers(&s, &Snapshot::default(), &[1]).is_empty());
    }
}
