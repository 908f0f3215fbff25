//! The intercept on real sockets: the test server behind the proxy, the MCP test client, and the
//! controller the TUI uses. A matching request is held (others pass), then forwarded as sent or
//! edited, dropped, or answered with an error; clearing the filter releases what is held.

use std::time::{Duration, Instant};

use mcpscope_engine::fault::{FaultControl, HeldRequest, Release};
use mcpscope_proxy::controller as fault;
use mcpscope_testserver as testserver;
use mcpscope_testserver::client::{Answer, McpClient, Outcome};
use serde_json::json;
use std::sync::Arc;
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(10);

/// A new session that calls `echo` with `text`, in the background.
fn echo(url: &str, text: &str) -> JoinHandle<Answer> {
    let (url, text) = (url.to_string(), text.to_string());
    tokio::spawn(async move {
        let mut c = McpClient::new(&url).expect("client");
        c.handshake().await.expect("initialize");
        c.call("echo", json!({"text": text}), false)
            .await
            .expect("echo")
    })
}

/// Waits until `n` requests are held; returns them.
async fn held(control: &Arc<dyn FaultControl>, n: usize) -> Vec<HeldRequest> {
    let deadline = Instant::now() + WAIT;
    loop {
        let held = control.held();
        if held.len() == n {
            return held;
        }
        assert!(Instant::now() < deadline, "{} held, not {n}", held.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A proxy in front of the JSON-answering test server, intercepting `tool:echo`: an `echo` call
/// whose request was held and forwarded, and whose response is held now.
struct HeldResponse {
    live: mcpscope_testkit::live::Live,
    control: Arc<dyn FaultControl>,
    call: JoinHandle<Answer>,
    held: Vec<HeldRequest>,
}

async fn held_echo_response() -> HeldResponse {
    let live = mcpscope_testkit::live::start_with(testserver::Options {
        json_responses: true,
        ..Default::default()
    })
    .await;
    let control = fault::controller(&live.proxy, live.engine.clone());
    control
        .set_intercept(Some("tool:echo".into()))
        .expect("intercept");
    let call = echo(&live.url, "from the server");
    let h = held(&control, 1).await;
    control
        .release(h[0].id, Release::Forward(None))
        .expect("forward the request");
    let held = held(&control, 1).await;
    HeldResponse {
        live,
        control,
        call,
        held,
    }
}

fn text(a: &Answer) -> String {
    a.text()
        .map(str::to_string)
        .unwrap_or_else(|| format!("{:?}", a.outcome))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_requests_are_forwarded_edited_dropped_or_refused() {
    let run = async {
        let mcpscope_testkit::live::Live {
            server,
            proxy,
            engine,
            events: _rx,
            url,
        } = mcpscope_testkit::live::start().await;
        let control = fault::controller(&proxy, engine);
        control
            .set_intercept(Some("tool:echo".into()))
            .expect("intercept");

        // Held; the handshake (not a tools/call echo) passed.
        let first = echo(&url, "as sent");
        let h = held(&control, 1).await;
        assert!(h[0].summary.starts_with("tools/call echo id="), "{h:?}");
        assert!(h[0].body.contains("as sent"), "{h:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!first.is_finished(), "a held request is not answered");
        control
            .release(h[0].id, Release::Forward(None))
            .expect("forward");
        assert_eq!(text(&first.await.expect("task")), "as sent");

        // Edited before it goes on.
        let edited = echo(&url, "before");
        let h = held(&control, 1).await;
        let body = h[0].body.replace("before", "after the edit");
        control
            .release(h[0].id, Release::Forward(Some(body)))
            .expect("forward edited");
        assert_eq!(text(&edited.await.expect("task")), "after the edit");

        // Dropped: the upstream never sees it; the client gets mcpscope's 502.
        let dropped = echo(&url, "dropped");
        let h = held(&control, 1).await;
        control.release(h[0].id, Release::Drop).expect("drop");
        let answer = dropped.await.expect("task");
        assert!(
            matches!(answer.outcome, Outcome::Status(502, _)),
            "{:?}",
            answer.outcome
        );

        // Answered with an error.
        let refused = echo(&url, "refused");
        let h = held(&control, 1).await;
        control
            .release(h[0].id, Release::Error("not today".into()))
            .expect("error");
        let answer = refused.await.expect("task");
        let Outcome::Response(v) = &answer.outcome else {
            panic!("{:?}", answer.outcome)
        };
        assert_eq!(
            v.pointer("/error/message").and_then(|m| m.as_str()),
            Some("mcpscope intercept: not today")
        );

        // Clearing the filter (as quitting the view does) releases what is held, unchanged.
        let a = echo(&url, "one");
        let b = echo(&url, "two");
        held(&control, 2).await;
        control.set_intercept(None).expect("clear");
        assert_eq!(text(&a.await.expect("task")), "one");
        assert_eq!(text(&b.await.expect("task")), "two");
        assert!(control.held().is_empty());
        server.shutdown().await;
    };
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_response_is_held_too_and_can_be_edited() {
    let run = async {
        let HeldResponse {
            mut live,
            control,
            call,
            held: h,
        } = held_echo_response().await;
        assert!(
            h[0].summary.starts_with("response to tools/call echo id="),
            "{h:?}"
        );
        assert!(h[0].body.contains("from the server"), "{h:?}");
        let edited = h[0].body.replace("from the server", "from the intercept");
        control
            .release(h[0].id, Release::Forward(Some(edited)))
            .expect("forward the response");
        assert_eq!(text(&call.await.expect("task")), "from the intercept");
        // A note says the client was sent an edited response.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut notes = Vec::new();
        while let Ok(event) = live.events.try_recv() {
            if let mcpscope_engine::event::EventKind::Note { text, .. } = event.kind {
                notes.push(text);
            }
        }
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("response released by the intercept: sent edited")),
            "{notes:?}"
        );
        live.server.shutdown().await;
    };
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_request_is_recorded_as_sent_and_redacted_with_no_body_in_a_note() {
    use mcpscope_engine::event::{Direction, EventKind};
    let run = async {
        let mcpscope_testkit::live::Live {
            server,
            proxy,
            engine,
            events: mut rx,
            url,
        } = mcpscope_testkit::live::start().await;
        let control = fault::controller(&proxy, engine);
        control
            .set_intercept(Some("tool:echo".into()))
            .expect("intercept");
        let call = echo(&url, "before");
        let h = held(&control, 1).await;
        let body = h[0].body.replace(
            r#""text":"before""#,
            r#""text":"after the edit","password":"EDITED-S3CRET""#,
        );
        assert!(body.contains("EDITED-S3CRET"), "{body}");
        control
            .release(h[0].id, Release::Forward(Some(body)))
            .expect("forward edited");
        assert_eq!(text(&call.await.expect("task")), "after the edit");
        tokio::time::sleep(Duration::from_millis(100)).await;
        // What the hub records: each event through the redaction policy.
        let redactor = mcpscope_engine::redact::Redactor::new();
        let mut requests = Vec::new();
        let mut notes = Vec::new();
        while let Ok(mut event) = rx.try_recv() {
            redactor.event(&mut event.kind);
            match event.kind {
                EventKind::Message {
                    dir: Direction::ClientToServer,
                    body,
                    ..
                } if body["method"] == "tools/call" => requests.push(body),
                EventKind::Note { text, .. } => notes.push(text),
                _ => {}
            }
        }
        assert_eq!(requests.len(), 1, "one request, as sent: {requests:#?}");
        let args = &requests[0]["params"]["arguments"];
        assert_eq!(args["text"], "after the edit", "{requests:#?}");
        assert_eq!(args["password"], "[redacted]", "{requests:#?}");
        assert!(
            notes
                .iter()
                .all(|n| !n.contains("after the edit") && !n.contains("S3CRET")),
            "{notes:?}"
        );
        assert!(
            notes
                .iter()
                .any(|n| n == "released by the intercept: forwarded edited"),
            "{notes:?}"
        );
        server.shutdown().await;
    };
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("bounded");
}

/// An edited response is recorded as the client was sent it (one message, redacted like any),
/// its end counting the bytes sent; no note carries the body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_response_is_recorded_as_sent_and_redacted() {
    use mcpscope_engine::event::{Direction, EventKind};
    let run = async {
        let HeldResponse {
            mut live,
            control,
            call,
            held: h,
        } = held_echo_response().await;
        let edited = h[0].body.replace(
            r#""text":"from the server""#,
            r#""text":"from the intercept","password":"EDITED-S3CRET""#,
        );
        assert!(edited.contains("EDITED-S3CRET"), "{edited}");
        control
            .release(h[0].id, Release::Forward(Some(edited.clone())))
            .expect("forward the response");
        assert_eq!(text(&call.await.expect("task")), "from the intercept");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let redactor = mcpscope_engine::redact::Redactor::new();
        let mut answers = Vec::new();
        let mut ends = Vec::new();
        let mut notes = Vec::new();
        let mut answer_stream = None;
        while let Ok(mut event) = live.events.try_recv() {
            redactor.event(&mut event.kind);
            match event.kind {
                EventKind::Message {
                    stream,
                    dir: Direction::ServerToClient,
                    body,
                } if body.to_string().contains("from the") => {
                    answer_stream = Some(stream);
                    answers.push(body);
                }
                EventKind::StreamEnded {
                    stream,
                    dir: Direction::ServerToClient,
                    bytes,
                    ..
                } => ends.push((stream, bytes)),
                EventKind::Note { text, .. } => notes.push(text),
                _ => {}
            }
        }
        assert_eq!(answers.len(), 1, "one answer, as sent: {answers:#?}");
        let sent = answers[0].to_string();
        assert!(sent.contains("from the intercept"), "{sent}");
        assert!(!sent.contains("from the server"), "{sent}");
        assert!(
            !sent.contains("S3CRET") && sent.contains("[redacted]"),
            "{sent}"
        );
        let stream = answer_stream.expect("the answer's stream");
        assert!(
            ends.contains(&(stream, edited.len() as u64)),
            "the end counts the bytes sent ({}): {ends:?}",
            edited.len()
        );
        assert!(
            notes
                .iter()
                .all(|n| !n.contains("from the intercept") && !n.contains("S3CRET")),
            "{notes:?}"
        );
        live.server.shutdown().await;
    };
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("bounded");
}
