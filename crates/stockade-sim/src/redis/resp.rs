//! RESP2, the protocol the `redis` client speaks by default: the [`Reply`]
//! a command gives and how it is written, and the reading of requests
//! (arrays of bulk strings, as every client sends them).

/// What a command answers, as RESP2 can say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`.
    Status(String),
    /// `-ERR ...`: the whole line after the dash, its first word the kind.
    Error(String),
    /// `:42`.
    Int(i64),
    /// `$3\r\nabc`.
    Bulk(Vec<u8>),
    /// `$-1`: no value.
    Nil,
    /// `*-1`: no array (a timed-out blocking pop, an aborted transaction).
    NilArray,
    /// `*2\r\n...`.
    Array(Vec<Reply>),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Self {
        Self::Status("OK".into())
    }

    /// An error reply; `text` starts with its kind (`ERR`, `WRONGTYPE`...).
    pub fn error(text: impl Into<String>) -> Self {
        Self::Error(text.into())
    }

    /// A bulk string.
    pub fn bulk(bytes: impl AsRef<[u8]>) -> Self {
        Self::Bulk(bytes.as_ref().to_vec())
    }

    /// An array of bulk strings.
    pub fn bulks<I: IntoIterator<Item = T>, T: AsRef<[u8]>>(items: I) -> Self {
        Self::Array(items.into_iter().map(Self::bulk).collect())
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Self::Error(_))
    }

    /// Appends the RESP2 encoding of this reply to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Self::Status(text) => line(out, b'+', text.as_bytes()),
            Self::Error(text) => line(out, b'-', text.as_bytes()),
            Self::Int(n) => line(out, b':', n.to_string().as_bytes()),
            Self::Bulk(bytes) => {
                line(out, b'$', bytes.len().to_string().as_bytes());
                out.extend_from_slice(bytes);
                out.extend_from_slice(b"\r\n");
            }
            Self::Nil => out.extend_from_slice(b"$-1\r\n"),
            Self::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Self::Array(items) => {
                line(out, b'*', items.len().to_string().as_bytes());
                for item in items {
                    item.encode(out);
                }
            }
        }
    }
}

fn line(out: &mut Vec<u8>, kind: u8, text: &[u8]) {
    out.push(kind);
    // A status or error line cannot hold a line break: Redis replaces them.
    out.extend(
        text.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// A command's name and arguments.
pub type Args = Vec<Vec<u8>>;

/// A request that cannot be read: the connection is closed after the
/// error is sent, as Redis does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

/// Reads one request from the front of `buffer`: `Ok(Some((args,
/// used)))` when a whole one is there, `Ok(None)` when more bytes are
/// needed. Inline commands (`PING\r\n`) are read too.
pub fn parse_request(buffer: &[u8]) -> Result<Option<(Args, usize)>, ProtocolError> {
    let Some(&first) = buffer.first() else {
        return Ok(None);
    };
    if first != b'*' {
        let Some(end) = find_crlf(buffer, 0) else {
            return Ok(None);
        };
        let args = buffer[..end]
            .split(|b| *b == b' ')
            .filter(|word| !word.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        return Ok(Some((args, end + 2)));
    }
    let Some((count, mut at)) = number_line(buffer, 1)? else {
        return Ok(None);
    };
    let mut args = Vec::with_capacity(count.max(0) as usize);
    for _ in 0..count.max(0) {
        if at >= buffer.len() {
            return Ok(None);
        }
        if buffer[at] != b'$' {
            return Err(ProtocolError(format!(
                "Protocol error: expected '$', got '{}'",
                buffer[at] as char
            )));
        }
        let Some((length, start)) = number_line(buffer, at + 1)? else {
            return Ok(None);
        };
        let length = usize::try_from(length)
            .map_err(|_| ProtocolError("Protocol error: invalid bulk length".into()))?;
        if buffer.len() < start + length + 2 {
            return Ok(None);
        }
        args.push(buffer[start..start + length].to_vec());
        at = start + length + 2;
    }
    Ok(Some((args, at)))
}

/// The number on the line starting at `from`, and where the next begins.
fn number_line(buffer: &[u8], from: usize) -> Result<Option<(i64, usize)>, ProtocolError> {
    let Some(end) = find_crlf(buffer, from) else {
        return Ok(None);
    };
    let number = std::str::from_utf8(&buffer[from..end])
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
        .ok_or_else(|| ProtocolError("Protocol error: invalid multibulk length".into()))?;
    Ok(Some((number, end + 2)))
}

fn find_crlf(buffer: &[u8], from: usize) -> Option<usize> {
    buffer
        .get(from..)?
        .windows(2)
        .position(|pair| pair == b"\r\n")
        .map(|at| from + at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_read_only_once_whole() {
        let request = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        for cut in 0..request.len() {
            assert_eq!(parse_request(&request[..cut]), Ok(None), "cut at {cut}");
        }
        assert_eq!(
            parse_request(request),
            Ok(Some((vec![b"GET".to_vec(), b"k".to_vec()], request.len())))
        );
        assert_eq!(
            parse_request(b"PING  x\r\n"),
            Ok(Some((vec![b"PING".to_vec(), b"x".to_vec()], 9)))
        );
        assert!(parse_request(b"*1\r\n:3\r\n").is_err());
    }

    #[test]
    fn replies_encode_as_resp2() {
        let mut out = Vec::new();
        Reply::Array(vec![
            Reply::ok(),
            Reply::error("ERR bad\nline"),
            Reply::Int(-3),
            Reply::bulk("ab"),
            Reply::Nil,
            Reply::NilArray,
        ])
        .encode(&mut out);
        assert_eq!(
            out,
            b"*6\r\n+OK\r\n-ERR bad line\r\n:-3\r\n$2\r\nab\r\n$-1\r\n*-1\r\n"
        );
    }
}
