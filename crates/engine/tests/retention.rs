//! The retention policy: a model fed a long session keeps every call that matters and evicts
//! only answered calls past its window, with memory bounded by the policy, not by the traffic.

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use mcpscope_engine::event::{Direction, EndHow, Event, EventKind, Leg, StreamId};
use mcpscope_engine::fixtures::t0;
use mcpscope_engine::model::{Model, Retention, Verdict};

/// Feeds events to a model as they are made, so that a million calls need no event list.
struct Feed {
    model: Model,
    t: DateTime<Utc>,
    events: u64,
}

impl Feed {
    fn new(retention: Retention) -> Self {
        Self {
            model: Model::with_retention(retention),
            t: t0(),
            events: 0,
        }
    }

    fn push(&mut self, kind: EventKind) {
        self.t += Duration::microseconds(100);
        self.events += 1;
        self.model.apply(&Event::at(self.t, kind));
    }

    fn open(&mut self, stream: StreamId, method: &str) {
        self.push(EventKind::StreamOpened {
            stream,
            conn: stream,
            method: method.into(),
            path: "/mcp".into(),
            headers: vec![
                ("mcp-session-id".into(), "s1".into()),
                (
                    "accept".into(),
                    "application/json, text/event-stream".into(),
                ),
            ],
            origin: None,
        });
    }

    fn head(&mut self, stream: StreamId, content_type: &str) {
        self.push(EventKind::ResponseHead {
            stream,
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
        });
    }

    fn message(&mut self, stream: StreamId, dir: Direction, body: Value) {
        self.push(EventKind::Message { stream, dir, body });
    }

    fn end(&mut self, stream: StreamId, how: EndHow) {
        self.push(EventKind::StreamEnded {
            stream,
            dir: Direction::ServerToClient,
            how,
            leg: Leg::Upstream,
            bytes: 100,
            detail: None,
        });
    }

    fn sse(&mut self, stream: StreamId, id: u64, body: Value) {
        let data = body.to_string();
        self.push(EventKind::SseEvent {
            stream,
            id: Some(id.to_string()),
            event: None,
            retry: None,
            data: data.into(),
            start: 0,
            end: 0,
        });
        self.message(stream, Direction::ServerToClient, body);
    }

    /// One `tools/call` on its own POST stream: answered with JSON, or (with `fate`) an SSE
    /// stream that dies or stays open before its result.
    fn call(&mut self, stream: StreamId, fate: Fate) {
        let id = stream as i64;
        let request = json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"work","arguments":{"n":id,"pad":"x".repeat(200)}}});
        self.open(stream, "POST");
        self.message(stream, Direction::ClientToServer, request);
        match fate {
            Fate::Answered => {
                self.head(stream, "application/json");
                self.message(
                    stream,
                    Direction::ServerToClient,
                    json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":"y".repeat(300)}]}}),
                );
                self.end(stream, EndHow::Eof);
            }
            Fate::Dies => {
                self.head(stream, "text/event-stream");
                self.end(stream, EndHow::Reset);
            }
            Fate::Pending => self.head(stream, "text/event-stream"),
        }
    }
}

#[derive(Clone, Copy)]
enum Fate {
    Answered,
    Dies,
    Pending,
}

#[test]
fn a_million_calls_keep_every_orphan_and_pending_call_and_evict_only_old_answered_ones() {
    let keep = 1_000;
    let mut feed = Feed::new(Retention::window(keep));
    let total: u64 = 1_000_000;
    let mut orphans = Vec::new();
    let mut pending = Vec::new();
    for stream in 1..=total {
        let fate = match stream {
            s if s % 99_991 == 0 => Fate::Dies,
            s if s % 250_013 == 0 => Fate::Pending,
            _ => Fate::Answered,
        };
        match fate {
            Fate::Dies => orphans.push(stream as i64),
            Fate::Pending => pending.push(stream as i64),
            Fate::Answered => {}
        }
        feed.call(stream, fate);
    }
    let model = &feed.model;
    let r = model.retention();
    assert_eq!(model.calls.next_index(), total as usize);
    // Bounded by the policy: full calls within the window, compact rows within their cap.
    let full = model.calls.iter().filter(|c| c.evicted.is_none()).count();
    assert!(
        full <= keep + keep / 8 + 256 + orphans.len() + pending.len(),
        "{full} full calls"
    );
    assert!(model.calls.len() <= keep + r.max_rows + (keep + r.max_rows) / 8 + 256);
    assert!(
        model.streams.len() <= 2 * keep + 256,
        "{} streams",
        model.streams.len()
    );
    assert!(
        model.messages.len() <= 4 * keep + 512,
        "{} messages",
        model.messages.len()
    );
    assert!(model.detail_bytes() <= r.keep_bytes + r.keep_bytes / 8);
    let evicted = model.evicted();
    assert!(evicted.compacted > 900_000, "{evicted:?}");
    assert!(evicted.dropped > 900_000, "{evicted:?}");
    // Nothing that matters is forgotten: every orphan and every pending call, in full.
    for id in orphans.iter().chain(&pending) {
        let call = model
            .calls
            .iter()
            .find(|c| c.id.value() == json!(id))
            .unwrap_or_else(|| panic!("call {id} was evicted"));
        assert!(call.evicted.is_none(), "call {id} was compacted");
        assert!(
            model.request_message(call).is_some(),
            "call {id} lost its request"
        );
        assert!(model.stream(call.request_stream).is_some());
    }
    for id in &orphans {
        let call = model
            .calls
            .iter()
            .find(|c| c.id.value() == json!(id))
            .expect("kept");
        assert!(matches!(call.verdict, Verdict::Orphaned { .. }), "{id}");
    }
    assert_eq!(model.counts().orphaned, orphans.len());
    assert_eq!(model.counts().pending, pending.len());
    // Only answered calls were collapsed, and they kept their facts and their way back.
    for call in model.calls.iter().filter(|c| c.evicted.is_some()) {
        assert_eq!(call.verdict, Verdict::Answered);
        assert!(call.ended_at.is_some());
        assert_eq!(call.tool.as_deref(), Some("work"));
        assert!(call.response().is_none());
        let (from, to) = call.evicted.expect("compacted");
        assert!(from < to && to < feed.events);
    }
    // The newest calls are all held in full.
    let newest = model.calls.as_slice().iter().rev().take(keep);
    assert!(newest.clone().all(|c| c.evicted.is_none()));
    for call in newest.filter(|c| c.verdict == Verdict::Answered) {
        let stream = model.stream(call.owner).expect("stream kept");
        assert!(
            model.response_message(call).is_some(),
            "call {} lost its response: stream messages {:?}, evicted {:?}",
            call.index,
            stream.messages,
            model.evicted()
        );
    }
}

#[test]
fn a_long_sse_stream_keeps_its_newest_events_and_its_pending_call() {
    let retention = Retention::window(100);
    let mut feed = Feed::new(retention);
    feed.call(1, Fate::Pending);
    for n in 0..200_000u64 {
        feed.sse(
            1,
            n,
            json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":n}}),
        );
    }
    let model = &feed.model;
    let stream = model.stream(1).expect("open stream kept");
    assert!(stream.marks.len() <= 2 * retention.stream_detail);
    assert!(stream.dropped_marks >= 200_000 - 2 * retention.stream_detail as u64);
    assert!(model.messages.len() <= 2 * retention.stream_detail + 1);
    assert_eq!(stream.last_event_id.as_deref(), Some("199999"));
    let call = model.calls.iter().next().expect("the call");
    assert!(call.verdict.is_open());
    assert!(model.request_message(call).is_some());
    // Resumption still finds the stream by its newest event id.
    let mut feed = feed;
    feed.end(1, EndHow::Reset);
    feed.push(EventKind::StreamOpened {
        stream: 2,
        conn: 2,
        method: "GET".into(),
        path: "/mcp".into(),
        headers: vec![
            ("mcp-session-id".into(), "s1".into()),
            ("last-event-id".into(), "199999".into()),
        ],
        origin: None,
    });
    let call = feed.model.calls.iter().next().expect("the call");
    assert_eq!(call.owner, 2, "resumed on the GET");
}

#[test]
fn headless_retention_holds_nothing_answered() {
    let mut feed = Feed::new(Retention::none());
    for stream in 1..=20_000 {
        feed.call(stream, Fate::Answered);
    }
    feed.call(20_001, Fate::Dies);
    let model = &feed.model;
    assert!(model.calls.len() <= 300, "{} calls", model.calls.len());
    assert!(
        model.streams.len() <= 300,
        "{} streams",
        model.streams.len()
    );
    let orphan = model.calls.last().expect("the orphan");
    assert!(matches!(orphan.verdict, Verdict::Orphaned { .. }));
}

#[test]
fn unbounded_retention_evicts_nothing() {
    let mut feed = Feed::new(Retention::unbounded());
    for stream in 1..=5_000 {
        feed.call(stream, Fate::Answered);
    }
    assert_eq!(feed.model.calls.len(), 5_000);
    assert_eq!(feed.model.evicted().compacted, 0);
}

/// One open stream flooded with SSE events of one size, under one policy: what it must keep.
struct DetailCase {
    name: &'static str,
    retention: Retention,
    streams: u64,
    events: u64,
    /// Bytes of padding in each event's message.
    pad: usize,
    /// Bytes of bodies a stream may hold, at most, and must hold, at least, once flooded.
    stream_max: usize,
    stream_min: usize,
    /// Messages a stream must hold, at least (the newest ones).
    messages_min: usize,
    /// Bytes of bodies all streams together may hold, at most.
    total_max: usize,
}

/// A policy with only the stream detail limits of interest.
fn detail(count: usize, stream_bytes: usize, all_bytes: usize) -> Retention {
    Retention {
        stream_detail: count,
        stream_detail_bytes: stream_bytes,
        streams_detail_bytes: all_bytes,
        keep_bytes: all_bytes,
        ..Retention::window(100)
    }
}

#[test]
fn an_open_stream_keeps_its_newest_events_within_both_the_count_and_the_bytes() {
    const KIB: usize = 1 << 10;
    const MIB: usize = 1 << 20;
    let cases = [
        DetailCase {
            name: "small events: the count binds",
            retention: detail(64, MIB, 64 * MIB),
            streams: 1,
            events: 10_000,
            pad: 100,
            stream_max: 128 * 300,
            stream_min: 64 * 100,
            messages_min: 64,
            total_max: 128 * 300,
        },
        DetailCase {
            name: "200 KB events under the viewer's defaults: the bytes bind",
            retention: Retention::window(1_000),
            streams: 1,
            events: 500,
            pad: 200 * KIB,
            stream_max: 8 * MIB,
            stream_min: 4 * MIB - 201 * KIB,
            messages_min: 19,
            total_max: 8 * MIB,
        },
        DetailCase {
            name: "every event past the budget: the newest alone stays",
            retention: detail(2_048, 64 * KIB, 64 * MIB),
            streams: 1,
            events: 50,
            pad: 200 * KIB,
            stream_max: 201 * KIB,
            stream_min: 200 * KIB,
            messages_min: 1,
            total_max: 201 * KIB,
        },
        DetailCase {
            name: "four streams over the cap of all streams share it",
            retention: detail(2_048, MIB, MIB),
            streams: 4,
            events: 200,
            pad: 20 * KIB,
            stream_max: 2 * MIB,
            stream_min: 20 * KIB,
            messages_min: 1,
            total_max: MIB + MIB / 8 + 21 * KIB,
        },
        DetailCase {
            name: "unbounded: everything stays",
            retention: Retention::unbounded(),
            streams: 2,
            events: 300,
            pad: 10 * KIB,
            stream_max: 300 * 11 * KIB,
            stream_min: 300 * 10 * KIB,
            messages_min: 300,
            total_max: 2 * 300 * 11 * KIB,
        },
    ];
    for case in cases {
        let name = case.name;
        let mut feed = Feed::new(case.retention);
        let streams: Vec<StreamId> = (1..=case.streams).collect();
        for &stream in &streams {
            feed.open(stream, "GET");
            feed.head(stream, "text/event-stream");
        }
        let pad = "p".repeat(case.pad);
        for n in 0..case.events {
            for &stream in &streams {
                feed.sse(
                    stream,
                    n,
                    json!({"jsonrpc":"2.0","method":"notifications/message",
                        "params":{"level":"info","data":{"n":n,"pad":pad}}}),
                );
            }
        }
        let model = &feed.model;
        let mut total = 0;
        for &stream in &streams {
            let s = model.stream(stream).expect("open stream kept");
            let held: usize = s
                .messages
                .iter()
                .map(|&m| model.messages.get(m).expect("listed message held").size)
                .sum();
            assert_eq!(
                s.detail_bytes, held,
                "{name}: stream {stream} counts its bytes"
            );
            assert!(
                held <= case.stream_max && held >= case.stream_min,
                "{name}: stream {stream} holds {held} bytes in {} messages",
                s.messages.len()
            );
            assert!(
                s.messages.len() >= case.messages_min,
                "{name}: stream {stream} holds {} messages",
                s.messages.len()
            );
            // What is held is the newest: the last event and its message, then back in order.
            let last = s.marks.last().expect("the newest event");
            assert_eq!(last.id, Some((case.events - 1).to_string()), "{name}");
            let newest = model
                .messages
                .get(last.message.expect("carried"))
                .expect("held");
            assert!(
                newest
                    .body
                    .text()
                    .contains(&format!("\"n\":{}", case.events - 1))
            );
            // Every event is held or counted as dropped; every mark held carries a held message.
            assert_eq!(
                s.marks.len() as u64 + s.dropped_marks,
                case.events,
                "{name}"
            );
            assert!(
                s.marks
                    .iter()
                    .all(|m| m.message.is_some_and(|m| model.messages.contains(m))),
                "{name}: a held event lost its message"
            );
            total += held;
        }
        assert_eq!(model.detail_bytes(), total, "{name}: the model's count");
        assert!(total <= case.total_max, "{name}: {total} bytes held");
        let pushed = (case.events * case.streams) as usize;
        assert_eq!(
            model.messages.len() + model.evicted().messages,
            pushed,
            "{name}: every message held or counted"
        );
    }
}

/// `n` sessions, each: initialize, `tools/list` (the same five tools), one answered call, and a
/// DELETE when `delete`.
fn sessions(n: usize, delete: bool) -> Vec<Event> {
    use mcpscope_engine::fixtures::Script;
    let mut s = Script::new();
    let tools: Vec<Value> = (0..5)
        .map(|i| {
            json!({"name": format!("tool{i}"), "inputSchema": {"type": "object",
            "properties": {"text": {"type": "string", "description": "x".repeat(200)}}}})
        })
        .collect();
    let mut stream: StreamId = 1;
    for i in 0..n {
        let ms = (i as i64) * 50;
        let id = format!("s{i}");
        s.handshake(ms, stream, &id);
        stream += 1;
        s.open(ms + 10, stream, "POST", Some(&id))
            .send(
                ms + 10,
                stream,
                json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
            )
            .head(ms + 11, stream, 200, "json", Some(&id))
            .reply(
                ms + 11,
                stream,
                json!({"jsonrpc":"2.0","id":1,"result":{"tools": tools}}),
            )
            .end(ms + 12, stream, EndHow::Eof, Leg::Upstream);
        stream += 1;
        s.call(ms + 20, stream, &id, 2, "tool0")
            .reply(
                ms + 25,
                stream,
                json!({"jsonrpc":"2.0","id":2,"result":{"content":[]}}),
            )
            .end(ms + 26, stream, EndHow::Eof, Leg::Upstream);
        stream += 1;
        if delete {
            s.open(ms + 30, stream, "DELETE", Some(&id))
                .head(ms + 31, stream, 200, "", Some(&id))
                .end(ms + 31, stream, EndHow::Eof, Leg::Upstream);
            stream += 1;
        }
    }
    s.events
}

#[test]
fn sessions_leave_memory_as_finished_calls_do() {
    // Ended sessions: the headless policy keeps none of them once nothing held belongs to them.
    let mut model = Model::with_retention(Retention::none());
    for event in sessions(5_000, true) {
        model.apply(&event);
    }
    assert!(
        model.sessions.len() < 600,
        "{} sessions held of 5000 ended",
        model.sessions.len()
    );
    assert!(model.evicted().sessions > 4_000, "{:?}", model.evicted());
    // Sessions that never end: the newest `max_sessions` idle ones, and no more.
    let mut model = Model::with_retention(Retention::none());
    for event in sessions(5_000, false) {
        model.apply(&event);
    }
    let cap = Retention::none().max_sessions;
    assert!(
        model.sessions.len() <= cap + cap / 4 + 256,
        "{} idle sessions held (cap {cap})",
        model.sessions.len()
    );
    // The newest is still known, with its tools; every session shares one copy of each.
    let newest = model.sessions.last().expect("a session");
    assert_eq!(newest.id.as_deref(), Some("s4999"));
    assert_eq!(newest.tools.len(), 5);
    let (index, _) = model.sessions.indexed().last().expect("indexed");
    let (older, _) = model
        .sessions
        .indexed()
        .rev()
        .nth(1)
        .expect("another session");
    let definition = |i: usize| {
        model.sessions[i].tools["tool0"]
            .definition
            .clone()
            .expect("definition")
    };
    assert!(definition(index).is_shared_with(&definition(older)));
    // Unbounded retention keeps every session, as before.
    let mut model = Model::with_retention(Retention::unbounded());
    for event in sessions(300, true) {
        model.apply(&event);
    }
    assert_eq!(model.sessions.len(), 301, "the session-less one and 300");
}

#[test]
fn calls_that_went_wrong_are_held_in_full_up_to_the_window_then_as_rows_that_outlive_answered_ones()
{
    let keep = 1_000;
    let mut feed = Feed::new(Retention::window(keep));
    let r = feed.model.retention();
    let total: u64 = 20_000;
    let mut orphans = Vec::new();
    for stream in 1..=total {
        if stream % 8 == 0 {
            orphans.push(stream as i64);
            feed.call(stream, Fate::Dies);
        } else {
            feed.call(stream, Fate::Answered);
        }
    }
    let model = &feed.model;
    // 2,500 orphans: more than the window holds in full, fewer than the rows can list.
    assert!(orphans.len() > keep && orphans.len() < keep + r.max_rows);
    let orphan = |id: &i64| {
        model
            .calls
            .iter()
            .find(|c| c.id.value() == json!(id))
            .unwrap_or_else(|| panic!("orphan {id} was dropped"))
    };
    let full_orphans = orphans
        .iter()
        .filter(|id| orphan(id).evicted.is_none())
        .count();
    assert!(
        (keep..=keep + keep / 8 + 256).contains(&full_orphans),
        "{full_orphans} orphans held in full"
    );
    // The newest are the ones in full; every older one is still listed, as what it was.
    for id in orphans.iter().rev().take(keep) {
        assert!(orphan(id).evicted.is_none(), "orphan {id} was compacted");
    }
    for id in &orphans {
        assert!(
            matches!(orphan(id).verdict, Verdict::Orphaned { .. }),
            "{id}"
        );
    }
    // Rows stay within their cap: the answered ones gave way, oldest first.
    let rows = model.calls.iter().filter(|c| c.evicted.is_some()).count();
    assert!(rows <= r.max_rows + r.max_rows / 8 + 256, "{rows} rows");
    let oldest_answered_row = model
        .calls
        .iter()
        .find(|c| c.evicted.is_some() && c.verdict == Verdict::Answered)
        .expect("answered rows are kept too");
    assert!(
        oldest_answered_row.index > orphans.len(),
        "the oldest answered row kept is call {}",
        oldest_answered_row.index
    );
}
