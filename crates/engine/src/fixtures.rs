//! Synthetic event sequences: fixed-time scripts for snapshot tests and benchmarks, ticking
//! timelines for the model's tests.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{Value, json};

use crate::event::{Direction, EndHow, Event, EventKind, Leg, StreamId};
use crate::model::{Call, Model, Notice};

/// The fixed start time of every fixture: 2026-10-22 19:59:42 UTC.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 10, 22, 19, 59, 42)
        .single()
        .unwrap_or_default()
}

/// An SSE event of a response on `stream` carrying `data` (no id, no name, no retry; at 0..0).
pub fn sse_data(stream: StreamId, data: &str) -> EventKind {
    EventKind::SseEvent {
        stream,
        id: None,
        event: None,
        retry: None,
        data: data.into(),
        start: 0,
        end: 0,
    }
}

/// `t0() + ms`.
pub fn at(ms: i64) -> DateTime<Utc> {
    t0() + Duration::milliseconds(ms)
}

/// Builds event scripts. Each event is stamped with the script's clock: [`Script::new`] keeps
/// it where [`Script::at`] sets it (fixed times, for snapshots), [`Script::ticking`] advances it
/// one millisecond before each event (a timeline, for the model's tests).
#[derive(Debug, Clone)]
pub struct Script {
    /// The events so far.
    pub events: Vec<Event>,
    clock: DateTime<Utc>,
    step: Duration,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            events: Vec::new(),
            clock: t0(),
            step: Duration::zero(),
        }
    }
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn headers(session: Option<&str>, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut h = owned(extra);
    if let Some(s) = session {
        h.push(("mcp-session-id".into(), s.into()));
        h.push(("mcp-protocol-version".into(), "2025-06-18".into()));
    }
    h
}

impl Script {
    /// An empty script at fixed times: events land where [`Script::at`] puts the clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty timeline: each event one millisecond after the previous one (or the last wait).
    pub fn ticking() -> Self {
        Self {
            step: Duration::milliseconds(1),
            ..Self::default()
        }
    }

    /// Sets the clock to `t0() + ms`.
    pub fn at(&mut self, ms: i64) -> &mut Self {
        self.clock = at(ms);
        self
    }

    /// Moves the clock `ms` forward.
    pub fn wait(&mut self, ms: i64) -> &mut Self {
        self.clock += Duration::milliseconds(ms);
        self
    }

    /// The clock: the time of the last event, plus any wait since.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock
    }

    /// Appends any event.
    pub fn push(&mut self, kind: EventKind) -> &mut Self {
        self.clock += self.step;
        self.events.push(Event::at(self.clock, kind));
        self
    }

    /// Folds the events so far into a model.
    pub fn fold(&self) -> (Model, Vec<Notice>) {
        Model::from_events(&self.events)
    }

    fn opened(
        &mut self,
        stream: StreamId,
        conn: u64,
        method: &str,
        headers: Vec<(String, String)>,
    ) -> &mut Self {
        self.push(EventKind::StreamOpened {
            stream,
            conn,
            method: method.into(),
            path: "/mcp".into(),
            headers,
            origin: None,
        })
    }

    fn message(&mut self, stream: StreamId, dir: Direction, body: Value) -> &mut Self {
        self.push(EventKind::Message { stream, dir, body })
    }

    fn sse_event(
        &mut self,
        stream: StreamId,
        id: Option<&str>,
        body: Option<Value>,
        span: (u64, u64),
    ) -> &mut Self {
        self.push(EventKind::SseEvent {
            stream,
            id: id.map(str::to_string),
            event: None,
            retry: None,
            data: body
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_default()
                .into(),
            start: span.0,
            end: span.1,
        });
        match body {
            Some(body) => self.message(stream, Direction::ServerToClient, body),
            None => self,
        }
    }

    fn ended(
        &mut self,
        stream: StreamId,
        how: EndHow,
        leg: Leg,
        bytes: u64,
        detail: Option<String>,
    ) -> &mut Self {
        self.push(EventKind::StreamEnded {
            stream,
            dir: Direction::ServerToClient,
            how,
            leg,
            bytes,
            detail,
        })
    }

    /// At `ms`: a request head (`POST` with a JSON body, or `GET`) on its own connection.
    pub fn open(
        &mut self,
        ms: i64,
        stream: StreamId,
        method: &str,
        session: Option<&str>,
    ) -> &mut Self {
        let extra: &[(&str, &str)] = if method == "GET" {
            &[("accept", "text/event-stream")]
        } else {
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
            ]
        };
        self.at(ms)
            .opened(stream, stream, method, headers(session, extra))
    }

    /// At `ms`: a client message on a stream.
    pub fn send(&mut self, ms: i64, stream: StreamId, body: Value) -> &mut Self {
        self.at(ms).message(stream, Direction::ClientToServer, body)
    }

    /// At `ms`: a response head: `sse`, `json` or anything else for no body type.
    pub fn head(
        &mut self,
        ms: i64,
        stream: StreamId,
        status: u16,
        body: &str,
        session: Option<&str>,
    ) -> &mut Self {
        let ct = match body {
            "sse" => "text/event-stream",
            "json" => "application/json",
            _ => "",
        };
        let mut h = Vec::new();
        if !ct.is_empty() {
            h.push(("content-type".to_string(), ct.to_string()));
        }
        if let Some(s) = session {
            h.push(("mcp-session-id".to_string(), s.to_string()));
        }
        self.at(ms).push(EventKind::ResponseHead {
            stream,
            status,
            headers: h,
        })
    }

    /// At `ms`: an SSE event carrying `body` (with an optional event id), at byte span `span`.
    pub fn sse(
        &mut self,
        ms: i64,
        stream: StreamId,
        id: Option<&str>,
        body: Value,
        span: (u64, u64),
    ) -> &mut Self {
        self.at(ms).sse_event(stream, id, Some(body), span)
    }

    /// At `ms`: a JSON response body.
    pub fn reply(&mut self, ms: i64, stream: StreamId, body: Value) -> &mut Self {
        self.at(ms).message(stream, Direction::ServerToClient, body)
    }

    /// At `ms`: the response body ends (after 128 bytes).
    pub fn end(&mut self, ms: i64, stream: StreamId, how: EndHow, leg: Leg) -> &mut Self {
        let detail = (how == EndHow::Reset).then(|| "connection reset by peer".to_string());
        self.at(ms).ended(stream, how, leg, 128, detail)
    }

    /// At `ms`: `initialize` on `stream` assigning `session`, then `notifications/initialized`.
    pub fn handshake(&mut self, ms: i64, stream: StreamId, session: &str) -> &mut Self {
        self.open(ms, stream, "POST", None)
            .send(
                ms,
                stream,
                json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                    "protocolVersion":"2025-06-18","capabilities":{},
                    "clientInfo":{"name":"claude-code","version":"2.1.307"}}}),
            )
            .head(ms + 5, stream, 200, "json", Some(session))
            .reply(
                ms + 5,
                stream,
                json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18",
                    "capabilities":{"tools":{}},"serverInfo":{"name":"repro","version":"0"}}}),
            )
            .end(ms + 6, stream, EndHow::Eof, Leg::Upstream)
    }

    /// At `ms`: a `tools/call` request on a new POST stream answered with an SSE head.
    pub fn call(
        &mut self,
        ms: i64,
        stream: StreamId,
        session: &str,
        id: i64,
        tool: &str,
    ) -> &mut Self {
        self.open(ms, stream, "POST", Some(session))
            .send(
                ms,
                stream,
                json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{}}}),
            )
            .head(ms + 10, stream, 200, "sse", Some(session))
    }

    /// Next: a request head with exactly `headers`, on connection 1.
    pub fn open_with(
        &mut self,
        stream: StreamId,
        method: &str,
        headers: &[(&str, &str)],
    ) -> &mut Self {
        self.opened(stream, 1, method, owned(headers))
    }

    /// Next: a POST with exactly `headers` (connection 1) carrying `body`.
    pub fn post(&mut self, stream: StreamId, headers: &[(&str, &str)], body: Value) -> &mut Self {
        self.open_with(stream, "POST", headers)
            .message(stream, Direction::ClientToServer, body)
    }

    /// Next: a response head with `content_type` and `extra` headers.
    pub fn respond(
        &mut self,
        stream: StreamId,
        status: u16,
        content_type: &str,
        extra: &[(&str, &str)],
    ) -> &mut Self {
        let mut headers = owned(&[("content-type", content_type)]);
        headers.extend(owned(extra));
        self.push(EventKind::ResponseHead {
            stream,
            status,
            headers,
        })
    }

    /// Next: an SSE event (a priming event without `body`), and its message.
    pub fn event(&mut self, stream: StreamId, id: Option<&str>, body: Option<Value>) -> &mut Self {
        self.sse_event(stream, id, body, (0, 0))
    }

    /// Next: a JSON response body.
    pub fn json_body(&mut self, stream: StreamId, body: Value) -> &mut Self {
        self.message(stream, Direction::ServerToClient, body)
    }

    /// Next: the response body ends.
    pub fn finish(&mut self, stream: StreamId, how: EndHow, leg: Leg) -> &mut Self {
        self.ended(stream, how, leg, 0, None)
    }

    /// Next: `initialize` at `revision` on stream 1, answered as JSON, assigning session `s1`.
    pub fn initialize(&mut self, revision: &str) -> &mut Self {
        self.post(1, &[], json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":revision,"clientInfo":{"name":"c","version":"1"}}}))
            .respond(1, 200, "application/json", &[("mcp-session-id", "s1")])
            .json_body(1, json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":revision,"serverInfo":{"name":"srv","version":"2"}}}))
            .finish(1, EndHow::Eof, Leg::Upstream)
    }

    /// A ticking script: a session at `revision` (session `s1`) whose `tools/call` of `tool`
    /// (id 1) on stream 2 is answered with an SSE head.
    pub fn sse_call(revision: &str, tool: &str) -> Self {
        let s1: &[(&str, &str)] = &[("mcp-session-id", "s1")];
        let mut s = Script::ticking();
        s.initialize(revision)
            .post(
                2,
                s1,
                json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":tool,"arguments":{}}}),
            )
            .respond(2, 200, "text/event-stream", s1);
        s
    }
}

/// The last call of `tool` in a folded model.
pub fn last_call<'a>(model: &'a Model, tool: &str) -> Option<&'a Call> {
    model
        .calls
        .iter()
        .rev()
        .find(|c| c.tool.as_deref() == Some(tool))
}

/// The seed report's story and its neighbours, in session `s1`: an orphaned `poke` (its POST
/// stream reset at +4.5 s with the GET stream; the client reopens the GET), a pending `peek`,
/// a resumable `slow`, an answered `echo`. "Now" for it is [`scenario_now`].
pub fn scenario() -> Vec<Event> {
    let mut s = Script::new();
    s.handshake(0, 1, "s1");
    s.open(20, 2, "GET", Some("s1"))
        .head(25, 2, 200, "sse", Some("s1"));
    s.call(3_000, 3, "s1", 3, "poke").sse(
        3_200,
        3,
        None,
        json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}),
        (0, 96),
    );
    s.call(3_500, 4, "s1", 4, "slow").sse(
        3_600,
        4,
        Some("e1"),
        json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}),
        (0, 104),
    );
    s.end(4_500, 3, EndHow::Reset, Leg::Upstream)
        .end(4_500, 2, EndHow::Reset, Leg::Upstream);
    s.open(5_500, 5, "GET", Some("s1"))
        .head(5_510, 5, 200, "sse", Some("s1"));
    s.call(6_000, 6, "s1", 5, "echo").sse(
        6_300,
        6,
        Some("e7"),
        json!({"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"echo ok"}]}}),
        (0, 88),
    );
    s.end(6_301, 6, EndHow::Eof, Leg::Upstream);
    s.end(7_000, 4, EndHow::Eof, Leg::Upstream);
    s.call(8_000, 7, "s1", 6, "peek");
    s.events
}

/// "Now" for [`scenario`]: 10 s after its start.
pub fn scenario_now() -> DateTime<Utc> {
    at(10_000)
}

/// `n` `tools/call`s in one session (every 10th orphaned by a reset, every 3rd answered, the
/// rest pending), for benchmarks.
pub fn many_calls(n: usize) -> Vec<Event> {
    let mut s = Script::new();
    s.handshake(0, 1, "s1");
    for i in 0..n {
        let stream = i as StreamId + 2;
        let ms = 100 + i as i64;
        s.call(
            ms,
            stream,
            "s1",
            i as i64 + 1,
            if i % 2 == 0 { "poke" } else { "peek" },
        );
        if i % 10 == 0 {
            s.end(ms + 5, stream, EndHow::Reset, Leg::Upstream);
        } else if i % 3 == 0 {
            s.sse(
                ms + 5,
                stream,
                None,
                json!({"jsonrpc":"2.0","id":i as i64 + 1,"result":{}}),
                (0, 40),
            )
            .end(ms + 6, stream, EndHow::Eof, Leg::Upstream);
        }
    }
    s.events
}
