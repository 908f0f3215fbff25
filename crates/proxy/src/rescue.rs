//! `--rescue`: when a POST's SSE stream dies before its responses and the client cannot resume
//! it (no event id seen, or revision 2026-07-28), the client gets a JSON-RPC error per pending
//! request on that stream, then a clean end, instead of a death it may wait on forever.
//!
//! A `tasks/result` (2025-11-25 tasks) is only a wait for a task's result: its rescue error says
//! the task lives and names it, so the client asks again. The task itself is left alone (no
//! `tasks/cancel` is sent), and the model keeps it alive.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

use bytes::Bytes;
use mcpscope_engine::event::{EndHow, EventKind, StreamId};
use mcpscope_engine::wire::jsonrpc::{self, Kind};
use mcpscope_engine::wire::observe::SeenEvent;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// The JSON-RPC error code of a rescue: -32000, the implementation-defined server error the
/// official MCP SDKs already use for "connection closed", so clients treat it as the transport
/// failure it stands for.
pub(crate) const RESCUE_CODE: i64 = -32000;

/// Parked rescues kept at most (the oldest is forgotten first).
const MAX_PARKED: usize = 256;

/// The calls of a stream that died resumable, kept until the client's resumption: if that is
/// refused or dies too, they are rescued on it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parked {
    /// The requests still without a response.
    pub pending: Vec<PendingId>,
    /// The first death, in words (`upstream stream reset 12 ms after the last event`).
    pub death: String,
}

/// A pending request's id: as parsed, and as the client wrote it (an integer beyond i64/u64 is
/// echoed digit for digit, not as the float it parses to).
#[derive(Debug, Clone)]
pub(crate) struct PendingId {
    /// The id, parsed.
    pub id: Value,
    /// Its JSON text in the request.
    pub exact: Box<RawValue>,
    /// For a `tasks/result`, the task it waits on (`params.taskId`).
    pub task_wait: Option<String>,
}

impl PartialEq for PendingId {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.exact.get() == other.exact.get()
            && self.task_wait == other.task_wait
    }
}

/// The task a `tasks/result` request waits on.
fn waited_task(method: &str, params: &Value) -> Option<String> {
    if method != "tasks/result" {
        return None;
    }
    params.get("taskId")?.as_str().map(str::to_string)
}

/// The ids of the requests in a body, as written (`"id": 123456789012345678901234567890`).
pub(crate) fn exact_ids(body: &[u8]) -> Vec<Box<RawValue>> {
    #[derive(serde::Deserialize)]
    struct Request<'a> {
        #[serde(borrow, default)]
        id: Option<&'a RawValue>,
    }
    let requests: Vec<Request<'_>> = if body.trim_ascii_start().starts_with(b"[") {
        serde_json::from_slice(body).unwrap_or_default()
    } else {
        serde_json::from_slice(body)
            .map(|r| vec![r])
            .unwrap_or_default()
    };
    requests
        .into_iter()
        .filter_map(|r| r.id.map(ToOwned::to_owned))
        .collect()
}

/// The rescue's message for one request: for a `tasks/result`, it adds that the task lives.
fn message_for(id: &PendingId, message: &str) -> String {
    match &id.task_wait {
        Some(task) => {
            format!("{message} (task {task} still lives: ask tasks/result again for its result)")
        }
        None => message.to_string(),
    }
}

/// One rescue error, with the id as the client wrote it.
fn rescue_error(id: &PendingId, message: &str) -> String {
    let error = json!({"code": RESCUE_CODE, "message": message});
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{error}}}",
        id.exact.get()
    )
}

/// One dead stream's parked calls: its session, the event ids it carried (a resumption from
/// any of them picks the calls up), and the calls.
type ParkedEntry = ((String, Vec<String>), Parked);

/// Parked rescues by session and the event ids their stream carried.
#[derive(Debug, Default)]
pub(crate) struct Parking(Mutex<VecDeque<ParkedEntry>>);

impl Parking {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<ParkedEntry>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `parked` for a resumption of `session` from any of `event_ids` (a client may
    /// resume from an earlier id than the last one that passed).
    pub(crate) fn park(&self, session: String, event_ids: Vec<String>, parked: Parked) {
        let mut list = self.lock();
        list.push_back(((session, event_ids), parked));
        while list.len() > MAX_PARKED {
            list.pop_front();
        }
    }

    /// Takes what was parked for a resumption of `session` from `last_event_id`.
    pub(crate) fn take(&self, session: &str, last_event_id: &str) -> Option<Parked> {
        let mut list = self.lock();
        let at = list
            .iter()
            .position(|((s, ids), _)| s == session && ids.iter().any(|id| id == last_event_id))?;
        list.remove(at).map(|(_, parked)| parked)
    }
}

/// Event ids a stream's rescue remembers, at most (the newest): those a resumption may name.
const MAX_EVENT_IDS: usize = 64;

/// The SSE bytes that answer `pending` with the rescue's error `message`, and their events.
pub(crate) fn answer(
    stream: StreamId,
    pending: Vec<PendingId>,
    message: &str,
) -> (Bytes, Vec<EventKind>) {
    // A blank line first: whatever event the death cut short ends before the rescue.
    let mut text = String::from("\n\n");
    let mut events = Vec::new();
    for id in pending {
        let message = message_for(&id, message);
        let error = rescue_error(&id, &message);
        mcpscope_engine::wire::sse::encode_into(&mut text, None, Some("message"), None, &error);
        events.push(EventKind::CallRescued {
            stream,
            id: id.id,
            message,
        });
    }
    (Bytes::from(text), events)
}

/// The JSON body that answer `pending` with the rescue's error `message` (an array for a
/// batch), and its events.
fn json_answer(
    stream: StreamId,
    pending: Vec<PendingId>,
    message: &str,
    batch: bool,
) -> (Bytes, Vec<EventKind>) {
    let messages: Vec<String> = pending.iter().map(|id| message_for(id, message)).collect();
    let errors: Vec<String> = pending
        .iter()
        .zip(&messages)
        .map(|(id, message)| rescue_error(id, message))
        .collect();
    let body = match (batch, errors.as_slice()) {
        (false, [one]) => one.clone(),
        _ => format!("[{}]", errors.join(",")),
    };
    let events = pending
        .into_iter()
        .zip(messages)
        .map(|(id, message)| EventKind::CallRescued {
            stream,
            id: id.id,
            message,
        })
        .collect();
    (Bytes::from(body), events)
}

/// What the tap tracks of one stream to rescue its calls.
#[derive(Debug)]
pub(crate) struct Rescue {
    /// Requests still without a response.
    pending: Vec<PendingId>,
    /// The session, to park a resumable death under.
    session: Option<String>,
    /// The event ids seen, oldest first (the newest [`MAX_EVENT_IDS`]).
    event_ids: VecDeque<String>,
    /// An earlier death this stream resumes, in words.
    earlier: Option<String>,
    /// An SSE event with an id passed (the client may resume).
    event_id_seen: bool,
    /// The request's revision cannot resume.
    sessionless: bool,
    /// When the last event passed (or the stream began).
    last_event: Instant,
    /// Whether an event has passed.
    any_event: bool,
    /// The body is JSON, not SSE: the rescue is the body itself (one error, or an array).
    json: bool,
    /// The request was a batch (its JSON rescue is an array).
    batch: bool,
}

impl Rescue {
    /// Tracks the requests of a POST body sent at `revision` in `session`; `None` when it
    /// carries none.
    /// `exact` holds the ids as the request's text wrote them ([`exact_ids`]).
    pub(crate) fn for_request(
        message: Option<&Value>,
        exact: &[Box<RawValue>],
        revision: Option<&str>,
        session: Option<String>,
    ) -> Option<Self> {
        let pending: Vec<PendingId> = jsonrpc::messages(message?)
            .into_iter()
            .filter_map(|m| match jsonrpc::classify(m) {
                Kind::Request { id, method, params } => Some(PendingId {
                    task_wait: waited_task(method, params),
                    id: id.clone(),
                    exact: exact
                        .iter()
                        .find(|raw| {
                            serde_json::from_str::<Value>(raw.get()).ok().as_ref() == Some(id)
                        })
                        .cloned()
                        .or_else(|| serde_json::value::to_raw_value(id).ok())?,
                }),
                _ => None,
            })
            .collect();
        if pending.is_empty() {
            return None;
        }
        Some(Self {
            pending,
            session,
            event_ids: VecDeque::new(),
            earlier: None,
            event_id_seen: false,
            sessionless: revision.is_some_and(mcpscope_engine::revision::is_sessionless),
            last_event: Instant::now(),
            any_event: false,
            json: false,
            batch: false,
        })
    }

    /// [`Rescue::for_request`] for a JSON response: rescued, if it dies before any of its bytes
    /// reached the client, with the error (an array of them for a batch) as the body.
    pub(crate) fn for_json_request(
        message: Option<&Value>,
        exact: &[Box<RawValue>],
    ) -> Option<Self> {
        let mut rescue = Self::for_request(message, exact, None, None)?;
        rescue.json = true;
        rescue.batch = message.is_some_and(Value::is_array);
        Some(rescue)
    }

    /// Tracks a resumption (in `session`) of the calls `parked` when their stream died.
    pub(crate) fn resuming(parked: Parked, session: String) -> Self {
        Self {
            pending: parked.pending,
            session: Some(session),
            event_ids: VecDeque::new(),
            earlier: Some(parked.death),
            event_id_seen: false,
            sessionless: false,
            last_event: Instant::now(),
            any_event: false,
            json: false,
            batch: false,
        }
    }

    /// Notes an event the client got: its id, and the responses it carries.
    pub(crate) fn passed(&mut self, event: &SeenEvent) {
        self.last_event = Instant::now();
        self.any_event = true;
        if let EventKind::SseEvent { id: Some(id), .. } = &event.event {
            self.event_id_seen = true;
            if self.event_ids.len() == MAX_EVENT_IDS {
                self.event_ids.pop_front();
            }
            self.event_ids.push_back(id.clone());
        }
        if let Some(EventKind::Message { body, .. }) = &event.message {
            for m in jsonrpc::messages(body) {
                if let Kind::Result { id, .. } | Kind::Error { id, .. } = jsonrpc::classify(m) {
                    let text = jsonrpc::id_text(id);
                    self.pending.retain(|p| jsonrpc::id_text(&p.id) != text);
                }
            }
        }
    }

    /// The death (`how`), in words.
    fn death(&self, how: EndHow) -> String {
        let ms = self.last_event.elapsed().as_millis();
        let death = match how {
            EndHow::Eof => "ended",
            EndHow::Reset => "reset",
            EndHow::Error | EndHow::Cancelled => "failed",
        };
        let when = if self.json {
            format!("{ms} ms after the response head, before any byte of its JSON body")
        } else if self.any_event {
            format!("{ms} ms after the last event")
        } else {
            format!("{ms} ms after the response head, before any event")
        };
        let what = if self.earlier.is_some() {
            "resumed stream"
        } else {
            "stream"
        };
        let now = format!("upstream {what} {death} {when}");
        match &self.earlier {
            Some(earlier) => format!("{earlier}; {now}"),
            None => now,
        }
    }

    /// When the stream died (`how`): the SSE bytes to send the client and the events that
    /// report them, or `None` when nothing needs rescuing or the client can resume (then the
    /// calls are parked in `parking` for its resumption).
    pub(crate) fn take(
        &mut self,
        stream: StreamId,
        how: EndHow,
        parking: &Parking,
    ) -> Option<(Bytes, Vec<EventKind>)> {
        if self.pending.is_empty() {
            return None;
        }
        let death = self.death(how);
        if self.event_id_seen && !self.sessionless {
            if let Some(session) = self.session.clone()
                && !self.event_ids.is_empty()
            {
                let pending = std::mem::take(&mut self.pending);
                let ids = self.event_ids.iter().cloned().collect();
                parking.park(session, ids, Parked { pending, death });
            }
            return None;
        }
        let message = format!("{death}; mcpscope --rescue");
        let pending = std::mem::take(&mut self.pending);
        if self.json {
            return Some(json_answer(stream, pending, &message, self.batch));
        }
        Some(answer(stream, pending, &message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(id: Option<&str>, body: Option<Value>) -> SeenEvent {
        SeenEvent {
            start: 0,
            end: 1,
            event: EventKind::SseEvent {
                stream: 1,
                id: id.map(str::to_string),
                event: None,
                retry: None,
                data: "".into(),
                start: 0,
                end: 1,
            },
            message: body.map(|body| EventKind::Message {
                stream: 1,
                dir: mcpscope_engine::event::Direction::ServerToClient,
                body,
            }),
            deferred: false,
        }
    }

    #[test]
    fn a_pending_call_without_event_ids_is_rescued_with_its_id() {
        let req = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}});
        let mut r =
            Rescue::for_request(Some(&req), &[], Some("2025-06-18"), None).expect("a request");
        r.passed(&seen(None, None));
        let parking = Parking::default();
        let (bytes, events) = r.take(1, EndHow::Reset, &parking).expect("rescued");
        let text = std::str::from_utf8(&bytes).expect("utf-8");
        assert!(text.starts_with("\n\nevent: message\ndata: {"), "{text}");
        assert!(
            text.contains("\"id\":7") && text.contains("-32000"),
            "{text}"
        );
        assert!(
            text.contains("reset") && text.contains("after the last event"),
            "{text}"
        );
        assert!(matches!(&events[..], [EventKind::CallRescued { id, .. }] if id == &json!(7)));
        assert!(r.take(1, EndHow::Reset, &parking).is_none(), "rescued once");
    }

    #[test]
    fn answered_or_resumable_calls_and_notifications_are_left_alone() {
        let parking = Parking::default();
        let req = json!({"jsonrpc": "2.0", "id": "a", "method": "tools/call"});
        let mut answered = Rescue::for_request(Some(&req), &[], None, None).expect("a request");
        answered.passed(&seen(
            None,
            Some(json!({"jsonrpc": "2.0", "id": "a", "result": {}})),
        ));
        assert!(answered.take(1, EndHow::Eof, &parking).is_none());

        let mut sessionless = Rescue::for_request(
            Some(&req),
            &[],
            Some(mcpscope_engine::revision::FIRST_SESSIONLESS),
            None,
        )
        .expect("request");
        sessionless.passed(&seen(Some("s1/0"), None));
        assert!(sessionless.take(1, EndHow::Reset, &parking).is_some());

        // A revision later than any this build knows is session-less too: no resumption to
        // wait for, the call is rescued.
        let mut future =
            Rescue::for_request(Some(&req), &[], Some("2027-03-01"), None).expect("request");
        future.passed(&seen(Some("s1/0"), None));
        assert!(future.take(1, EndHow::Reset, &parking).is_some());

        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert!(Rescue::for_request(Some(&note), &[], None, None).is_none());

        let mut json_body = Rescue::for_json_request(Some(&req), &[]).expect("request");
        let (bytes, _) = json_body.take(1, EndHow::Reset, &parking).expect("rescued");
        let body: Value = serde_json::from_slice(&bytes).expect("JSON");
        assert_eq!(body["id"], "a");
        assert_eq!(body["error"]["code"], RESCUE_CODE);
    }

    /// A death with an event id is left to the client's resumption; if that dies too before the
    /// response, the resumption carries the rescue, naming both deaths.
    #[test]
    fn a_resumable_death_is_parked_then_rescued_on_a_failed_resumption() {
        let parking = Parking::default();
        let req = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call"});
        let mut first = Rescue::for_request(Some(&req), &[], Some("2025-11-25"), Some("S".into()))
            .expect("request");
        first.passed(&seen(Some("s1/0"), None));
        assert!(first.take(1, EndHow::Reset, &parking).is_none());
        assert!(parking.take("S", "s1/9").is_none());
        let parked = parking.take("S", "s1/0").expect("parked");
        let ids: Vec<&Value> = parked.pending.iter().map(|p| &p.id).collect();
        assert_eq!(ids, [&json!(4)]);
        assert!(parking.take("S", "s1/0").is_none(), "taken once");

        let mut again = Rescue::resuming(parked, "S".into());
        let (bytes, _) = again.take(2, EndHow::Eof, &parking).expect("rescued");
        let text = std::str::from_utf8(&bytes).expect("utf-8");
        assert!(
            text.contains("upstream stream reset") && text.contains("resumed stream ended"),
            "{text}"
        );
    }

    /// A client that resumes from an earlier event id than the last that passed (opencode
    /// resumed from `s4-0` after `s4-1`) still finds its calls parked.
    #[test]
    fn a_resumption_from_any_event_id_the_stream_carried_finds_its_calls() {
        let parking = Parking::default();
        let req = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call"});
        let mut r = Rescue::for_request(Some(&req), &[], Some("2025-11-25"), Some("S".into()))
            .expect("request");
        r.passed(&seen(Some("s4-0"), None));
        r.passed(&seen(Some("s4-1"), None));
        assert!(r.take(1, EndHow::Reset, &parking).is_none());
        let parked = parking
            .take("S", "s4-0")
            .expect("parked under the earlier id too");
        assert_eq!(parked.pending.len(), 1);
        assert!(
            parking.take("S", "s4-1").is_none(),
            "taken once, under every id"
        );
    }

    /// A dying `tasks/result` is rescued with an error that says the task lives and names it.
    #[test]
    fn a_rescued_tasks_result_says_the_task_lives() {
        let req = json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/result",
                         "params": {"taskId": "task-0001"}});
        let mut r = Rescue::for_request(Some(&req), &[], Some("2025-11-25"), None).expect("req");
        let (bytes, events) = r
            .take(1, EndHow::Reset, &Parking::default())
            .expect("rescued");
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains("task task-0001 still lives: ask tasks/result again"),
            "{text}"
        );
        assert!(
            matches!(&events[..], [EventKind::CallRescued { message, .. }]
            if message.contains("mcpscope --rescue") && message.contains("task-0001 still lives"))
        );
    }

    #[test]
    fn an_id_beyond_u64_is_echoed_as_the_client_wrote_it() {
        let body =
            br#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call"}"#;
        let req: Value = serde_json::from_slice(body).expect("json");
        let mut r = Rescue::for_request(Some(&req), &exact_ids(body), None, None).expect("req");
        let (bytes, _) = r
            .take(1, EndHow::Reset, &Parking::default())
            .expect("rescued");
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains(r#""id":123456789012345678901234567890,"#),
            "{text}"
        );
    }
}
