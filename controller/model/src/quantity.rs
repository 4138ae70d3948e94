//! Kubernetes quantities (`100m`, `1.5Gi`, `2e3`) as exact integers, for
//! resource arithmetic: the scheduler's fit, capacity and allocatable.
//!
//! Values are kept in milli-units in an `i128`, so every quantity the API
//! accepts is exact (`1n` rounds up to `1m`, as `resource.Quantity`'s
//! `MilliValue` does), and sums over thousands of pods cannot overflow.

use thiserror::Error;

use crate::k8s::Quantity;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("quantity {text:?}: {why}")]
pub struct QuantityError {
    pub text: String,
    pub why: &'static str,
}

/// The quantity in milli-units (`"250m"` is 250, `"1"` is 1000, `"1Ki"` is
/// 1 024 000), rounded up to a whole milli-unit.
pub fn milli(q: &Quantity) -> Result<i128, QuantityError> {
    parse_milli(&q.0)
}

/// The quantity in whole units, rounded up (`"1500m"` is 2), as
/// `resource.Quantity.Value` reads memory and pod counts.
pub fn units(q: &Quantity) -> Result<i128, QuantityError> {
    let m = milli(q)?;
    Ok(if m >= 0 { (m + 999) / 1000 } else { m / 1000 })
}

/// `text` in milli-units.
pub fn parse_milli(text: &str) -> Result<i128, QuantityError> {
    let err = |why| QuantityError {
        text: text.to_owned(),
        why,
    };
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        Some(_) => (false, text),
        None => return Err(err("is empty")),
    };
    let split = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(split);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() {
        return Err(err("has no digits"));
    }
    if frac.contains('.') {
        return Err(err("has more than one decimal point"));
    }
    // The multiplier as base^exp: decimal suffixes are powers of ten,
    // binary ones powers of two.
    let (base, exp): (i128, i32) = match suffix {
        "" => (10, 0),
        "n" => (10, -9),
        "u" => (10, -6),
        "m" => (10, -3),
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        "Ki" => (2, 10),
        "Mi" => (2, 20),
        "Gi" => (2, 30),
        "Ti" => (2, 40),
        "Pi" => (2, 50),
        "Ei" => (2, 60),
        s => match s.strip_prefix(['e', 'E']) {
            Some(e) if !e.is_empty() => {
                let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(err("has an exponent that is no integer"));
                }
                (10, e.parse().map_err(|_| err("has an exponent too large"))?)
            }
            _ => return Err(err("has an unknown suffix")),
        },
    };
    // Digits as an integer with a decimal scale: value = digits * 10^-scale.
    let digits: String = whole.chars().chain(frac.chars()).collect();
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(err("has too many digits"));
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| err("has too many digits"))?
    };
    let scale = i32::try_from(frac.len()).map_err(|_| err("has too many digits"))?;
    let too_large = || err("is too large");
    // milli = mantissa * base^exp * 10^(3 - scale), rounded up.
    let (mut num, mut den): (i128, i128) = (mantissa, 1);
    let pow = |b: i128, e: i32| -> Option<i128> { b.checked_pow(u32::try_from(e).ok()?) };
    if exp >= 0 {
        num = num
            .checked_mul(pow(base, exp).ok_or_else(too_large)?)
            .ok_or_else(too_large)?;
    } else {
        den = pow(base, -exp).ok_or_else(too_large)?;
    }
    let shift = 3 - scale;
    if shift >= 0 {
        num = num
            .checked_mul(pow(10, shift).ok_or_else(too_large)?)
            .ok_or_else(too_large)?;
    } else {
        den = den
            .checked_mul(pow(10, -shift).ok_or_else(too_large)?)
            .ok_or_else(too_large)?;
    }
    let value = (num + den - 1) / den;
    if value > i128::from(i64::MAX) * 1000 {
        return Err(too_large());
    }
    Ok(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_binary_and_exponent_forms() {
        for (text, want) in [
            ("0", 0),
            ("1", 1000),
            ("250m", 250),
            ("0.5", 500),
            (".5", 500),
            ("1.5Gi", 1_610_612_736_000),
            ("1Ki", 1_024_000),
            ("2k", 2_000_000),
            ("1e3", 1_000_000),
            ("1E-3", 1),
            ("100M", 100_000_000_000),
            ("-1", -1000),
            ("+2", 2000),
            // Rounded up to a whole milli-unit, as MilliValue does.
            ("1n", 1),
            ("1500u", 2),
        ] {
            assert_eq!(parse_milli(text), Ok(want), "{text}");
        }
        assert_eq!(units(&Quantity("1500m".into())), Ok(2));
        assert_eq!(units(&Quantity("128Mi".into())), Ok(134_217_728));
    }

    #[test]
    fn bad_text_is_named() {
        for text in [
            "",
            "m",
            "1.2.3",
            "1X",
            "1e",
            "1e+",
            "1ee3",
            "1e999",
            "9".repeat(40).as_str(),
        ] {
            let e = parse_milli(text).expect_err(text);
            assert_eq!(e.text, text);
        }
    }
}
