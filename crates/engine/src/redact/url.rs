//! URLs, paths and parameters: a URL's userinfo (its credentials read, and hidden), and the
//! values of secret query and form parameters (`k=v` pairs) hidden.

use std::borrow::Cow;

use super::{REDACTED, Redactor};

/// The credentials in a URL's userinfo (`http://user:pass@host/`), percent-decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlCredentials {
    /// The user name.
    pub user: String,
    /// The password, when the userinfo has a `:`.
    pub password: Option<String>,
}

impl UrlCredentials {
    /// The userinfo of an absolute URL, if it has one.
    pub fn of(url: &str) -> Option<Self> {
        let (_, rest) = url.split_once("://")?;
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (userinfo, _) = rest[..authority_end].rsplit_once('@')?;
        let (user, password) = match userinfo.split_once(':') {
            Some((user, password)) => (user, Some(percent_decode(password, false))),
            None => (userinfo, None),
        };
        Some(Self {
            user: percent_decode(user, false),
            password,
        })
    }

    /// The `Authorization` header value that carries them (`Basic base64(user:password)`).
    pub fn basic(&self) -> String {
        use base64::Engine as _;
        let pair = format!("{}:{}", self.user, self.password.as_deref().unwrap_or(""));
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

impl Redactor {
    /// A path with its query's secret parameter values hidden (`/mcp?api_key=[redacted]&x=1`).
    pub fn path<'a>(&self, path: &'a str) -> Cow<'a, str> {
        if !self.enabled {
            return Cow::Borrowed(path);
        }
        let Some((base, query)) = path.split_once('?') else {
            return Cow::Borrowed(path);
        };
        match self.params(query, '&') {
            Cow::Borrowed(_) => Cow::Borrowed(path),
            Cow::Owned(query) => Cow::Owned(format!("{base}?{query}")),
        }
    }

    /// `k=v` pairs separated by `sep`, with secret values hidden.
    pub(super) fn params<'a>(&self, text: &'a str, sep: char) -> Cow<'a, str> {
        let mut changed = false;
        let parts: Vec<Cow<'a, str>> = text
            .split(sep)
            .map(|pair| match pair.split_once('=') {
                Some((name, value)) if value != REDACTED && self.is_secret_param(&decode(name)) => {
                    changed = true;
                    Cow::Owned(format!("{name}={REDACTED}"))
                }
                _ => Cow::Borrowed(pair),
            })
            .collect();
        if changed {
            Cow::Owned(parts.join(&sep.to_string()))
        } else {
            Cow::Borrowed(text)
        }
    }

    /// A URL as it may be shown anywhere: userinfo hidden (whatever the policy: a password in a
    /// URL is never printed), and secret query values hidden when redaction is on.
    pub fn url(&self, url: &str) -> String {
        let is_scheme = |s: &str| {
            s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        };
        let without_userinfo = match url.split_once("://") {
            Some((scheme, rest)) if is_scheme(scheme) => {
                let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
                let (authority, tail) = rest.split_at(authority_end);
                match authority.rsplit_once('@') {
                    Some((_, host)) => format!("{scheme}://{REDACTED}@{host}{tail}"),
                    None => url.to_string(),
                }
            }
            _ => url.to_string(),
        };
        self.path(&without_userinfo).into_owned()
    }
}

/// Percent-decodes a parameter name enough to compare it (`api%5Fkey` → `api_key`).
fn decode(name: &str) -> Cow<'_, str> {
    if !name.contains('%') && !name.contains('+') {
        return Cow::Borrowed(name);
    }
    Cow::Owned(percent_decode(name, true))
}

/// Percent-decodes a text; `plus_is_space` for form encoding (not for a URL's userinfo).
fn percent_decode(name: &str, plus_is_space: bool) -> String {
    if !(name.contains('%') || plus_is_space && name.contains('+')) {
        return name.to_string();
    }
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'+', _, _) if plus_is_space => out.push(b' '),
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let value = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 2;
            }
            (b, _, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_and_userinfo() {
        let r = Redactor::new();
        assert_eq!(
            r.path("/mcp?api_key=LEAK&x=1&access_token=T&sessionId=S&session_id=L"),
            "/mcp?api_key=[redacted]&x=1&access_token=[redacted]&sessionId=S&session_id=L"
        );
        assert_eq!(r.path("/mcp?x=1"), "/mcp?x=1");
        assert_eq!(r.path("/mcp?api%5Fkey=LEAK"), "/mcp?api%5Fkey=[redacted]");
        assert_eq!(
            r.url("http://user:PW@127.0.0.1:8080/mcp?key=K"),
            "http://[redacted]@127.0.0.1:8080/mcp?key=[redacted]"
        );
        assert_eq!(r.url("http://127.0.0.1/mcp"), "http://127.0.0.1/mcp");
        // A password in a URL is never shown, even with redaction off.
        assert_eq!(
            Redactor::disabled().url("https://u:p@h/x?key=K"),
            "https://[redacted]@h/x?key=K"
        );
        assert_eq!(
            r.clone().with_query(&["tenant"]).path("/a?tenant=acme"),
            "/a?tenant=[redacted]"
        );
    }
}
