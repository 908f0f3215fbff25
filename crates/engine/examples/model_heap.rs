//! The heap a live view's model holds under the default retention: one SSE stream of 1 KB
//! events, then answered JSON calls (the live-memory benchmark's traffic, folded in-process).
//!
//! Usage: model_heap [SSE_EVENTS] [CALLS]   (defaults 1000000 100000)

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use mcpscope_engine::event::{Direction, EndHow, Event, EventKind, Leg, StreamId};
use mcpscope_engine::model::{Model, Retention};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: forwards to the system allocator, only counting sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn mib(b: usize) -> f64 {
    b as f64 / 1048576.0
}

struct Feed {
    model: Model,
    t: DateTime<Utc>,
}

impl Feed {
    fn push(&mut self, kind: EventKind) {
        self.t += Duration::microseconds(100);
        self.model.apply(&Event::at(self.t, kind));
    }
    fn open(&mut self, stream: StreamId) {
        self.push(EventKind::StreamOpened {
            stream,
            conn: stream,
            method: "POST".into(),
            path: "/mcp".into(),
            headers: vec![("mcp-session-id".into(), "s1".into())],
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
    fn end(&mut self, stream: StreamId) {
        self.push(EventKind::StreamEnded {
            stream,
            dir: Direction::ServerToClient,
            how: EndHow::Eof,
            leg: Leg::Upstream,
            bytes: 100,
            detail: None,
        });
    }
}

fn report(what: &str, feed: &Feed) {
    println!(
        "{what:<22} live {:>6.1} MiB  approx {:>6.1} MiB  peak {:>6.1} MiB  calls {:>6} streams {:>6} messages {:>6} detail {:>6.1} MiB  {:?}",
        mib(LIVE.load(Ordering::Relaxed)),
        mib(feed.model.approx_heap()),
        mib(PEAK.load(Ordering::Relaxed)),
        feed.model.calls.len(),
        feed.model.streams.len(),
        feed.model.messages.len(),
        mib(feed.model.detail_bytes()),
        feed.model.evicted(),
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let sse: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let calls: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let mut feed = Feed {
        model: Model::with_retention(Retention::window(10_000)),
        t: chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default(),
    };
    {
        use mcpscope_engine::model::{Call, Death, MessageRec, Reaction, Stream, Verdict};
        println!(
            "size_of: Call {} Stream {} MessageRec {} Verdict {} Reaction {} Death {} Value {}",
            std::mem::size_of::<Call>(),
            std::mem::size_of::<Stream>(),
            std::mem::size_of::<MessageRec>(),
            std::mem::size_of::<Verdict>(),
            std::mem::size_of::<Reaction>(),
            std::mem::size_of::<Option<Death>>(),
            std::mem::size_of::<Value>(),
        );
    }
    report("empty", &feed);
    feed.open(1);
    feed.message(
        1,
        Direction::ClientToServer,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flood"}}),
    );
    feed.head(1, "text/event-stream");
    let pad = "x".repeat(900);
    for i in 0..sse {
        let body = json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":pad}});
        feed.push(EventKind::SseEvent {
            stream: 1,
            id: Some(i.to_string()),
            event: None,
            retry: None,
            data: body.to_string().into(),
            start: 0,
            end: 0,
        });
        feed.message(1, Direction::ServerToClient, body);
    }
    feed.message(
        1,
        Direction::ServerToClient,
        json!({"jsonrpc":"2.0","id":1,"result":{}}),
    );
    feed.end(1);
    report("after the SSE stream", &feed);
    for n in 0..calls {
        let stream = 2 + n;
        let id = stream as i64;
        feed.open(stream);
        feed.message(stream, Direction::ClientToServer, json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}));
        feed.head(stream, "application/json");
        feed.message(
            stream,
            Direction::ServerToClient,
            json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":"hello"}]}}),
        );
        feed.end(stream);
    }
    report("after the calls", &feed);
}
