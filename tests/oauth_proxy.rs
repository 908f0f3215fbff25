//! An OAuth-protected upstream behind the real binary, on real sockets: the client's discovery
//! (RFC 9728) passes against the proxy's address, exactly the two URLs naming the upstream are
//! rewritten (and reported), the OAuth endpoints are labelled and not flagged as invalid MCP,
//! tokens stay out of the recording; and `--pass-host` lets a DNS-rebinding probe reach the
//! upstream, which mcpscope answers itself (403) without it.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::peers::{Proxy, temp_dir};
use mcpscope_testkit::raw::decode_chunked;
use serde_json::{Value, json};

const TOKEN: &str = "tok-SECRET-123";
const REFRESH: &str = "ref-SECRET-456";
const CODE: &str = "CODE-SECRET-789";
const CLIENT_SECRET: &str = "cs-SECRET-000";
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A request as the upstream saw it.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// A small OAuth-protected MCP server (protected resource and authorization server in one),
/// on std sockets: every request it saw is kept; each connection serves one request.
struct Upstream {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Upstream {
    /// `rebinding_guard`: answer 403 to a Host that is not the server's own address.
    fn start(rebinding_guard: bool) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let log = log.clone();
                thread::spawn(move || serve(conn, addr, rebinding_guard, &log));
            }
        });
        Upstream { addr, seen }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.addr.port())
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("log").clone()
    }
}

fn read_request(conn: &mut TcpStream) -> Option<Seen> {
    let mut reader = BufReader::new(conn.try_clone().ok()?);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let seen = Seen {
        head,
        body: Vec::new(),
    };
    let length: usize = seen
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Seen { body, ..seen })
}

fn serve(mut conn: TcpStream, addr: SocketAddr, guard: bool, log: &Mutex<Vec<Seen>>) {
    let _ = conn.set_read_timeout(Some(IO_TIMEOUT));
    let Some(req) = read_request(&mut conn) else {
        return;
    };
    log.lock().expect("log").push(req.clone());
    let base = format!("http://127.0.0.1:{}", addr.port());
    let line = req.head.lines().next().unwrap_or("").to_string();
    let (status, extra, body) = if guard && req.header("host").as_deref() != Some(&base[7..]) {
        (
            "403 Forbidden",
            String::new(),
            "upstream: foreign Host".to_string(),
        )
    } else if line.starts_with("POST /mcp ") {
        if req.header("authorization").as_deref() == Some(&format!("Bearer {TOKEN}")) {
            let result = json!({"jsonrpc": "2.0", "id": 1, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "serverInfo": {"name": "oauth-upstream", "version": "1"}}});
            ("200 OK", String::new(), result.to_string())
        } else {
            let challenge = format!(
                "WWW-Authenticate: Bearer error=\"invalid_token\", resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\"\r\n"
            );
            (
                "401 Unauthorized",
                challenge,
                r#"{"error":"invalid_token"}"#.into(),
            )
        }
    } else if line.starts_with("GET /.well-known/oauth-protected-resource/mcp ") {
        let doc = json!({"resource": format!("{base}/mcp"), "authorization_servers": [base],
            "scopes_supported": ["mcp"], "bearer_methods_supported": ["header"]});
        ("200 OK", String::new(), doc.to_string())
    } else if line.starts_with("GET /.well-known/oauth-authorization-server ") {
        let doc = json!({"issuer": base, "token_endpoint": format!("{base}/token"),
            "authorization_endpoint": format!("{base}/authorize"),
            "response_types_supported": ["code"]});
        ("200 OK", String::new(), doc.to_string())
    } else if line.starts_with("POST /token ") {
        let tokens = json!({"access_token": TOKEN, "token_type": "Bearer",
            "refresh_token": REFRESH, "expires_in": 3600});
        ("200 OK", String::new(), tokens.to_string())
    } else {
        ("404 Not Found", String::new(), "{}".into())
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(response.as_bytes());
}

/// A response as the client got it.
struct Reply {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<String> {
        Seen {
            head: self.head.clone(),
            body: Vec::new(),
        }
        .header(name)
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}\n{}",
                self.head,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// One request on its own connection (`Connection: close`), read to its end.
fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut conn = TcpStream::connect(addr).expect("connect to the proxy");
    conn.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    let mut text = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    conn.write_all(text.as_bytes()).expect("send");
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).expect("read the reply");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    let rest = raw[split + 4..].to_vec();
    let mut reply = Reply {
        status,
        head,
        body: Vec::new(),
    };
    reply.body = if reply
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        decode_chunked(&rest).0
    } else {
        rest
    };
    if let Some(length) = reply.header("content-length") {
        assert_eq!(
            length.parse::<usize>().ok(),
            Some(reply.body.len()),
            "Content-Length does not match the body: {}",
            reply.head
        );
    }
    reply
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"oauth-test","version":"1"}}}"#;

#[test]
fn oauth_discovery_passes_against_the_proxy_address() {
    let upstream = Upstream::start(false);
    let dir = temp_dir();
    let recording = dir.path().join("oauth.jsonl");
    let recording_arg = recording.display().to_string();
    let mut proxy = Proxy::start(
        &format!("{}/mcp", upstream.base()),
        &["--record", &recording_arg],
    );
    let addr = proxy.base.trim_start_matches("http://").to_string();
    let json_post = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];

    // 1. The challenge names the proxy's metadata URL; its other parameters are as sent.
    let challenged = request(&addr, "POST", "/mcp", &json_post, INITIALIZE);
    assert_eq!(challenged.status, 401, "{}", challenged.head);
    let challenge = challenged.header("www-authenticate").expect("challenge");
    let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp", proxy.base);
    assert_eq!(
        challenge,
        format!(
            "Bearer error=\"invalid_token\", resource_metadata=\"{metadata_url}\", scope=\"mcp\""
        )
    );

    // 2. The metadata document's resource is the URL the client talks to (RFC 9728 §3.3);
    //    the authorization server is the upstream's, untouched.
    let path = metadata_url.trim_start_matches(&proxy.base);
    let doc = request(&addr, "GET", path, &[], "");
    assert_eq!(doc.status, 200, "{}", doc.head);
    let doc = doc.json();
    assert_eq!(doc["resource"], format!("{}/mcp", proxy.base));
    assert_eq!(doc["authorization_servers"], json!([upstream.base()]));
    assert_eq!(doc["scopes_supported"], json!(["mcp"]));

    // 3. The authorization server's own metadata passes unchanged.
    let auth = request(
        &addr,
        "GET",
        "/.well-known/oauth-authorization-server",
        &[],
        "",
    );
    assert_eq!(auth.json()["issuer"], upstream.base());
    assert_eq!(
        auth.json()["token_endpoint"],
        format!("{}/token", upstream.base())
    );

    // 4. The token exchange (form-encoded) passes untouched both ways.
    let form = format!(
        "grant_type=authorization_code&code={CODE}&code_verifier=v1&client_id=c1&client_secret={CLIENT_SECRET}"
    );
    let tokens = request(
        &addr,
        "POST",
        "/token",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &form,
    );
    assert_eq!(tokens.json()["access_token"], TOKEN);
    let sent = upstream
        .seen()
        .into_iter()
        .find(|s| s.head.starts_with("POST /token "))
        .expect("the token request reached the upstream");
    assert_eq!(String::from_utf8_lossy(&sent.body), form);

    // 5. With the token, the MCP call is answered.
    let bearer = format!("Bearer {TOKEN}");
    let mut with_token = json_post.to_vec();
    with_token.push(("Authorization", &bearer));
    let answered = request(&addr, "POST", "/mcp", &with_token, INITIALIZE);
    assert_eq!(answered.status, 200, "{}", answered.head);
    assert_eq!(
        answered.json()["result"]["serverInfo"]["name"],
        "oauth-upstream"
    );

    let done = proxy.wait_notice(Duration::from_secs(10), |n| n["kind"] == "call_answered");
    assert!(done.is_some(), "{}", proxy.dump());
    let notices = proxy.notices();
    let rewritten: Vec<(String, String, String)> = notices
        .iter()
        .filter(|n| n["kind"] == "rewritten")
        .map(|n| {
            let s = |k: &str| n[k].as_str().unwrap_or("").to_string();
            (s("what"), s("from"), s("to"))
        })
        .collect();
    assert_eq!(
        rewritten,
        [
            (
                "resource_metadata".to_string(),
                format!(
                    "{}/.well-known/oauth-protected-resource/mcp",
                    upstream.base()
                ),
                metadata_url.clone()
            ),
            (
                "resource".to_string(),
                format!("{}/mcp", upstream.base()),
                format!("{}/mcp", proxy.base)
            )
        ],
        "{}",
        proxy.dump()
    );
    for kind in [
        "invalid_message",
        "call_failed",
        "client_retry",
        "call_orphaned",
    ] {
        assert!(
            !notices.iter().any(|n| n["kind"] == kind),
            "{kind} in an OAuth flow:\n{}",
            proxy.dump()
        );
    }
    assert!(
        notices
            .iter()
            .any(|n| n["kind"] == "auth_challenge" && n["status"] == 401),
        "{}",
        proxy.dump()
    );
    assert!(
        notices.iter().any(|n| n["label"] == "POST#4 token request"),
        "{}",
        proxy.dump()
    );

    // The recording holds the rewrites and none of the secrets.
    proxy.proc.terminate(Duration::from_secs(5));
    let text = std::fs::read_to_string(&recording).expect("recording");
    for secret in [TOKEN, REFRESH, CODE, CLIENT_SECRET] {
        assert!(!text.contains(secret), "{secret} is in the recording");
    }
    assert_eq!(text.matches(r#""kind":"rewritten""#).count(), 2, "{text}");
    // Said once: tokens will be asked for the proxy's URL, and --forward keeps audiences.
    assert_eq!(
        text.matches("`mcpscope --forward` keeps every URL and audience intact")
            .count(),
        1,
        "{text}"
    );
}

#[test]
fn pass_host_lets_a_rebinding_probe_reach_the_upstream() {
    let probe = [
        ("Host", "evil.example:80"),
        ("Origin", "http://evil.example"),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];

    // Without --pass-host, mcpscope answers the probe itself.
    let upstream = Upstream::start(true);
    let guarded = Proxy::start(&format!("{}/mcp", upstream.base()), &[]);
    let addr = guarded.base.trim_start_matches("http://").to_string();
    let refused = request(&addr, "POST", "/mcp", &probe, INITIALIZE);
    assert_eq!(refused.status, 403, "{}", refused.head);
    assert!(String::from_utf8_lossy(&refused.body).contains("mcpscope"));
    assert!(upstream.seen().is_empty(), "the probe reached the upstream");
    drop(guarded);

    // With it, the upstream sees the client's Host and Origin and answers for itself.
    let open = Proxy::start(&format!("{}/mcp", upstream.base()), &["--pass-host"]);
    let addr = open.base.trim_start_matches("http://").to_string();
    let answered = request(&addr, "POST", "/mcp", &probe, INITIALIZE);
    assert_eq!(answered.status, 403, "{}", answered.head);
    assert_eq!(
        String::from_utf8_lossy(&answered.body),
        "upstream: foreign Host"
    );
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].header("host").as_deref(), Some("evil.example:80"));
    assert_eq!(
        seen[0].header("origin").as_deref(),
        Some("http://evil.example")
    );
    // A request with the proxy's own Host reaches the upstream with that Host, too.
    let own = request(&addr, "POST", "/mcp", &probe[2..], INITIALIZE);
    assert_eq!(own.status, 403, "{}", own.head);
    assert!(
        open.stderr.text().contains("WARNING: --pass-host"),
        "{}",
        open.dump()
    );
}

#[test]
fn pass_host_is_refused_off_loopback() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcpscope"))
        .args(["--listen", "0.0.0.0:0", "--allow-remote", "--pass-host"])
        .args([
            "--upstream",
            "http://127.0.0.1:9/mcp",
            "--no-record",
            "--json",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run mcpscope");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--pass-host"), "{err}");
}
