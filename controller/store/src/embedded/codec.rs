//! The embedded store's on-disk records, as bytes. Pure: no I/O.
//!
//! - a current value: `create_rev:i64 LE | mod_rev:i64 LE | value`;
//! - a history entry (keyed by its revision): `kind:u8 | key_len:u32 LE |
//!   key | value_len:u32 LE | value | has_prev:u8 [| create_rev | mod_rev |
//!   prev_len:u32 LE | prev]`. The previous record is kept whole so that a
//!   list at an older revision can undo the change.

use crate::error::{Result, StoreError};
use crate::types::{EventKind, Revision};

/// A value with its revisions, as stored for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub value: Vec<u8>,
    pub create_rev: Revision,
    pub mod_rev: Revision,
}

/// One change, as the history table keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub kind: EventKind,
    pub key: String,
    pub value: Vec<u8>,
    pub prev: Option<Record>,
}

pub fn encode_record(r: &Record) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + r.value.len());
    out.extend_from_slice(&r.create_rev.to_le_bytes());
    out.extend_from_slice(&r.mod_rev.to_le_bytes());
    out.extend_from_slice(&r.value);
    out
}

pub fn decode_record(bytes: &[u8]) -> Result<Record> {
    let mut r = Reader(bytes);
    let create_rev = r.i64()?;
    let mod_rev = r.i64()?;
    Ok(Record {
        value: r.0.to_vec(),
        create_rev,
        mod_rev,
    })
}

pub fn encode_change(c: &Change) -> Vec<u8> {
    let prev_len = c.prev.as_ref().map_or(0, |p| 20 + p.value.len());
    let mut out = Vec::with_capacity(10 + c.key.len() + c.value.len() + prev_len);
    out.push(match c.kind {
        EventKind::Put => 0,
        EventKind::Delete => 1,
    });
    put_bytes(&mut out, c.key.as_bytes());
    put_bytes(&mut out, &c.value);
    match &c.prev {
        None => out.push(0),
        Some(p) => {
            out.push(1);
            out.extend_from_slice(&p.create_rev.to_le_bytes());
            out.extend_from_slice(&p.mod_rev.to_le_bytes());
            put_bytes(&mut out, &p.value);
        }
    }
    out
}

pub fn decode_change(bytes: &[u8]) -> Result<Change> {
    let mut r = Reader(bytes);
    let kind = match r.u8()? {
        0 => EventKind::Put,
        1 => EventKind::Delete,
        k => return Err(corrupt(format!("history entry of unknown kind {k}"))),
    };
    let key = String::from_utf8(r.bytes()?.to_vec())
        .map_err(|_| corrupt("history entry with a key that is not UTF-8".into()))?;
    let value = r.bytes()?.to_vec();
    let prev = match r.u8()? {
        0 => None,
        1 => {
            let create_rev = r.i64()?;
            let mod_rev = r.i64()?;
            Some(Record {
                value: r.bytes()?.to_vec(),
                create_rev,
                mod_rev,
            })
        }
        f => return Err(corrupt(format!("history entry with prev flag {f}"))),
    };
    if !r.0.is_empty() {
        return Err(corrupt(format!(
            "{} trailing bytes in a history entry",
            r.0.len()
        )));
    }
    Ok(Change {
        kind,
        key,
        value,
        prev,
    })
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    // Values are bounded far below 4 GiB by the API server's body limit.
    let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(b);
}

fn corrupt(what: String) -> StoreError {
    StoreError::Corrupt(what)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(corrupt(format!(
                "record cut short: {n} bytes wanted, {} left",
                self.0.len()
            )));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn i64(&mut self) -> Result<i64> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(i64::from_le_bytes(b))
    }

    fn bytes(&mut self) -> Result<&'a [u8]> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        let len = u32::from_le_bytes(b) as usize;
        self.take(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(v: &[u8], c: Revision, m: Revision) -> Record {
        Record {
            value: v.to_vec(),
            create_rev: c,
            mod_rev: m,
        }
    }

    #[test]
    fn records_round_trip() {
        let r = rec(b"{\"kind\":\"Pod\"}", 3, 9);
        assert_eq!(decode_record(&encode_record(&r)).unwrap(), r);
        assert!(decode_record(b"short").is_err());
    }

    #[test]
    fn changes_round_trip() {
        for c in [
            Change {
                kind: EventKind::Put,
                key: "/registry/pods/default/a".into(),
                value: b"v2".to_vec(),
                prev: Some(rec(b"v1", 1, 2)),
            },
            Change {
                kind: EventKind::Delete,
                key: "k".into(),
                value: vec![],
                prev: None,
            },
        ] {
            assert_eq!(decode_change(&encode_change(&c)).unwrap(), c);
        }
    }

    #[test]
    fn damaged_changes_are_refused_not_misread() {
        let c = Change {
            kind: EventKind::Put,
            key: "k".into(),
            value: b"v".to_vec(),
            prev: Some(rec(b"p", 1, 1)),
        };
        let bytes = encode_change(&c);
        for cut in 0..bytes.len() {
            assert!(decode_change(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad_kind = bytes.clone();
        bad_kind[0] = 7;
        assert!(decode_change(&bad_kind).is_err());
    }
}
