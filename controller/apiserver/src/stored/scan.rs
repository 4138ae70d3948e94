//! The members of a JSON object as spans of its bytes, found in one pass
//! without decoding: what splicing a resourceVersion into a stored object
//! needs. Pure: no I/O, no recursion (nesting is counted, not followed).
//!
//! Only what the API server itself writes is taken: compact JSON (no
//! whitespace between tokens), keys without escapes, in strictly rising
//! byte order without duplicates (as `serde_json`'s sorted map writes
//! them). Anything else is `None`, and the caller takes the path that
//! decodes the whole object, which answers for every input. The scan
//! checks the structure (brackets, strings, literals), not every rule of
//! JSON: the bytes are the server's own writes.

/// One member of an object: its key (unescaped, so the bytes are the key)
/// and its value's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member<'a> {
    pub key: &'a str,
    pub value: &'a [u8],
    /// Where the member starts (its key's opening quote) in the bytes
    /// scanned.
    pub start: usize,
}

/// An object's members, and where its closing brace is, both as offsets
/// in the bytes scanned (an object inside another is placed in the outer
/// one's bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object<'a> {
    pub members: Vec<Member<'a>>,
    pub close: usize,
}

/// The object that `bytes` is exactly (no trailing bytes), and the members
/// of its member `descend` when that is an object: found in the same pass
/// (the metadata of a stored object, most of its bytes with its
/// managedFields, is not scanned twice).
pub fn scan<'a>(bytes: &'a [u8], descend: &str) -> Option<(Object<'a>, Option<Object<'a>>)> {
    let mut s = Scanner { b: bytes, i: 0 };
    let mut inner = None;
    let top = s.object(Some(descend), &mut inner)?;
    (s.i == bytes.len()).then_some((top, inner))
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    /// An object from here, its member `descend` (if an object) scanned
    /// into `inner` rather than skipped. One level only: no recursion
    /// beyond it.
    fn object(
        &mut self,
        descend: Option<&str>,
        inner: &mut Option<Object<'a>>,
    ) -> Option<Object<'a>> {
        self.eat(b'{')?;
        let mut members: Vec<Member<'a>> = Vec::new();
        if self.peek()? == b'}' {
            self.i += 1;
        } else {
            loop {
                let start = self.i;
                let key = self.key()?;
                if members
                    .last()
                    .is_some_and(|m| m.key.as_bytes() >= key.as_bytes())
                {
                    return None;
                }
                self.eat(b':')?;
                let v0 = self.i;
                if descend == Some(key) && self.peek()? == b'{' {
                    *inner = Some(self.object(None, &mut None)?);
                } else {
                    self.value()?;
                }
                members.push(Member {
                    key,
                    value: &self.b[v0..self.i],
                    start,
                });
                match self.next()? {
                    b',' => continue,
                    b'}' => break,
                    _ => return None,
                }
            }
        }
        Some(Object {
            members,
            close: self.i - 1,
        })
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }

    /// A key: a string without escapes (a key with one is rare enough to
    /// leave to the decoding path).
    fn key(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            match self.next()? {
                b'"' => break,
                b'\\' => return None,
                c if c < 0x20 => return None,
                _ => {}
            }
        }
        std::str::from_utf8(&self.b[start..self.i - 1]).ok()
    }

    /// Past the end of a string whose opening quote is already read:
    /// straight to the next quote or backslash (most of an object's bytes
    /// are in strings). Control characters are not looked for: the bytes
    /// are what `serde_json` wrote, which escapes them.
    fn rest_of_string(&mut self) -> Option<()> {
        loop {
            let at = memchr::memchr2(b'"', b'\\', self.b.get(self.i..)?)?;
            self.i += at + 1;
            if self.b[self.i - 1] == b'"' {
                return Some(());
            }
            // An escape: the next byte is part of it, whatever it is.
            self.next()?;
        }
    }

    /// Past one value. Containers are skipped by counting brackets (strings
    /// inside them are skipped whole, so their brackets do not count);
    /// literals must be made of the characters a literal can have.
    fn value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.i += 1;
                self.rest_of_string()
            }
            b'{' | b'[' => {
                let mut stack: Vec<u8> = Vec::new();
                loop {
                    match self.next()? {
                        b'"' => self.rest_of_string()?,
                        c @ (b'{' | b'[') => stack.push(c),
                        c @ (b'}' | b']') => {
                            let open = if c == b'}' { b'{' } else { b'[' };
                            if stack.pop()? != open {
                                return None;
                            }
                        }
                        b' ' | b'\n' | b'\r' | b'\t' => return None,
                        _ => {}
                    }
                    if stack.is_empty() {
                        return Some(());
                    }
                }
            }
            _ => {
                let start = self.i;
                while let Some(c) = self.peek() {
                    if matches!(c, b',' | b'}' | b']') {
                        break;
                    }
                    self.i += 1;
                }
                literal(&self.b[start..self.i])
            }
        }
    }
}

fn literal(l: &[u8]) -> Option<()> {
    let number = !l.is_empty()
        && l.iter()
            .all(|c| c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E'));
    (number || matches!(l, b"true" | b"false" | b"null")).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(b: &[u8]) -> Option<Vec<(&str, &str)>> {
        scan(b, "").map(|(o, _)| {
            o.members
                .iter()
                .map(|m| (m.key, std::str::from_utf8(m.value).expect("utf-8")))
                .collect()
        })
    }

    #[test]
    fn members_of_compact_sorted_objects() {
        assert_eq!(keys(b"{}"), Some(vec![]));
        assert_eq!(
            keys(br#"{"a":1,"b":"x,}\"]","c":{"d":[1,{"e":"]"}]},"f":null,"g":-1.5e3}"#),
            Some(vec![
                ("a", "1"),
                ("b", r#""x,}\"]""#),
                ("c", r#"{"d":[1,{"e":"]"}]}"#),
                ("f", "null"),
                ("g", "-1.5e3"),
            ])
        );
        let (o, _) = scan(br#"{"a":[]}"#, "").expect("ok");
        assert_eq!((o.members[0].start, o.close), (1, 7));
        // The member to descend into, placed in the outer bytes.
        let b = br#"{"a":1,"m":{"x":2,"y":{}},"z":[]}"#;
        let (o, inner) = scan(b, "m").expect("ok");
        let inner = inner.expect("m is an object");
        assert_eq!(o.members.len(), 3);
        assert_eq!(
            inner.members.iter().map(|m| m.key).collect::<Vec<_>>(),
            ["x", "y"]
        );
        assert_eq!((inner.members[1].start, inner.close), (18, 24));
        assert_eq!(&b[inner.members[1].start..inner.close + 1], br#""y":{}}"#);
        // Not an object: nothing to descend into, the member is there.
        assert_eq!(
            scan(br#"{"m":1}"#, "m").map(|(o, i)| (o.members.len(), i)),
            Some((1, None))
        );
        // A fault inside the descended object is a fault of the whole.
        assert_eq!(scan(br#"{"m":{"b":1,"a":2}}"#, "m"), None);
    }

    #[test]
    fn anything_else_is_left_to_the_decoding_path() {
        for bad in [
            &b""[..],
            b"[]",
            b"{",
            b"{}x",
            br#"{"b":1,"a":2}"#, // unsorted
            br#"{"a":1,"a":2}"#, // duplicate
            br#"{"a\"b":1}"#,    // escaped key
            br#"{"a": 1}"#,      // whitespace
            br#"{"a":[1, 2]}"#,  // whitespace inside
            br#"{"a":tru}"#,     // not a literal
            br#"{"a":[1}"#,      // mismatched
            br#"{"a":{"b":"x}"#, // unterminated string
            br#"{"a":1,}"#,      // trailing comma
            b"{\"a\x01\":1}",    // control character in a key
        ] {
            assert_eq!(keys(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn deep_nesting_is_counted_not_followed() {
        let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(keys(deep.as_bytes()).map(|k| k.len()), Some(1));
    }
}
