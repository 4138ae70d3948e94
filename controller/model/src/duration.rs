//! Durations as GKE writes them: seconds with up to nine fractional digits
//! and a trailing `s` (`"3600s"`, `"3.5s"`), the JSON form of
//! `google.protobuf.Duration`.

use std::borrow::Cow;
use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

const NANOS_PER_SEC: i64 = 1_000_000_000;

/// A signed duration in nanoseconds. Signed because GKE's wire form allows
/// `"-1s"`; a negative value then fails validation with its field path
/// instead of failing to parse without one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration {
    nanos: i64,
}

impl Duration {
    pub const ZERO: Duration = Duration { nanos: 0 };

    pub const fn from_secs(secs: i64) -> Duration {
        Duration {
            nanos: secs.saturating_mul(NANOS_PER_SEC),
        }
    }

    pub const fn from_nanos(nanos: i64) -> Duration {
        Duration { nanos }
    }

    pub const fn as_nanos(self) -> i64 {
        self.nanos
    }

    /// Whole seconds, rounded towards zero.
    pub const fn as_secs(self) -> i64 {
        self.nanos / NANOS_PER_SEC
    }

    pub const fn is_negative(self) -> bool {
        self.nanos < 0
    }

    /// `None` for a negative duration.
    pub fn to_std(self) -> Option<std::time::Duration> {
        u64::try_from(self.nanos)
            .ok()
            .map(std::time::Duration::from_nanos)
    }
}

/// Why a string is not a GKE duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}; write seconds ending in \"s\", like \"3600s\" or \"2.5s\"")]
pub struct ParseDurationError {
    input: String,
    reason: &'static str,
}

impl std::str::FromStr for Duration {
    type Err = ParseDurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let fail = |reason| ParseDurationError {
            input: s.to_string(),
            reason,
        };
        let body = s
            .strip_suffix('s')
            .ok_or_else(|| fail("no trailing \"s\""))?;
        let (negative, body) = match body.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, body),
        };
        let (whole, frac) = body.split_once('.').unwrap_or((body, ""));
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) {
            return Err(fail("the seconds are not a number"));
        }
        if body.contains('.') && !digits(frac) {
            return Err(fail("the fraction is not a number"));
        }
        if frac.len() > 9 {
            return Err(fail("more than nine fractional digits"));
        }
        let secs: i64 = whole.parse().map_err(|_| fail("out of range"))?;
        // Pad the fraction to nanoseconds: ".5" is 500 000 000 ns.
        let frac_nanos: i64 = if frac.is_empty() {
            0
        } else {
            format!("{frac:0<9}")
                .parse()
                .map_err(|_| fail("out of range"))?
        };
        let nanos = secs
            .checked_mul(NANOS_PER_SEC)
            .and_then(|n| n.checked_add(frac_nanos))
            .ok_or_else(|| fail("out of range"))?;
        Ok(Duration {
            nanos: if negative { -nanos } else { nanos },
        })
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.unsigned_abs();
        let (secs, frac) = (abs / NANOS_PER_SEC as u64, abs % NANOS_PER_SEC as u64);
        if frac == 0 {
            write!(f, "{sign}{secs}s")
        } else {
            let frac = format!("{frac:09}");
            write!(f, "{sign}{secs}.{}s", frac.trim_end_matches('0'))
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = Cow::<str>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Duration {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^-?[0-9]+(\\.[0-9]{1,9})?s$",
            "description": "A duration in seconds with up to nine fractional digits, ending with \"s\", e.g. \"3600s\"."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_gke_form() {
        for (text, nanos) in [
            ("3600s", 3_600 * NANOS_PER_SEC),
            ("0s", 0),
            ("3.5s", 3_500_000_000),
            ("0.000000001s", 1),
            ("-2s", -2 * NANOS_PER_SEC),
        ] {
            let d: Duration = text.parse().expect(text);
            assert_eq!(d.as_nanos(), nanos, "{text}");
            assert_eq!(d.to_string(), text);
        }
    }

    #[test]
    fn refuses_other_forms() {
        for text in [
            "",
            "s",
            "1h",
            "3600",
            "1.s",
            ".5s",
            "1.0000000001s",
            "+1s",
            "1e3s",
            "99999999999999s",
        ] {
            assert!(text.parse::<Duration>().is_err(), "{text:?} parsed");
        }
    }

    #[test]
    fn serde_uses_the_string_form() {
        let d: Duration = serde_json::from_str("\"604800s\"").expect("decode");
        assert_eq!(d, Duration::from_secs(604_800));
        assert_eq!(serde_json::to_string(&d).expect("encode"), "\"604800s\"");
        let err = serde_json::from_str::<Duration>("\"7d\"").expect_err("7d");
        assert!(err.to_string().contains("like \"3600s\""), "{err}");
    }
}
