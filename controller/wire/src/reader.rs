//! The protobuf wire format, read without trusting a single length.

use crate::error::Problem;

/// How a field's value is laid out on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireType {
    Varint,
    Fixed64,
    Len,
    Fixed32,
}

impl WireType {
    pub(crate) fn number(self) -> u8 {
        match self {
            WireType::Varint => 0,
            WireType::Fixed64 => 1,
            WireType::Len => 2,
            WireType::Fixed32 => 5,
        }
    }
}

/// One field as it appears on the wire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Len(&'a [u8]),
    Fixed32(u32),
}

impl Value<'_> {
    pub(crate) fn wire_type(&self) -> WireType {
        match self {
            Value::Varint(_) => WireType::Varint,
            Value::Fixed64(_) => WireType::Fixed64,
            Value::Len(_) => WireType::Len,
            Value::Fixed32(_) => WireType::Fixed32,
        }
    }
}

/// Reads the fields of one message in order. Every length is checked
/// against what is left before anything is sliced, so no input can make it
/// allocate or read past the end.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, Problem> {
        let start = self.pos;
        let mut value: u64 = 0;
        for i in 0..10 {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(Problem::Truncated {
                    offset: start,
                    needed: i + 1,
                    available: self.buf.len() - start,
                });
            };
            self.pos += 1;
            // The tenth byte may only carry the 64th bit.
            if i == 9 && byte > 1 {
                return Err(Problem::BadVarint { offset: start });
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Problem::BadVarint { offset: start })
    }

    fn take(&mut self, needed: u64) -> Result<&'a [u8], Problem> {
        let available = self.buf.len() - self.pos;
        match usize::try_from(needed) {
            Ok(n) if n <= available => {
                let slice = &self.buf[self.pos..self.pos + n];
                self.pos += n;
                Ok(slice)
            }
            _ => Err(Problem::Truncated {
                offset: self.pos,
                needed,
                available,
            }),
        }
    }

    /// The next `N` bytes, as an array (fixed32, fixed64).
    fn take_fixed<const N: usize>(&mut self) -> Result<[u8; N], Problem> {
        let offset = self.pos;
        let bytes = self.take(N as u64)?;
        <[u8; N]>::try_from(bytes).map_err(|_| Problem::Truncated {
            offset,
            needed: N as u64,
            available: bytes.len(),
        })
    }

    /// The next field's number and value, or `None` at the end.
    pub(crate) fn next_field(&mut self) -> Result<Option<(u32, Value<'a>)>, Problem> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let offset = self.pos;
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 || number > (1 << 29) - 1 {
            return Err(Problem::BadFieldNumber { number, offset });
        }
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => Value::Fixed64(u64::from_le_bytes(self.take_fixed()?)),
            2 => {
                let len = self.varint()?;
                Value::Len(self.take(len)?)
            }
            5 => Value::Fixed32(u32::from_le_bytes(self.take_fixed()?)),
            other => {
                return Err(Problem::BadWireType {
                    wire_type: other as u8,
                    offset,
                })
            }
        };
        // Checked above: the number fits in 29 bits.
        Ok(Some((number as u32, value)))
    }

    /// The varints of a packed repeated field, one after another.
    pub(crate) fn packed_varint(&mut self) -> Result<Option<u64>, Problem> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        self.varint().map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_of_every_wire_type() {
        // 1: varint 150, 2: "hi", 3: fixed64 1, 4: fixed32 2
        let bytes = [
            0x08, 0x96, 0x01, 0x12, 2, b'h', b'i', 0x19, 1, 0, 0, 0, 0, 0, 0, 0, 0x25, 2, 0, 0, 0,
        ];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.next_field(), Ok(Some((1, Value::Varint(150)))));
        assert_eq!(r.next_field(), Ok(Some((2, Value::Len(b"hi")))));
        assert_eq!(r.next_field(), Ok(Some((3, Value::Fixed64(1)))));
        assert_eq!(r.next_field(), Ok(Some((4, Value::Fixed32(2)))));
        assert_eq!(r.next_field(), Ok(None));
    }

    #[test]
    fn refuses_lengths_beyond_the_input() {
        let bytes = [0x12, 0xff, 0xff, 0xff, 0xff, 0x0f, b'x'];
        let err = Reader::new(&bytes).next_field();
        assert!(matches!(err, Err(Problem::Truncated { .. })), "{err:?}");
    }

    #[test]
    fn refuses_overlong_varints_and_groups() {
        let long = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ];
        assert!(matches!(
            Reader::new(&long).next_field(),
            Err(Problem::BadVarint { .. })
        ));
        let group = [0x0b];
        assert!(matches!(
            Reader::new(&group).next_field(),
            Err(Problem::BadWireType { wire_type: 3, .. })
        ));
        let zero = [0x00, 0x00];
        assert!(matches!(
            Reader::new(&zero).next_field(),
            Err(Problem::BadFieldNumber { number: 0, .. })
        ));
    }
}
