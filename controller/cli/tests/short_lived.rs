//! `node-pools update --autoscaled-rollout-policy` and flex-start pools
//! through the CLI, against a live controller (`--node-provider sim:1`):
//! what the API stores, and what its admission refuses.

mod common;
use common::{code, run, text, update, with_pool, Controller, ERROR, OK, USAGE};

/// Pool-a, one node in zone-a; `config` its config's fields after the
/// capacity, `more` further lines of its spec.
fn pool(config: &str, more: &str) -> String {
    format!(
        "apiVersion: sluice.dev/v1
kind: NodePool
metadata: {{name: pool-a}}
spec:
  locations: [zone-a]
  initialNodeCount: 1
  version: \"1.33.2\"
  config: {{capacity: {{cpu: \"2\", memory: 4Gi}}{config}}}
{more}"
    )
}

/// The pool's `spec.upgradeSettings.blueGreenSettings`, as JSON text.
fn blue_green(c: &Controller) -> String {
    let o = c.kubectl(&[
        "get",
        "nodepool",
        "pool-a",
        "-o",
        "jsonpath={.spec.upgradeSettings.blueGreenSettings}",
    ]);
    text(&o)
}

/// spec: A1, A4 — gcloud's flag sets the autoscaled policy, replacing the
/// standard one (and back); empty is the defaults; bad values are refused.
#[test]
fn the_autoscaled_rollout_policy_is_set_as_gcloud_sets_it() {
    let c = with_pool(
        "autoscaled-policy",
        &pool(
            "",
            "  autoscaling: {enabled: true, minNodeCount: 1, maxNodeCount: 3}\n",
        ),
    );
    let kc = c.kubeconfig();
    let o = update(
        &kc,
        &[
            "--enable-blue-green-upgrade",
            "--autoscaled-rollout-policy=wait-for-drain-duration=7200s",
        ],
    );
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    assert!(
        text(&o).contains("waitForDrainDuration 7200s"),
        "{}",
        text(&o)
    );
    let bg = blue_green(&c);
    assert!(bg.contains(r#""waitForDrainDuration":"7200s""#), "{bg}");

    let o = update(&kc, &["--standard-rollout-policy=batch-node-count=1"]);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let bg = blue_green(&c);
    assert!(!bg.contains("autoscaledRolloutPolicy"), "{bg}");
    assert!(bg.contains("standardRolloutPolicy"), "{bg}");

    let o = update(&kc, &["--autoscaled-rollout-policy="]);
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let bg = blue_green(&c);
    assert!(bg.contains(r#""autoscaledRolloutPolicy":{}"#), "{bg}");
    assert!(!bg.contains("standardRolloutPolicy"), "{bg}");

    // Refused by the flag's parser, naming the key, before any request.
    for bad in [
        "--autoscaled-rollout-policy=wait-for-drain-duration=2d",
        "--autoscaled-rollout-policy=wait=1s",
    ] {
        let o = update(&kc, &[bad]);
        assert_eq!(code(&o), Some(USAGE), "{bad}: {}", text(&o));
        assert!(text(&o).contains("wait"), "{bad}: {}", text(&o));
    }
    // Refused by the API: at most 7 days (A1).
    let o = update(
        &kc,
        &["--autoscaled-rollout-policy=wait-for-drain-duration=700000s"],
    );
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    assert!(text(&o).contains("waitForDrainDuration"), "{}", text(&o));
    assert!(blue_green(&c).contains(r#""autoscaledRolloutPolicy":{}"#));
}

/// spec: A5 — a flex-start pool takes no upgrade settings, its upgrades
/// are SHORT_LIVED, and its fields are in the published schema.
#[test]
fn a_flex_start_pool_is_upgraded_short_lived() {
    let c = with_pool(
        "flex-start",
        &pool(", flexStart: true, maxRunDuration: 3600s", ""),
    );
    let kc = c.kubeconfig();
    let o = update(&kc, &["--enable-blue-green-upgrade"]);
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    assert!(
        text(&o).contains(
            "flex-start and queued-provisioning node pools are upgraded with SHORT_LIVED, \
             which takes no settings"
        ),
        "{}",
        text(&o)
    );
    let o = run(
        &kc,
        &[
            "node-pools",
            "upgrade",
            "pool-a",
            "--version",
            "1.33.5",
            "--max-surge",
            "2",
        ],
    );
    assert_eq!(code(&o), Some(ERROR), "{}", text(&o));
    assert!(text(&o).contains("takes no settings"), "{}", text(&o));
    let o = run(
        &kc,
        &[
            "--format",
            "json",
            "node-pools",
            "upgrade",
            "pool-a",
            "--version",
            "1.33.5",
            "--async",
        ],
    );
    assert_eq!(code(&o), Some(OK), "{}", text(&o));
    let op: serde_json::Value = serde_json::from_slice(&o.stdout).expect("the operation");
    assert_eq!(
        op["spec"]["upgradeSettings"],
        serde_json::json!({"strategy": "SHORT_LIVED"}),
        "{op}"
    );

    for field in [
        "config.flexStart",
        "config.maxRunDuration",
        "queuedProvisioning",
    ] {
        let o = c.kubectl(&["explain", &format!("nodepool.spec.{field}")]);
        assert_eq!(o.status.code(), Some(0), "{field}: {}", text(&o));
    }
}
