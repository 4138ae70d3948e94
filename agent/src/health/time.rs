//! Timestamp formatting without a date crate: RFC 3339 with nanoseconds (the
//! JSON bodies) and IMF-fixdate (the `Date` header). UTC only.

use std::time::{SystemTime, UNIX_EPOCH};

/// kube-proxy prints a missing time as Go's zero time.
pub const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// Seconds and nanoseconds relative to the Unix epoch, for any `SystemTime`.
fn split(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_nanos(),
        ),
        Err(e) => {
            let d = e.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            if d.subsec_nanos() == 0 {
                (-secs, 0)
            } else {
                (-secs - 1, 1_000_000_000 - d.subsec_nanos())
            }
        }
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn push2(out: &mut Vec<u8>, v: u32) {
    out.push(b'0' + (v / 10 % 10) as u8);
    out.push(b'0' + (v % 10) as u8);
}

fn push4(out: &mut Vec<u8>, v: i64) {
    // Years outside 0..=9999 cannot come from a sane clock; clamp so the
    // output keeps its fixed width.
    let v = v.clamp(0, 9999) as u32;
    push2(out, v / 100);
    push2(out, v % 100);
}

/// `2006-01-02T15:04:05.999999999Z`: trailing zeros of the fraction dropped,
/// no fraction at all on a whole second (Go's `RFC3339Nano`). `None` is the
/// zero time.
pub fn write_rfc3339_nano(t: Option<SystemTime>, out: &mut Vec<u8>) {
    let Some(t) = t else {
        out.extend_from_slice(ZERO_TIME.as_bytes());
        return;
    };
    let (secs, nanos) = split(t);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400) as u32;
    let (y, m, d) = civil_from_days(days);
    push4(out, y);
    out.push(b'-');
    push2(out, m);
    out.push(b'-');
    push2(out, d);
    out.push(b'T');
    push2(out, sod / 3600);
    out.push(b':');
    push2(out, sod / 60 % 60);
    out.push(b':');
    push2(out, sod % 60);
    if nanos != 0 {
        let mut digits = [0u8; 9];
        let mut n = nanos;
        for slot in digits.iter_mut().rev() {
            *slot = b'0' + (n % 10) as u8;
            n /= 10;
        }
        let mut len = 9;
        while len > 0 && digits[len - 1] == b'0' {
            len -= 1;
        }
        out.push(b'.');
        out.extend_from_slice(&digits[..len]);
    }
    out.push(b'Z');
}

/// Length of an IMF-fixdate.
pub const HTTP_DATE_LEN: usize = 29;

/// `Sun, 06 Nov 1994 08:49:37 GMT` for whole second `unix_secs`.
pub fn http_date(unix_secs: i64) -> [u8; HTTP_DATE_LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = unix_secs.div_euclid(86_400);
    let sod = unix_secs.rem_euclid(86_400) as u32;
    let (y, m, d) = civil_from_days(days);
    let mut v = Vec::with_capacity(HTTP_DATE_LEN);
    v.extend_from_slice(DAYS[days.rem_euclid(7) as usize]);
    v.extend_from_slice(b", ");
    push2(&mut v, d);
    v.push(b' ');
    v.extend_from_slice(MONTHS[(m as usize).saturating_sub(1).min(11)]);
    v.push(b' ');
    push4(&mut v, y);
    v.push(b' ');
    push2(&mut v, sod / 3600);
    v.push(b':');
    push2(&mut v, sod / 60 % 60);
    v.push(b':');
    push2(&mut v, sod % 60);
    v.extend_from_slice(b" GMT");
    let mut a = [b' '; HTTP_DATE_LEN];
    let n = v.len().min(HTTP_DATE_LEN);
    a[..n].copy_from_slice(&v[..n]);
    a
}

/// Whole Unix seconds of `t` (negative before 1970).
pub fn unix_secs(t: SystemTime) -> i64 {
    split(t).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn fmt(t: Option<SystemTime>) -> String {
        let mut v = Vec::new();
        write_rfc3339_nano(t, &mut v);
        String::from_utf8_lossy(&v).into_owned()
    }

    #[test]
    fn rfc3339_nano_like_go() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(fmt(Some(t)), "2023-11-14T22:13:20Z");
        assert_eq!(
            fmt(Some(t + Duration::from_nanos(120_000_000))),
            "2023-11-14T22:13:20.12Z"
        );
        assert_eq!(
            fmt(Some(t + Duration::from_nanos(1))),
            "2023-11-14T22:13:20.000000001Z"
        );
        assert_eq!(fmt(Some(UNIX_EPOCH)), "1970-01-01T00:00:00Z");
        assert_eq!(
            fmt(Some(UNIX_EPOCH - Duration::from_millis(500))),
            "1969-12-31T23:59:59.5Z"
        );
        assert_eq!(fmt(None), ZERO_TIME);
        // Leap day.
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(fmt(Some(leap)), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn http_date_like_rfc() {
        assert_eq!(&http_date(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
    }
}
