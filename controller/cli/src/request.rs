//! What the upgrade commands ask of the API, decided from what they read:
//! the new operation's name and spec, the config file, and which of a
//! pool's operations `rollback` and `resume` act on. Pure: no I/O.

use sluice_model::decode::{decode, FieldValidation};
use sluice_model::duration::Duration;
use sluice_model::node_pool::{
    AutoscaledRolloutPolicy, NodeConfig, NodePool, StandardRolloutPolicy, UpgradeSettings,
    UpgradeStrategy,
};
use sluice_model::operation::{
    Operation, OperationAction, OperationSpec, OperationState, OperationType,
};

/// What a manual upgrade changes (`--version` or `--config`, never both:
/// clap enforces it).
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    Version(String),
    Config(NodeConfig),
}

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum RequestError {
    #[error("nothing to upgrade: node pool {pool:?} is already at {what}")]
    NothingToUpgrade { pool: String, what: String },
    #[error("{0}")]
    NoOperation(String),
    #[error(
        "node pool {pool:?} is a flex-start or queued-provisioning pool: it is upgraded with \
         SHORT_LIVED, which takes no settings (leave out --max-surge and --max-unavailable)"
    )]
    ShortLivedSettings { pool: String },
    #[error("operation {name:?} is {state} and will not change again: nothing to {verb}")]
    Final {
        name: String,
        state: String,
        verb: &'static str,
    },
}

/// GKE's operation name form: `operation-<unix millis>-<4 hex>`; `salt`
/// keeps two commands in the same millisecond apart.
pub fn operation_name(unix_millis: i64, salt: u16) -> String {
    format!("operation-{unix_millis}-{salt:04x}")
}

/// A node config from YAML (or JSON), decoded strictly: an unknown field
/// is an error naming its path, as the API server's strict decoding.
pub fn config_from_yaml(text: &str) -> Result<NodeConfig, String> {
    if text.trim().is_empty() {
        return Err("empty: expected a NodeConfig (capacity, labels, taints, spot)".into());
    }
    let de = serde_yaml::Deserializer::from_str(text);
    decode::<NodeConfig, _>(de, FieldValidation::Strict)
        .map(|d| d.value)
        .map_err(|e| {
            if e.field.is_empty() {
                e.message
            } else {
                format!("{}: {}", e.field, e.message)
            }
        })
}

/// The spec of a manual upgrade of `pool`: the settings are the pool's,
/// with the flags' values over them (absent both: the API's defaults); a
/// flex-start or queued-provisioning pool's are SHORT_LIVED alone (A5),
/// and take no flags. Refused when it would change nothing.
pub fn upgrade_spec(
    pool: &NodePool,
    change: Change,
    max_surge: Option<i32>,
    max_unavailable: Option<i32>,
) -> Result<OperationSpec, RequestError> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let mut spec = OperationSpec::new(
        OperationType::UpgradeNodes,
        format!("{}{name}", OperationSpec::NODE_POOL_LINK),
    );
    match change {
        Change::Version(v) => {
            if pool.spec.version.as_deref() == Some(v.as_str()) {
                return Err(RequestError::NothingToUpgrade {
                    pool: name,
                    what: format!("version {v} (give --config to change its node config)"),
                });
            }
            spec.node_version = Some(v);
        }
        Change::Config(c) => {
            if c == pool.spec.config {
                return Err(RequestError::NothingToUpgrade {
                    pool: name,
                    what: "that node config".into(),
                });
            }
            spec.config = Some(c);
        }
    }
    let mut settings = pool.spec.operation_upgrade_settings();
    if max_surge.is_some() || max_unavailable.is_some() {
        if pool.spec.short_lived() {
            return Err(RequestError::ShortLivedSettings { pool: name });
        }
        let s = settings.get_or_insert_with(UpgradeSettings::default);
        if max_surge.is_some() {
            s.max_surge = max_surge;
        }
        if max_unavailable.is_some() {
            s.max_unavailable = max_unavailable;
        }
    }
    spec.upgrade_settings = settings;
    Ok(spec)
}

fn state(op: &Operation) -> Option<OperationState> {
    op.status.as_ref().and_then(|s| s.status)
}

/// `PENDING` for an operation with no status yet, as the controller
/// would first write.
pub fn state_name(state: Option<OperationState>) -> String {
    let s = state.unwrap_or(OperationState::Pending);
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_else(|| format!("{s:?}"))
}

/// Newest first: by creation time, then by name (GKE's names grow with
/// time, so the name breaks ties within a second).
fn newest_key(o: &Operation) -> (Option<sluice_model::k8s::jiff::Timestamp>, Option<&str>) {
    (
        o.metadata.creation_timestamp.as_ref().map(|t| t.0),
        o.metadata.name.as_deref(),
    )
}

pub fn newest_first(ops: &mut [Operation]) {
    ops.sort_by(|a, b| newest_key(b).cmp(&newest_key(a)));
}

/// The manual and automatic upgrades of `pool`, newest first.
pub fn upgrades_of<'a>(ops: &'a [Operation], pool: &str) -> Vec<&'a Operation> {
    let mut out: Vec<&Operation> = ops
        .iter()
        .filter(|o| {
            matches!(
                o.spec.operation_type,
                OperationType::UpgradeNodes | OperationType::AutoUpgradeNodes
            ) && o.spec.node_pool() == Some(pool)
        })
        .collect();
    out.sort_by(|a, b| newest_key(b).cmp(&newest_key(a)));
    out
}

fn name_of(op: &Operation) -> String {
    op.metadata.name.clone().unwrap_or_default()
}

/// The operation `action` is written to for `pool` (U6), or why none.
/// ROLLBACK goes to the latest upgrade when it is live or cancelled; a
/// completed one is still sent, so that the API's refusal ("downgrade
/// instead") is what the user reads.
pub fn action_target(
    ops: &[Operation],
    pool: &str,
    action: OperationAction,
) -> Result<String, RequestError> {
    let ups = upgrades_of(ops, pool);
    let Some(latest) = ups.first() else {
        return Err(RequestError::NoOperation(format!(
            "node pool {pool:?} has no upgrade operation"
        )));
    };
    let st = state(latest);
    let fits = match action {
        OperationAction::Rollback => {
            st == Some(OperationState::Done) || !st.is_some_and(OperationState::is_final)
        }
        OperationAction::Resume => matches!(
            st,
            Some(OperationState::Cancelled | OperationState::Cancelling)
        ),
        OperationAction::Cancel | OperationAction::Complete => {
            !st.is_some_and(OperationState::is_final)
        }
    };
    if fits {
        return Ok(name_of(latest));
    }
    let verb = match action {
        OperationAction::Rollback => "roll back",
        OperationAction::Resume => "resume (only a cancelled upgrade resumes)",
        OperationAction::Cancel => "cancel",
        OperationAction::Complete => "complete",
    };
    Err(RequestError::NoOperation(format!(
        "node pool {pool:?}'s latest upgrade {:?} is {}: nothing to {verb}",
        name_of(latest),
        state_name(st)
    )))
}

/// What `node-pools update` asks of a pool's upgrade settings, as
/// gcloud's flags spell it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StrategyFlags {
    pub blue_green: bool,
    pub surge: bool,
    pub max_surge: Option<i32>,
    pub max_unavailable: Option<i32>,
    /// `--standard-rollout-policy`, parsed.
    pub standard: Option<StandardRolloutPolicy>,
    /// `--autoscaled-rollout-policy`, parsed (A1–A4).
    pub autoscaled: Option<AutoscaledRolloutPolicy>,
    /// `--node-pool-soak-duration`.
    pub node_pool_soak: Option<Duration>,
}

impl StrategyFlags {
    pub fn is_empty(&self) -> bool {
        *self == StrategyFlags::default()
    }
}

/// The pool's upgrade settings with `flags` laid over them:
/// `--enable-blue-green-upgrade` sets strategy BLUE_GREEN,
/// `--enable-surge-upgrade` SURGE and drops the blue-green settings (a
/// surge pool takes none); the rollout policy (standard or autoscaled,
/// one replacing the other: GKE's `oneof`) and soak are blue-green
/// settings. What the API refuses (a rollout policy on a surge pool, a
/// soak over 7 days) is left for it to say.
pub fn updated_settings(
    current: Option<&UpgradeSettings>,
    flags: &StrategyFlags,
) -> Result<UpgradeSettings, String> {
    if flags.is_empty() {
        return Err("nothing to update: give --enable-blue-green-upgrade, \
             --enable-surge-upgrade, --standard-rollout-policy, --autoscaled-rollout-policy, \
             --node-pool-soak-duration, --max-surge-upgrade or --max-unavailable-upgrade"
            .into());
    }
    let mut u = current.cloned().unwrap_or_default();
    if flags.blue_green {
        u.strategy = Some(UpgradeStrategy::BlueGreen);
    }
    if flags.surge {
        u.strategy = Some(UpgradeStrategy::Surge);
        u.blue_green_settings = None;
    }
    if flags.max_surge.is_some() {
        u.max_surge = flags.max_surge;
    }
    if flags.max_unavailable.is_some() {
        u.max_unavailable = flags.max_unavailable;
    }
    if flags.standard.is_some() || flags.autoscaled.is_some() || flags.node_pool_soak.is_some() {
        let bg = u.blue_green_settings.get_or_insert_with(Default::default);
        if let Some(p) = &flags.standard {
            bg.standard_rollout_policy = Some(p.clone());
            bg.autoscaled_rollout_policy = None;
        }
        if let Some(p) = &flags.autoscaled {
            bg.autoscaled_rollout_policy = Some(p.clone());
            bg.standard_rollout_policy = None;
        }
        if flags.node_pool_soak.is_some() {
            bg.node_pool_soak_duration = flags.node_pool_soak;
        }
    }
    Ok(u)
}

/// A gcloud dict flag's value, `KEY=VALUE,KEY=VALUE`: the pairs in
/// order, trimmed; empty text is no pair (the defaults). An item without
/// `=`, a key given twice, and a key not in `keys` are refused, naming
/// them.
fn key_values<'a>(text: &'a str, keys: &[&str]) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?}: expected KEY=VALUE"))?;
        let (key, value) = (key.trim(), value.trim());
        if !keys.contains(&key) {
            let expected = match keys {
                [] => "no key".to_owned(),
                [one] => (*one).to_owned(),
                [init @ .., last] => format!("{} or {last}", init.join(", ")),
            };
            return Err(format!("unknown key {key:?}: expected {expected}"));
        }
        if pairs.iter().any(|(k, _)| *k == key) {
            return Err(format!("{key} given twice"));
        }
        pairs.push((key, value));
    }
    Ok(pairs)
}

/// `--standard-rollout-policy=batch-node-count=N,batch-percent=F,batch-soak-duration=Ds`
/// (gcloud's keys; an empty value means the defaults). Unknown keys,
/// repeated keys and both batch sizes are refused, naming them.
pub fn parse_standard_rollout_policy(text: &str) -> Result<StandardRolloutPolicy, String> {
    let mut p = StandardRolloutPolicy::default();
    let keys = ["batch-node-count", "batch-percent", "batch-soak-duration"];
    for (key, value) in key_values(text, &keys)? {
        match key {
            "batch-node-count" => {
                let n: i32 = value
                    .parse()
                    .map_err(|_| format!("batch-node-count: {value:?} is not a whole number"))?;
                if n < 0 {
                    return Err(format!("batch-node-count: must be 0 or more, got {n}"));
                }
                p.batch_node_count = Some(n);
            }
            "batch-percent" => {
                let f: f64 = value
                    .parse()
                    .map_err(|_| format!("batch-percent: {value:?} is not a number"))?;
                if !(0.0..=1.0).contains(&f) {
                    return Err(format!(
                        "batch-percent: must be a fraction from 0 to 1 (0.25 is 25 %), got {value}"
                    ));
                }
                p.batch_percentage = Some(f);
            }
            _ => p.batch_soak_duration = Some(parse_duration(key, value)?),
        }
    }
    if p.batch_node_count.is_some() && p.batch_percentage.is_some() {
        return Err("batch-node-count and batch-percent: give one of the two".into());
    }
    Ok(p)
}

/// `--autoscaled-rollout-policy=wait-for-drain-duration=Ds` (gcloud's
/// key). An empty value (`--autoscaled-rollout-policy=`) means the
/// defaults: an empty policy, whose wait is 3 days (A1). An unknown key or
/// a bad duration is refused, naming the key; the 7-day ceiling is the
/// API's to say.
pub fn parse_autoscaled_rollout_policy(text: &str) -> Result<AutoscaledRolloutPolicy, String> {
    let mut p = AutoscaledRolloutPolicy::default();
    for (key, value) in key_values(text, &["wait-for-drain-duration"])? {
        p.wait_for_drain_duration = Some(parse_duration(key, value)?);
    }
    Ok(p)
}

/// A gcloud duration in seconds, `3600s` (fractions allowed), at least 0.
pub fn parse_duration(what: &str, text: &str) -> Result<Duration, String> {
    let d: Duration = text
        .trim()
        .parse()
        .map_err(|e| format!("{what}: {text:?} is not a duration ({e}); expected e.g. 3600s"))?;
    if d.as_nanos() < 0 {
        return Err(format!("{what}: must not be negative, got {text}"));
    }
    Ok(d)
}

/// `operations cancel NAME`: a final operation is refused here, before
/// the write, with its state named.
pub fn cancellable(op: &Operation) -> Result<(), RequestError> {
    match state(op) {
        Some(s) if s.is_final() => Err(RequestError::Final {
            name: name_of(op),
            state: state_name(Some(s)),
            verb: "cancel",
        }),
        _ => Ok(()),
    }
}

/// `--timeout`: whole seconds, or a number with `s`, `m` or `h`.
pub fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let (num, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c),
        _ => (t, 's'),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: expected e.g. 90s, 5m or 1h"))?;
    let secs = match unit {
        's' => Some(n),
        'm' => n.checked_mul(60),
        'h' => n.checked_mul(3600),
        _ => None,
    };
    secs.map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is not a duration: expected e.g. 90s, 5m or 1h"))
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
