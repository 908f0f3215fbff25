//! A JSON-RPC request and what became of it.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::verdict::{Death, Verdict};
use super::{Body, Name};
use crate::event::{Direction, StreamId};

/// What the client did after a call was orphaned or left resumable.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reaction {
    /// How many times the client re-sent it after seeing it fail.
    pub retries: u32,
    /// The client sent `notifications/cancelled` for it.
    pub cancelled: bool,
    /// The client sent a new `initialize`.
    pub reinitialized: bool,
    /// The client opened a new GET stream in the session.
    pub new_get: bool,
    /// How many times the client tried to resume it (GET with `Last-Event-ID`).
    pub resume_attempts: u32,
}

impl Reaction {
    /// A short summary: `silent`, `resume tried ×3`, `retried ×2`, `cancelled`,
    /// `re-initialized`, `new GET`, joined by `, `.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.resume_attempts > 0 {
            parts.push(format!("resume tried ×{}", self.resume_attempts));
        }
        if self.retries > 0 {
            parts.push(format!("retried ×{}", self.retries));
        }
        if self.cancelled {
            parts.push("cancelled".to_string());
        }
        if self.reinitialized {
            parts.push("re-initialized".to_string());
        }
        if self.new_get {
            parts.push("new GET".to_string());
        }
        if parts.is_empty() {
            "silent".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// One request (client → server, or server → client) and its fate.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Call {
    /// Index of this call in [`crate::model::Model::calls`].
    pub index: usize,
    /// Index of its session in [`crate::model::Model::sessions`].
    pub session: usize,
    /// Who sent the request.
    pub dir: Direction,
    /// The JSON-RPC id, as JSON text (read it with [`Body::value`]).
    pub id: Body,
    /// The method.
    pub method: Name,
    /// The tool name, for `tools/call`.
    pub tool: Option<Name>,
    /// The request message, shared with its [`super::MessageRec`] (read its params with
    /// [`Call::params`]); an empty object once the call is a compact row.
    pub request: Body,
    /// When the request was seen.
    pub started_at: DateTime<Utc>,
    /// The stream the request arrived on (its POST, or the SSE stream of a server request).
    pub request_stream: StreamId,
    /// The stream that owns the response now (the POST, or a resumption GET).
    pub owner: StreamId,
    /// Whether it came in a batch.
    pub batch: bool,
    /// The protocol revision in force for it, if known.
    pub revision: Option<Name>,
    /// Its fate so far.
    pub verdict: Verdict,
    /// When the verdict stopped being pending.
    pub ended_at: Option<DateTime<Utc>>,
    /// The response message, shared with its [`super::MessageRec`], when it arrived (read its
    /// result or error with [`Call::response`]).
    pub reply: Option<Body>,
    /// Whether it was answered with a tool's error (a result with `isError: true`).
    pub tool_error: bool,
    /// Progress and other notifications seen on its stream (counted).
    pub progress: Progress,
    /// What the client did after it was orphaned.
    pub reaction: Reaction,
    /// Which arrival of the same method and params this is (1 for the first).
    pub arrival: u32,
    /// The earlier unanswered call this one repeats, if it is a retry.
    pub retry_of: Option<usize>,
    /// Whether the call was hit by an injected fault.
    pub injected: bool,
    /// Whether its result asked the client for input (2026-07-28 `InputRequiredResult`): the
    /// logical call goes on in a later round.
    pub input_required: bool,
    /// Event sequence numbers (0-based, in recording order) of its request stream's opening
    /// and of the last event that changed its fate: its detail lies between them.
    pub seq: (u64, u64),
    /// Set when the retention policy collapsed it to a compact row (params, response and
    /// progress dropped); holds [`Call::seq`] to find the detail in the recording.
    pub evicted: Option<(u64, u64)>,
    /// What few calls have (read with [`Call::continues`], [`Call::rescued`],
    /// [`Call::first_death`], [`Call::superseded_by`]); none for most.
    pub aside: Option<Box<Aside>>,
    /// The key it is listed under among possible retries, kept from its start so that
    /// compacting it does not parse its params again.
    pub(crate) retry_key: KnownKey,
}

/// A value worked out once and kept only to save working it out again: not saved with the
/// model (one read back works it out when needed) and not part of what makes two calls equal.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct KnownKey(#[serde(skip)] Option<Box<str>>);

impl KnownKey {
    /// A key worked out.
    pub(crate) fn known(key: &str) -> Self {
        Self(Some(key.into()))
    }

    /// The key, if it was kept; it is not kept after this.
    pub(crate) fn take(&mut self) -> Option<String> {
        self.0.take().map(String::from)
    }
}

impl PartialEq for KnownKey {
    /// Always: a cache says nothing about the call.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// What few calls have, kept apart so that the others cost less.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Aside {
    /// The earlier round of the same logical call that this request continues (MRTR), if any.
    pub continues: Option<usize>,
    /// The error the proxy answered the client with when its stream died (`--rescue`), if it
    /// did; the verdict stays what the upstream did.
    pub rescued: Option<String>,
    /// The death of the stream that carried it before a resumption took it over (its POST's),
    /// kept while the resumption is tried.
    pub first_death: Option<Death>,
    /// The call the client fell back to after this probe (`server/discover`) failed
    /// (`initialize`): a normal handshake step, not a failure.
    pub superseded_by: Option<usize>,
    /// The task this request created (a task operation), if any.
    pub task: Option<Box<super::task::Task>>,
    /// The task operation this request is about (`tasks/get`, `tasks/result`, `tasks/cancel`).
    pub about_task: Option<usize>,
    /// The later round of the same logical call that continues this one (MRTR), if any.
    pub continued_by: Option<usize>,
}

impl Call {
    /// The earlier round of the same logical call that this request continues (MRTR), if any.
    pub fn continues(&self) -> Option<usize> {
        self.aside.as_ref()?.continues
    }

    /// The error the proxy answered the client with when its stream died (`--rescue`).
    pub fn rescued(&self) -> Option<&str> {
        self.aside.as_ref()?.rescued.as_deref()
    }

    /// The death of the stream that carried it before a resumption took it over.
    pub fn first_death(&self) -> Option<Death> {
        self.aside.as_ref()?.first_death
    }

    /// The later round of the same logical call that continues this one (MRTR), if any.
    pub fn continued_by(&self) -> Option<usize> {
        self.aside.as_ref()?.continued_by
    }

    /// The call the client fell back to after this failed probe.
    pub fn superseded_by(&self) -> Option<usize> {
        self.aside.as_ref()?.superseded_by
    }

    /// Its rare facts, for writing (made on first use).
    pub fn aside_mut(&mut self) -> &mut Aside {
        self.aside.get_or_insert_with(Box::default)
    }

    /// Which round of its logical call this request is (1 for the first).
    pub fn round(&self, calls: &super::Store<Call>) -> u32 {
        let mut round = 1;
        let mut at = self.continues();
        while let Some(prev) = at {
            round += 1;
            at = calls.get(prev).and_then(Call::continues);
        }
        round
    }
}

/// The notifications seen for a call while it ran: counted, not listed, so a call that streams
/// a million progress notifications costs no more than one that streams none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    /// How many.
    pub count: u64,
    /// When the last one arrived.
    pub last: Option<DateTime<Utc>>,
}

impl Call {
    /// The request's params, parsed (`null` when it had none, or once the call is a compact
    /// row).
    pub fn params(&self) -> Value {
        self.request.member("params").unwrap_or(Value::Null)
    }

    /// The request's `params._meta.progressToken`, read from its text without parsing the
    /// rest into values (a progress flood asks once per notification).
    pub fn progress_token(&self) -> Option<Value> {
        progress_token_of(self.request.text())
    }

    /// The response's result or error object, parsed, when it arrived (and the call is not
    /// compact).
    pub fn response(&self) -> Option<Value> {
        let Value::Object(mut reply) = self.reply.as_ref()?.value() else {
            return None;
        };
        reply
            .swap_remove("result")
            .or_else(|| reply.swap_remove("error"))
    }

    /// Whether it was answered with a tool's error (a result with `isError: true`).
    pub fn is_tool_error(&self) -> bool {
        self.verdict == Verdict::Answered && self.tool_error
    }

    /// The id as text (`7`, `"abc"`).
    pub fn id_text(&self) -> String {
        crate::wire::jsonrpc::id_text(&self.id.value())
    }

    /// `tools/call poke`, or the method alone.
    pub fn title(&self) -> String {
        match &self.tool {
            Some(tool) => format!("{} {tool}", self.method),
            None => self.method.to_string(),
        }
    }

    /// Milliseconds from the request to `now` (or to the end, if it ended).
    pub fn elapsed_ms(&self, now: DateTime<Utc>) -> i64 {
        (self.ended_at.unwrap_or(now) - self.started_at).num_milliseconds()
    }
}

/// `params._meta.progressToken` of a message's JSON text, as the parsed message has it, without
/// building the rest of it.
fn progress_token_of(text: &str) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct Request {
        params: Option<Params>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "_meta")]
        meta: Option<Meta>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        // Present even when `null`, as in the parsed message.
        #[serde(rename = "progressToken", default, deserialize_with = "present")]
        token: Option<Value>,
    }
    fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        <Value as serde::Deserialize>::deserialize(d).map(Some)
    }
    match serde_json::from_str::<Request>(text) {
        Ok(request) => request.params?.meta?.token,
        // Not of that shape (params not an object, a key given twice): read it whole.
        Err(_) => serde_json::from_str::<Value>(text)
            .ok()?
            .pointer("/params/_meta/progressToken")
            .cloned(),
    }
}

/// The key that tells a call's retries: its method and canonical params (without `_meta` and
/// a retry's own input fields).
pub(crate) fn retry_key(method: &str, params: &Value) -> String {
    let params = crate::wire::jsonrpc::canonical_without(
        params,
        &["_meta", "inputResponses", "requestState"],
    );
    format!("{method} {params}")
}

/// Whether a result is a tool's error (`isError: true`).
pub(crate) fn is_tool_error(result: &Value) -> bool {
    result.get("isError").and_then(Value::as_bool) == Some(true)
}

#[cfg(test)]
mod tests {
    use super::progress_token_of;
    use serde_json::Value;

    #[test]
    fn the_progress_token_read_from_text_is_the_parsed_messages() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"t"}}}"#,
            r#"{"id":1,"params":{"_meta":{"progressToken":7,"other":[1,2]},"arguments":{"a":{"b":1}}}}"#,
            r#"{"id":1,"params":{"_meta":{"progressToken":null}}}"#,
            r#"{"id":1,"params":{"_meta":{"progressToken":"a"},"_meta":{"progressToken":"b"}}}"#,
            r#"{"id":1,"params":{"_meta":{}}}"#,
            r#"{"id":1,"params":{"_meta":null}}"#,
            r#"{"id":1,"params":{"_meta":"text"}}"#,
            r#"{"id":1,"params":[1,2]}"#,
            r#"{"id":1,"params":null}"#,
            r#"{"id":1}"#,
            r#""not an object""#,
        ] {
            let parsed: Value = serde_json::from_str(text).expect("JSON");
            assert_eq!(
                progress_token_of(text),
                parsed.pointer("/params/_meta/progressToken").cloned(),
                "{text}"
            );
        }
    }
}
