//! How old something is, in the words kubectl's AGE column uses: about
//! two to three significant figures (`45s`, `3m20s`, `5h12m`, `3d4h`,
//! `2y30d`), `0s` for a clock a second ahead, `<invalid>` beyond that.

use sluice_model::k8s::jiff::Timestamp;

/// `then` as an age at `now`; `<unknown>` when `then` does not parse.
pub fn since(then: Option<&str>, now: Timestamp) -> String {
    match then.and_then(|t| t.parse::<Timestamp>().ok()) {
        Some(t) => human(now.as_second() - t.as_second()),
        None => "<unknown>".into(),
    }
}

/// A span of `secs` seconds. The thresholds are kube-apiserver's, so a
/// table reads the same here as against a real cluster.
pub fn human(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        return match secs % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return match days % 365 {
            0 => format!("{years}y"),
            d => format!("{years}y{d}d"),
        };
    }
    format!("{years}y")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_like_kubectl_at_every_threshold() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 12 * 60, "5h12m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 59 * 60, "47h"),
            (48 * 3600, "2d"),
            (3 * 86_400 + 4 * 3600, "3d4h"),
            (8 * 86_400, "8d"),
            (729 * 86_400, "729d"),
            (730 * 86_400, "2y"),
            (760 * 86_400, "2y30d"),
            (9 * 365 * 86_400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human(secs), want, "{secs} s");
        }
    }

    #[test]
    fn a_timestamp_that_does_not_parse_is_unknown() {
        let now: Timestamp = "2026-11-23T12:00:00Z".parse().unwrap();
        assert_eq!(since(Some("2026-11-23T11:59:00Z"), now), "60s");
        assert_eq!(since(Some("yesterday"), now), "<unknown>");
        assert_eq!(since(None, now), "<unknown>");
    }
}
