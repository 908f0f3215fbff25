//! The real binary in a real terminal (tmux), driven with keys as a person would: the orphaned
//! call appears within a second of its stream's death, `?` shows the help, `q` quits and leaves
//! the shell usable.

use std::process::Command;
use std::time::{Duration, Instant};

use mcpscope_testkit::raw::{observe, read_head, reset};
use mcpscope_testkit::tmux::Tmux;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: s1\r\nconnection: close\r\n\r\n";

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs tmux: install it (CI does, in .ci/run), then run scripts/test.sh"]
async fn the_orphan_shows_within_a_second_help_opens_and_q_restores_the_terminal() {
    // The upstream: answers a tools/call with an SSE stream and resets it 300 ms later.
    let upstream = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let upstream_addr = upstream.local_addr().expect("addr");
    let (death_tx, mut death_rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = upstream.accept().await {
            let death_tx = death_tx.clone();
            tokio::spawn(async move {
                if read_head(&mut sock).await.is_none() {
                    return;
                }
                let _ = sock.write_all(SSE_HEAD.as_bytes()).await;
                let _ = sock.write_all(b": open\n\n").await;
                tokio::time::sleep(Duration::from_millis(300)).await;
                let _ = death_tx.send(Instant::now());
                reset(sock);
            });
        }
    });
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("probe");
        probe.local_addr().expect("addr").port()
    };

    let tmux = Tmux::start(140, 40);
    let command = format!(
        "{} --listen 127.0.0.1:{port} --upstream http://{upstream_addr}/mcp --no-record; echo EXIT=$?",
        env!("CARGO_BIN_EXE_mcpscope")
    );
    tmux.keys(&[&command, "Enter"]);
    tmux.wait_for("the TUI", Duration::from_secs(10), |s| {
        s.contains("Calls") && s.contains("? help")
    });

    let proxy: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let call = r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"poke","arguments":{}}}"#;
    let client = tokio::spawn(async move { observe(proxy, "POST", call).await });
    let died = tokio::time::timeout(Duration::from_secs(5), death_rx.recv())
        .await
        .expect("death")
        .expect("time");
    let shown = tmux.wait_for("the orphaned row", Duration::from_secs(5), |s| {
        s.lines()
            .any(|l| l.contains("poke") && l.contains("orphaned"))
    });
    let lag = shown.at.saturating_duration_since(died);
    assert!(
        lag < Duration::from_secs(1),
        "orphan shown {lag:?} after the death"
    );
    let seen = client.await.expect("client");
    assert_eq!(
        seen.end,
        mcpscope_testkit::raw::End::Reset,
        "the client saw the reset"
    );
    let screen = tmux.screen();
    assert!(
        screen.contains("reset (upstream)"),
        "how the stream died is shown:\n{screen}"
    );

    tmux.keys(&["?"]);
    tmux.wait_for("the help overlay", Duration::from_secs(3), |s| {
        s.to_lowercase().contains("quit")
    });
    tmux.keys(&["Escape"]);
    tmux.keys(&["q"]);
    tmux.wait_for("the shell again", Duration::from_secs(5), |s| {
        s.contains("EXIT=0")
    });
    let screen = tmux.screen();
    assert!(
        !screen.contains("? help"),
        "the TUI's screen is gone:\n{screen}"
    );
    tmux.keys(&["echo still-$((20+22))", "Enter"]);
    tmux.wait_for("a usable shell", Duration::from_secs(3), |s| {
        s.contains("still-42")
    });
}

#[test]
#[ignore = "needs tmux: install it (CI does, in .ci/run), then run scripts/test.sh"]
fn every_signal_restores_the_terminal() {
    for signal in ["HUP", "TERM", "INT", "QUIT"] {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("probe");
            probe.local_addr().expect("addr").port()
        };
        let tmux = Tmux::start(120, 30);
        let before = tmux.modes();
        assert!(before.starts_with("alt=0 cursor=1"), "{before}");
        let command = format!(
            "{} --listen 127.0.0.1:{port} --upstream http://127.0.0.1:1/mcp --no-record; echo EXIT=$?",
            env!("CARGO_BIN_EXE_mcpscope")
        );
        tmux.keys(&[&command, "Enter"]);
        tmux.wait_for("the TUI", Duration::from_secs(10), |s| {
            s.contains("Calls") && s.contains("? help")
        });
        let during = tmux.modes();
        assert!(
            during.starts_with("alt=1"),
            "{signal}: in the TUI: {during}"
        );
        assert!(
            !during.ends_with("mouse=0000"),
            "{signal}: mouse captured: {during}"
        );
        let status = Command::new("pkill")
            .args([
                &format!("-{signal}"),
                "-f",
                &format!("listen 127.0.0.1:{port} --upstream"),
            ])
            .status()
            .expect("pkill");
        assert!(status.success(), "{signal}: the TUI process was found");
        tmux.wait_for("the shell again", Duration::from_secs(5), |s| {
            s.contains("EXIT=0")
        });
        let after = tmux.modes();
        assert_eq!(after, "alt=0 cursor=1 mouse=0000", "{signal}: restored");
        tmux.keys(&["echo still-$((20+22))", "Enter"]);
        tmux.wait_for("a usable shell", Duration::from_secs(3), |s| {
            s.contains("still-42")
        });
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs tmux: install it (CI does, in .ci/run), then run scripts/test.sh"]
async fn the_intercept_holds_edits_in_the_editor_and_quitting_releases() {
    use mcpscope_testserver::client::McpClient;
    use serde_json::json;

    let server = mcpscope_testserver::start(Default::default())
        .await
        .expect("test server");
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("probe");
        probe.local_addr().expect("addr").port()
    };
    let tmux = Tmux::start(160, 40);
    // `sed -i` stands in for the editor: it rewrites the held body in place.
    let command = format!(
        "EDITOR='sed -i s/before/after/' {} --listen 127.0.0.1:{port} --upstream {} --no-record; echo EXIT=$?",
        env!("CARGO_BIN_EXE_mcpscope"),
        server.url()
    );
    tmux.keys(&[&command, "Enter"]);
    tmux.wait_for("the TUI", Duration::from_secs(10), |s| {
        s.contains("Calls") && s.contains("? help")
    });
    tmux.keys(&["i"]);
    tmux.keys(&["-l", "tool:echo"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the intercept", Duration::from_secs(3), |s| {
        s.contains("INTERCEPT tool:echo")
    });
    let url = format!("http://127.0.0.1:{port}/mcp");
    let echo = |text: &'static str| {
        let url = url.clone();
        tokio::spawn(async move {
            let mut c = McpClient::new(&url).expect("client");
            c.handshake().await.expect("initialize");
            let answer = c
                .call("echo", json!({"text": text}), false)
                .await
                .expect("echo");
            answer.text().map(str::to_string)
        })
    };

    let edited = echo("before");
    tmux.wait_for("one held", Duration::from_secs(5), |s| s.contains("1 held"));
    tmux.keys(&["I"]);
    tmux.wait_for("the held list", Duration::from_secs(3), |s| {
        s.contains("Held by the intercept")
    });
    tmux.keys(&["e"]);
    let answer = tokio::time::timeout(Duration::from_secs(10), edited)
        .await
        .expect("answered")
        .expect("task");
    assert_eq!(answer.as_deref(), Some("after"));
    tmux.wait_for("the TUI back", Duration::from_secs(5), |s| {
        s.contains("forwarded edited")
    });

    let at_quit = echo("at quit");
    tmux.wait_for("one held", Duration::from_secs(5), |s| s.contains("1 held"));
    tmux.keys(&["Escape"]);
    tmux.keys(&["q"]);
    let answer = tokio::time::timeout(Duration::from_secs(10), at_quit)
        .await
        .expect("released at quit")
        .expect("task");
    assert_eq!(answer.as_deref(), Some("at quit"));
    tmux.wait_for("the shell again", Duration::from_secs(5), |s| {
        s.contains("EXIT=0")
    });
    server.shutdown().await;
}

/// At 80 × 24 the orphan's row names the death's cause and age (`reset 1.2s ago`) and its
/// verdict; the clock time gives way.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs tmux: install it (CI does, in .ci/run), then run scripts/test.sh"]
async fn at_80x24_the_orphan_row_gives_cause_and_age_first() {
    let upstream = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let upstream_addr = upstream.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = upstream.accept().await {
            tokio::spawn(async move {
                if read_head(&mut sock).await.is_none() {
                    return;
                }
                let _ = sock.write_all(SSE_HEAD.as_bytes()).await;
                let _ = sock.write_all(b": open\n\n").await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                reset(sock);
            });
        }
    });
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("probe");
        probe.local_addr().expect("addr").port()
    };
    let tmux = Tmux::start(80, 24);
    let command = format!(
        "{} --listen 127.0.0.1:{port} --upstream http://{upstream_addr}/mcp --no-record; echo EXIT=$?",
        env!("CARGO_BIN_EXE_mcpscope")
    );
    tmux.keys(&[&command, "Enter"]);
    tmux.wait_for("the TUI", Duration::from_secs(10), |s| s.contains("Calls"));
    let proxy: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let call = r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"poke","arguments":{}}}"#;
    let client = tokio::spawn(async move { observe(proxy, "POST", call).await });
    tmux.wait_for(
        "the orphan row with cause and age",
        Duration::from_secs(5),
        |s| {
            s.lines().any(|l| {
                l.contains("poke")
                    && l.contains("reset ")
                    && l.contains("s ago")
                    && l.contains("orphaned")
            })
        },
    );
    let _ = client.await;
    tmux.keys(&["q"]);
    tmux.wait_for("the shell again", Duration::from_secs(5), |s| {
        s.contains("EXIT=0")
    });
}

/// `q` ends the proxy within a second while a client still waits on an open call, and the held
/// exchange is recorded as ended by the shutdown.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs tmux: install it (CI does, in .ci/run), then run scripts/test.sh"]
async fn q_exits_within_a_second_while_a_client_waits_on_an_open_call() {
    // The upstream opens the call's SSE stream and never answers it.
    let upstream = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let upstream_addr = upstream.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = upstream.accept().await {
            tokio::spawn(async move {
                if read_head(&mut sock).await.is_none() {
                    return;
                }
                let _ = sock.write_all(SSE_HEAD.as_bytes()).await;
                let _ = sock.write_all(b": open\n\n").await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
        }
    });
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("probe");
        probe.local_addr().expect("addr").port()
    };
    let dir = tempfile::tempdir().expect("temp");
    let rec = dir.path().join("rec.jsonl");
    let tmux = Tmux::start(140, 40);
    let command = format!(
        "{} --listen 127.0.0.1:{port} --upstream http://{upstream_addr}/mcp --no-publish --record {}; echo EXIT=$?",
        env!("CARGO_BIN_EXE_mcpscope"),
        rec.display()
    );
    tmux.keys(&[&command, "Enter"]);
    tmux.wait_for("the TUI", Duration::from_secs(10), |s| {
        s.contains("Calls") && s.contains("? help")
    });
    let proxy: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let call = serde_json::json!({"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"poke","arguments":{}}});
    // The client holds its connection, waiting on the answer.
    let held = mcpscope_testkit::raw::send(proxy, "POST", Some("s1"), Some(&call)).await;
    tmux.wait_for("the waiting call", Duration::from_secs(5), |s| {
        s.lines().any(|l| l.contains("poke"))
    });
    let pressed = Instant::now();
    tmux.keys(&["q"]);
    let back = tmux.wait_for("the shell again", Duration::from_secs(10), |s| {
        s.contains("EXIT=0")
    });
    let took = back.at.saturating_duration_since(pressed);
    assert!(took < Duration::from_secs(1), "q took {took:?} to exit");
    let events = mcpscope_engine::record::read_file(&rec)
        .expect("recording")
        .events;
    let shutdown = events.iter().any(|e| {
        matches!(&e.kind, mcpscope_engine::event::EventKind::StreamEnded { detail: Some(d), .. } if d == "shutdown")
    });
    assert!(shutdown, "the held exchange ends as shutdown");
    drop(held);
}

/// `matrix` on a terminal: the grid fills in, Enter opens a finished cell's recording in the
/// replay viewer at its death, q comes back to the grid, q again leaves it and prints the table.
#[test]
#[ignore = "needs tmux: install it (CI does, in .ci/run), then run scripts/test.sh"]
fn the_matrix_grid_fills_in_and_opens_a_cell_at_its_death() {
    let tmux = Tmux::start(140, 24);
    let client = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/retry_client.py");
    tmux.keys(&[
        &format!(
            "{} matrix --cases healthy,reset-after-headers --tool poke --timeout 8s -- python3 {client} {{url}}; echo EXIT=$?",
            env!("CARGO_BIN_EXE_mcpscope")
        ),
        "Enter",
    ]);
    tmux.wait_for("the grid to finish", Duration::from_secs(60), |s| {
        s.contains("done: 2 cells")
    });
    let screen = tmux.screen();
    assert!(
        screen.contains("ok: correct") && screen.contains("retried: double execution"),
        "{screen}"
    );
    tmux.keys(&["Down"]);
    tmux.wait_for("the second cell selected", Duration::from_secs(5), |s| {
        s.contains("reset-after-headers × ")
    });
    tmux.keys(&["Enter"]);
    tmux.wait_for("the viewer at the death", Duration::from_secs(10), |s| {
        s.contains("REPLAY") && s.contains("reset (upstream)")
    });
    tmux.keys(&["q"]);
    tmux.wait_for("the grid again", Duration::from_secs(10), |s| {
        s.contains("done: 2 cells")
    });
    tmux.keys(&["q"]);
    tmux.wait_for(
        "the table and the exit status",
        Duration::from_secs(10),
        |s| s.contains("EXIT=1") && s.contains("2 cells, 1 correct, 1 with a defect"),
    );
}
