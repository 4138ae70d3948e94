//! Duplicate fields in a request body (`{"metadata": {"name": "a", "name":
//! "b"}}`, or a YAML mapping with a key twice). Decoding into a
//! `serde_json::Value` keeps the last one quietly; kube-apiserver reports
//! each, by its path, as `fieldValidation` asks: `Strict` refuses the
//! request, `Warn` (the default) answers a `Warning` per duplicate, and
//! `Ignore` keeps the last without a word. Pure: no I/O.
//!
//! The body is walked a second time with a visitor that only compares
//! keys, so the path of every duplicate is known without building a second
//! value; the walk works over any serde format, JSON and YAML alike.

use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The paths of the duplicate fields in `bytes` (`metadata.name`,
/// `spec.containers[0].image`), in the order met; empty when there are
/// none, or when the body does not parse (the decoding that made the value
/// has already said why).
pub fn find(yaml: bool, bytes: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let walk = Walk {
        path: String::new(),
        found: &mut found,
    };
    let ok = if yaml {
        walk.deserialize(serde_yaml::Deserializer::from_slice(bytes))
            .is_ok()
    } else {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        walk.deserialize(&mut de).is_ok()
    };
    if ok {
        found
    } else {
        Vec::new()
    }
}

/// The `Warning` header value for a duplicate under `Warn`.
pub fn warning(path: &str) -> String {
    format!("299 - \"duplicate field \\\"{path}\\\"\"")
}

struct Walk<'a> {
    path: String,
    found: &'a mut Vec<String>,
}

impl Walk<'_> {
    fn child(&mut self, step: impl fmt::Display, member: bool) -> Walk<'_> {
        let path = match (member, self.path.is_empty()) {
            (true, true) => step.to_string(),
            (true, false) => format!("{}.{step}", self.path),
            (false, _) => format!("{}[{step}]", self.path),
        };
        Walk {
            path,
            found: self.found,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let child = self.child(&key, true);
            if seen.contains(&key) {
                child.found.push(child.path.clone());
            }
            map.next_value_seed(child)?;
            seen.insert(key);
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        while seq.next_element_seed(self.child(i, false))?.is_some() {
            i += 1;
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_i128<E>(self, _: i128) -> Result<(), E> {
        Ok(())
    }
    fn visit_u128<E>(self, _: u128) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_bytes<E>(self, _: &[u8]) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_duplicate_is_named_by_its_path() {
        let body = br#"{"metadata":{"name":"a","labels":{"x":"1"},"name":"b"},
            "spec":{"containers":[{"name":"c","image":"i","image":"j"}]},"kind":"Pod","kind":"Pod"}"#;
        assert_eq!(
            find(false, body),
            ["metadata.name", "spec.containers[0].image", "kind"]
        );
    }

    #[test]
    fn yaml_mappings_too() {
        let body = b"metadata:\n  name: a\n  name: b\nspec: {containers: [{name: c}]}\n";
        assert_eq!(find(true, body), ["metadata.name"]);
    }

    #[test]
    fn none_in_a_clean_body_or_one_that_does_not_parse() {
        assert!(find(false, br#"{"a":{"b":[1,{"c":2}]},"d":null}"#).is_empty());
        assert!(find(false, br#"{"a":1,"a""#).is_empty());
        assert!(find(true, b"a: [").is_empty());
    }
}
