//! The messages whose JSON form is not an object: Go's own marshalers for
//! Quantity, IntOrString, Time, MicroTime, Duration and raw JSON.

use serde_json::Value;

use crate::error::Problem;
use crate::reader::{Reader, Value as Wire};

/// The fields of a small special message, read loosely: unknown fields are
/// skipped, wrong wire types refused.
struct Fields<'a> {
    varints: [Option<u64>; 4],
    bytes: [Option<&'a [u8]>; 4],
}

fn fields(bytes: &[u8]) -> Result<Fields<'_>, Problem> {
    let mut out = Fields {
        varints: [None; 4],
        bytes: [None; 4],
    };
    let mut reader = Reader::new(bytes);
    while let Some((tag, value)) = reader.next_field()? {
        let Some(slot) = usize::try_from(tag).ok().filter(|t| *t < 4) else {
            continue;
        };
        match value {
            Wire::Varint(v) => out.varints[slot] = Some(v),
            Wire::Len(b) => out.bytes[slot] = Some(b),
            Wire::Fixed32(_) | Wire::Fixed64(_) => {}
        }
    }
    Ok(out)
}

fn utf8(bytes: &[u8]) -> Result<&str, Problem> {
    std::str::from_utf8(bytes).map_err(|_| Problem::InvalidUtf8)
}

/// `resource.Quantity {string = 1}` → its canonical string. An empty
/// Quantity is Go's zero value, which prints as "0".
pub(crate) fn quantity(bytes: &[u8]) -> Result<Value, Problem> {
    let f = fields(bytes)?;
    let s = match f.bytes[1] {
        Some(b) => utf8(b)?,
        None => "0",
    };
    Ok(Value::String(s.to_owned()))
}

/// `intstr.IntOrString {type = 1, intVal = 2, strVal = 3}` → a number when
/// type is 0, a string when it is 1.
pub(crate) fn int_or_string(bytes: &[u8]) -> Result<Value, Problem> {
    let f = fields(bytes)?;
    match f.varints[1].unwrap_or(0) as i64 {
        0 => Ok(Value::from(f.varints[2].unwrap_or(0) as i32)),
        1 => Ok(Value::String(utf8(f.bytes[3].unwrap_or(b""))?.to_owned())),
        other => Err(Problem::BadIntOrString(other)),
    }
}

/// `meta.v1.Time {seconds = 1, nanos = 2}` → RFC 3339 to the second, as Go
/// writes it (Go's protobuf reader drops the nanoseconds too). An empty
/// message is the zero time: `None`, and the field is omitted.
pub(crate) fn time(bytes: &[u8]) -> Result<Option<Value>, Problem> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let f = fields(bytes)?;
    let seconds = f.varints[1].unwrap_or(0) as i64;
    Ok(Some(Value::String(rfc3339(seconds, None)?)))
}

/// `meta.v1.MicroTime` → RFC 3339 with six fractional digits.
pub(crate) fn micro_time(bytes: &[u8]) -> Result<Option<Value>, Problem> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let f = fields(bytes)?;
    let seconds = f.varints[1].unwrap_or(0) as i64;
    let nanos = f.varints[2].unwrap_or(0) as i32;
    // Normalise nanos outside 0..1e9 into the seconds, as time.Unix does.
    let extra = i64::from(nanos).div_euclid(1_000_000_000);
    let nanos = i64::from(nanos).rem_euclid(1_000_000_000);
    let seconds = seconds
        .checked_add(extra)
        .ok_or(Problem::TimeOutOfRange { seconds })?;
    Ok(Some(Value::String(rfc3339(seconds, Some(nanos / 1000))?)))
}

/// `meta.v1.Duration {duration = 1}` (nanoseconds) → Go's `Duration.String`.
pub(crate) fn duration(bytes: &[u8]) -> Result<Value, Problem> {
    let f = fields(bytes)?;
    Ok(Value::String(go_duration(f.varints[1].unwrap_or(0) as i64)))
}

/// `RawExtension`/`FieldsV1 {raw = 1}` → the JSON its bytes hold; `None`
/// when empty (Go writes null, which the JSON API omits).
pub(crate) fn raw_json(bytes: &[u8]) -> Result<Option<&[u8]>, Problem> {
    let f = fields(bytes)?;
    Ok(f.bytes[1].filter(|b| !b.is_empty()))
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`, with `.ffffff` when
/// `micros` is given: Go's RFC 3339 in UTC, which refuses years outside
/// 0 to 9999.
fn rfc3339(seconds: i64, micros: Option<i64>) -> Result<String, Problem> {
    // 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
    const MIN: i64 = -62_167_219_200;
    const MAX: i64 = 253_402_300_799;
    let out_of_range = Problem::TimeOutOfRange { seconds };
    if !(MIN..=MAX).contains(&seconds) {
        return Err(out_of_range);
    }
    let instant = jiff::Timestamp::from_second(seconds).map_err(|_| out_of_range)?;
    let civil = jiff::tz::Offset::UTC.to_datetime(instant);
    let whole = civil.strftime("%Y-%m-%dT%H:%M:%S");
    Ok(match micros {
        None => format!("{whole}Z"),
        Some(us) => format!("{whole}.{us:06}Z"),
    })
}

/// Go's `time.Duration.String`: `1h2m3.5s`, `300ms`, `1.5µs`, `0s`.
pub(crate) fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    if u < 1_000_000_000 {
        let (unit, scale, digits) = match u {
            0..=999 => ("ns", 1, 0),
            1_000..=999_999 => ("µs", 1_000, 3),
            _ => ("ms", 1_000_000, 6),
        };
        return format!("{sign}{}{}{unit}", u / scale, fraction(u % scale, digits));
    }
    let secs = u / 1_000_000_000;
    let frac = fraction(u % 1_000_000_000, 9);
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, secs / 60) {
        (0, 0) => format!("{sign}{s}{frac}s"),
        (0, _) => format!("{sign}{m}m{s}{frac}s"),
        _ => format!("{sign}{h}h{m}m{s}{frac}s"),
    }
}

/// `.5` for 500 of 1000: `value` over 10^digits, trailing zeros trimmed,
/// empty when zero.
fn fraction(value: u64, digits: usize) -> String {
    if value == 0 || digits == 0 {
        return String::new();
    }
    let s = format!("{value:0digits$}");
    format!(".{}", s.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_writes_them() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(1), "1ns");
        assert_eq!(go_duration(1_500), "1.5µs");
        assert_eq!(go_duration(300_000_000), "300ms");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(60_000_000_000), "1m0s");
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
        assert_eq!(go_duration(3_723_000_000_000), "1h2m3s");
        assert_eq!(go_duration(-90_000_000_000), "-1m30s");
        assert_eq!(go_duration(i64::MIN), "-2562047h47m16.854775808s");
    }

    #[test]
    fn times_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(0, None).as_deref(), Ok("1970-01-01T00:00:00Z"));
        assert_eq!(
            rfc3339(1_795_460_400, None).as_deref(),
            Ok("2026-11-23T19:00:00Z")
        );
        assert_eq!(
            rfc3339(951_782_400, Some(42)).as_deref(),
            Ok("2000-02-29T00:00:00.000042Z")
        );
        assert_eq!(
            rfc3339(-86_400, None).as_deref(),
            Ok("1969-12-31T00:00:00Z")
        );
        assert_eq!(
            rfc3339(-62_167_219_200, None).as_deref(),
            Ok("0000-01-01T00:00:00Z")
        );
        assert!(rfc3339(-62_167_219_201, None).is_err());
        assert!(rfc3339(i64::MAX, None).is_err());
        assert!(rfc3339(i64::MIN, None).is_err());
    }
}
