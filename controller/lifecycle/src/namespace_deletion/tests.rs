//! The namespace controller's rules, one case each, with the facts of
//! upstream's namespace deletion tests (pods first, grace estimates from
//! the deletionTimestamp, finalizers' 15 s, conditions' wording, the
//! `kubernetes` token removed only from an empty namespace).

use super::*;
use k8s_openapi::api::core::v1::{NamespaceSpec, NamespaceStatus, PodSpec, PodStatus};

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).expect("a valid time")
}

fn namespace(deleted: Option<i64>, phase: &str, finalizers: &[&str]) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some("team-a".into()),
            deletion_timestamp: deleted.map(|s| Time(at(s))),
            ..Default::default()
        },
        spec: Some(NamespaceSpec {
            finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
        }),
        status: Some(NamespaceStatus {
            phase: Some(phase.into()),
            conditions: None,
        }),
    }
}

fn terminating() -> Namespace {
    namespace(Some(0), "Terminating", &[KUBERNETES])
}

fn object(resource: &str, group: &str, name: &str) -> Content {
    Content {
        resource: resource.into(),
        group: group.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        finalizers: Vec::new(),
        being_deleted: false,
        running_grace: None,
    }
}

fn pod(name: &str, grace: Option<i64>, phase: &str) -> Content {
    Content::from_pod(&Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(PodSpec {
            termination_grace_period_seconds: grace,
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        }),
    })
}

fn held(mut c: Content, f: &str) -> Content {
    c.finalizers.push(f.into());
    c.being_deleted = true;
    c
}

fn deleting(mut c: Content) -> Content {
    c.being_deleted = true;
    c
}

fn names(p: &Plan) -> Vec<String> {
    p.delete.iter().map(|d| d.name.clone()).collect()
}

fn condition_of<'a>(p: &'a Plan, t: &str) -> &'a NamespaceCondition {
    p.conditions
        .as_ref()
        .and_then(|c| c.iter().find(|c| c.type_ == t))
        .unwrap_or_else(|| panic!("no {t}"))
}

/// What a pass decides, as a case states it: the objects deleted (by
/// name), the finalizers `finalize` writes, and the requeue in seconds.
type Outcome = (Vec<&'static str>, Option<Vec<&'static str>>, Option<i64>);

#[test]
fn the_namespace_controllers_rules() {
    struct Case {
        rule: &'static str,
        ns: Namespace,
        contents: Vec<Content>,
        errors: Vec<String>,
        now: i64,
        want: Option<Outcome>,
    }
    let c = |rule, ns, contents, now, want| Case {
        rule,
        ns,
        contents,
        errors: Vec::new(),
        now,
        want,
    };
    let cases = vec![
        c(
            "a namespace not being deleted is left alone",
            namespace(None, "Active", &[KUBERNETES]),
            vec![object("configmaps", "", "cfg")],
            0,
            None,
        ),
        c(
            "an empty namespace loses the kubernetes token at once",
            terminating(),
            vec![],
            0,
            Some((vec![], Some(vec![]), None)),
        ),
        c(
            "other spec finalizers stay, sorted and each once",
            namespace(
                Some(0),
                "Terminating",
                &["z.io/x", KUBERNETES, "a.io/y", "z.io/x"],
            ),
            vec![],
            0,
            Some((vec![], Some(vec!["a.io/y", "z.io/x"]), None)),
        ),
        c(
            "pods go first: the rest waits while any pod is left",
            terminating(),
            vec![
                object("services", "", "web"),
                pod("web-0", Some(5), "Running"),
                object("deployments", "apps", "web"),
            ],
            0,
            Some((vec!["web-0"], None, Some(5 / 2 + 1))),
        ),
        c(
            "no pod left: everything else is deleted",
            terminating(),
            vec![
                object("services", "", "web"),
                object("deployments", "apps", "web"),
                object("configmaps", "", "cfg"),
            ],
            0,
            Some((vec!["cfg", "web", "web"], None, Some(1))),
        ),
        c(
            "the estimate is the longest grace of the running pods",
            terminating(),
            vec![pod("a", Some(10), "Running"), pod("b", None, "Pending")],
            0,
            Some((vec!["a", "b"], None, Some(30 / 2 + 1))),
        ),
        c(
            "the estimate runs from the namespace's deletionTimestamp",
            terminating(),
            vec![deleting(pod("a", Some(10), "Running"))],
            12,
            Some((vec![], None, Some(1))),
        ),
        c(
            "terminal pods have nothing to wait for",
            terminating(),
            vec![pod("done", Some(60), "Succeeded")],
            0,
            Some((vec!["done"], None, Some(1))),
        ),
        c(
            "objects held by finalizers are waited for 15 s",
            terminating(),
            vec![held(object("configmaps", "", "cfg"), "example.com/hold")],
            0,
            Some((vec![], None, Some(15 / 2 + 1))),
        ),
        c(
            "the token is kept while anything remains, even being deleted",
            terminating(),
            vec![deleting(object("services", "", "web"))],
            100,
            Some((vec![], None, Some(1))),
        ),
        Case {
            errors: vec!["pods is forbidden".into()],
            ..c(
                "a failed delete keeps the token, even with nothing listed",
                terminating(),
                vec![],
                0,
                Some((vec![], None, Some(1))),
            )
        },
    ];
    for case in cases {
        let got = plan(&case.ns, &case.contents, &case.errors, at(case.now));
        let got = got.map(|p| {
            let fin = p.finalize.clone();
            (names(&p), fin, p.requeue_after.map(|d| d.as_secs()))
        });
        let want = case.want.map(|(d, f, r)| {
            (
                d.into_iter().map(String::from).collect::<Vec<_>>(),
                f.map(|f| f.into_iter().map(String::from).collect::<Vec<_>>()),
                r,
            )
        });
        assert_eq!(got, want, "{}", case.rule);
    }
}

#[test]
fn terminating_is_written_first_and_a_finalized_namespace_is_done() {
    let marked = namespace(Some(0), "Active", &[KUBERNETES]);
    let p = plan(&marked, &[], &[], at(0)).expect("a plan");
    assert!(p.set_terminating);
    let finalized = namespace(Some(0), "Terminating", &[]);
    assert_eq!(plan(&finalized, &[], &[], at(0)), None);
    let finalized_active = namespace(Some(0), "Active", &[]);
    let p = plan(&finalized_active, &[], &[], at(0)).expect("phase only");
    assert!(p.set_terminating && p.finalize.is_none() && p.delete.is_empty());
}

#[test]
fn conditions_say_what_remains_in_upstreams_words() {
    let contents = vec![
        held(pod("a", Some(5), "Running"), "example.com/a"),
        pod("b", Some(5), "Running"),
        held(object("deployments", "apps", "web"), "example.com/a"),
        held(object("configmaps", "", "cfg"), "example.com/b"),
    ];
    let errors = vec!["b failed".to_string(), "a failed".to_string()];
    let p = plan(&terminating(), &contents, &errors, at(1)).expect("plan");
    let types: Vec<&str> = p
        .conditions
        .as_ref()
        .expect("conditions")
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(types, CONDITION_TYPES);
    let remaining = condition_of(&p, "NamespaceContentRemaining");
    assert_eq!(remaining.status, "True");
    assert_eq!(remaining.reason.as_deref(), Some("SomeResourcesRemain"));
    assert_eq!(
        remaining.message.as_deref(),
        Some("Some resources are remaining: configmaps. has 1 resource instances, deployments.apps has 1 resource instances, pods. has 2 resource instances")
    );
    let fin = condition_of(&p, "NamespaceFinalizersRemaining");
    assert_eq!(fin.reason.as_deref(), Some("SomeFinalizerRemain"));
    assert_eq!(
        fin.message.as_deref(),
        Some("Some finalizers are remaining: example.com/a in 2 resource instances, example.com/b in 1 resource instances")
    );
    let failed = condition_of(&p, "NamespaceDeletionContentFailure");
    assert_eq!(failed.reason.as_deref(), Some("ContentDeletionFailed"));
    assert_eq!(
        failed.message.as_deref(),
        Some("Failed to delete all resource types, 2 remaining: a failed, b failed")
    );
    let discovery = condition_of(&p, "NamespaceDeletionDiscoveryFailure");
    assert_eq!(discovery.status, "False");
    assert_eq!(discovery.reason.as_deref(), Some("ResourcesDiscovered"));
    assert_eq!(
        discovery.message.as_deref(),
        Some("All resources successfully discovered")
    );
    assert_eq!(
        condition_of(&p, "NamespaceDeletionGroupVersionParsingFailure")
            .message
            .as_deref(),
        Some("All legacy kube types successfully parsed")
    );

    // Written back, they are not written again; a status that changes
    // moves only its own lastTransitionTime.
    let mut ns = terminating();
    if let Some(s) = ns.status.as_mut() {
        s.conditions = p.conditions.clone();
    }
    let again = plan(&ns, &contents, &errors, at(30)).expect("plan");
    assert_eq!(again.conditions, None);
    let cleared = plan(&ns, &[], &[], at(40)).expect("plan");
    let ok = condition_of(&cleared, "NamespaceContentRemaining");
    assert_eq!(ok.status, "False");
    assert_eq!(ok.reason.as_deref(), Some("ContentRemoved"));
    assert_eq!(
        ok.message.as_deref(),
        Some("All content successfully removed")
    );
    assert_eq!(ok.last_transition_time, Some(Time(at(40))));
    let discovery = condition_of(&cleared, "NamespaceDeletionDiscoveryFailure");
    assert_eq!(discovery.last_transition_time, Some(Time(at(1))));
    assert_eq!(
        condition_of(&cleared, "NamespaceDeletionContentFailure")
            .message
            .as_deref(),
        Some("All content successfully deleted, may be waiting on finalization")
    );
    assert_eq!(cleared.finalize, Some(vec![]));
}
