//! What counts as a secret, and how it is hidden: the one policy applied to every event before
//! it is recorded, shown or printed. Values are replaced whole (never a partial value).

use std::borrow::Cow;

use serde_json::Value;

use crate::event::{EventKind, Header};

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Headers whose values are always secrets.
const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
];

/// Headers that look like secrets by name but are not.
const PUBLIC_HEADERS: &[&str] = &["mcp-session-id"];

/// Query parameters that look like secrets by name but are not: the legacy HTTP+SSE
/// transport's session ids, as public as `Mcp-Session-Id`.
const PUBLIC_PARAMS: &[&str] = &["session_id", "sessionid"];

/// A header or parameter whose name contains one of these is a secret.
const SECRET_NAME_PARTS: &[&str] = &[
    "token",
    "secret",
    "key",
    "auth",
    "session",
    "password",
    "credential",
];

/// For each byte, the parts of [`SECRET_NAME_PARTS`] that begin with it (bit `j`: part `j`).
const SECRET_PARTS_BY_START: [u8; 256] = {
    assert!(SECRET_NAME_PARTS.len() <= 8, "one bit per part");
    let mut starts = [0u8; 256];
    let mut j = 0;
    while j < SECRET_NAME_PARTS.len() {
        let part = SECRET_NAME_PARTS[j].as_bytes();
        if !part.is_empty() {
            starts[part[0] as usize] |= 1 << j;
        }
        j += 1;
    }
    starts
};

/// Whether a (lower-case) name contains one of [`SECRET_NAME_PARTS`]. Every header of every
/// exchange is asked this: one walk over the name, comparing only the parts that begin with
/// the byte there, instead of a substring search per part.
fn has_secret_part(name: &str) -> bool {
    let name = name.as_bytes();
    name.iter().enumerate().any(|(i, &byte)| {
        let mut parts = SECRET_PARTS_BY_START[usize::from(byte)];
        while parts != 0 {
            let part = SECRET_NAME_PARTS[parts.trailing_zeros() as usize].as_bytes();
            if name[i..].starts_with(part) {
                return true;
            }
            parts &= parts - 1;
        }
        false
    })
}

/// Query and form parameters that are secrets by their exact name (OAuth and friends).
const SECRET_PARAMS: &[&str] = &[
    "code",
    "code_verifier",
    "assertion",
    "client_assertion",
    "passwd",
    "pwd",
    "sig",
    "signature",
];

/// JSON keys that are secrets, compared without case, `_` or `-` (`apiKey` = `api_key`).
const SECRET_JSON_KEYS: &[&str] = &[
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "clientsecret",
    "codeverifier",
    "clientassertion",
    "assertion",
    "password",
    "passwd",
    "secret",
    "apikey",
    "token",
    "authorization",
    "privatekey",
];

/// How many secret values a redactor remembers to scrub from texts (past it, the shortest is
/// forgotten).
const MAX_SECRET_VALUES: usize = 64;

/// Secret values shorter than this are not scrubbed from texts: they would match ordinary words.
pub const MIN_SECRET_VALUE: usize = 6;

/// The redaction policy: the built-in lists plus the names a user adds, and the secret values
/// it knows (a URL's password, the values of secret headers seen so far), scrubbed wherever
/// they reappear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redactor {
    enabled: bool,
    headers: Vec<String>,
    query: Vec<String>,
    json_keys: Vec<String>,
    /// The first letters of the secret JSON keys (built-in and added), one bit each (ASCII):
    /// a key that begins with none of them is told apart without normalizing it.
    json_initials: u128,
    /// The last letters of the same keys, one bit each (ASCII): a key whose first letter
    /// passes is told apart by its last one.
    json_finals: u128,
    /// Known secret values, longest first, at most `MAX_SECRET_VALUES`.
    values: Vec<String>,
}

/// One bit for the letter at one end (`end`: its first or its last) of each normalized key
/// ([`Redactor::json_initials`], [`Redactor::json_finals`]).
fn letter_bits<'a>(keys: impl Iterator<Item = &'a str>, end: fn(&[u8]) -> Option<&u8>) -> u128 {
    keys.filter_map(|key| end(key.as_bytes()))
        .filter(|b| b.is_ascii())
        .fold(0, |bits, b| bits | 1u128 << b)
}

/// Whether a key's letter (its first or last past `_` and `-`) rules it out: ASCII, and no
/// secret key's letter at that end (`letters`). A key of other letters is not ruled out here.
fn ruled_out(letter: Option<&u8>, letters: u128) -> bool {
    letter.is_some_and(|b| b.is_ascii() && letters & (1u128 << b.to_ascii_lowercase()) == 0)
}

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

impl Default for Redactor {
    fn default() -> Self {
        Self::new()
    }
}

fn json_key(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

impl Redactor {
    /// The built-in policy, enabled.
    pub fn new() -> Self {
        Self {
            enabled: true,
            headers: Vec::new(),
            query: Vec::new(),
            json_keys: Vec::new(),
            json_initials: letter_bits(SECRET_JSON_KEYS.iter().copied(), <[u8]>::first),
            json_finals: letter_bits(SECRET_JSON_KEYS.iter().copied(), <[u8]>::last),
            values: Vec::new(),
        }
    }

    /// Adds the credentials of a URL's userinfo (`--upstream http://user:pass@…`) to the secret
    /// values scrubbed from every text: the password, `user:password` and the `Basic` value.
    pub fn with_url_secrets(mut self, url: &str) -> Self {
        if let Some(credentials) = UrlCredentials::of(url) {
            if let Some(password) = &credentials.password {
                self.learn(password);
                self.learn(&format!("{}:{password}", credentials.user));
            }
            self.learn(&credentials.basic());
            if let Some((_, token)) = credentials.basic().split_once(' ') {
                self.learn(token);
            }
        }
        self
    }

    /// Remembers a secret value, to be scrubbed wherever it reappears (bounded: the shortest is
    /// forgotten past `MAX_SECRET_VALUES`; values shorter than `MIN_SECRET_VALUE` are ignored).
    pub fn learn(&mut self, value: &str) {
        let value = value.trim();
        if !self.enabled
            || value.chars().count() < MIN_SECRET_VALUE
            || value.contains(REDACTED)
            || self.values.iter().any(|v| v == value)
        {
            return;
        }
        if self.values.len() >= MAX_SECRET_VALUES {
            self.values.remove(self.values.len() - 1);
        }
        self.values.push(value.to_string());
        // Longest first: `user:password` is scrubbed whole before `password`.
        self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    /// Remembers the secret values a secret header carries: the whole value, a credential after
    /// its scheme (`Bearer …`), a `Basic` pair's password, each cookie's value.
    fn learn_header(&mut self, name: &str, value: &str) {
        if value == REDACTED || !self.is_secret_header(name) {
            return;
        }
        self.learn(value);
        if let Some((scheme, credential)) = value.trim().split_once(' ') {
            self.learn(credential);
            if scheme.eq_ignore_ascii_case("basic") {
                use base64::Engine as _;
                if let Ok(pair) =
                    base64::engine::general_purpose::STANDARD.decode(credential.trim())
                    && let Ok(pair) = String::from_utf8(pair)
                {
                    if let Some((_, password)) = pair.split_once(':') {
                        self.learn(password);
                    }
                    self.learn(&pair);
                }
            }
        }
        let lower = name.to_ascii_lowercase();
        if lower == "cookie" || lower == "set-cookie" {
            for part in value.split(';') {
                if let Some((_, v)) = part.split_once('=') {
                    self.learn(v);
                }
            }
        }
    }

    /// A text with every known secret value replaced by `[redacted]`, when it holds any.
    pub fn scrub(&self, text: &str) -> Option<String> {
        if !self.enabled || !self.values.iter().any(|v| text.contains(v.as_str())) {
            return None;
        }
        let mut out = text.to_string();
        for value in &self.values {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), REDACTED);
            }
        }
        Some(out)
    }

    fn scrub_in_place(&self, text: &mut String) {
        if let Some(scrubbed) = self.scrub(text) {
            *text = scrubbed;
        }
    }

    /// Scrubs known secret values from every string of a JSON value (keys included).
    fn scrub_json(&self, value: &mut Value) {
        match value {
            Value::String(s) => self.scrub_in_place(s),
            Value::Array(items) => items.iter_mut().for_each(|item| self.scrub_json(item)),
            Value::Object(map) => {
                if map.keys().any(|k| self.scrub(k).is_some()) {
                    let entries = std::mem::take(map);
                    for (key, item) in entries {
                        let key = self.scrub(&key).unwrap_or(key);
                        map.insert(key, item);
                    }
                }
                map.values_mut().for_each(|item| self.scrub_json(item));
            }
            _ => {}
        }
    }

    /// Learns the secret values an event's headers carry, then redacts it (`Redactor::event`):
    /// what the hub calls on every event, in order, so that a secret sent once is scrubbed from
    /// whatever follows.
    pub fn observe(&mut self, kind: &mut EventKind) {
        if !self.enabled {
            self.event(kind);
            return;
        }
        if let EventKind::StreamOpened { headers, .. } | EventKind::ResponseHead { headers, .. } =
            &*kind
        {
            for (name, value) in headers {
                self.learn_header(name, value);
            }
        }
        self.event(kind);
    }

    /// Redacts an SSE event and the message parsed from its data, as [`Redactor::observe`]
    /// redacts each; returns whether both are unchanged, so that the message is still exactly
    /// what the data parses to. The data of a message redacted to nothing new is not searched
    /// again: its text holds the same keys the message does.
    pub fn observe_sse_message(&mut self, sse: &mut EventKind, message: &mut EventKind) -> bool {
        let plain = matches!(sse, EventKind::SseEvent { event, .. } if event.as_deref() != Some("endpoint"));
        let EventKind::Message { body, .. } = message else {
            self.observe(sse);
            self.observe(message);
            return false;
        };
        if !plain || !self.enabled {
            self.observe(sse);
            self.observe(message);
            return !self.enabled;
        }
        // The data parses to `body`: `text` would find in it what `json` finds in the body.
        let changed = self.json(body);
        if changed {
            self.by_name(sse);
        }
        if !self.values.is_empty() {
            self.scrub_event(sse);
            self.scrub_event(message);
            return false;
        }
        !changed
    }

    /// Redacts a message (a whole body parsed) as [`Redactor::observe`] does; returns whether
    /// it is unchanged, so that the text it was parsed from still stands for it.
    pub fn observe_message(&mut self, message: &mut EventKind) -> bool {
        let EventKind::Message { body, .. } = message else {
            self.observe(message);
            return false;
        };
        if !self.enabled {
            return true;
        }
        let changed = self.json(body);
        if !self.values.is_empty() {
            self.scrub_event(message);
            return false;
        }
        !changed
    }

    /// No redaction at all (`--no-redact`).
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::new()
        }
    }

    /// Whether anything is redacted.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Adds header names whose values are secrets (`--redact-header`).
    pub fn with_headers<S: AsRef<str>>(mut self, names: &[S]) -> Self {
        self.headers
            .extend(names.iter().map(|n| n.as_ref().trim().to_ascii_lowercase()));
        self
    }

    /// Adds query (and form) parameter names whose values are secrets (`--redact-query`).
    pub fn with_query<S: AsRef<str>>(mut self, names: &[S]) -> Self {
        self.query
            .extend(names.iter().map(|n| n.as_ref().trim().to_ascii_lowercase()));
        self
    }

    /// Adds JSON keys whose values are secrets wherever they appear (`--redact-json`).
    pub fn with_json_keys<S: AsRef<str>>(mut self, keys: &[S]) -> Self {
        self.json_keys
            .extend(names_as_json_keys(keys.iter().map(AsRef::as_ref)));
        self.json_initials |= letter_bits(self.json_keys.iter().map(String::as_str), <[u8]>::first);
        self.json_finals |= letter_bits(self.json_keys.iter().map(String::as_str), <[u8]>::last);
        self
    }

    /// Whether a header's value is a secret.
    pub fn is_secret_header(&self, name: &str) -> bool {
        // Names from a header map are lower case already: no copy for them.
        let lowered;
        let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
            lowered = name.to_ascii_lowercase();
            lowered.as_str()
        } else {
            name
        };
        if PUBLIC_HEADERS.contains(&name) {
            return false;
        }
        SECRET_HEADERS.contains(&name)
            || has_secret_part(name)
            || self.headers.iter().any(|h| h == name)
    }

    /// Whether a query or form parameter's value is a secret.
    pub fn is_secret_param(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        if PUBLIC_PARAMS.contains(&name.as_str()) && !self.query.contains(&name) {
            return false;
        }
        SECRET_PARAMS.contains(&name.as_str())
            || has_secret_part(&name)
            || self.query.contains(&name)
            || self.is_secret_json_key(&name)
    }

    /// Whether a JSON key's value is a secret.
    pub fn is_secret_json_key(&self, key: &str) -> bool {
        // A key whose first letter (past `_` and `-`) begins no secret key is none, nor one whose
        // last letter ends none: most keys are told apart here. A key beginning or ending
        // otherwise than in ASCII is normalized.
        let letters = || key.as_bytes().iter().filter(|b| **b != b'_' && **b != b'-');
        if ruled_out(letters().next(), self.json_initials)
            || ruled_out(letters().next_back(), self.json_finals)
        {
            return false;
        }
        // Most keys are short ASCII: normalized on the stack, without an allocation per key.
        const SHORT: usize = 48;
        if key.len() <= SHORT && key.is_ascii() {
            let mut buf = [0u8; SHORT];
            let mut n = 0;
            for b in key.bytes() {
                if b != b'_' && b != b'-' {
                    buf[n] = b.to_ascii_lowercase();
                    n += 1;
                }
            }
            return self.is_secret_normal_key(&buf[..n]);
        }
        self.is_secret_normal_key(json_key(key).as_bytes())
    }

    /// Whether a key already normalized ([`json_key`]) names a secret. Compared as bytes:
    /// lengths first, so most keys are told apart without reading them.
    fn is_secret_normal_key(&self, normal: &[u8]) -> bool {
        SECRET_JSON_KEYS.iter().any(|k| k.as_bytes() == normal)
            || self.json_keys.iter().any(|k| k.as_bytes() == normal)
    }

    /// A header value as it may be shown: the whole value hidden if the name is a secret's.
    pub fn header_value<'a>(&self, name: &str, value: &'a str) -> Cow<'a, str> {
        if self.enabled && self.is_secret_header(name) && value != REDACTED {
            Cow::Borrowed(REDACTED)
        } else {
            Cow::Borrowed(value)
        }
    }

    /// Redacts secret header values in place.
    pub fn headers(&self, headers: &mut [Header]) {
        if !self.enabled {
            return;
        }
        for (name, value) in headers.iter_mut() {
            if self.is_secret_header(name) && value != REDACTED {
                *value = REDACTED.to_string();
            }
        }
    }

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
    fn params<'a>(&self, text: &'a str, sep: char) -> Cow<'a, str> {
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

    /// Redacts secret values in a JSON value, wherever their keys appear; returns whether it
    /// changed anything.
    pub fn json(&self, value: &mut Value) -> bool {
        if !self.enabled {
            return false;
        }
        match value {
            Value::Object(map) => {
                let mut changed = false;
                for (key, item) in map.iter_mut() {
                    if self.is_secret_json_key(key) {
                        if item.as_str() != Some(REDACTED) {
                            *item = Value::String(REDACTED.to_string());
                            changed = true;
                        }
                    } else {
                        changed |= self.json(item);
                    }
                }
                changed
            }
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, item| self.json(item) | changed),
            _ => false,
        }
    }

    /// Redacts a text that may hold JSON or an `application/x-www-form-urlencoded` body
    /// (an OAuth token request); returns the redacted text when anything changed.
    pub fn text(&self, text: &str) -> Option<String> {
        if !self.enabled || text.is_empty() {
            return None;
        }
        let trimmed = text.trim_start();
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            if !self.may_hold_secret_key(text) {
                return None;
            }
            return match serde_json::from_str::<Value>(text) {
                Ok(mut value) => self.json(&mut value).then(|| value.to_string()),
                // Text that does not parse (a brace missing, a cut body) still loses the values
                // of its secret keys.
                Err(_) => self.raw_json_keys(text),
            };
        }
        if text.contains('=')
            && !text.contains(char::is_whitespace)
            && let Cow::Owned(form) = self.params(text, '&')
        {
            return Some(form);
        }
        None
    }

    /// A cheap check before parsing: whether `text` has a key that is a secret's. It reads
    /// the text's strings as JSON does: a string followed by `:` is a key. A key with an
    /// escape in it (which parsing would decode) or a string that does not end counts as one
    /// that may be, so the text is then parsed (or, not parsing, read raw) as before.
    fn may_hold_secret_key(&self, text: &str) -> bool {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'"' {
                i += 1;
                continue;
            }
            let Some(end) = string_end(bytes, i) else {
                return true;
            };
            let mut j = end;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            if bytes.get(j) == Some(&b':') {
                let key = &text[i + 1..end - 1];
                if key.contains('\\') || self.is_secret_json_key(key) {
                    return true;
                }
            }
            i = end;
        }
        false
    }

    /// Redacts every secret an event carries, in place: headers, the path's query, the
    /// upstream URL, JSON bodies (messages and SSE data) and raw texts (invalid messages, form
    /// bodies); then scrubs the known secret values from every text it holds.
    pub fn event(&self, kind: &mut EventKind) {
        self.by_name(kind);
        if self.enabled && !self.values.is_empty() {
            self.scrub_event(kind);
        }
    }

    /// Scrubs the known secret values from every text an event holds.
    fn scrub_event(&self, kind: &mut EventKind) {
        match kind {
            EventKind::ProxyStarted { upstream, .. } => self.scrub_in_place(upstream),
            EventKind::StreamOpened { path, headers, .. } => {
                self.scrub_in_place(path);
                headers.iter_mut().for_each(|(_, v)| self.scrub_in_place(v));
            }
            EventKind::ResponseHead { headers, .. } => {
                headers.iter_mut().for_each(|(_, v)| self.scrub_in_place(v));
            }
            EventKind::Message { body, .. } => self.scrub_json(body),
            EventKind::SseEvent { data, id, .. } => {
                if let Some(scrubbed) = self.scrub(data) {
                    *data = scrubbed.into();
                }
                if let Some(id) = id {
                    self.scrub_in_place(id);
                }
            }
            EventKind::InvalidMessage { raw, reason, .. } => {
                self.scrub_in_place(raw);
                self.scrub_in_place(reason);
            }
            EventKind::StreamEnded {
                detail: Some(detail),
                ..
            } => self.scrub_in_place(detail),
            EventKind::UpstreamUnreachable { error, .. } => self.scrub_in_place(error),
            EventKind::CallRescued { message, .. } => self.scrub_in_place(message),
            EventKind::Note { text, .. } => self.scrub_in_place(text),
            EventKind::Rewritten { from, to, .. } => {
                self.scrub_in_place(from);
                self.scrub_in_place(to);
            }
            EventKind::ProcessStarted { command, .. } => {
                command.iter_mut().for_each(|a| self.scrub_in_place(a));
            }
            EventKind::StderrLine { line, .. } => self.scrub_in_place(line),
            _ => {}
        }
    }

    /// The redaction by name: secret headers, parameters and JSON keys.
    fn by_name(&self, kind: &mut EventKind) {
        match kind {
            EventKind::ProxyStarted { upstream, .. } => *upstream = self.url(upstream),
            _ if !self.enabled => {}
            EventKind::StreamOpened { path, headers, .. } => {
                if let Cow::Owned(p) = self.path(path) {
                    *path = p;
                }
                self.headers(headers);
            }
            EventKind::ResponseHead { headers, .. } => self.headers(headers),
            EventKind::Message { body, .. } => {
                self.json(body);
            }
            // The legacy transport's `endpoint` is a URL, redacted as the paths posted to it are.
            EventKind::SseEvent { data, event, .. } if event.as_deref() == Some("endpoint") => {
                *data = self.url(data).into();
            }
            EventKind::SseEvent { data, .. } => {
                if let Some(redacted) = self.text(data) {
                    *data = redacted.into();
                }
            }
            EventKind::InvalidMessage { raw, .. } => {
                if let Some(redacted) = self.text(raw) {
                    *raw = redacted;
                }
            }
            EventKind::Rewritten { from, to, .. } => {
                *from = self.url(from);
                *to = self.url(to);
            }
            EventKind::ProcessStarted { command, .. } => self.command(command),
            EventKind::StderrLine { line, .. } => {
                if let Some(redacted) = self.log_line(line) {
                    *line = redacted;
                }
            }
            _ => {}
        }
    }

    /// Redacts a server's log line (a stdio server's stderr): a JSON line as a body; a line
    /// `Name: value` whose name is a secret header's, the whole value; a `Bearer`/`Basic`
    /// credential; `name=value` words whose name is a secret's; the secrets of URLs. Returns the
    /// redacted line when anything changed.
    pub fn log_line(&self, line: &str) -> Option<String> {
        if !self.enabled || line.is_empty() {
            return None;
        }
        if let Some(redacted) = self.text(line) {
            return Some(redacted);
        }
        if let Some((name, value)) = line.split_once(':')
            && !name.trim().is_empty()
            && !name.trim().contains(char::is_whitespace)
            && !value.trim().is_empty()
            && !value.starts_with("//")
            && self.is_secret_header(name.trim())
        {
            return Some(format!("{name}: {REDACTED}"));
        }
        let mut changed = false;
        let mut credential_next = false;
        let words: Vec<String> = line
            .split(' ')
            .map(|word| {
                if std::mem::take(&mut credential_next) && !word.is_empty() {
                    changed = true;
                    return REDACTED.to_string();
                }
                if word.eq_ignore_ascii_case("bearer") || word.eq_ignore_ascii_case("basic") {
                    credential_next = true;
                    return word.to_string();
                }
                let redacted = if word.contains("://") {
                    self.url(word)
                } else if word.contains('=') {
                    self.params(word, '&').into_owned()
                } else {
                    return word.to_string();
                };
                changed |= redacted != word;
                redacted
            })
            .collect();
        changed.then(|| words.join(" "))
    }

    /// Redacts a command line in place: the value of an option named like a secret
    /// (`--api-key=…`, `--token …`) and the secrets of a URL argument.
    pub fn command(&self, args: &mut [String]) {
        if !self.enabled {
            return;
        }
        let option_name = |arg: &str| -> Option<String> {
            let name = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
            Some(name.split('=').next().unwrap_or(name).to_string())
        };
        let mut secret_next = false;
        for arg in args.iter_mut() {
            if std::mem::take(&mut secret_next) && !arg.starts_with('-') {
                *arg = REDACTED.to_string();
                continue;
            }
            if option_name(arg).is_some_and(|n| self.is_secret_param(&n)) {
                match arg.split_once('=') {
                    Some((option, _)) => *arg = format!("{option}={REDACTED}"),
                    None => secret_next = true,
                }
            } else if arg.contains("://") {
                *arg = self.url(arg);
            }
        }
    }
}

impl Redactor {
    /// Redacts the values of secret keys in text that looks like JSON but does not parse:
    /// `"password": "…"` (any scalar, object or array, up to where it ends or the text does)
    /// becomes `"password": "[redacted]"`. Returns the text when anything changed.
    fn raw_json_keys(&self, text: &str) -> Option<String> {
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut changed = false;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'"' {
                i += 1;
                continue;
            }
            let key_end = string_end(bytes, i);
            let Some(key_end) = key_end else { break };
            let key = &text[i + 1..key_end - 1];
            let mut j = key_end;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            if j >= bytes.len() || bytes[j] != b':' || !self.is_secret_json_key(key) {
                i = key_end;
                continue;
            }
            j += 1;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            let value_end = value_end(bytes, j);
            if &text[j..value_end] != "\"[redacted]\"" && value_end > j {
                out.push_str(&text[copied..j]);
                out.push('"');
                out.push_str(REDACTED);
                out.push('"');
                copied = value_end;
                changed = true;
            }
            i = value_end.max(j);
        }
        if !changed {
            return None;
        }
        out.push_str(&text[copied..]);
        Some(out)
    }
}

/// The end (one past the closing quote) of the JSON string starting at `start`, if it closes.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The end of the JSON value starting at `start`: a string, an object or array up to its
/// matching bracket, or a scalar up to a delimiter; the text's end when it does not close.
fn value_end(bytes: &[u8], start: usize) -> usize {
    match bytes.get(start) {
        None => start,
        Some(b'"') => string_end(bytes, start).unwrap_or(bytes.len()),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = start;
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        i = string_end(bytes, i).unwrap_or(bytes.len());
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            bytes.len()
        }
        Some(_) => {
            let mut i = start;
            while i < bytes.len() && !matches!(bytes[i], b',' | b'}' | b']' | b'\n' | b'\r') {
                i += 1;
            }
            while i > start && bytes[i - 1].is_ascii_whitespace() {
                i -= 1;
            }
            i
        }
    }
}

fn names_as_json_keys<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    names.map(json_key).collect()
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
    #[test]
    fn a_secret_part_is_found_wherever_it_is_in_a_name() {
        let names = [
            "x-api-key",
            "x-auth-token",
            "keyboard",
            "monkey",
            "sessionid",
            "passwords",
            "x-credential",
            "content-type",
            "accept",
            "mcp-protocol-version",
            "",
            "k",
            "ke",
            "secre",
            "x-secret",
            "authority",
            "tok",
            "tokens",
            "x-amz-security-token",
            "host",
        ];
        for name in names {
            let by_substring = super::SECRET_NAME_PARTS
                .iter()
                .any(|part| name.contains(part));
            assert_eq!(super::has_secret_part(name), by_substring, "{name}");
        }
    }

    #[test]
    fn a_servers_log_lines_lose_their_secrets() {
        let r = super::Redactor::new();
        let hidden = |line: &str| r.log_line(line).unwrap_or_else(|| line.to_string());
        assert_eq!(
            hidden("Authorization: Bearer abc.def"),
            "Authorization: [redacted]"
        );
        assert_eq!(
            hidden("calling upstream with Bearer abc.def now"),
            "calling upstream with Bearer [redacted] now"
        );
        assert_eq!(
            hidden("GET /v1?api_key=s3cret&page=2 200"),
            "GET /v1?api_key=[redacted]&page=2 200"
        );
        assert!(!hidden("connecting to https://user:pw@db.example/x").contains("pw"));
        assert!(!hidden(r#"{"level":"info","access_token":"s3cr3t"}"#).contains("s3cr3t"));
        assert_eq!(r.log_line("listening on port 8080"), None);
        assert_eq!(r.log_line("note: nothing secret here"), None);
        assert_eq!(
            Redactor::disabled().log_line("Authorization: Bearer x"),
            None
        );
    }

    #[test]
    fn command_lines_lose_their_secrets() {
        let mut args: Vec<String> = [
            "npx",
            "my-server",
            "--api-key=abc",
            "--token",
            "xyz",
            "--port",
            "8080",
            "https://user:pw@example.com/mcp",
        ]
        .map(String::from)
        .to_vec();
        super::Redactor::new().command(&mut args);
        assert_eq!(args[..3], ["npx", "my-server", "--api-key=[redacted]"]);
        assert_eq!(args[3..7], ["--token", "[redacted]", "--port", "8080"]);
        assert!(!args[7].contains("pw"), "{}", args[7]);
    }

    use serde_json::json;

    use super::*;

    #[test]
    fn whole_header_values_are_hidden() {
        let r = Redactor::new();
        let mut headers: Vec<Header> = [
            ("Authorization", "sk-LEAK extra"),
            ("Cookie", "SECRET; theme=dark"),
            ("X-Api-Key", "k1"),
            ("X-Upstream-Token", "t1"),
            ("Mcp-Session-Id", "s1"),
            ("Content-Type", "application/json"),
            ("X-Custom", "c1"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        r.clone().with_headers(&["x-custom"]).headers(&mut headers);
        let values: Vec<&str> = headers.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(
            values,
            [
                REDACTED,
                REDACTED,
                REDACTED,
                REDACTED,
                "s1",
                "application/json",
                REDACTED
            ]
        );
        let mut kept = headers.clone();
        Redactor::disabled().headers(&mut kept);
        assert_eq!(kept, headers);
    }

    #[test]
    fn an_sse_event_and_its_message_are_redacted_together_as_each_alone() {
        let sse = |data: &str| crate::fixtures::sse_data(1, data);
        let plain =
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}"#;
        let keyed = r#"{"jsonrpc":"2.0","id":1,"result":{"access_token":"LEAK","x":1}}"#;
        let valued = r#"{"jsonrpc":"2.0","id":1,"result":{"text":"p4ss-w0rd here"}}"#;
        let redactors = [
            Redactor::new(),
            Redactor::disabled(),
            Redactor::new().with_url_secrets("http://u:p4ss-w0rd@127.0.0.1:1/mcp"),
        ];
        for redactor in redactors {
            for data in [plain, keyed, valued] {
                let message = crate::wire::observe::message(
                    1,
                    crate::event::Direction::ServerToClient,
                    data.as_bytes(),
                );
                let (mut alone_sse, mut alone_message) = (sse(data), message.clone());
                let mut each = redactor.clone();
                each.observe(&mut alone_sse);
                each.observe(&mut alone_message);
                let (mut both_sse, mut both_message) = (sse(data), message);
                let mut together = redactor.clone();
                let unchanged = together.observe_sse_message(&mut both_sse, &mut both_message);
                assert_eq!(
                    (&both_sse, &both_message),
                    (&alone_sse, &alone_message),
                    "{data}"
                );
                if unchanged {
                    let EventKind::SseEvent { data: left, .. } = &both_sse else {
                        unreachable!()
                    };
                    let parsed = crate::wire::observe::message(
                        1,
                        crate::event::Direction::ServerToClient,
                        left.as_bytes(),
                    );
                    assert_eq!((&**left, &parsed), (data, &both_message));
                }
            }
        }
    }

    #[test]
    fn a_legacy_endpoint_is_redacted_as_the_path_posted_to_it() {
        let r = Redactor::new();
        let url = "/messages/?session_id=ab12&api_key=K";
        let mut event = EventKind::SseEvent {
            stream: 1,
            id: None,
            event: Some("endpoint".into()),
            retry: None,
            data: url.into(),
            start: 0,
            end: 0,
        };
        r.event(&mut event);
        let EventKind::SseEvent { data, .. } = event else {
            unreachable!()
        };
        assert_eq!(&*data, "/messages/?session_id=ab12&api_key=[redacted]");
        assert_eq!(&*data, r.path(url));
    }

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

    #[test]
    fn a_key_is_told_by_its_normalized_name_whatever_its_first_letter() {
        let plain = Redactor::new();
        for secret in [
            "password",
            "_Password",
            "--api-key",
            "Client_Secret",
            "ACCESS-TOKEN",
            "token",
        ] {
            assert!(plain.is_secret_json_key(secret), "{secret}");
        }
        for other in [
            "jsonrpc",
            "method",
            "params",
            "progressToken",
            "_",
            "",
            "tokens",
            "Ä",
        ] {
            assert!(!plain.is_secret_json_key(other), "{other}");
        }
        let added = Redactor::new().with_json_keys(&["x-session", "Ärger", "__"]);
        for secret in ["xsession", "X_Session", "ärger", "_ÄRGER", "-", "_"] {
            assert!(added.is_secret_json_key(secret), "{secret}");
        }
        assert!(!added.is_secret_json_key("yession"));
        let mut value = serde_json::json!({"jsonrpc": "2.0", "params": {"_Password": "p", "X-Session": "s", "method": "m"}});
        assert!(added.json(&mut value));
        assert_eq!(value["params"]["_Password"], REDACTED);
        assert_eq!(value["params"]["X-Session"], REDACTED);
        assert_eq!(value["params"]["method"], "m");
    }

    /// The letters checked first (the first and the last) never change a verdict: over keys
    /// made of every secret key and ordinary ones, cased, padded with `_` and `-`, cut and
    /// ended in other scripts, the check says what comparing the whole normalized key says.
    #[test]
    fn a_keys_first_and_last_letters_decide_only_what_its_whole_name_would() {
        let redactors = [
            Redactor::new(),
            Redactor::new().with_json_keys(&["x-session", "Ärger", "__", "sessionÄ", "a"]),
        ];
        let mut stems: Vec<String> = SECRET_JSON_KEYS.iter().map(|k| k.to_string()).collect();
        stems.extend(
            [
                "jsonrpc",
                "method",
                "params",
                "progressToken",
                "progress",
                "message",
                "id",
                "result",
                "content",
                "type",
                "text",
                "isError",
                "tokens",
                "xsession",
                "ärger",
                "sessionä",
                "sessionÄ",
                "a",
                "",
                "Ä",
                "keyÄ",
                "Äkey",
            ]
            .map(String::from),
        );
        // The byte offset of the middle letter.
        let middle = |form: &str| {
            let half = form.chars().count() / 2;
            form.char_indices().nth(half).map_or(form.len(), |(i, _)| i)
        };
        let mut checked = 0;
        for stem in &stems {
            let cut = stem.char_indices().map(|(i, _)| &stem[..i]).skip(1);
            let tail = stem.char_indices().map(|(i, _)| &stem[i..]).skip(1);
            let forms: Vec<String> = [stem.clone(), stem.to_uppercase()]
                .into_iter()
                .chain(cut.chain(tail).map(String::from))
                .flat_map(|form| {
                    [
                        form.clone(),
                        format!("_{form}"),
                        format!("{form}_"),
                        format!("-{form}-"),
                        format!("{}_{}", &form[..middle(&form)], &form[middle(&form)..]),
                        format!("{form}é"),
                    ]
                })
                .collect();
            for form in forms {
                for redactor in &redactors {
                    let whole = redactor.is_secret_normal_key(json_key(&form).as_bytes());
                    assert_eq!(redactor.is_secret_json_key(&form), whole, "{form:?}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 2_000, "{checked}");
    }

    #[test]
    fn json_keys_anywhere_and_oauth_forms() {
        let r = Redactor::new();
        let mut body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
            "name":"fetch","arguments":{"apiKey":"LEAK","nested":[{"password":"P"}],"q":"x"},
            "_meta":{"progressToken":7}}});
        assert!(r.json(&mut body));
        let text = body.to_string();
        assert!(!text.contains("LEAK") && !text.contains("\"P\""), "{text}");
        assert!(text.contains("\"progressToken\":7"), "{text}");
        let mut error = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}});
        assert!(!r.json(&mut error));
        let token =
            r#"{"access_token":"AT","refresh_token":"RT","id_token":"IT","token_type":"Bearer"}"#;
        let redacted = r.text(token).expect("a token response");
        assert!(!redacted.contains("AT\"") && !redacted.contains("RT") && !redacted.contains("IT"));
        assert!(redacted.contains("Bearer"));
        let form = "grant_type=authorization_code&code=C0DE&code_verifier=V&client_secret=S&redirect_uri=http%3A%2F%2Flocalhost";
        let redacted = r.text(form).expect("a form body");
        assert_eq!(
            redacted,
            "grant_type=authorization_code&code=[redacted]&code_verifier=[redacted]&client_secret=[redacted]&redirect_uri=http%3A%2F%2Flocalhost"
        );
        assert_eq!(r.text("plain words, nothing = here"), None);
        let custom = r.clone().with_json_keys(&["ssn"]);
        let mut v = json!({"SSN":"123"});
        assert!(custom.json(&mut v));
        assert_eq!(v, json!({"SSN": REDACTED}));
    }
}

#[cfg(test)]
mod known_values {
    use super::*;

    #[test]
    fn a_urls_password_and_secret_header_values_are_scrubbed_wherever_they_reappear() {
        let mut r = Redactor::new().with_url_secrets("http://alice:Pa%24%24word9@127.0.0.1:1/mcp");
        let mut head = EventKind::StreamOpened {
            stream: 1,
            conn: 1,
            method: "POST".into(),
            path: "/mcp".into(),
            headers: vec![("Authorization".into(), "Bearer tok-123456789".into())],
            origin: None,
        };
        r.observe(&mut head);
        let mut answer = EventKind::InvalidMessage {
            stream: 1,
            dir: crate::event::Direction::ServerToClient,
            reason: "r".into(),
            raw: "Host alice:Pa$$word9@127.0.0.1 refused, token tok-123456789".into(),
        };
        r.observe(&mut answer);
        let EventKind::InvalidMessage { raw, .. } = answer else {
            unreachable!()
        };
        assert_eq!(raw, "Host [redacted]@127.0.0.1 refused, token [redacted]");
        // Short values would match ordinary words: not learnt.
        r.learn("abc");
        assert_eq!(r.scrub("abc"), None);
    }

    #[test]
    fn secret_keys_in_text_that_does_not_parse() {
        let r = Redactor::new();
        let text = r#"{"params":{"arguments":{"password":"P\"W","access_token":12345, "q":"x", "apiKey":{"a":[1,"}"]}}"#;
        let redacted = r.text(text).expect("redacted");
        assert_eq!(
            redacted,
            r#"{"params":{"arguments":{"password":"[redacted]","access_token":"[redacted]", "q":"x", "apiKey":"[redacted]"}"#
        );
        assert_eq!(r.text(&redacted), None);
        assert_eq!(r.text(r#"{"password":"#), None);
    }

    /// Only a key that is a secret's (whole, as parsing would read it) makes a text parsed:
    /// a key that merely contains one (`progressToken`), or a value that mentions one, does not.
    #[test]
    fn the_check_before_parsing_reads_keys_as_json_does() {
        let r = Redactor::new().with_json_keys(&["session-ticket"]);
        // (text, what it becomes; None: unchanged)
        let table: &[(&str, Option<&str>)] = &[
            (
                r#"{"method":"notifications/progress","params":{"progressToken":"t","progress":1}}"#,
                None,
            ),
            (r#"{"note":"token: abc","text":"password\":1"}"#, None),
            (
                r#"{"a" : {"Access_Token" : "x"}}"#,
                Some(r#"{"a":{"Access_Token":"[redacted]"}}"#),
            ),
            (r#"{"\u0074oken":"x"}"#, Some(r#"{"token":"[redacted]"}"#)),
            (
                r#"[{"sessionTicket":"x"}]"#,
                Some(r#"[{"sessionTicket":"[redacted]"}]"#),
            ),
            (
                r#"{"clientSecret":"s","#,
                Some(r#"{"clientSecret":"[redacted]","#),
            ),
            (r#"{"a":"never ends"#, None),
            (r#"{"k":"\"token\":1"}"#, None),
        ];
        for &(text, want) in table {
            assert_eq!(r.text(text).as_deref(), want, "{text}");
        }
        let long = format!(r#"{{"{}":"v","token":"t"}}"#, "k".repeat(100));
        assert!(
            r.text(&long).is_some_and(|t| !t.contains(r#""t""#)),
            "{long}"
        );
        let unicode = r#"{"clé":"v","pässword":"x"}"#;
        assert_eq!(r.text(unicode), None);
    }
}
