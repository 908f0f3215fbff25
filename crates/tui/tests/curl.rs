//! `c` copies the selected call's request as a `curl` command: run by a real curl, it sends the
//! same method, path, MCP headers and body to the proxy's address, with secrets redacted.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use chrono::{Offset, Utc};
use mcpscope_engine::fixtures::Script;
use mcpscope_tui::{App, Effect};
use mcpscope_tui::{Info, Theme};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::{Value, json};

/// Reads one HTTP request (head and `Content-Length` body) and answers 202.
fn read_one_request(listener: &TcpListener) -> String {
    let (mut conn, _) = listener.accept().expect("accept");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = conn.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            if body.len() >= len {
                break;
            }
        }
    }
    let _ =
        conn.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    String::from_utf8_lossy(&data).into_owned()
}

#[test]
fn the_curl_command_resends_the_request_with_secrets_redacted() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let headers: &[(&str, &str)] = &[
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", "s-1"),
        ("mcp-protocol-version", "2025-06-18"),
        ("authorization", "Bearer SECRET-TOKEN"),
        ("user-agent", "node"),
    ];
    let request = json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
        "params":{"name":"echo","arguments":{"text":"it's here","api_key":"K3Y"}}});
    let mut s = Script::ticking();
    s.post(2, headers, request);
    let (model, _) = s.fold();
    let info = Info {
        listen: Some(addr.to_string()),
        ..Info::default()
    };
    let mut app = App::new(info, Theme::dark(), Utc.fix());
    app.sync(&model);
    let effects = app.handle_key(
        KeyEvent::new(KeyCode::Char('c'), KeyModifiers::NONE),
        &model,
    );
    let Some(Effect::Copy(command)) = effects.first() else {
        panic!("no copy: {effects:?} {:?}", app.flash());
    };
    assert!(
        !command.contains("SECRET-TOKEN") && !command.contains("K3Y"),
        "{command}"
    );
    let server = std::thread::spawn(move || read_one_request(&listener));
    let out = std::process::Command::new("sh")
        .args(["-c", command])
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = server.join().expect("server");
    let (head, body) = seen.split_once("\r\n\r\n").expect("a request");
    assert!(head.starts_with("POST /mcp HTTP/1.1"), "{head}");
    let lower = head.to_ascii_lowercase();
    for line in [
        "mcp-session-id: s-1",
        "mcp-protocol-version: 2025-06-18",
        "content-type: application/json",
        "authorization: [redacted]",
    ] {
        assert!(lower.contains(line), "{line} missing: {head}");
    }
    assert!(!lower.contains("user-agent: node"), "{head}");
    let body: Value = serde_json::from_str(body).expect("json body");
    assert_eq!(body["params"]["arguments"]["text"], "it's here");
    assert_eq!(body["method"], "tools/call");
    assert_eq!(body["id"], 7);
}
