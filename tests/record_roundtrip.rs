//! Record a run, read it back, fold it: the same verdicts as live; the file is private and
//! credentials are redacted.

use std::sync::Arc;
use std::time::Duration;

use mcpscope_engine::fault::{Fault, Plan, Planner, RequestInfo, Trigger};
use mcpscope_engine::model::{Model, Notice};
use mcpscope_engine::record::{self, Create, Recorder};
use mcpscope_engine::redact::Redactor;
use mcpscope_proxy::Config;
use mcpscope_session::Session;
use mcpscope_testserver as testserver;
use mcpscope_testserver::client::McpClient;
use mcpscope_testserver::democlient::{self, DemoStep};

/// How long a test waits for its session to record what it was sent.
const FINISH: Duration = Duration::from_secs(30);

/// Resets the stream of the first `tools/call poke`, 100 ms in (the tool answers at 300 ms).
struct KillPoke(std::sync::atomic::AtomicBool);

impl Planner for KillPoke {
    fn plan(&self, request: &RequestInfo<'_>) -> Option<Plan> {
        let body = request.body?;
        let is_poke = body["method"] == "tools/call" && body["params"]["name"] == "poke";
        (is_poke && !self.0.swap(true, std::sync::atomic::Ordering::SeqCst)).then(|| Plan {
            fault: Fault::Reset,
            trigger: Trigger::After(Duration::from_millis(100)),
            origin: "test".into(),
        })
    }
}

fn verdicts(model: &Model) -> Vec<(String, String, &'static str)> {
    model
        .calls
        .iter()
        .map(|c| (c.id_text(), c.title(), c.verdict.name()))
        .collect()
}

#[tokio::test]
async fn a_recording_folds_to_the_live_verdicts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("run.jsonl");
    // No event ids: a dead stream cannot be resumed, so the poke is orphaned (not resumable).
    let options = testserver::Options {
        event_ids: false,
        ..Default::default()
    };
    let server = testserver::start(options).await.expect("test server");
    let config = Config {
        listen: "127.0.0.1:0".parse().expect("addr"),
        upstream: server.url().parse().expect("uri"),
        insecure: false,
        allow_remote: false,
        ..Default::default()
    };
    let recorder = Recorder::create(&path, Create::New, true).expect("recording");
    let mut session = Session::builder("http", Redactor::new())
        .record(Some(recorder))
        .start()
        .expect("session");
    let proxy = mcpscope_proxy::start(config, session.sink())
        .await
        .expect("proxy");
    proxy
        .shared
        .set_planner(Arc::new(KillPoke(Default::default())));
    let mut feed = session.feed().expect("feed");
    let url = format!("http://{}/mcp", proxy.addr);
    let steps = [
        DemoStep::Initialize,
        DemoStep::Initialized,
        DemoStep::ListTools,
        DemoStep::call("echo", serde_json::json!({"text": "hi"}), false),
        DemoStep::call(
            "slow",
            serde_json::json!({"steps": 3, "interval_ms": 20}),
            true,
        ),
        DemoStep::call("poke", serde_json::json!({}), false),
        DemoStep::call("peek", serde_json::json!({}), false),
    ];
    let outcomes = democlient::run_script(&url, &steps).await.expect("script");
    assert!(
        !outcomes[5].ok,
        "poke's stream was reset: {:?}",
        outcomes[5]
    );

    proxy.shutdown();
    drop(proxy);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let recorded = session.finish(FINISH).await.expect("finished").written;
    let mut live = Model::new();
    let mut live_notices: Vec<Notice> = Vec::new();
    while let Ok(event) = feed.try_recv() {
        live_notices.extend(live.apply(&event));
    }

    let recording = record::read_file(&path).expect("read back");
    assert!(recording.warnings.is_empty(), "{:?}", recording.warnings);
    assert_eq!(recording.events.len() as u64, recorded);
    let (replayed, replayed_notices) = Model::from_events(&recording.events);
    assert_eq!(verdicts(&replayed), verdicts(&live));
    assert_eq!(replayed_notices, live_notices);
    let poke = replayed
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("poke"))
        .expect("poke");
    assert_eq!(poke.verdict.name(), "orphaned");
    assert!(
        replayed
            .calls
            .iter()
            .filter(|c| c.tool.as_deref() != Some("poke"))
            .all(|c| c.verdict.name() == "answered")
    );

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}

#[tokio::test]
async fn secrets_are_absent_from_the_recording_unless_asked() {
    for redact in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("run.jsonl");
        let server = testserver::start(testserver::Options::default())
            .await
            .expect("test server");
        let config = Config {
            listen: "127.0.0.1:0".parse().expect("addr"),
            upstream: server.url().parse().expect("uri"),
            insecure: false,
            allow_remote: false,
            ..Default::default()
        };
        let redactor = if redact {
            Redactor::new().with_json_keys(&["customer_pin"])
        } else {
            Redactor::disabled()
        };
        let recorder = Recorder::create(&path, Create::New, redact).expect("recording");
        let session = Session::builder("http", redactor)
            .record(Some(recorder))
            .start()
            .expect("session");
        let proxy = mcpscope_proxy::start(config, session.sink())
            .await
            .expect("proxy");
        let status = initialize_with_credentials(proxy.addr).await;
        assert_eq!(status, 200);
        proxy.shutdown();
        drop(proxy);
        tokio::time::sleep(Duration::from_millis(50)).await;
        session.finish(FINISH).await.expect("finished");
        let text = std::fs::read_to_string(&path).expect("recording");
        for secret in [
            "s3cr3t",
            "sk-LEAK",
            "extra-LEAK",
            "COOKIE-LEAK",
            "dark-LEAK",
            "KEY-LEAK",
            "QUERY-LEAK",
            "JSON-LEAK",
            "PIN-LEAK",
        ] {
            assert_eq!(
                text.contains(secret),
                !redact,
                "redact={redact}: {secret} in {text}"
            );
        }
        // Whole values: no scheme or first word is left behind.
        assert_eq!(text.contains("Bearer"), !redact, "redact={redact}");
        if redact {
            assert!(text.contains("[redacted]"), "{text}");
            // What is not a secret is kept.
            assert!(text.contains("\"q\":\"kept\""), "{text}");
        }
    }
}

/// `initialize` through the proxy at `addr` with secrets in its headers, query and body;
/// returns the status.
async fn initialize_with_credentials(addr: std::net::SocketAddr) -> u16 {
    let mut client =
        McpClient::new(&format!("http://{addr}/mcp?api_key=QUERY-LEAK&x=1")).expect("client");
    let init = serde_json::json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"},
        "apiKey":"JSON-LEAK","customer_pin":"PIN-LEAK","q":"kept"}});
    let credentials = [
        ("authorization", "Bearer s3cr3t sk-LEAK extra-LEAK"),
        ("cookie", "COOKIE-LEAK; theme=dark-LEAK"),
        ("x-api-key", "KEY-LEAK"),
    ];
    let reading = client
        .send(http::Method::POST, Some(&init), &credentials)
        .await
        .expect("send");
    reading.answer(None).await.status
}
