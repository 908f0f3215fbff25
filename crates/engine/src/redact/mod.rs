//! What counts as a secret, and how it is hidden: the one policy applied to every event before
//! it is recorded, shown or printed. Values are replaced whole (never a partial value).
//!
//! The policy, the secret values it learns and what it does to each kind of event are here;
//! how it reads URLs and parameters is in `url`, JSON bodies and texts in `json`, a stdio
//! server's command line and log lines in `process`.

mod json;
mod process;
mod url;

pub use url::UrlCredentials;

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
}

fn names_as_json_keys<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    names.map(json_key).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
