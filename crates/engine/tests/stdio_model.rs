//! The model of a stdio server process: one session, one stream that owns every call; a
//! server request answered on stdin; the process's end (exit, signal) or its closing of stdout
//! orphans what is pending, with that cause.

use chrono::{TimeDelta, TimeZone, Utc};
use serde_json::{Value, json};

use mcpscope_engine::event::{Direction, EndHow, Event, EventKind, Leg};
use mcpscope_engine::model::{Model, Notice, OrphanCause, Verdict, What};

struct Run {
    model: Model,
    notices: Vec<Notice>,
    ms: i64,
}

impl Run {
    fn new() -> Self {
        let mut run = Self {
            model: Model::new(),
            notices: Vec::new(),
            ms: 0,
        };
        run.push(EventKind::ProcessStarted {
            stream: 1,
            pid: 4242,
            command: vec!["npx".into(), "my-server".into()],
            name: None,
        });
        run
    }

    fn push(&mut self, kind: EventKind) {
        self.ms += 10;
        let t = Utc
            .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .single()
            .expect("time")
            + TimeDelta::milliseconds(self.ms);
        let notices = self.model.apply(&Event::at(t, kind));
        self.notices.extend(notices);
    }

    fn send(&mut self, dir: Direction, body: Value) {
        self.push(EventKind::Message {
            stream: 1,
            dir,
            body,
        });
    }

    fn kinds(&self) -> Vec<String> {
        self.notices
            .iter()
            .map(|n| {
                serde_json::to_value(n).expect("notice")["kind"]
                    .as_str()
                    .expect("kind")
                    .to_string()
            })
            .collect()
    }

    fn verdict(&self, method: &str) -> Verdict {
        self.model
            .calls
            .iter()
            .find(|c| c.method == method)
            .map(|c| c.verdict.clone())
            .expect("call")
    }
}

fn handshake(run: &mut Run) {
    run.send(
        Direction::ClientToServer,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":"c","version":"1"}}}),
    );
    run.send(
        Direction::ServerToClient,
        json!({"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"s","version":"2"}}}),
    );
}

#[test]
fn a_process_is_one_session_with_the_negotiated_revision() {
    let mut run = Run::new();
    handshake(&mut run);
    let session = run
        .model
        .sessions
        .iter()
        .find(|s| s.id.as_deref() == Some("stdio:npx:4242"))
        .expect("session");
    assert_eq!(session.revision.as_deref(), Some("2025-06-18"));
    assert_eq!(session.server.as_deref(), Some("s 2"));
    assert_eq!(session.streams, [1]);
    assert_eq!(
        run.model.stream(1).map(|s| s.label()),
        Some("STDIO#1".into())
    );
    assert_eq!(
        run.kinds(),
        [
            "process_started",
            "call_started",
            "session_started",
            "call_answered"
        ]
    );
}

#[test]
fn a_server_request_is_answered_on_stdin() {
    let mut run = Run::new();
    handshake(&mut run);
    run.send(
        Direction::ClientToServer,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask"}}),
    );
    run.send(
        Direction::ServerToClient,
        json!({"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}),
    );
    run.send(
        Direction::ClientToServer,
        json!({"jsonrpc":"2.0","id":"s1","result":{}}),
    );
    run.send(
        Direction::ServerToClient,
        json!({"jsonrpc":"2.0","id":1,"result":{}}),
    );
    assert_eq!(run.verdict("sampling/createMessage"), Verdict::Answered);
    assert_eq!(run.verdict("tools/call"), Verdict::Answered);
    assert!(run.kinds().contains(&"server_request_answered".to_string()));
}

#[test]
fn an_exit_orphans_the_pending_calls_and_a_later_stdout_end_changes_nothing() {
    let mut run = Run::new();
    handshake(&mut run);
    run.send(
        Direction::ClientToServer,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}),
    );
    run.push(EventKind::ProcessExited {
        stream: 1,
        code: Some(1),
        signal: None,
    });
    run.push(EventKind::StreamEnded {
        stream: 1,
        dir: Direction::ServerToClient,
        how: EndHow::Eof,
        leg: Leg::Upstream,
        bytes: 99,
        detail: None,
    });
    let Verdict::Orphaned { cause, death } = run.verdict("tools/call") else {
        panic!("{:?}", run.verdict("tools/call"));
    };
    assert_eq!(cause, OrphanCause::ProcessExited { code: 1 });
    assert_eq!(cause.describe(), "server exited with code 1");
    assert_eq!(death.how, Some(EndHow::Error));
    let stream = run.model.stream(1).expect("stream");
    assert_eq!(stream.ended.as_ref().map(|e| e.bytes), Some(99));
    assert!(run.model.fate(stream).is_death());
    let exited = run
        .notices
        .iter()
        .find(|n| matches!(n.what, What::ProcessExited { .. }))
        .expect("process_exited");
    assert!(matches!(
        exited.what,
        What::ProcessExited { pending: 1, .. }
    ));
    assert_eq!(run.model.counts().open_streams, 0);
    assert_eq!(run.model.counts().orphaned, 1);
}

#[test]
fn stdout_closed_by_a_live_process_orphans_with_that_cause() {
    let mut run = Run::new();
    run.send(
        Direction::ClientToServer,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}),
    );
    run.push(EventKind::StreamEnded {
        stream: 1,
        dir: Direction::ServerToClient,
        how: EndHow::Eof,
        leg: Leg::Upstream,
        bytes: 0,
        detail: Some("server closed stdout".into()),
    });
    run.push(EventKind::ProcessExited {
        stream: 1,
        code: None,
        signal: Some(15),
    });
    let Verdict::Orphaned { cause, .. } = run.verdict("tools/call") else {
        panic!("not orphaned");
    };
    assert_eq!(cause, OrphanCause::StdoutClosed);
    assert_eq!(cause.describe(), "server closed stdout");
    let process = run
        .model
        .stream(1)
        .and_then(|s| s.process.as_ref())
        .expect("process");
    assert_eq!(process.exit.and_then(|e| e.signal), Some(15));
    assert_eq!(
        process.exit.map(|e| e.describe()),
        Some("killed by SIGTERM".into())
    );
}

#[test]
fn stdin_closing_and_stderr_lines_are_kept() {
    let mut run = Run::new();
    for i in 0..1005 {
        run.push(EventKind::StderrLine {
            stream: 1,
            line: format!("line {i}"),
        });
    }
    run.push(EventKind::StreamEnded {
        stream: 1,
        dir: Direction::ClientToServer,
        how: EndHow::Eof,
        leg: Leg::Client,
        bytes: 10,
        detail: None,
    });
    let process = run
        .model
        .stream(1)
        .and_then(|s| s.process.as_ref())
        .expect("process");
    assert!(process.stdin_closed.is_some());
    assert_eq!(process.stderr.len(), 1000);
    assert_eq!(process.stderr_dropped, 5);
    assert_eq!(
        process.stderr.back().map(|(_, l)| l.as_str()),
        Some("line 1004")
    );
    assert!(
        run.model.stream(1).is_some_and(|s| s.is_open()),
        "stdin closing leaves stdout open"
    );
    assert_eq!(run.kinds().last().map(String::as_str), Some("stdin_closed"));
}

#[test]
fn a_failed_probe_is_superseded_even_when_the_model_holds_nothing() {
    // The headless view's model keeps no finished call: the probe is gone when `initialize`
    // follows, and its notice still names it.
    let mut run = Run::new();
    run.model = Model::with_retention(mcpscope_engine::model::Retention::none());
    run.notices.clear();
    run.push(EventKind::ProcessStarted {
        stream: 1,
        pid: 4242,
        command: vec!["npx".into(), "my-server".into()],
        name: None,
    });
    run.send(
        Direction::ClientToServer,
        json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}),
    );
    run.send(
        Direction::ServerToClient,
        json!({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}),
    );
    handshake(&mut run);
    assert!(
        run.kinds().contains(&"call_superseded".to_string()),
        "{:?}",
        run.kinds()
    );
}
