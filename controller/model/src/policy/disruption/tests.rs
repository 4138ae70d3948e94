use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn pod(name: &str, ready: bool) -> PodFacts {
    PodFacts {
        name: name.into(),
        namespace: "default".into(),
        labels: labels(&[("app", "web")]),
        ready,
        deleting: false,
        phase: "Running".into(),
    }
}

fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: if values.is_empty() {
            None
        } else {
            Some(values.iter().map(|v| v.to_string()).collect())
        },
    }
}

fn spec(selector: Option<LabelSelector>) -> PodDisruptionBudgetSpec {
    PodDisruptionBudgetSpec {
        selector,
        min_available: Some(IntOrString::Int(1)),
        ..Default::default()
    }
}

#[test]
fn selectors_match_labels_and_every_expression() {
    let l = labels(&[("app", "web"), ("tier", "front")]);
    let sel = |ml: &[(&str, &str)], me: Vec<LabelSelectorRequirement>| LabelSelector {
        match_labels: Some(labels(ml)),
        match_expressions: Some(me),
    };
    assert_eq!(
        selector_matches(&sel(&[("app", "web")], vec![]), &l),
        Ok(true)
    );
    assert_eq!(
        selector_matches(&sel(&[("app", "db")], vec![]), &l),
        Ok(false)
    );
    for (e, want) in [
        (expr("tier", "In", &["front", "back"]), true),
        (expr("tier", "In", &["back"]), false),
        (expr("zone", "In", &["a"]), false),
        (expr("tier", "NotIn", &["back"]), true),
        (expr("zone", "NotIn", &["a"]), true),
        (expr("tier", "NotIn", &["front"]), false),
        (expr("tier", "Exists", &[]), true),
        (expr("zone", "Exists", &[]), false),
        (expr("zone", "DoesNotExist", &[]), true),
        (expr("tier", "DoesNotExist", &[]), false),
    ] {
        let s = sel(&[("app", "web")], vec![e.clone()]);
        assert_eq!(selector_matches(&s, &l), Ok(want), "{e:?}");
    }
    // Empty: everything.
    assert_eq!(selector_matches(&LabelSelector::default(), &l), Ok(true));
    // Malformed expressions are errors that name the entry.
    let e =
        selector_matches(&sel(&[], vec![expr("a", "Equals", &["b"])]), &l).expect_err("operator");
    assert!(
        e.to_string().contains("matchExpressions[0].operator"),
        "{e}"
    );
    assert!(selector_matches(&sel(&[], vec![expr("a", "In", &[])]), &l).is_err());
    assert!(selector_matches(&sel(&[], vec![expr("a", "Exists", &["x"])]), &l).is_err());
}

#[test]
fn selector_faults_name_the_expression_and_its_field() {
    // spec: E6 — a budget that cannot be read is refused naming the
    // field, so the file or request can be fixed.
    let one = |e: LabelSelectorRequirement| {
        Selector::parse(&LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![expr("app", "Exists", &[]), e]),
        })
        .expect_err("bad expression")
    };
    for (e, field) in [
        (
            expr("a", "Near", &["x"]),
            "spec.selector.matchExpressions[1].operator",
        ),
        (
            expr("a", "NotIn", &[]),
            "spec.selector.matchExpressions[1].values",
        ),
        (
            expr("a", "DoesNotExist", &["x"]),
            "spec.selector.matchExpressions[1].values",
        ),
        (
            expr("", "Exists", &[]),
            "spec.selector.matchExpressions[1].key",
        ),
    ] {
        let err = one(e.clone());
        assert_eq!(err.field(), field, "{e:?}");
        assert_eq!(err.to_string(), format!("{field}: {}", err.message()));
    }
    let parsed = Selector::parse(&LabelSelector {
        match_labels: Some(labels(&[("app", "web")])),
        match_expressions: Some(vec![expr("tier", "In", &["a", "b"])]),
    })
    .expect("valid");
    assert_eq!(parsed.match_labels, labels(&[("app", "web")]));
    assert_eq!(
        parsed.match_expressions,
        vec![(
            "tier".to_string(),
            SelectorOp::In(["a".to_string(), "b".to_string()].into())
        )]
    );
}

#[test]
fn unhealthy_policy_is_strict_when_read_and_lenient_when_applied() {
    // spec: E6 — IfHealthyBudget unless the budget says AlwaysAllow.
    let with = |v: Option<&str>| PodDisruptionBudgetSpec {
        unhealthy_pod_eviction_policy: v.map(str::to_string),
        ..Default::default()
    };
    use UnhealthyPodEvictionPolicy::*;
    assert_eq!(
        UnhealthyPodEvictionPolicy::parse(&with(None)),
        Ok(IfHealthyBudget)
    );
    assert_eq!(
        UnhealthyPodEvictionPolicy::parse(&with(Some("AlwaysAllow"))),
        Ok(AlwaysAllow)
    );
    let e = UnhealthyPodEvictionPolicy::parse(&with(Some("Sometimes"))).expect_err("bad");
    assert_eq!(e.field(), "spec.unhealthyPodEvictionPolicy");
    assert_eq!(
        UnhealthyPodEvictionPolicy::of(&with(Some("Sometimes"))),
        IfHealthyBudget
    );
}

#[test]
fn a_budget_guards_matching_pods_of_its_namespace_only() {
    let p = pod("web-1", true);
    let web = Some(LabelSelector {
        match_labels: Some(labels(&[("app", "web")])),
        match_expressions: None,
    });
    assert!(guards("default", &spec(web.clone()), &p));
    assert!(!guards("prod", &spec(web), &p));
    // policy/v1: a null selector selects nothing, an empty one every
    // pod of the namespace.
    assert!(!guards("default", &spec(None), &p));
    assert!(guards("default", &spec(Some(LabelSelector::default())), &p));
    // One that does not parse guards nothing, as kube-apiserver skips it.
    let bad = Some(LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![expr("app", "Like", &["w"])]),
    });
    assert!(!guards("default", &spec(bad), &p));
}

#[test]
fn desired_healthy_rounds_percentages_up() {
    // spec: E6 — minAvailable: N, a percentage of expected rounded up;
    // maxUnavailable: expected − ceil(maxUnavailable).
    let min = |v: IntOrString| {
        Budget::of(&PodDisruptionBudgetSpec {
            min_available: Some(v),
            ..Default::default()
        })
    };
    let max = |v: IntOrString| {
        Budget::of(&PodDisruptionBudgetSpec {
            max_unavailable: Some(v),
            ..Default::default()
        })
    };
    let s = |x: &str| IntOrString::String(x.into());
    assert_eq!(
        min(IntOrString::Int(2)).map(|b| b.desired_healthy(5)),
        Ok(2)
    );
    assert_eq!(min(s("50%")).map(|b| b.desired_healthy(3)), Ok(2));
    assert_eq!(min(s("34%")).map(|b| b.desired_healthy(3)), Ok(2));
    assert_eq!(
        max(IntOrString::Int(1)).map(|b| b.desired_healthy(3)),
        Ok(2)
    );
    assert_eq!(max(s("50%")).map(|b| b.desired_healthy(3)), Ok(1));
    assert_eq!(max(s("100%")).map(|b| b.desired_healthy(3)), Ok(0));
    assert_eq!(
        max(IntOrString::Int(9)).map(|b| b.desired_healthy(3)),
        Ok(0)
    );
    let e = min(s("half")).expect_err("junk");
    assert!(e.to_string().contains("spec.minAvailable"), "{e}");
    assert!(min(IntOrString::Int(-1)).is_err());
    assert_eq!(
        Budget::of(&PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(1)),
            max_unavailable: Some(IntOrString::Int(1)),
            ..Default::default()
        }),
        Err(PolicyError::BothSet)
    );
    assert!(min(s("150%")).is_err(), "more than 100%");
    assert!(min(s("+5%")).is_err());
}

#[test]
fn status_counts_ready_pods_not_deleting_nor_disrupted() {
    // spec: E6 — disruptionsAllowed = max(0, currentHealthy − desired).
    let mut pods = vec![
        pod("a", true),
        pod("b", true),
        pod("c", false),
        pod("d", true),
    ];
    pods[3].deleting = true;
    let none = BTreeMap::new();
    let st = budget_status(Budget::MinAvailable(IntOrPercent::Int(1)), &pods, &none);
    assert_eq!(
        st,
        BudgetStatus {
            expected: 4,
            current_healthy: 2,
            desired_healthy: 1,
            disruptions_allowed: 1
        }
    );
    let disrupted: BTreeMap<String, Time> = [("a".to_string(), Time(Timestamp::UNIX_EPOCH))].into();
    let st = budget_status(
        Budget::MinAvailable(IntOrPercent::Int(1)),
        &pods,
        &disrupted,
    );
    assert_eq!((st.current_healthy, st.disruptions_allowed), (1, 0));
    let st = budget_status(Budget::MinAvailable(IntOrPercent::Int(3)), &pods, &none);
    assert_eq!(st.disruptions_allowed, 0, "never negative");
}

#[test]
fn verdicts_spend_refuse_or_let_unhealthy_pods_go() {
    let st = |current, desired| BudgetStatus {
        expected: 3,
        current_healthy: current,
        desired_healthy: desired,
        disruptions_allowed: u32::saturating_sub(current, desired),
    };
    let policy = UnhealthyPodEvictionPolicy::IfHealthyBudget;
    // spec: E6 — a refused eviction is a 429 the client retries.
    assert_eq!(decide(true, &st(2, 2), policy), Verdict::Refused);
    assert_eq!(decide(true, &st(3, 2), policy), Verdict::Spend);
    // An unhealthy pod goes free while the budget is met...
    assert_eq!(decide(false, &st(2, 2), policy), Verdict::AllowUnhealthy);
    // ...and needs an allowance when it is not (IfHealthyBudget)...
    assert_eq!(decide(false, &st(1, 2), policy), Verdict::Refused);
    // ...unless the budget says AlwaysAllow.
    assert_eq!(
        decide(false, &st(1, 2), UnhealthyPodEvictionPolicy::AlwaysAllow),
        Verdict::AllowUnhealthy
    );
    let mut pending = pod("p", false);
    pending.phase = "Pending".into();
    assert!(pending.can_ignore_budget());
    assert!(!pod("a", true).can_ignore_budget());
}

#[test]
fn recorded_disruptions_lapse_when_done_or_stale() {
    let now = Timestamp::from_second(1_000_000).expect("ts");
    let at = |s: i64| Time(Timestamp::from_second(1_000_000 - s).expect("ts"));
    let mut gone = pod("b", true);
    gone.deleting = true;
    let pods = vec![pod("a", true), gone, pod("c", true)];
    let recorded: BTreeMap<String, Time> = [
        ("a".to_string(), at(10)),
        ("b".to_string(), at(10)),
        ("c".to_string(), at(121)),
        ("x".to_string(), at(1)),
    ]
    .into();
    let live = live_disruptions(&recorded, &pods, now);
    assert_eq!(live.keys().collect::<Vec<_>>(), vec!["a"]);
    let s = spent_status(
        &BudgetStatus {
            expected: 3,
            current_healthy: 2,
            desired_healthy: 1,
            disruptions_allowed: 1,
        },
        live,
        "c",
        now,
        Some(2),
        None,
    );
    assert_eq!(s.disruptions_allowed, Some(0));
    assert_eq!(s.disrupted_pods.map(|d| d.len()), Some(2));
    assert!(refusal_cause(
        "web",
        &BudgetStatus {
            expected: 2,
            current_healthy: 2,
            desired_healthy: 2,
            disruptions_allowed: 0
        }
    )
    .contains("The disruption budget web needs 2 healthy pods and has 2 currently"));
}
