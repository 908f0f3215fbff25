//! Notable changes reported by the fold: the lines of the headless view.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::event::{EndHow, Leg, StreamId};

/// One notable change, serialized as one JSON object with `kind` and `t`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notice {
    /// When it happened (RFC 3339 with milliseconds).
    #[serde(serialize_with = "millis")]
    pub t: DateTime<Utc>,
    /// The server it is about (`scheme://host[:port]`, or a stdio process's name), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub what: What,
}

fn millis<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// The call a notice is about.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CallRef {
    /// The server of its session (written once, as the notice's `server`).
    #[serde(skip)]
    pub server: Option<String>,
    /// Session id, or null for session-less traffic.
    pub session: Option<String>,
    /// JSON-RPC id.
    pub request_id: Value,
    /// Method.
    pub method: String,
    /// Tool name (tools/call only).
    pub tool: Option<String>,
    /// The task id, for a task operation and the requests about its task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

/// The kinds of notable change.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum What {
    /// A session was established (`Mcp-Session-Id` assigned) or first seen.
    SessionStarted {
        /// Session id.
        session: Option<String>,
        /// Protocol revision, if known.
        revision: Option<String>,
    },
    /// A session's revision turned out other than `session_started` named: the one client and
    /// server negotiated at `initialize` (a `server/discover` probe that got a session id first
    /// named the probe's revision).
    SessionRevision {
        /// Session id.
        session: Option<String>,
        /// The negotiated revision.
        revision: String,
        /// What was named before.
        was: Option<String>,
    },
    /// A session ended (404 or DELETE).
    SessionEnded {
        /// Session id.
        session: Option<String>,
        /// `expired` or `deleted`.
        how: &'static str,
    },
    /// A client request began.
    CallStarted {
        /// The call.
        #[serde(flatten)]
        call: CallRef,
        /// Its owning stream.
        stream: StreamId,
    },
    /// A response stream ended.
    StreamEnded {
        /// The stream.
        stream: StreamId,
        /// Its label (`POST#3 sse`).
        label: String,
        /// How.
        how: EndHow,
        /// Which leg.
        leg: Leg,
        /// Calls it owned that had no response yet.
        pending: usize,
    },
    /// A call can no longer be answered.
    CallOrphaned {
        /// The call.
        #[serde(flatten)]
        call: CallRef,
        /// The stream that died.
        stream: StreamId,
        /// When it died (RFC 3339, ms).
        stream_ended_at: String,
        /// How (`eof`, `reset`, `error`, `cancelled`), or null when no stream died.
        how: Option<EndHow>,
        /// Why, in words.
        cause: std::borrow::Cow<'static, str>,
    },
    /// A call's stream died but it may be resumed.
    CallResumable {
        /// The call.
        #[serde(flatten)]
        call: CallRef,
        /// The stream that died.
        stream: StreamId,
        /// The last event id seen.
        last_event_id: Option<String>,
        /// The server's retry hint, ms.
        retry_ms: Option<u64>,
    },
    /// A resumption GET took over a call.
    CallResumed {
        /// The call.
        #[serde(flatten)]
        call: CallRef,
        /// The resuming stream.
        stream: StreamId,
        /// The `Last-Event-ID` it sent.
        last_event_id: String,
    },
    /// A resumption named another `Last-Event-ID` than the last id the client received on the
    /// stream whose calls wait for it.
    ResumeMismatch {
        /// The resuming stream.
        stream: StreamId,
        /// The `Last-Event-ID` it sent.
        last_event_id: String,
        /// The stream whose calls wait.
        waiting: StreamId,
        /// The last event id that stream carried.
        expected: String,
        /// What the sent id was instead.
        mismatch: super::MismatchKind,
    },
    /// A call got its result.
    CallAnswered {
        /// The call.
        #[serde(flatten)]
        call: CallRef,
        /// The stream that delivered it.
        stream: StreamId,
        /// From request to response.
        elapsed_ms: i64,
        /// Whether the result is a tool's error (`isError: true`).
        is_error: bool,
    },
    /// A call got an error.
    CallFailed {
        /// The call.
        #[serde(flatten)]
        call: CallRef,
        /// The error.
        error: String,
        /// From request to error.
        elapsed_ms: i64,
    },
    /// A probe (`server/discover`) failed and the client fell back to another method
    /// (`initialize`): the normal handshake with an older server, not a failure.
    CallSuperseded {
        /// The probe.
        #[serde(flatten)]
        call: CallRef,
        /// How it failed.
        error: String,
        /// The method the client fell back to.
        by: String,
        /// The request id of the call it fell back to.
        by_request_id: Value,
    },
    /// A round of a multi-round-trip call ended asking the client for input.
    CallInputRequired {
        /// The call.
        #[serde(flatten)]
        call: CallRef,
        /// What the server asked for (`inputRequests`), as sent.
        input_requests: Value,
    },
    /// A request continues an earlier round of the same logical call (MRTR).
    CallContinued {
        /// The new round's request.
        #[serde(flatten)]
        call: CallRef,
        /// Which round (2 for the first continuation).
        round: u32,
        /// The request id of the previous round.
        continues: Value,
    },
    /// The server sent the client a request (elicitation, sampling, roots).
    ServerRequest {
        /// The request (its `session`, `request_id`, `method`).
        #[serde(flatten)]
        call: CallRef,
        /// The stream it arrived on.
        stream: StreamId,
    },
    /// The client answered a server request.
    ServerRequestAnswered {
        /// The request.
        #[serde(flatten)]
        call: CallRef,
        /// From request to answer.
        elapsed_ms: i64,
    },
    /// The client cancelled a call.
    CallCancelled {
        /// The call.
        #[serde(flatten)]
        call: CallRef,
    },
    /// The client re-sent a call it saw fail (same method and params, in the same session or
    /// the session that replaced it).
    ClientRetry {
        /// The new call.
        #[serde(flatten)]
        call: CallRef,
        /// Which arrival (2 for the first retry).
        arrival: u32,
        /// Whether the tool says it is safe to repeat (`readOnlyHint` or `idempotentHint`);
        /// null when the client's session never listed the tool.
        idempotent: Option<bool>,
        /// The request id of the call it repeats.
        retry_of: Value,
    },
    /// The upstream could not be reached.
    UpstreamUnreachable {
        /// The stream.
        stream: StreamId,
        /// Why.
        error: String,
    },
    /// A message was not valid JSON-RPC.
    InvalidMessage {
        /// The stream.
        stream: StreamId,
        /// Why.
        reason: String,
    },
    /// The proxy answered a call whose stream died with an error of its own (`--rescue`).
    CallRescued {
        /// The call.
        #[serde(flatten)]
        call: CallRef,
        /// The stream that died.
        stream: StreamId,
        /// The error message the client got.
        message: String,
    },
    /// The proxy injected a fault.
    FaultInjected {
        /// The stream.
        stream: StreamId,
        /// The fault.
        fault: String,
    },
    /// A call's request was answered with an OAuth challenge (401, or 403 for more scope, with
    /// `WWW-Authenticate`): the client authorises and sends it again; not a failure.
    AuthChallenge {
        /// The call.
        #[serde(flatten)]
        call: CallRef,
        /// The challenged exchange.
        stream: StreamId,
        /// The HTTP status.
        status: u16,
    },
    /// The proxy changed forwarded bytes on purpose: a URL naming the upstream rewritten to
    /// name the proxy (a legacy `endpoint`, OAuth metadata).
    Rewritten {
        /// The stream.
        stream: StreamId,
        /// What was rewritten.
        what: String,
        /// The value the upstream sent.
        from: String,
        /// The value the client got.
        to: String,
    },
    /// A stdio server process started (`mcpscope stdio`).
    ProcessStarted {
        /// Its session id (`stdio:NAME:PID`).
        session: String,
        /// Its stream.
        stream: StreamId,
        /// Its process id.
        pid: u32,
        /// The command line.
        command: String,
    },
    /// The stdio server process ended.
    ProcessExited {
        /// Its stream.
        stream: StreamId,
        /// Its exit code, when it exited.
        code: Option<i32>,
        /// The signal that killed it, when one did.
        signal: Option<i32>,
        /// Calls still waiting on it (each one orphaned).
        pending: usize,
    },
    /// The client closed the stdio server's stdin.
    StdinClosed {
        /// The process's stream.
        stream: StreamId,
    },
    /// A task-augmented request was answered with a `CreateTaskResult`: the operation stays
    /// pending while its task lives.
    TaskCreated {
        /// The task operation (the request that created it).
        #[serde(flatten)]
        call: CallRef,
        /// The task id.
        task_id: String,
        /// The status it was created with.
        status: &'static str,
        /// Its ttl in ms (null: unlimited).
        ttl_ms: Option<u64>,
        /// The suggested poll interval in ms.
        poll_ms: Option<u64>,
    },
    /// A task's status changed.
    TaskStatus {
        /// The task operation.
        #[serde(flatten)]
        call: CallRef,
        /// The task id.
        task_id: String,
        /// The new status.
        status: &'static str,
        /// The server's `statusMessage`, if any.
        message: Option<String>,
    },
    /// The stream carrying a `tasks/result` died without the answer: the task lives, and the
    /// client must ask again.
    TaskResultWaitDied {
        /// The task operation (its tool is named).
        #[serde(flatten)]
        call: CallRef,
        /// The task id.
        task_id: String,
        /// The stream that died.
        stream: StreamId,
        /// How it ended, or null when no stream died (an HTTP failure).
        how: Option<EndHow>,
        /// The JSON-RPC id of the `tasks/result` request whose wait died.
        result_request_id: Value,
    },
    /// A call broke a schema: a `tools/call`'s arguments its tool's `inputSchema`, its result
    /// the `outputSchema`, or an accepted elicitation's content its `requestedSchema`
    /// (`engine::schema`).
    SchemaViolation {
        /// The call.
        #[serde(flatten)]
        call: CallRef,
        /// `input`, `output` or `elicitation`.
        side: &'static str,
        /// The member checked: `arguments`, `structuredContent`, `content`.
        member: &'static str,
        /// Where in it (`$`, `$.address.zip`).
        path: String,
        /// The schema keyword that failed (`type`, `required`, …).
        keyword: String,
        /// The validator's message.
        message: String,
    },
    /// A schema a call needed was not checked: past the budget that keeps a hostile schema
    /// from taking the process down (`engine::schema`). Said once per tool and reason.
    SchemaUnchecked {
        /// The first call that needed it.
        #[serde(flatten)]
        call: CallRef,
        /// `input`, `output` or `elicitation`.
        side: &'static str,
        /// Why (`schema not checked: its references loop back …`).
        message: String,
    },
}

impl What {
    /// The call it is about, if any.
    pub fn call(&self) -> Option<&CallRef> {
        match self {
            What::CallStarted { call, .. }
            | What::CallOrphaned { call, .. }
            | What::CallResumable { call, .. }
            | What::CallResumed { call, .. }
            | What::CallAnswered { call, .. }
            | What::CallFailed { call, .. }
            | What::CallSuperseded { call, .. }
            | What::CallInputRequired { call, .. }
            | What::CallContinued { call, .. }
            | What::ServerRequest { call, .. }
            | What::ServerRequestAnswered { call, .. }
            | What::CallCancelled { call }
            | What::ClientRetry { call, .. }
            | What::CallRescued { call, .. }
            | What::AuthChallenge { call, .. }
            | What::TaskCreated { call, .. }
            | What::TaskStatus { call, .. }
            | What::TaskResultWaitDied { call, .. }
            | What::SchemaViolation { call, .. }
            | What::SchemaUnchecked { call, .. } => Some(call),
            What::SessionStarted { .. }
            | What::SessionRevision { .. }
            | What::SessionEnded { .. }
            | What::StreamEnded { .. }
            | What::ResumeMismatch { .. }
            | What::UpstreamUnreachable { .. }
            | What::InvalidMessage { .. }
            | What::FaultInjected { .. }
            | What::Rewritten { .. }
            | What::ProcessStarted { .. }
            | What::ProcessExited { .. }
            | What::StdinClosed { .. } => None,
        }
    }

    /// The stream it is about, if any.
    pub fn stream(&self) -> Option<StreamId> {
        match self {
            What::CallStarted { stream, .. }
            | What::StreamEnded { stream, .. }
            | What::CallOrphaned { stream, .. }
            | What::CallResumable { stream, .. }
            | What::CallResumed { stream, .. }
            | What::ResumeMismatch { stream, .. }
            | What::CallAnswered { stream, .. }
            | What::ServerRequest { stream, .. }
            | What::UpstreamUnreachable { stream, .. }
            | What::InvalidMessage { stream, .. }
            | What::CallRescued { stream, .. }
            | What::FaultInjected { stream, .. }
            | What::AuthChallenge { stream, .. }
            | What::Rewritten { stream, .. }
            | What::ProcessStarted { stream, .. }
            | What::ProcessExited { stream, .. }
            | What::StdinClosed { stream }
            | What::TaskResultWaitDied { stream, .. } => Some(*stream),
            _ => None,
        }
    }
}
