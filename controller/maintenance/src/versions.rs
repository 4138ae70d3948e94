//! The versions table: each minor's end of life (M7: no exclusion past
//! it) and each release channel's default and available versions (M6:
//! where a cluster goes once nothing holds it). Loaded by the controller
//! from YAML or JSON; strict, every mistake named by its path.

use std::collections::BTreeMap;

use serde::Deserialize;
use sluice_model::cluster::{Channel, ClusterSpec, ClusterStatus};
use sluice_model::k8s::jiff::Timestamp;

/// The shipped example, the controller's default table.
pub const EXAMPLE: &str = include_str!("../../versions.example.yaml");

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VersionsError {
    #[error("versions table: {path}: {why}")]
    Decode { path: String, why: String },
    #[error("versions table: minors[{minor}]: {why}")]
    Minor { minor: String, why: String },
    #[error("versions table: channels.{channel}.{field}: {why}")]
    Channel {
        channel: String,
        field: String,
        why: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versions {
    minors: BTreeMap<String, Timestamp>,
    channels: BTreeMap<String, ChannelVersions>,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChannelVersions {
    pub default: String,
    pub available: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Raw {
    minors: BTreeMap<String, RawMinor>,
    channels: RawChannels,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawMinor {
    end_of_life: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "SCREAMING_SNAKE_CASE")]
struct RawChannels {
    rapid: Option<ChannelVersions>,
    regular: Option<ChannelVersions>,
    stable: Option<ChannelVersions>,
    extended: Option<ChannelVersions>,
}

/// `1.33` of `1.33.5-gke.1000` (or of `1.33` itself).
pub fn minor_of(version: &str) -> Option<String> {
    let mut parts = version.trim_start_matches('v').split(['.', '-', '+']);
    let (major, minor) = (parts.next()?, parts.next()?);
    let num = |s: &str| !s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit());
    (num(major) && num(minor)).then(|| format!("{major}.{minor}"))
}

fn channel_name(c: Channel) -> Option<&'static str> {
    match c {
        Channel::Unspecified => None,
        Channel::Rapid => Some("RAPID"),
        Channel::Regular => Some("REGULAR"),
        Channel::Stable => Some("STABLE"),
        Channel::Extended => Some("EXTENDED"),
    }
}

impl Versions {
    /// Decode a table written in YAML (JSON is YAML too).
    pub fn from_yaml(text: &str) -> Result<Versions, VersionsError> {
        let de = serde_yaml::Deserializer::from_str(text);
        let raw: Raw = serde_path_to_error::deserialize(de).map_err(|e| VersionsError::Decode {
            path: e.path().to_string(),
            why: e.inner().to_string(),
        })?;
        let mut minors = BTreeMap::new();
        for (minor, m) in raw.minors {
            if minor_of(&minor).as_deref() != Some(minor.as_str()) {
                return Err(VersionsError::Minor {
                    minor,
                    why: "a minor is written MAJOR.MINOR, e.g. 1.33".into(),
                });
            }
            let eol = m
                .end_of_life
                .parse::<Timestamp>()
                .map_err(|e| VersionsError::Minor {
                    minor: minor.clone(),
                    why: format!("endOfLife {:?}: {e}", m.end_of_life),
                })?;
            minors.insert(minor, eol);
        }
        let c = raw.channels;
        let mut channels = BTreeMap::new();
        for (name, versions) in [
            ("RAPID", c.rapid),
            ("REGULAR", c.regular),
            ("STABLE", c.stable),
            ("EXTENDED", c.extended),
        ] {
            let Some(v) = versions else { continue };
            let bad = |field: &str, why: String| VersionsError::Channel {
                channel: name.into(),
                field: field.into(),
                why,
            };
            for version in v.available.iter().chain([&v.default]) {
                let minor = minor_of(version).ok_or_else(|| {
                    bad(
                        "available",
                        format!("{version:?} is no MAJOR.MINOR.PATCH version"),
                    )
                })?;
                if !minors.contains_key(&minor) {
                    return Err(bad(
                        "available",
                        format!("{version:?}: minor {minor} is not in minors"),
                    ));
                }
            }
            if !v.available.contains(&v.default) {
                return Err(bad(
                    "default",
                    format!(
                        "{:?} is not one of the channel's available versions",
                        v.default
                    ),
                ));
            }
            channels.insert(name.to_string(), v);
        }
        Ok(Versions { minors, channels })
    }

    /// The shipped example table.
    pub fn example() -> Result<Versions, VersionsError> {
        Versions::from_yaml(EXAMPLE)
    }

    /// When `minor` (`1.33`) reaches its end of life, if the table knows it.
    pub fn end_of_life(&self, minor: &str) -> Option<Timestamp> {
        self.minors.get(minor).copied()
    }

    pub fn channel(&self, c: Channel) -> Option<&ChannelVersions> {
        self.channels.get(channel_name(c)?)
    }

    /// The minor a cluster runs: its control plane's, else (not yet
    /// reported) its channel's default.
    pub fn current_minor(
        &self,
        spec: &ClusterSpec,
        status: Option<&ClusterStatus>,
    ) -> Option<String> {
        if let Some(v) = status.and_then(|s| s.current_master_version.as_deref()) {
            return minor_of(v);
        }
        let channel = spec.release_channel.as_ref()?.channel;
        minor_of(&self.channel(channel)?.default)
    }
}

#[cfg(test)]
#[path = "tests/versions.rs"]
mod tests;
