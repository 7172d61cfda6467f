//! Secrets and URLs as they may be shown, the one place that knows how: a
//! token or key is a [`Secret`], whose `Debug` never shows it. In the start-up
//! banner, in errors and in logs a database or Redis URL appears as its
//! host and port, never with its user name, password or query (which may
//! carry a password too) ([`redact_url`], [`endpoint`], [`scrub`]); the
//! bench, which shows which named database it used, masks only the
//! passwords ([`mask_password`], [`mask_passwords_in`]).
//!
//! One splitter serves every scheme, because Sentinel and Cluster URLs name
//! several hosts (`redis+sentinel://a:26379,b:26379/mymaster`), which a
//! URL parser refuses; percent-decoding is the `percent-encoding` crate's.

/// A secret (a token, a key): `Debug` shows `Secret(<redacted>)`, so no
/// configuration or error printed with `{:?}` carries it; [`expose`]
/// (`Secret::expose`) is the one way to read it, for the code that uses it.
///
/// [`expose`]: Secret::expose
#[derive(Clone, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    /// Wraps a secret.
    pub fn new(secret: T) -> Self {
        Self(secret)
    }

    /// The secret itself.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> std::fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The parts of a URL a message may show.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parts<'a> {
    scheme: &'a str,
    hosts: &'a str,
    path: &'a str,
    userinfo: Option<&'a str>,
}

fn split(url: &str) -> Option<Parts<'_>> {
    let (scheme, rest) = url.split_once("://")?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let path = tail.split(['?', '#']).next().unwrap_or("");
    Some(Parts {
        scheme,
        hosts,
        path,
        userinfo,
    })
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "redis" | "rediss" => Some(6379),
        "postgres" | "postgresql" => Some(5432),
        s if s.contains("sentinel") => Some(26379),
        _ => None,
    }
}

/// `url` without user name, password, query or fragment:
/// `postgres://app:secret@db:5432/orders?sslmode=require` becomes
/// `postgres://db:5432/orders`. Text that is not a URL is shown as
/// `(unparsable URL)`, since it may be a password pasted in the wrong place.
pub fn redact_url(url: &str) -> String {
    match split(url) {
        Some(parts) => format!("{}://{}{}", parts.scheme, parts.hosts, parts.path),
        None => "(unparsable URL)".to_owned(),
    }
}

/// Where `url` points, as `host:port` (comma-separated when it names
/// several hosts), with the scheme's default port filled in.
pub fn endpoint(url: &str) -> String {
    let Some(parts) = split(url) else {
        return "(unparsable URL)".to_owned();
    };
    parts
        .hosts
        .split(',')
        .map(|host| {
            let has_port = match host.rfind(']') {
                Some(bracket) => host[bracket..].contains(':'),
                None => host.contains(':'),
            };
            match default_port(parts.scheme) {
                Some(port) if !has_port => format!("{host}:{port}"),
                _ => host.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `text` with every secret of `url` removed: the URL itself becomes its
/// redacted form, and its password (as written and percent-decoded) `***`.
pub fn scrub(text: &str, url: &str) -> String {
    let mut text = text.replace(url, &redact_url(url));
    if let Some(userinfo) = split(url).and_then(|p| p.userinfo) {
        if let Some((_, password)) = userinfo.split_once(':')
            && !password.is_empty()
        {
            text = text.replace(password, "***");
            let decoded = percent_decode(password);
            if !decoded.is_empty() {
                text = text.replace(&decoded, "***");
            }
        }
        // The whole user info, for URLs with a token and no user name.
        if !userinfo.contains(':') && !userinfo.is_empty() {
            text = text.replace(userinfo, "***");
        }
    }
    // A password in the query (`?password=...`, libpq style).
    if let Some((_, query)) = url.split_once('?') {
        for pair in query.split(['&', '#']) {
            if let Some(("password", value)) = pair.split_once('=')
                && !value.is_empty()
            {
                text = text.replace(value, "***");
                text = text.replace(&percent_decode(value), "***");
            }
        }
    }
    text
}

/// `error` and its causes on one line, each cause once: a cause whose text
/// its parent already quotes is not repeated.
pub fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = next.source();
    }
    line
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// `url` with its password (in the user part or a `password` query
/// parameter) replaced by `***`, the rest as written:
/// `postgres://user:***@host:5432/db`. Text that is not a URL is shown as
/// `(a URL that does not parse)`.
pub fn mask_password(url: &str) -> String {
    let Some(parts) = split(url) else {
        return "(a URL that does not parse)".to_owned();
    };
    let mut shown = format!("{}://", parts.scheme);
    if let Some(userinfo) = parts.userinfo {
        match userinfo.split_once(':') {
            Some((user, _)) => shown.push_str(&format!("{user}:***@")),
            None => shown.push_str(&format!("{userinfo}@")),
        }
    }
    shown.push_str(parts.hosts);
    shown.push_str(parts.path);
    if let Some((_, query)) = url.split_once('?') {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some(("password", _)) => "password=***".to_owned(),
                _ => pair.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    shown
}

/// `text` with every URL in it that carries a password shown by
/// [`mask_password`] (for a child server's output, which may quote the
/// URLs it was given).
pub fn mask_passwords_in(text: &str) -> String {
    let is_boundary = |c: char| {
        c.is_whitespace() || matches!(c, '"' | '\'' | '(' | ')' | '[' | ']' | '<' | '>' | ',')
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| !is_boundary(c)) {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest.find(is_boundary).unwrap_or(rest.len());
        let word = &rest[..end];
        if word.contains("://") && word.contains('@') {
            out.push_str(&mask_password(word));
        } else {
            out.push_str(word);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_credentials_and_query() {
        assert_eq!(
            redact_url("postgres://app:s3cret@db.internal:5433/orders?password=x"),
            "postgres://db.internal:5433/orders"
        );
        assert_eq!(
            redact_url("redis://:hunter2@cache:6380/0"),
            "redis://cache:6380/0"
        );
        assert_eq!(redact_url("s3cret-pasted-here"), "(unparsable URL)");
    }

    #[test]
    fn endpoints_name_host_and_port() {
        assert_eq!(endpoint("postgres://u:p@db/orders"), "db:5432");
        assert_eq!(endpoint("redis://:p@127.0.0.1:6380"), "127.0.0.1:6380");
        assert_eq!(endpoint("rediss://cache"), "cache:6379");
        assert_eq!(endpoint("redis://[::1]"), "[::1]:6379");
        assert_eq!(endpoint("redis://[::1]:7000"), "[::1]:7000");
        assert_eq!(
            endpoint("redis+sentinel://a:26379,b/mymaster"),
            "a:26379,b:26379"
        );
    }

    #[test]
    fn a_cause_quoted_by_its_parent_is_not_repeated() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot create /proc/nope: {source}")]
        struct Outer {
            source: std::io::Error,
        }
        let error = Outer {
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let line = one_line(&error);
        assert_eq!(line.matches("not found").count(), 1, "{line}");
    }

    #[test]
    fn scrubbed_text_keeps_no_password() {
        let url = "postgres://app:p%40ss@db:5432/orders";
        let text = format!("cannot connect to {url}: password p@ss rejected for p%40ss");
        let clean = scrub(&text, url);
        assert!(
            !clean.contains("p@ss") && !clean.contains("p%40ss"),
            "{clean}"
        );
        assert!(clean.contains("postgres://db:5432/orders"), "{clean}");
        let url = "postgres://db:5432/orders?user=app&password=qu%3Fery";
        let clean = scrub("auth failed for qu?ery (qu%3Fery)", url);
        assert!(
            !clean.contains("qu?ery") && !clean.contains("qu%3Fery"),
            "{clean}"
        );
        let url = "redis://tokenonly@cache:6379";
        assert_eq!(
            scrub("at redis://tokenonly@cache:6379", url),
            "at redis://cache:6379"
        );
    }

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(
            mask_password("postgres://shop:s3cret@db.example:5433/sales"),
            "postgres://shop:***@db.example:5433/sales"
        );
        assert_eq!(
            mask_password("redis://:s3cret@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            mask_password("postgres://shop@db.example/sales?password=s3cret&sslmode=require"),
            "postgres://shop@db.example/sales?password=***&sslmode=require"
        );
        assert_eq!(
            mask_password("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(mask_password("not a url"), "(a URL that does not parse)");
        assert_eq!(
            scrub("failed for s3cret", "postgres://u:s3cret@h/d"),
            "failed for ***"
        );
        assert_eq!(
            mask_passwords_in(
                "store at postgres://u:s3cret@h:5432/d)\n(redis \"redis://:pw@r:6379\", http://h:1 x)"
            ),
            "store at postgres://u:***@h:5432/d)\n(redis \"redis://:***@r:6379\", http://h:1 x)"
        );
    }
}
