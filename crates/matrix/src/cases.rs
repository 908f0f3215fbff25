//! The matrix's cases: one stream death (or control) each, with the test server set up for it.

use mcpscope_testserver::{GetRefusal, SlowPlan};

/// What a correct client does when the case's fault hits its call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Nothing breaks: the call is answered.
    Answer,
    /// The call's stream dies: resume when an event id allows it, else give up at once.
    Death,
    /// An HTTP error answers the call (`what` names it): give up at once, or start over.
    HttpError(&'static str),
    /// The result never comes on a live stream: waiting is no defect (it looks like a slow tool).
    Stall,
    /// A slow, healthy call whose stream carries a notification every few seconds: correct is
    /// waiting for the result; giving up while they still flow is a defect.
    SlowAnswer,
    /// A slow, healthy call whose stream is silent until the result: waiting and giving up are
    /// both facts about the client (when it gave up is reported), neither a defect.
    Silent,
    /// A task's `tasks/result` wait dies; the task lives: ask `tasks/result` again. Only for
    /// clients that make task-augmented calls (2025-11-25 tasks); the fault hits `tasks/result`.
    TaskWait,
}

/// How the built-in test server is set up for a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSetup {
    /// Put `id:` fields on SSE events (resumption possible).
    pub event_ids: bool,
    /// Answer with `application/json` bodies instead of SSE.
    pub json: bool,
    /// GET requests refused.
    pub refusal: GetRefusal,
    /// The `retry:` hint of the priming event (2025-11-25), ms.
    pub retry_ms: Option<u64>,
    /// `: keep-alive` comments on idle streams (every 15 s); without them an idle stream is
    /// silent on the wire.
    pub keepalive: bool,
    /// How the `slow` tool behaves whatever the client asks (the case's timing).
    pub slow: Option<SlowPlan>,
}

/// One case of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    /// Its name (`--cases`).
    pub name: &'static str,
    /// What happens, in words.
    pub about: &'static str,
    /// The fault, in the rule grammar without matchers; `None` for the control.
    pub fault: Option<&'static str>,
    /// The test server's setup.
    pub server: ServerSetup,
    /// Why the case means nothing without that setup: with `--upstream` its cell is skipped
    /// with this reason (`None`: the fault works on any server, and what it hit is checked).
    pub needs_server: Option<&'static str>,
    /// What a correct client does.
    pub expect: Expect,
    /// The host's own idle timeout for a tool call, ms, set for the cell where the host has
    /// one (its preset's `idle_timeout_env`).
    pub host_idle_timeout_ms: Option<u64>,
}

const NO_IDS: ServerSetup = ServerSetup {
    event_ids: false,
    json: false,
    refusal: GetRefusal {
        every_get: None,
        resumption: None,
    },
    retry_ms: None,
    keepalive: true,
    slow: None,
};

const WITH_IDS: ServerSetup = ServerSetup {
    event_ids: true,
    ..NO_IDS
};

/// The `retry:` hint of the `retry-hint` case, ms.
pub const RETRY_HINT_MS: u64 = 1_500;

/// The idle timeout the slow cases give a host that has one, ms.
pub const HOST_IDLE_TIMEOUT_MS: u64 = 10_000;

/// Every case, in the order they are shown.
pub const CASES: &[Case] = &[
    Case {
        name: "healthy",
        about: "no fault (control)",
        fault: None,
        server: WITH_IDS,
        needs_server: None,
        host_idle_timeout_ms: None,
        expect: Expect::Answer,
    },
    Case {
        name: "reset-after-event",
        about: "SSE stream reset after its first event, no event ids",
        fault: Some("reset after 1 events"),
        server: NO_IDS,
        needs_server: None,
        host_idle_timeout_ms: None,
        expect: Expect::Death,
    },
    Case {
        name: "reset-after-headers",
        about: "SSE stream reset after the response head, before any event",
        fault: Some("reset"),
        server: NO_IDS,
        needs_server: None,
        host_idle_timeout_ms: None,
        expect: Expect::Death,
    },
    Case {
        name: "eof-before-result",
        about: "SSE stream ends cleanly after its first event, before the result",
        fault: Some("eof after 1 events"),
        server: NO_IDS,
        needs_server: None,
        host_idle_timeout_ms: None,
        expect: Expect::Death,
    },
    Case {
        name: "server-dies",
        about: "server dies: the call's SSE stream and every GET stream reset, new connections accepted at once",
        fault: Some("server-dies:0s after 1 events"),
        server: NO_IDS,
        needs_server: None,
        host_idle_timeout_ms: None,
        expect: Expect::Death,
    },
    Case {
        name: "server-dies-refusing",
        about: "server dies: the call's and GET streams reset, connections refused for 3 s",
        fault: Some("server-dies:3s after 1 events"),
        server: NO_IDS,
        needs_server: None,
        host_idle_timeout_ms: None,
        expect: Expect::Death,
    },
    Case {
        name: "json-reset",
        about: "JSON response reset halfway through its body",
        fault: Some("json-reset"),
        server: ServerSetup {
            json: true,
            ..NO_IDS
        },
        needs_server: None,
        host_idle_timeout_ms: None,
        expect: Expect::Death,
    },
    Case {
        name: "priming-then-reset",
        about: "priming event with an id, then reset; every GET answered 405",
        fault: Some("reset after 1 events"),
        server: ServerSetup {
            refusal: GetRefusal {
                every_get: Some(405),
                resumption: None,
            },
            ..WITH_IDS
        },
        needs_server: Some("needs the built-in server's priming event ids and GETs answered 405"),
        host_idle_timeout_ms: None,
        expect: Expect::Death,
    },
    Case {
        name: "resumable",
        about: "SSE stream with event ids reset after two events; resumption works",
        fault: Some("reset after 2 events"),
        server: WITH_IDS,
        needs_server: Some("needs the built-in server's event ids and resumption"),
        host_idle_timeout_ms: None,
        expect: Expect::Death,
    },
    Case {
        name: "resume-refused",
        about: "SSE stream with event ids reset after two events; resumption answered 404",
        fault: Some("reset after 2 events"),
        server: ServerSetup {
            refusal: GetRefusal {
                every_get: None,
                resumption: Some(404),
            },
            ..WITH_IDS
        },
        needs_server: Some("needs the built-in server's event ids and its refused resumption"),
        host_idle_timeout_ms: None,
        expect: Expect::Death,
    },
    Case {
        name: "retry-hint",
        about: "priming event with an id and retry: 1500, then a clean end (a deliberate close)",
        fault: Some("eof after 1 events"),
        server: ServerSetup {
            retry_ms: Some(RETRY_HINT_MS),
            ..WITH_IDS
        },
        needs_server: Some("needs the built-in server's priming event with a retry hint"),
        host_idle_timeout_ms: None,
        expect: Expect::Death,
    },
    Case {
        name: "stall",
        about: "the result is swallowed; the stream stays open",
        fault: Some("stall"),
        server: NO_IDS,
        needs_server: None,
        host_idle_timeout_ms: None,
        expect: Expect::Stall,
    },
    Case {
        name: "progress-keeps-alive",
        about: "healthy 30 s call; its stream carries a notification every 2 s (progress with a progress token, else a log message), no keep-alive comments; the host's idle timeout 10 s",
        fault: None,
        server: ServerSetup {
            keepalive: false,
            slow: Some(SlowPlan {
                steps: 15,
                interval_ms: 2_000,
            }),
            ..WITH_IDS
        },
        needs_server: Some("needs the built-in server's `slow` tool, timed by the case"),
        host_idle_timeout_ms: Some(HOST_IDLE_TIMEOUT_MS),
        expect: Expect::SlowAnswer,
    },
    Case {
        name: "silent-slow",
        about: "healthy 45 s call; its stream carries the head and the priming event, then nothing (no keep-alive comments) until one notification and the result at 45 s; the host's idle timeout 10 s",
        fault: None,
        server: ServerSetup {
            keepalive: false,
            slow: Some(SlowPlan {
                steps: 1,
                interval_ms: 45_000,
            }),
            ..WITH_IDS
        },
        needs_server: Some("needs the built-in server's `slow` tool, timed by the case"),
        host_idle_timeout_ms: Some(HOST_IDLE_TIMEOUT_MS),
        expect: Expect::Silent,
    },
    Case {
        name: "task-result-reset",
        about: "a task's tasks/result stream is reset before the result (the task lives; 2025-11-25 tasks)",
        fault: Some("reset"),
        server: NO_IDS,
        needs_server: None,
        host_idle_timeout_ms: None,
        expect: Expect::TaskWait,
    },
    Case {
        name: "session-expired",
        about: "the call is answered 404 Session not found",
        fault: Some("404"),
        server: WITH_IDS,
        needs_server: None,
        host_idle_timeout_ms: None,
        expect: Expect::HttpError("session expiry"),
    },
    Case {
        name: "status-503",
        about: "the call is answered 503 Service Unavailable",
        fault: Some("503"),
        server: WITH_IDS,
        needs_server: None,
        host_idle_timeout_ms: None,
        expect: Expect::HttpError("HTTP 503"),
    },
];

/// The case of that name.
pub fn find(name: &str) -> Option<&'static Case> {
    CASES.iter().find(|c| c.name == name)
}

/// The cases `--cases a,b` names (all when `None`, or with `quick` all but the slow calls of
/// 30 s and more); an unknown name is an error naming it.
pub fn select(list: Option<&str>, quick: bool) -> Result<Vec<&'static Case>, String> {
    let Some(list) = list else {
        return Ok(CASES
            .iter()
            .filter(|c| !(quick && c.server.slow.is_some()))
            .collect());
    };
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let case = find(name).ok_or_else(|| {
            let known: Vec<&str> = CASES.iter().map(|c| c.name).collect();
            format!("unknown case {name:?} (known: {})", known.join(", "))
        })?;
        if !out.contains(&case) {
            out.push(case);
        }
    }
    if out.is_empty() {
        return Err("--cases names no case".into());
    }
    Ok(out)
}

/// The method a task case's fault hits, whatever the target: the task's result wait.
pub const TASK_WAIT_METHOD: &str = "tasks/result";

impl Case {
    /// The matchers of its rule: the target's (`--tool`, `--method`, any `tools/call`), or the
    /// result wait for a task case.
    pub fn matchers(&self, target: &str) -> String {
        match self.expect {
            Expect::TaskWait => format!("method={TASK_WAIT_METHOD}"),
            _ => target.to_string(),
        }
    }
}

/// The rule armed for a case: its fault, hitting the first request the target matches.
pub fn rule(fault: &str, target: &str) -> String {
    format!("{fault} when {target} nth=1 once")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_parses_and_names_are_unique() {
        for case in CASES {
            if let Some(fault) = case.fault {
                let text = rule(fault, "method=tools/call");
                assert!(
                    mcpscope_engine::fault::spec::parse_rule(&text).is_ok(),
                    "{text}"
                );
            }
            assert_eq!(CASES.iter().filter(|c| c.name == case.name).count(), 1);
        }
    }

    /// The report's server dies and takes reconnections at once; the refusing variant stays.
    #[test]
    fn server_dies_accepts_new_connections_at_once_and_the_refusing_variant_refuses() {
        use mcpscope_engine::fault::Fault;
        let down = |name: &str| {
            let fault = find(name).and_then(|c| c.fault).expect("a fault");
            match mcpscope_engine::fault::spec::parse_rule(&rule(fault, "method=tools/call")) {
                Ok(rule) => match rule.fault {
                    Fault::ServerDies { down } => down,
                    other => panic!("{name}: {other:?}"),
                },
                Err(e) => panic!("{name}: {e}"),
            }
        };
        assert_eq!(down("server-dies"), std::time::Duration::ZERO);
        assert_eq!(
            down("server-dies-refusing"),
            std::time::Duration::from_secs(3)
        );
    }

    #[test]
    fn select_keeps_order_given_and_refuses_unknown_names() {
        let picked = select(Some("stall,healthy,stall"), false).expect("known");
        let names: Vec<&str> = picked.iter().map(|c| c.name).collect();
        assert_eq!(names, ["stall", "healthy"]);
        assert!(select(Some("nope"), false).is_err_and(|e| e.contains("nope")));
        assert_eq!(select(None, false).map(|v| v.len()), Ok(CASES.len()));
        let quick = select(None, true).expect("quick");
        assert_eq!(quick.len(), CASES.len() - 2);
        assert!(quick.iter().all(|c| c.server.slow.is_none()));
    }
}
