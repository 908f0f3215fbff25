//! The intercept and re-send through a forward proxy (`--forward`), on real sockets: the test
//! server, a forward proxy in process with the controller the TUI uses, and absolute-form
//! requests as an HTTP client that has the proxy set sends them. A held request goes on edited;
//! a request sent again goes to the server it went to (not to the proxy itself), marked.

mod common;

use common::forward::{curl_post, initialize, post, session_of, tls_front};

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{Offset, Utc};
use mcpscope_engine::event::{Direction, Event, EventKind};
use mcpscope_engine::fault::{FaultControl, HeldRequest, RESENT_HEADER, Release, Resend};
use mcpscope_engine::model::Model;
use mcpscope_proxy::Config;
use mcpscope_proxy::ForwardMode;
use mcpscope_proxy::ca::Ca;
use mcpscope_proxy::controller as fault;
use mcpscope_testkit::live::start_proxy;
use mcpscope_testserver as testserver;
use mcpscope_tui::App;
use mcpscope_tui::{Info, Theme};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

const WAIT: Duration = Duration::from_secs(20);

fn echo(id: u64, text: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
           "params":{"name":"echo","arguments":{"text":text}}})
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

/// Folds the proxy's events into `model` until `done` holds for an event; returns that event.
async fn until(
    events: &mut UnboundedReceiver<Event>,
    model: &mut Model,
    what: &str,
    done: impl Fn(&Model, &Event) -> bool,
) -> Event {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .unwrap_or_else(|_| panic!("{what}: not seen in time"))
            .expect("the proxy's events");
        model.apply(&event);
        if done(model, &event) {
            return event;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_forward_a_held_request_goes_on_edited_and_a_resent_one_reaches_its_server() {
    let run = async {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = testserver::start(testserver::Options::default())
            .await
            .expect("test server");
        let ca = Arc::new(Ca::create(dir.path()).expect("the local CA"));
        let config = Config {
            listen: "127.0.0.1:0".parse().expect("addr"),
            forward: Some(Arc::new(ForwardMode::new(ca, Vec::new()))),
            ..Default::default()
        };
        let (proxy, engine, mut events) = start_proxy(config).await;
        let control = fault::controller(&proxy, engine);
        let (via, to) = (proxy.addr, server.addr);
        let mut model = Model::new();

        let server_host = to.to_string();
        let host = server_host.clone();
        let session = tokio::task::spawn_blocking(move || initialize(via, &host))
            .await
            .expect("initialize");

        // Held, then sent on edited: the server answers what the edit says.
        control
            .set_intercept(Some("tool:echo".into()))
            .expect("intercept");
        let sid = session.clone();
        let host = server_host.clone();
        let first =
            tokio::task::spawn_blocking(move || post(via, &host, Some(&sid), &echo(1, "before")));
        let h = held(&control, 1).await;
        assert!(h[0].summary.starts_with("tools/call echo id=1"), "{h:?}");
        assert!(h[0].body.contains("before"), "{h:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!first.is_finished(), "a held request is not answered");
        let edited = h[0].body.replace("before", "after the edit");
        control
            .release(h[0].id, Release::Forward(Some(edited)))
            .expect("forward edited");
        let (head, body) = first.await.expect("the held call");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
        assert!(body.contains("after the edit"), "{body}");
        control.set_intercept(None).expect("clear");

        // Sent again as the view does (`r`): the request as it was sent, to its server.
        let origin = format!("http://{to}");
        until(
            &mut events,
            &mut model,
            "the edited call answered",
            |m, _| {
                m.calls
                    .iter()
                    .any(|c| c.tool.as_deref() == Some("echo") && !c.verdict.is_open())
            },
        )
        .await;
        let call = model
            .calls
            .iter()
            .find(|c| c.tool.as_deref() == Some("echo"))
            .expect("the echo call");
        let stream = model.stream(call.request_stream).expect("its stream");
        assert_eq!(stream.origin.as_deref(), Some(origin.as_str()));
        let resend = Resend {
            method: stream.method.clone(),
            path: stream.path.clone(),
            origin: stream.origin.clone(),
            headers: stream.request_headers.clone(),
            body: model
                .request_message(call)
                .expect("its request")
                .body
                .to_string(),
            of: call.id_text(),
        };
        control.resend(resend).expect("resend");
        let opened = until(&mut events, &mut model, "the re-sent exchange", |_, e| {
            matches!(&e.kind, EventKind::StreamOpened { headers, .. }
                if headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(RESENT_HEADER)))
        })
        .await;
        let EventKind::StreamOpened {
            stream: again,
            origin: seen,
            ..
        } = opened.kind
        else {
            unreachable!("matched above")
        };
        assert_eq!(
            seen.as_deref(),
            Some(origin.as_str()),
            "the re-sent request's server"
        );
        until(&mut events, &mut model, "the re-sent call's answer", |_, e| {
            matches!(&e.kind, EventKind::Message { stream, dir: Direction::ServerToClient, body }
                if *stream == again && body.to_string().contains("after the edit"))
        })
        .await;
        server.shutdown().await;
    };
    tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("bounded");
}

/// `c` (copy as curl) through a forward proxy: the command names the request's own `https://`
/// server, the proxy and the local CA; run by the shell, it is answered by that server through
/// the proxy, and the copy is seen going to the same server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_forward_a_call_copied_as_curl_reaches_its_https_server_again() {
    let run = async {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = testserver::start(testserver::Options::default())
            .await
            .expect("test server");
        let (front, test_ca, _) = tls_front(dir.path(), server.addr).await;
        let local = Arc::new(Ca::create(&dir.path().join("data")).expect("the local CA"));
        let roots = mcpscope_proxy::ca::read_roots(&[test_ca]).expect("the test CA");
        let config = Config {
            listen: "127.0.0.1:0".parse().expect("addr"),
            forward: Some(Arc::new(ForwardMode::new(local.clone(), Vec::new()))),
            ca_roots: roots,
            ..Default::default()
        };
        let (proxy, _engine, mut events) = start_proxy(config).await;
        let via = proxy.addr;
        let url = format!("https://127.0.0.2:{}/mcp", front.port());
        let origin = format!("https://127.0.0.2:{}", front.port());
        let (trust, work, target) = (
            local.cert_path().to_path_buf(),
            dir.path().to_path_buf(),
            url.clone(),
        );
        tokio::task::spawn_blocking(move || {
            let initialize = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion":"2025-06-18","capabilities":{},
                "clientInfo":{"name":"curl","version":"1"}}});
            let (_, head, _) = curl_post(
                Some(via),
                &trust,
                &target,
                None,
                &initialize.to_string(),
                &work,
            );
            let session = session_of(&head);
            let initialized = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
            let hello = initialized.to_string();
            curl_post(Some(via), &trust, &target, Some(&session), &hello, &work);
            let call = echo(1, "copied as curl").to_string();
            curl_post(Some(via), &trust, &target, Some(&session), &call, &work);
        })
        .await
        .expect("the client's calls");
        let mut model = Model::new();
        let answered = |m: &Model| {
            m.calls
                .iter()
                .filter(|c| c.tool.as_deref() == Some("echo") && !c.verdict.is_open())
                .count()
        };
        until(&mut events, &mut model, "the echo call answered", |m, _| {
            answered(m) == 1
        })
        .await;

        let info = Info {
            listen: Some(via.to_string()),
            upstream: Some(mcpscope_proxy::UPSTREAM_LABEL.to_string()),
            ca_cert: Some(local.cert_path().to_path_buf()),
            ..Info::default()
        };
        let mut app = App::new(info, Theme::dark(), Utc.fix());
        app.sync(&model);
        let echo_index = model
            .calls
            .iter()
            .find(|c| c.tool.as_deref() == Some("echo"))
            .map(|c| c.index)
            .expect("the echo call");
        assert!(app.select_call(&model, echo_index), "row");
        let command = app.curl_of_selection(&model).expect("a curl command");
        assert!(
            command.contains(&format!("--proxy 'http://{via}'")),
            "{command}"
        );
        assert!(
            command.contains(&format!("--cacert '{}'", local.cert_path().display())),
            "{command}"
        );
        assert!(command.contains(&format!("'{url}'")), "{command}");

        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new("timeout")
                .args(["20", "sh", "-c", &command])
                .env_remove("HTTPS_PROXY")
                .env_remove("https_proxy")
                .env_remove("NO_PROXY")
                .env_remove("no_proxy")
                .output()
                .expect("run the copied command")
        })
        .await
        .expect("the copied command");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        assert!(stdout.contains("copied as curl"), "{stdout}");
        until(&mut events, &mut model, "the copy answered", |m, _| {
            answered(m) == 2
        })
        .await;
        let copy = model
            .calls
            .iter()
            .filter(|c| c.tool.as_deref() == Some("echo"))
            .nth(1)
            .expect("the copy");
        let stream = model.stream(copy.request_stream).expect("its stream");
        assert_eq!(stream.origin.as_deref(), Some(origin.as_str()));
        server.shutdown().await;
    };
    tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("bounded");
}
