//! The registration flags that take more than a number (pure): the
//! kubelet's `--node-labels` and `--register-with-taints`, and `--memory`.
//! Each bad value is refused at start-up, naming what is wrong, rather
//! than left for the API server to refuse on every registration attempt.

use k8s_openapi::api::core::v1::Taint;
use sluice_model::quantity::parse_milli;
use sluice_model::validation::{label_key_error, label_value_error};

/// One `key=value` of `--node-labels`.
pub fn label(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not key=value"))?;
    if let Some(why) = label_key_error(k).or_else(|| label_value_error(v)) {
        return Err(why);
    }
    Ok((k.to_owned(), v.to_owned()))
}

/// One `key=value:Effect` (or `key:Effect`) of `--register-with-taints`,
/// as the kubelet spells them.
pub fn taint(s: &str) -> Result<Taint, String> {
    let (kv, effect) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("{s:?} is not key=value:Effect"))?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return Err(format!(
            "{s:?}: effect {effect:?} is not NoSchedule, PreferNoSchedule or NoExecute"
        ));
    }
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (kv, None),
    };
    if let Some(why) = label_key_error(key).or_else(|| value.and_then(label_value_error)) {
        return Err(format!("{s:?}: {why}"));
    }
    Ok(Taint {
        key: key.to_owned(),
        value: value.filter(|v| !v.is_empty()).map(str::to_owned),
        effect: effect.to_owned(),
        time_added: None,
    })
}

/// `--memory`: a Kubernetes quantity of bytes (`8Gi`, `512Mi`, `1000000`),
/// more than 0.
pub fn memory(s: &str) -> Result<u64, String> {
    let milli = parse_milli(s).map_err(|e| e.to_string())?;
    let bytes = milli.div_euclid(1000) + i128::from(milli.rem_euclid(1000) != 0);
    match u64::try_from(bytes) {
        Ok(b) if b > 0 => Ok(b),
        _ => Err(format!("{s:?} is not a positive amount of bytes")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_key_value_with_kubernetes_keys_and_values() {
        assert_eq!(label("team=web"), Ok(("team".into(), "web".into())));
        assert_eq!(
            label("example.com/tier="),
            Ok(("example.com/tier".into(), String::new()))
        );
        assert!(label("team").unwrap_err().contains("key=value"));
        assert!(label("Bad Key=x").unwrap_err().contains("label key"));
        assert!(label("team=no way").unwrap_err().contains("label value"));
    }

    #[test]
    fn taints_take_the_kubelets_spelling() {
        let t = taint("dedicated=gpu:NoSchedule").expect("taint");
        assert_eq!(
            (t.key.as_str(), t.value.as_deref(), t.effect.as_str()),
            ("dedicated", Some("gpu"), "NoSchedule")
        );
        let t = taint("spot:PreferNoSchedule").expect("no value");
        assert_eq!((t.key.as_str(), t.value), ("spot", None));
        assert!(taint("dedicated=gpu").unwrap_err().contains("Effect"));
        assert!(taint("dedicated=gpu:NO_SCHEDULE")
            .unwrap_err()
            .contains("not NoSchedule"));
        assert!(taint("=x:NoExecute").unwrap_err().contains("label key"));
    }

    #[test]
    fn memory_is_a_positive_quantity_of_bytes() {
        assert_eq!(memory("8Gi"), Ok(8 << 30));
        assert_eq!(memory("1000"), Ok(1000));
        assert_eq!(memory("1500m"), Ok(2));
        assert!(memory("0").is_err());
        assert!(memory("-1Gi").is_err());
        assert!(memory("lots").is_err());
    }
}
