//! The rule grammar and the rule engine: which rule fires on which request.

use std::time::Duration;

use mcpscope_engine::fault::{
    self, Fault, Planner, Repeat, RequestInfo, Rule, RuleEngine, RuleId, Trigger,
};
use serde_json::{Value, json};

fn call(id: u64, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
}

fn request(id: u64, method: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}})
}

/// Feeds the bodies in order; returns, per body, the origin of the plan (or None).
fn run(engine: &RuleEngine, bodies: &[(Option<&str>, Value)]) -> Vec<Option<String>> {
    bodies
        .iter()
        .enumerate()
        .map(|(i, (session, body))| {
            engine
                .plan(&RequestInfo {
                    stream: i as u64 + 1,
                    http_method: "POST",
                    session: *session,
                    server: None,
                    body: Some(body),
                })
                .map(|p| p.origin)
        })
        .collect()
}

fn engine(specs: &[&str]) -> RuleEngine {
    let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
    fault::load(&specs, None).expect("rules parse")
}

/// Which rule (#n) fired on each request, as a compact string like `1.2..`.
fn fired(engine: &RuleEngine, bodies: &[(Option<&str>, Value)]) -> String {
    run(engine, bodies)
        .into_iter()
        .map(|o| match o {
            Some(origin) => origin
                .strip_prefix("rule #")
                .and_then(|r| r.chars().next())
                .unwrap_or('?'),
            None => '.',
        })
        .collect()
}

fn s1(body: Value) -> (Option<&'static str>, Value) {
    (Some("s1"), body)
}

#[test]
fn the_seed_rule_parses_with_every_part() {
    let rule: Rule = "reset after 500ms when method=tools/call tool=poke nth=1 once"
        .parse()
        .expect("parse");
    assert_eq!(rule.fault, Fault::Reset);
    assert_eq!(rule.trigger, Trigger::After(Duration::from_millis(500)));
    assert_eq!(rule.method.as_deref(), Some("tools/call"));
    assert_eq!(rule.tool.as_deref(), Some("poke"));
    assert_eq!(rule.nth, Some(1));
    assert_eq!(rule.repeat, Repeat::Once);
    assert_eq!(
        rule.to_string(),
        "reset after 500ms when method=tools/call tool=poke nth=1 once"
    );
    // The canonical text parses back to the same rule.
    assert_eq!(rule.to_string().parse::<Rule>().expect("reparse"), rule);
}

#[test]
fn every_fault_word_parses() {
    let table: &[(&str, Fault)] = &[
        ("eof", Fault::Eof),
        ("reset", Fault::Reset),
        (
            "server-dies",
            Fault::ServerDies {
                down: Duration::from_secs(5),
            },
        ),
        (
            "server-dies:2s",
            Fault::ServerDies {
                down: Duration::from_secs(2),
            },
        ),
        ("json-reset", Fault::JsonThenReset),
        ("status:503", Fault::Status(503)),
        ("503", Fault::Status(503)),
        ("404", Fault::Status(404)),
        ("stall", Fault::Stall),
        ("delay:200ms", Fault::Delay(Duration::from_millis(200))),
        ("delay:1.5s", Fault::Delay(Duration::from_millis(1500))),
        ("drip:64", Fault::Drip { bytes_per_sec: 64 }),
        ("drip", Fault::Drip { bytes_per_sec: 64 }),
        ("truncate", Fault::Truncate),
        ("duplicate", Fault::Duplicate),
        ("vanish", Fault::Vanish),
    ];
    for (word, want) in table {
        let rule: Rule = word.parse().unwrap_or_else(|e| panic!("{word}: {e}"));
        assert_eq!(&rule.fault, want, "{word}");
        assert_eq!(rule.trigger, Trigger::Now, "{word}");
    }
    let rule: Rule = "truncate after 3 events".parse().expect("parse");
    assert_eq!(rule.trigger, Trigger::AfterEvents(3));
    let rule: Rule = "duplicate always per-tool when tool=echo"
        .parse()
        .expect("any order");
    assert_eq!(rule.repeat, Repeat::Always);
    assert!(rule.per_tool);
    let rule: Rule = "eof each-tool".parse().expect("alias");
    assert!(rule.per_tool);
}

/// Plain seconds are a duration everywhere durations are read: `8` is `8s`.
#[test]
fn plain_seconds_are_a_duration() {
    let read = fault::spec::parse_duration;
    assert_eq!(read("8"), Ok(Duration::from_secs(8)));
    assert_eq!(read("1.5"), Ok(Duration::from_millis(1500)));
    assert_eq!(read("0"), Ok(Duration::ZERO));
    assert_eq!(read("8s"), read("8"));
    for bad in [
        "", ".", "1.2.3", "-1", "+1", "1e3", "inf", "nan", "8 s", "8h",
    ] {
        assert!(read(bad).is_err(), "{bad:?} read as a duration");
    }
    let rule: Rule = "reset after 2 when method=tools/call"
        .parse()
        .expect("rule");
    assert_eq!(rule.trigger, Trigger::After(Duration::from_secs(2)));
}

#[test]
fn bad_specs_name_the_spec_and_the_word() {
    let table: &[(&str, &str)] = &[
        ("", ""),
        ("boom", "boom"),
        ("reset aftr 5s", "aftr"),
        ("reset after", "after"),
        ("reset after 5x", "5x"),
        ("reset after -5", "-5"),
        ("reset after five events", "five"),
        ("status", "status"),
        ("status:42", "status:42"),
        ("delay:fast", "delay:fast"),
        ("drip:0", "drip:0"),
        ("reset:now", "reset:now"),
        ("reset nth=0", "nth=0"),
        ("reset tool=", "tool="),
        ("reset tool=a tool=b", "tool=b"),
        ("reset once always", "always"),
        ("reset colour=red", "colour=red"),
        ("503 after 2 events", "2 events"),
        ("reset method=ping tool=poke", "tool=poke"),
    ];
    for (spec, word) in table {
        let err = spec.parse::<Rule>().expect_err(spec);
        assert_eq!(err.spec, *spec);
        assert_eq!(err.word, *word, "{spec}: {err}");
        let text = err.to_string();
        assert!(text.contains(&format!("{spec:?}")), "{text}");
    }
    // Through `load`, as the CLI reports it.
    let err = fault::load(&["reset aftr 5s".to_string()], None).expect_err("bad");
    assert!(
        err.0.contains("reset aftr 5s") && err.0.contains("aftr"),
        "{}",
        err.0
    );
}

#[test]
fn once_fires_on_the_first_match_only() {
    let e = engine(&["reset when tool=poke"]);
    let got = fired(
        &e,
        &[
            s1(call(1, "echo")),
            s1(call(2, "poke")),
            s1(call(3, "poke")),
        ],
    );
    assert_eq!(got, ".1.");
    assert!(e.armed().is_empty(), "a spent once rule is disarmed");
    assert_eq!(e.fired(), 1);
}

#[test]
fn always_fires_on_every_match() {
    let e = engine(&["eof always when tool=poke"]);
    let got = fired(
        &e,
        &[
            s1(call(1, "poke")),
            s1(call(2, "echo")),
            s1(call(3, "poke")),
        ],
    );
    assert_eq!(got, "1.1");
    assert_eq!(e.armed().len(), 1);
}

#[test]
fn nth_picks_the_nth_occurrence() {
    let e = engine(&["reset when tool=poke nth=2"]);
    let got = fired(
        &e,
        &[
            s1(call(1, "poke")),
            s1(call(2, "echo")),
            s1(call(3, "poke")),
            s1(call(4, "poke")),
        ],
    );
    assert_eq!(got, "..1.");
    // With `always`, from the n-th on.
    let e = engine(&["reset when tool=poke nth=2 always"]);
    let got = fired(
        &e,
        &[
            s1(call(1, "poke")),
            s1(call(2, "poke")),
            s1(call(3, "poke")),
        ],
    );
    assert_eq!(got, ".11");
}

#[test]
fn per_tool_once_takes_the_first_call_of_each_tool() {
    // The seed: "the first tools/call of each tool gets an SSE response reset after 500 ms".
    let e = engine(&["reset after 500ms when method=tools/call per-tool"]);
    let got = fired(
        &e,
        &[
            s1(request(1, "tools/list")),
            s1(call(2, "poke")),
            s1(call(3, "poke")),
            s1(call(4, "peek")),
            s1(call(5, "peek")),
            s1(call(6, "poke")),
            s1(call(7, "echo")),
        ],
    );
    assert_eq!(got, ".1.1..1");
    let armed = e.armed();
    assert_eq!(
        armed.len(),
        1,
        "per-tool once rules stay armed for new tools"
    );
    assert!(armed[0].contains("fired for echo, peek, poke"), "{armed:?}");
    // Per tool with nth: the second call of each tool.
    let e = engine(&["eof when method=tools/call per-tool nth=2"]);
    let got = fired(
        &e,
        &[
            s1(call(1, "a")),
            s1(call(2, "b")),
            s1(call(3, "b")),
            s1(call(4, "a")),
            s1(call(5, "a")),
        ],
    );
    assert_eq!(got, "..11.");
}

#[test]
fn matchers_method_session_and_requests_only() {
    let e = engine(&[
        "503 always when method=tools/list",
        "eof always when session=s2",
    ]);
    let got = fired(
        &e,
        &[
            s1(request(1, "tools/list")),
            s1(call(2, "echo")),
            (Some("s2"), call(3, "echo")),
            (Some("s2"), request(4, "tools/list")),
            (None, call(5, "echo")),
        ],
    );
    assert_eq!(got, "1.21.");
    // Without a method matcher, notifications and responses never match.
    let e = engine(&["reset always"]);
    let got = fired(
        &e,
        &[
            s1(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            s1(json!({"jsonrpc": "2.0", "id": 9, "result": {}})),
            s1(request(1, "ping")),
        ],
    );
    assert_eq!(got, "..1");
    // With one, a notification of that method matches.
    let e = engine(&["500 when method=notifications/initialized"]);
    let got = fired(
        &e,
        &[s1(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )],
    );
    assert_eq!(got, "1");
    // No body (a GET) never matches.
    let plan = e.plan(&RequestInfo {
        stream: 1,
        http_method: "GET",
        session: Some("s1"),
        server: None,
        body: None,
    });
    assert!(plan.is_none());
}

#[test]
fn batches_match_when_any_element_does() {
    let e = engine(&["reset when tool=poke"]);
    let batch = json!([request(1, "ping"), call(2, "poke")]);
    assert_eq!(fired(&e, &[s1(batch)]), "1");
}

#[test]
fn the_first_rule_that_fires_takes_the_request() {
    let e = engine(&["reset when tool=poke", "eof when tool=poke"]);
    // #1 takes the first poke; #2 does not count it and takes the second.
    assert_eq!(fired(&e, &[s1(call(1, "poke")), s1(call(2, "poke"))]), "12");
}

#[test]
fn the_plan_carries_fault_trigger_and_origin() {
    let e = engine(&["truncate after 2 events when tool=slow"]);
    let plan = e
        .plan(&RequestInfo {
            stream: 4,
            http_method: "POST",
            session: None,
            server: None,
            body: Some(&call(1, "slow")),
        })
        .expect("fires");
    assert_eq!(plan.fault, Fault::Truncate);
    assert_eq!(plan.trigger, Trigger::AfterEvents(2));
    assert_eq!(
        plan.origin,
        "rule #1: truncate after 2 events when tool=slow once"
    );
}

#[test]
fn disarming_by_id_never_hits_a_rule_that_moved_up() {
    let e = RuleEngine::new();
    e.arm("reset when tool=a").expect("arm");
    e.arm("eof when tool=b").expect("arm");
    // A view reads the list and means to disarm the oldest rule, #1 ...
    let armed = e.armed_rules();
    let (oldest, _) = armed.first().cloned().expect("armed");
    assert_eq!(oldest, RuleId(1));
    // ... but #1 fires (and is spent) before the disarm arrives.
    assert_eq!(fired(&e, &[s1(call(1, "a"))]), "1");
    assert!(!e.disarm(oldest), "#1 is already gone");
    let left: Vec<RuleId> = e.armed_rules().into_iter().map(|(id, _)| id).collect();
    assert_eq!(left, vec![RuleId(2)], "#2 stays armed");
    assert_eq!(fired(&e, &[s1(call(2, "b"))]), "2");
}

#[test]
fn arm_and_disarm() {
    let e = RuleEngine::new();
    let a = e.arm("reset when tool=a").expect("arm");
    let b = e.arm("eof when tool=b").expect("arm");
    assert_eq!(a, "#1 reset when tool=a once");
    assert_eq!(b, "#2 eof when tool=b once");
    assert_eq!(e.armed(), vec![a, b.clone()]);
    assert!(e.disarm(RuleId(1)));
    assert!(!e.disarm(RuleId(5)));
    assert_eq!(e.armed(), vec![b]);
    assert_eq!(fired(&e, &[s1(call(1, "a")), s1(call(2, "b"))]), ".2");
    assert!(e.arm("nonsense").is_err());
}

#[test]
fn the_faults_file_has_the_same_fields() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("faults.toml");
    std::fs::write(
        &path,
        r#"
[[rule]]
fault = "reset"
after = "500ms"
method = "tools/call"
per_tool = true

[[rule]]
fault = "status:503"
tool = "echo"
nth = 2
repeat = "always"

[[rule]]
fault = "truncate"
after = "3 events"
session = "s9"
"#,
    )
    .expect("write");
    let e = fault::load(&["eof when tool=zzz".into()], Some(&path)).expect("load");
    assert_eq!(
        e.armed(),
        vec![
            "#1 eof when tool=zzz once",
            "#2 reset after 500ms when method=tools/call per-tool once",
            "#3 status:503 when tool=echo nth=2 always",
            "#4 truncate after 3 events when session=s9 once",
        ]
    );

    std::fs::write(
        &path,
        "[[rule]]\nfault = \"reset\"\n\n[[rule]]\nfault = \"zap\"\n",
    )
    .expect("write");
    let err = fault::load(&[], Some(&path)).expect_err("bad fault");
    assert!(
        err.0.contains("rule 2") && err.0.contains("zap"),
        "{}",
        err.0
    );

    std::fs::write(&path, "[[rule]]\nfault = \"reset\"\ncolour = \"red\"\n").expect("write");
    let err = fault::load(&[], Some(&path)).expect_err("unknown field");
    assert!(err.0.contains("colour"), "{}", err.0);

    std::fs::write(&path, "[[rule]]\nfault = \"reset\"\nrepeat = \"twice\"\n").expect("write");
    let err = fault::load(&[], Some(&path)).expect_err("bad repeat");
    assert!(err.0.contains("twice"), "{}", err.0);

    let err = fault::load(&[], Some(&dir.path().join("missing.toml"))).expect_err("missing");
    assert!(err.0.contains("missing.toml"), "{}", err.0);
}

/// Whether a rule fires on a `tools/call` to `server`.
fn fires_for(spec: &str, server: Option<&str>) -> bool {
    engine(&[spec])
        .plan(&RequestInfo {
            stream: 1,
            http_method: "POST",
            session: None,
            server,
            body: Some(&call(1, "poke")),
        })
        .is_some()
}

#[test]
fn server_matches_the_origin_its_host_or_host_and_port() {
    // (rule, the request's server, fires)
    let table: &[(&str, Option<&str>, bool)] = &[
        (
            "reset when server=127.0.0.1",
            Some("http://127.0.0.1:4001"),
            true,
        ),
        (
            "reset when server=127.0.0.1:4001",
            Some("http://127.0.0.1:4001"),
            true,
        ),
        (
            "reset when server=127.0.0.1:4002",
            Some("http://127.0.0.1:4001"),
            false,
        ),
        (
            "reset when server=http://127.0.0.1:4001",
            Some("http://127.0.0.1:4001"),
            true,
        ),
        (
            "reset when server=api.example",
            Some("https://API.example"),
            true,
        ),
        (
            "reset when server=api.example:443",
            Some("https://api.example"),
            true,
        ),
        (
            "reset when server=other.example",
            Some("https://api.example"),
            false,
        ),
        ("reset when server=weather", Some("weather"), true),
        ("reset when server=127.0.0.1", None, false),
        ("reset", Some("http://127.0.0.1:4001"), true),
    ];
    for &(spec, server, fires) in table {
        assert_eq!(fires_for(spec, server), fires, "{spec} on {server:?}");
    }
}

#[test]
fn server_is_parsed_written_back_and_refused_twice() {
    let rule: Rule = "reset when server=127.0.0.1:4001 tool=poke"
        .parse()
        .expect("parses");
    assert_eq!(rule.server.as_deref(), Some("127.0.0.1:4001"));
    assert_eq!(rule.to_string().parse::<Rule>().expect("reparse"), rule);
    assert!(rule.to_string().contains("server=127.0.0.1:4001"), "{rule}");
    let err = "reset when server=a server=b"
        .parse::<Rule>()
        .expect_err("twice");
    assert!(err.to_string().contains("given twice"), "{err}");
    let err = "reset when server=".parse::<Rule>().expect_err("empty");
    assert!(err.to_string().contains("needs a value"), "{err}");
}
