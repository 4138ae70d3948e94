use super::*;

#[test]
fn the_example_loads() {
    let v = Versions::example().expect("the shipped example loads");
    for minor in ["1.32", "1.33", "1.34", "1.35"] {
        assert!(v.end_of_life(minor).is_some(), "{minor}");
    }
    for c in [
        Channel::Rapid,
        Channel::Regular,
        Channel::Stable,
        Channel::Extended,
    ] {
        let ch = v.channel(c).expect("channel");
        assert!(ch.available.contains(&ch.default));
    }
    assert_eq!(v.channel(Channel::Unspecified), None);
}

#[test]
fn minors_of_versions() {
    assert_eq!(minor_of("1.33.5-gke.1000").as_deref(), Some("1.33"));
    assert_eq!(minor_of("v1.35.0").as_deref(), Some("1.35"));
    assert_eq!(minor_of("1.33").as_deref(), Some("1.33"));
    for bad in ["", "1", "x.y.z", "1..2", "1.-3"] {
        assert_eq!(minor_of(bad), None, "{bad:?}");
    }
}

#[test]
fn the_cluster_minor_is_its_control_planes_else_its_channels_default() {
    let v = Versions::example().expect("example");
    let mut spec = ClusterSpec::default();
    assert_eq!(v.current_minor(&spec, None), None);
    spec.release_channel = Some(sluice_model::cluster::ReleaseChannel {
        channel: Channel::Stable,
    });
    assert_eq!(v.current_minor(&spec, None).as_deref(), Some("1.34"));
    let status = ClusterStatus {
        current_master_version: Some("1.33.9-gke.1060000".into()),
        ..Default::default()
    };
    assert_eq!(
        v.current_minor(&spec, Some(&status)).as_deref(),
        Some("1.33")
    );
}

#[test]
fn bad_tables_are_refused_naming_what_is_wrong() {
    for (text, words) in [
        ("", "missing field"),
        ("minors: {}\nchannels: {}\nextra: 1", "unknown field `extra`"),
        (
            "minors: {\"1.33\": {endOfLife: 2026-08-20T00:00:00Z, eol: 1}}\nchannels: {}",
            "minors.1.33",
        ),
        ("minors: {\"1.33\": {endOfLife: yesterday}}\nchannels: {}", "minors[1.33]: endOfLife \"yesterday\""),
        ("minors: {\"one\": {endOfLife: 2026-08-20T00:00:00Z}}\nchannels: {}", "minors[one]"),
        (
            "minors: {}\nchannels: {FAST: {default: 1.33.1, available: [1.33.1]}}",
            "unknown field `FAST`",
        ),
        (
            "minors: {\"1.33\": {endOfLife: 2026-08-20T00:00:00Z}}\nchannels: {RAPID: {default: 1.34.1, available: [1.34.1]}}",
            "channels.RAPID.available: \"1.34.1\": minor 1.34 is not in minors",
        ),
        (
            "minors: {\"1.33\": {endOfLife: 2026-08-20T00:00:00Z}}\nchannels: {RAPID: {default: 1.33.2, available: [1.33.1]}}",
            "channels.RAPID.default",
        ),
        ("minors: [1, 2", "versions table"),
        ("{\"minors\": {}, \"channels\": {\"STABLE\": {\"default\": \"1.2.3\"}}}", "missing field `available`"),
    ] {
        let e = Versions::from_yaml(text).expect_err(text);
        assert!(e.to_string().contains(words), "{text:?}: {e}");
    }
    // JSON is YAML too.
    let json =
        r#"{"minors": {"1.33": {"endOfLife": "2026-08-20T02:00:00+02:00"}}, "channels": {}}"#;
    let v = Versions::from_yaml(json).expect("json");
    assert_eq!(
        v.end_of_life("1.33").map(|t| t.to_string()).as_deref(),
        Some("2026-08-20T00:00:00Z")
    );
}
