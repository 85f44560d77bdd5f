//! The few pieces of protobuf's wire format (protobuf.dev, "Encoding") the gRPC clients need:
//! varints to write requests, and an iterator over a message's fields to read answers. Every
//! length is checked against the bytes there, so a malformed or hostile message is an error,
//! never a panic or an allocation it asks for.

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A protobuf field's value, by wire type.
pub(crate) enum Field<'a> {
    Varint(u64),
    Fixed64([u8; 8]),
    Bytes(&'a [u8]),
    Fixed32,
}

/// Iterates over a message's fields; unknown fields are returned like the others, for the
/// caller to skip.
pub(crate) struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
}

pub(crate) fn fields(buf: &[u8]) -> Fields<'_> {
    Fields { buf, pos: 0 }
}

impl<'a> Fields<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err("truncated varint".to_string());
            };
            self.pos += 1;
            if i == 9 && b > 1 {
                return Err("varint over 64 bits".to_string());
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint over 64 bits".to_string())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| "field runs past the end of its message".to_string())?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn next_field(&mut self) -> Option<Result<(u64, Field<'a>), String>> {
        if self.pos >= self.buf.len() {
            return None;
        }
        Some(self.field())
    }

    fn field(&mut self) -> Result<(u64, Field<'a>), String> {
        let tag = self.varint()?;
        let number = tag >> 3;
        if number == 0 {
            return Err("field number 0".to_string());
        }
        let value = match tag & 7 {
            0 => Field::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Field::Fixed64(a)
            }
            2 => {
                let n = self.varint()?;
                let n = usize::try_from(n).map_err(|_| "length too large".to_string())?;
                Field::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Field::Fixed32
            }
            w => return Err(format!("unsupported wire type {w}")),
        };
        Ok((number, value))
    }
}
