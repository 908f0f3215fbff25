//! Recording format version 2: the shipped recordings read the same as their version 1
//! originals, `mcpscope convert` rewrites a file safely, what the live view saw is what the
//! recording gives back (redaction on), and the file stays close to the bytes on the wire.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mcpscope::app;
use mcpscope_engine::event::{Event, EventKind};
use mcpscope_engine::model::Model;
use mcpscope_engine::record::{self, Create, Recorder};
use mcpscope_engine::redact::Redactor;
use mcpscope_proxy::Config;
use mcpscope_testkit::client::McpClient;
use mcpscope_testkit::{testserver, wirecount};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn verdicts(model: &Model) -> Vec<(String, String, &'static str)> {
    model
        .calls
        .iter()
        .map(|c| (c.id_text(), c.title(), c.verdict.name()))
        .collect()
}

#[test]
fn shipped_recordings_read_the_same_as_their_version_1_originals() {
    let v1_dir = root().join("tests/data/recordings-v1");
    let mut seen = 0;
    for entry in std::fs::read_dir(root().join("recordings")).expect("recordings/") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let name = path.file_name().expect("name");
        let v2 = record::read_file(&path).expect("the shipped recording");
        let v1 = record::read_file(&v1_dir.join(name)).expect("its version 1 original");
        assert_eq!(v2.header.version, 2, "{}", path.display());
        assert_eq!(v1.header.version, 1, "{}", path.display());
        assert_eq!(v2.events, v1.events, "{}", path.display());
        let (model_v2, notices_v2) = Model::from_events(&v2.events);
        let (model_v1, notices_v1) = Model::from_events(&v1.events);
        assert_eq!(verdicts(&model_v2), verdicts(&model_v1));
        assert_eq!(notices_v2, notices_v1);
        assert!(!verdicts(&model_v2).is_empty());
        seen += 1;
    }
    assert!(seen >= 6, "only {seen} shipped recordings");
}

fn mcpscope(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(args)
        .output()
        .expect("run mcpscope")
}

#[test]
fn convert_rewrites_version_1_as_version_2_and_never_clobbers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = root().join("tests/data/recordings-v1/healthy.jsonl");
    let out = dir.path().join("healthy.jsonl");
    let run = |extra: &[&str], to: &Path| {
        let mut args = vec![input.as_os_str(), to.as_os_str()];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        mcpscope_convert(&args)
    };

    let first = run(&[], &out);
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        first.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let v1 = record::read_file(&input).expect("v1");
    assert!(
        stdout.contains(&format!(
            "converted {} events (version 1 → 2)",
            v1.events.len()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("bytes →"), "{stdout}");
    let v2 = record::read_file(&out).expect("v2");
    assert_eq!(v2.header.version, 2);
    assert_eq!(v2.header.created, v1.header.created);
    assert_eq!(v2.events, v1.events);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&out).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    let again = run(&[], &out);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("exists (add --overwrite to replace it)"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(run(&["--overwrite"], &out).status.success());

    // Version 2 in, the same bytes out.
    let twice = dir.path().join("twice.jsonl");
    assert!(
        mcpscope_convert(&[out.as_os_str(), twice.as_os_str()])
            .status
            .success()
    );
    assert_eq!(
        std::fs::read(&twice).expect("twice"),
        std::fs::read(&out).expect("once")
    );

    #[cfg(unix)]
    {
        let target = dir.path().join("target.jsonl");
        std::fs::write(&target, "keep").expect("target");
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let refused = run(&["--overwrite"], &link);
        assert!(!refused.status.success());
        assert!(String::from_utf8_lossy(&refused.stderr).contains("symbolic link"));
        assert_eq!(std::fs::read_to_string(&target).expect("target"), "keep");
    }

    let missing = mcpscope(&[
        std::ffi::OsStr::new("convert"),
        dir.path().join("nope.jsonl").as_os_str(),
        dir.path().join("x.jsonl").as_os_str(),
    ]);
    assert_eq!(missing.status.code(), Some(1));
}

/// Runs `mcpscope convert` (the first two arguments are IN and OUT).
fn mcpscope_convert(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut all = vec![std::ffi::OsStr::new("convert")];
    all.extend_from_slice(args);
    mcpscope(&all)
}

/// A proxy in front of the test server, recording to `path` through `redactor`.
async fn recorded_proxy(upstream: &str, path: &Path, redactor: Redactor) -> app::Running {
    let config = Config {
        listen: "127.0.0.1:0".parse().expect("addr"),
        upstream: upstream.parse().expect("uri"),
        insecure: false,
        allow_remote: false,
        ..Default::default()
    };
    let recorder = Recorder::create(path, Create::New, redactor.enabled()).expect("recording");
    app::start_proxy(config, Some(recorder), redactor)
        .await
        .expect("proxy")
}

/// Stops the proxy and returns the events its view was fed.
async fn stop(mut running: app::Running) -> Vec<Event> {
    let mut feed = running.hub.take_output().expect("feed");
    running.proxy.shutdown();
    drop(running.proxy);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let tally = running
        .hub
        .finish_within(Duration::from_secs(10))
        .expect("the hub finishes");
    assert_eq!(tally.written, tally.seen);
    let mut live = Vec::new();
    while let Ok(event) = feed.try_recv() {
        live.push(event);
    }
    live
}

#[tokio::test]
async fn the_recording_gives_back_exactly_what_the_live_view_saw_with_redaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("live.jsonl");
    let server = testserver::start(testserver::Options::default())
        .await
        .expect("test server");
    // `text` as a secret key: every tool result's data and body are redacted.
    let redactor = Redactor::new().with_json_keys(&["text"]);
    let running = recorded_proxy(&server.url(), &path, redactor).await;
    let url = format!("http://{}/mcp", running.proxy.addr);
    let mut client = McpClient::new(&url).expect("client");
    client.handshake().await.expect("handshake");
    for n in 0..3 {
        let answer = client
            .call(
                "echo",
                serde_json::json!({"text": format!("secret {n}")}),
                false,
            )
            .await
            .expect("echo");
        assert!(answer.result().is_some(), "{answer:?}");
    }
    client
        .call(
            "slow",
            serde_json::json!({"steps": 3, "interval_ms": 5}),
            true,
        )
        .await
        .expect("slow");
    let live = stop(running).await;

    let recording = record::read_file(&path).expect("read back");
    assert!(recording.warnings.is_empty(), "{:?}", recording.warnings);
    assert_eq!(recording.events, live, "the recording is the live feed");
    let text = std::fs::read_to_string(&path).expect("text");
    assert!(!text.contains("secret 1"), "redacted");
    let refs = text.matches("\"from_sse\":true").count();
    let sse_data = live
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::SseEvent { data, .. } if !data.is_empty()))
        .count();
    assert!(refs >= 5, "{refs} back-references");
    assert_eq!(refs, sse_data, "every SSE message refers to its data");
    assert!(
        text.contains(r#""text":"[redacted]""#),
        "the data is stored redacted"
    );

    // A torn last line (a crash mid-write) is reported and skipped.
    let bytes = std::fs::read(&path).expect("bytes");
    let torn = dir.path().join("torn.jsonl");
    std::fs::write(&torn, &bytes[..bytes.len() - 10]).expect("torn");
    let cut = record::read_file(&torn).expect("a torn file opens");
    assert_eq!(cut.events, live[..live.len() - 1]);
    assert_eq!(cut.warnings.len(), 1);
    assert!(
        cut.warnings[0].contains("the last line is truncated"),
        "{:?}",
        cut.warnings
    );
    // And through the binary: converting it says so, and keeps the rest.
    let out = dir.path().join("out.jsonl");
    let converted = mcpscope_convert(&[torn.as_os_str(), out.as_os_str()]);
    assert!(converted.status.success());
    assert!(String::from_utf8_lossy(&converted.stderr).contains("the last line is truncated"));
    assert_eq!(record::read_file(&out).expect("out").events, cut.events);
}

/// Recording bytes (the header aside) per byte that crossed the client's side of the proxy.
fn ratio(recording: &Path, wire: u64) -> f64 {
    let text = std::fs::read(recording).expect("recording");
    let header = text.iter().position(|b| *b == b'\n').expect("header") + 1;
    (text.len() - header) as f64 / wire as f64
}

#[tokio::test]
async fn an_sse_flood_records_in_at_most_1_3_times_its_wire_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("flood.jsonl");
    let upstream = wirecount::flooding_upstream(3000).await.expect("upstream");
    let running = recorded_proxy(&format!("http://{upstream}/mcp"), &path, Redactor::new()).await;
    let (relay, wire) = wirecount::counting_relay(running.proxy.addr)
        .await
        .expect("relay");
    let response = tokio::time::timeout(Duration::from_secs(60), wirecount::post_once(relay))
        .await
        .expect("the flood ends in time")
        .expect("the flood");
    assert!(response.starts_with(b"HTTP/1.1 200"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let live = stop(running).await;
    let wire = wire.bytes();
    assert!(wire > 3_000_000, "{wire} bytes crossed");
    let recording = record::read_file(&path).expect("read back");
    assert_eq!(recording.events, live);
    let ratio = ratio(&path, wire);
    println!("SSE flood: {wire} wire bytes, {ratio:.3} recording bytes per wire byte");
    assert!(ratio <= 1.3, "{ratio:.3} recording bytes per wire byte");
}

#[tokio::test]
async fn a_call_heavy_session_records_close_to_its_wire_bytes() {
    for json_responses in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("calls.jsonl");
        let server = testserver::start(testserver::Options {
            json_responses,
            ..Default::default()
        })
        .await
        .expect("test server");
        let running = recorded_proxy(&server.url(), &path, Redactor::new()).await;
        let (relay, wire) = wirecount::counting_relay(running.proxy.addr)
            .await
            .expect("relay");
        let mut client = McpClient::new(&format!("http://{relay}/mcp")).expect("client");
        let calls = async {
            client.handshake().await.expect("handshake");
            for n in 0..300 {
                let text = format!("call number {n} with a sentence of ordinary length");
                client
                    .call("echo", serde_json::json!({ "text": text }), false)
                    .await
                    .expect("echo");
            }
        };
        tokio::time::timeout(Duration::from_secs(60), calls)
            .await
            .expect("the calls end in time");
        drop(client);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let live = stop(running).await;
        let wire = wire.bytes();
        let recording = record::read_file(&path).expect("read back");
        assert_eq!(recording.events, live);
        let ratio = ratio(&path, wire);
        println!(
            "calls (json responses: {json_responses}): {wire} wire bytes, {ratio:.3} recording bytes per wire byte"
        );
        assert!(ratio <= 1.3, "{ratio:.3} recording bytes per wire byte");
    }
}

#[test]
fn a_reference_with_nothing_to_refer_to_is_an_error_with_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(root().join("recordings/healthy.jsonl")).expect("shipped");
    let lines: Vec<&str> = text.lines().collect();
    let back_ref = lines
        .iter()
        .position(|l| l.contains("\"from_sse\":true"))
        .expect("a back-reference");
    assert!(lines[back_ref - 1].contains("\"kind\":\"sse_event\""));
    // Without the SSE event it refers to, the message cannot be restored: a clear error naming
    // the line (which moved up by one), never a made-up event.
    let mut cut = lines.clone();
    cut.remove(back_ref - 1);
    let path = dir.path().join("cut.jsonl");
    std::fs::write(&path, cut.join("\n") + "\n").expect("write");
    let error = record::read_file(&path).expect_err("refused").to_string();
    assert!(
        error.starts_with(&format!(
            "{}:{}: bad event: refers to the data of an SSE event",
            path.display(),
            back_ref
        )),
        "{error}"
    );
    // A header index past the previous head's headers, in the middle of the file.
    let head = lines
        .iter()
        .skip(2)
        .position(|l| l.contains("\"kind\":\"stream_opened\"") && l.contains("\"headers\":[0"))
        .expect("a head with a repeated header")
        + 2;
    let mut broken: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    broken[head] = broken[head].replace("\"headers\":[0", "\"headers\":[99");
    std::fs::write(&path, broken.join("\n") + "\n").expect("write");
    let error = record::read_file(&path).expect_err("refused").to_string();
    assert_eq!(
        error,
        format!(
            "{}:{}: bad event: header 99 of the previous head does not exist",
            path.display(),
            head + 1
        )
    );
}
