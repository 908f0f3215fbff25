//! The headless view's text: one readable line per notice (`mcpscope --headless`,
//! `replay --headless`, `attach --headless`).

use mcpscope_engine::event::EndHow;
use mcpscope_engine::model::{CallRef, Notice, What};

/// One readable line for the headless view, naming its server after the time when
/// `name_server` (`12:00:00.000 [127.0.0.2:8443] ORPHANED …`; the scheme is left out, a
/// notice of no server is not marked). The views name it when the feed is a forward
/// proxy's ([`mcpscope_engine::model::Model::names_servers`]): many servers, the lines alike otherwise.
pub fn line_for(notice: &Notice, name_server: bool) -> String {
    let line = line(notice);
    match (&notice.server, name_server) {
        (Some(server), true) => {
            let server = server
                .strip_prefix("http://")
                .or_else(|| server.strip_prefix("https://"))
                .unwrap_or(server);
            match line.split_once(' ') {
                Some((t, rest)) => format!("{t} [{server}] {rest}"),
                None => format!("[{server}] {line}"),
            }
        }
        _ => line,
    }
}

/// One readable line for the headless view.
pub fn line(notice: &Notice) -> String {
    let t = notice.t.format("%H:%M:%S%.3f");
    let what = &notice.what;
    let text = match what {
        What::SessionStarted { .. }
        | What::SessionRevision { .. }
        | What::SessionEnded { .. }
        | What::ProcessStarted { .. }
        | What::ProcessExited { .. }
        | What::StdinClosed { .. } => session_text(what),
        What::StreamEnded { .. }
        | What::ResumeMismatch { .. }
        | What::UpstreamUnreachable { .. }
        | What::InvalidMessage { .. }
        | What::FaultInjected { .. }
        | What::Rewritten { .. } => stream_text(what),
        What::CallStarted { .. }
        | What::CallAnswered { .. }
        | What::CallFailed { .. }
        | What::CallSuperseded { .. }
        | What::CallCancelled { .. }
        | What::CallInputRequired { .. }
        | What::CallContinued { .. }
        | What::ServerRequest { .. }
        | What::ServerRequestAnswered { .. }
        | What::AuthChallenge { .. } => call_text(what),
        What::CallOrphaned { .. }
        | What::CallResumable { .. }
        | What::CallResumed { .. }
        | What::ClientRetry { .. }
        | What::CallRescued { .. } => call_trouble_text(what),
        What::TaskCreated { .. } | What::TaskStatus { .. } | What::TaskResultWaitDied { .. } => {
            task_text(what)
        }
        What::SchemaViolation { .. } | What::SchemaUnchecked { .. } => schema_text(what),
    };
    format!("{t} {text}")
}

/// A call as the lines name it: its method (and tool), request id, session and task.
fn call(c: &CallRef) -> String {
    let session = c.session.as_deref().unwrap_or("-");
    let what = match &c.tool {
        Some(tool) => format!("{} {tool}", c.method),
        None => c.method.clone(),
    };
    match &c.task {
        Some(task) => format!("{what} id={} session={session} task={task}", c.request_id),
        None => format!("{what} id={} session={session}", c.request_id),
    }
}

/// The text of a notice handed to a group that is not its own: none is (`line` hands each
/// kind to its group), but one would be written as what it is rather than lost.
fn unrouted(what: &What) -> String {
    format!("{what:?}")
}

/// The text of a notice about a session or a stdio server's process.
fn session_text(what: &What) -> String {
    match what {
        What::SessionStarted { session, revision } => format!(
            "session started   {} revision={}",
            session.as_deref().unwrap_or("-"),
            revision.as_deref().unwrap_or("?")
        ),
        What::SessionRevision {
            session,
            revision,
            was,
        } => format!(
            "session revision  {} revision={revision} (was {})",
            session.as_deref().unwrap_or("-"),
            was.as_deref().unwrap_or("?")
        ),
        What::SessionEnded { session, how } => {
            format!("session {how}   {}", session.as_deref().unwrap_or("-"))
        }
        What::ProcessStarted {
            session,
            stream,
            pid,
            command,
        } => format!("process started   {session} pid={pid} on #{stream}: {command}"),
        What::ProcessExited {
            stream,
            code,
            signal,
            pending,
        } => {
            let how = match (code, signal) {
                (_, Some(signal)) => {
                    format!(
                        "KILLED by {}",
                        mcpscope_engine::model::process::signal_name(*signal)
                    )
                }
                (Some(code), None) => format!("exited with code {code}"),
                (None, None) => "ended".to_string(),
            };
            format!("PROCESS ENDED     #{stream} {how} with {pending} call(s) unanswered")
        }
        What::StdinClosed { stream } => format!("stdin closed      #{stream} by the client"),
        other => unrouted(other),
    }
}

/// The text of a notice about a stream or what the proxy reports of one: its end, a
/// resumption from the wrong event, an unreachable upstream, an invalid message, a fault, a
/// rewrite.
fn stream_text(what: &What) -> String {
    match what {
        What::StreamEnded {
            label,
            how,
            leg,
            pending,
            ..
        } => format!(
            "stream ended      {label} {} ({}) with {pending} call(s) unanswered",
            how.as_str(),
            leg.as_str()
        ),
        What::ResumeMismatch {
            stream,
            last_event_id,
            waiting,
            expected,
            mismatch,
        } => format!(
            "RESUME MISMATCH   #{stream} resumed from event id {last_event_id}, {}; \
         the last id #{waiting} carried was {expected}",
            mismatch.words()
        ),
        What::UpstreamUnreachable { stream, error } => {
            format!("UNREACHABLE       upstream on #{stream}: {error}")
        }
        What::InvalidMessage { stream, reason } => {
            format!("invalid message   on #{stream}: {reason}")
        }
        What::FaultInjected { stream, fault } => {
            format!("FAULT INJECTED    {fault} on #{stream}")
        }
        What::Rewritten {
            stream,
            what,
            from,
            to,
        } => format!("rewritten         {what} on #{stream}: {from} → {to}"),
        other => unrouted(other),
    }
}

/// The text of a notice of a call's course: started, answered, failed, superseded,
/// cancelled, asking for input, continued, challenged; a server's request and its answer.
fn call_text(what: &What) -> String {
    match what {
        What::CallStarted { call: c, stream } => {
            format!("call started      {} on #{stream}", call(c))
        }
        What::CallAnswered {
            call: c,
            elapsed_ms,
            is_error,
            ..
        } => {
            let error = if *is_error { " with isError: true" } else { "" };
            format!("call answered     {} in {elapsed_ms} ms{error}", call(c))
        }
        What::CallFailed {
            call: c,
            error,
            elapsed_ms,
        } => {
            format!("call failed       {} in {elapsed_ms} ms: {error}", call(c))
        }
        What::CallSuperseded {
            call: c, error, by, ..
        } => format!("call superseded   {} ({error}) by {by}", call(c)),
        What::CallCancelled { call: c } => format!("call cancelled    {}", call(c)),
        What::CallInputRequired { call: c, .. } => format!("input required    {}", call(c)),
        What::CallContinued {
            call: c,
            round,
            continues,
        } => {
            format!(
                "call continued    {} round {round} (after id={continues})",
                call(c)
            )
        }
        What::ServerRequest { call: c, stream } => {
            format!("server request    {} on #{stream}", call(c))
        }
        What::ServerRequestAnswered {
            call: c,
            elapsed_ms,
        } => {
            format!("client answered   {} in {elapsed_ms} ms", call(c))
        }
        What::AuthChallenge {
            call: c,
            stream,
            status,
        } => format!("auth challenge    {} on #{stream}: HTTP {status}", call(c)),
        other => unrouted(other),
    }
}

/// The text of a notice of a call in trouble: orphaned or left resumable by its stream's
/// death, resumed, retried by the client, rescued by the proxy.
fn call_trouble_text(what: &What) -> String {
    match what {
        What::CallOrphaned {
            call: c,
            stream,
            how,
            cause,
            ..
        } => format!(
            "CALL ORPHANED     {} — #{stream} {}: {cause}",
            call(c),
            how.map(EndHow::as_str).unwrap_or("-")
        ),
        What::CallResumable {
            call: c,
            stream,
            last_event_id,
            ..
        } => format!(
            "call resumable    {} — #{stream} died after event id {}",
            call(c),
            last_event_id.as_deref().unwrap_or("-")
        ),
        What::CallResumed {
            call: c,
            stream,
            last_event_id,
        } => {
            format!(
                "call resumed      {} on #{stream} from event id {last_event_id}",
                call(c)
            )
        }
        What::ClientRetry {
            call: c,
            arrival,
            idempotent,
            ..
        } => format!(
            "CLIENT RETRY      {} arrival {arrival}{}",
            call(c),
            match idempotent {
                Some(true) => "",
                Some(false) => " — tool is neither read-only nor idempotent",
                None => " — tool annotations unknown (the session never listed tools)",
            }
        ),
        What::CallRescued {
            call: c,
            stream,
            message,
        } => format!("CALL RESCUED      {} on #{stream}: {message}", call(c)),
        other => unrouted(other),
    }
}

/// The text of a notice about a task (MCP tasks): created, its status, a dead result wait.
fn task_text(what: &What) -> String {
    match what {
        What::TaskCreated {
            call: c,
            status,
            ttl_ms,
            ..
        } => format!(
            "task created      {} status={status} ttl={}",
            call(c),
            ttl_ms.map_or("unlimited".to_string(), |ms| format!("{ms} ms"))
        ),
        What::TaskStatus {
            call: c,
            status,
            message,
            ..
        } => match message {
            Some(m) => format!("task status       {} {status}: {m}", call(c)),
            None => format!("task status       {} {status}", call(c)),
        },
        What::TaskResultWaitDied {
            call: c,
            stream,
            how,
            ..
        } => format!(
            "RESULT WAIT DIED  {} — #{stream} {}: the task lives; the client must ask again (tasks/result)",
            call(c),
            how.map(EndHow::as_str).unwrap_or("-")
        ),
        other => unrouted(other),
    }
}

/// The text of a notice about a schema: a value that breaks it, or one not checked.
fn schema_text(what: &What) -> String {
    match what {
        What::SchemaViolation {
            call: c,
            side,
            member,
            path,
            keyword,
            message,
        } => format!(
            "SCHEMA {side}  {} — {member} {path}: {keyword}: {message}",
            call(c)
        ),
        What::SchemaUnchecked {
            call: c,
            side,
            message,
        } => format!("SCHEMA NOT CHECKED  {} — {side}: {message}", call(c)),
        other => unrouted(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use mcpscope_engine::model::MismatchKind;

    fn notice(what: What, server: Option<&str>) -> Notice {
        Notice {
            t: chrono::Utc
                .with_ymd_and_hms(2026, 12, 7, 12, 0, 0)
                .single()
                .expect("time"),
            server: server.map(str::to_string),
            what,
        }
    }

    #[test]
    fn a_resume_mismatch_and_a_tool_error_read_as_lines_naming_their_server_when_asked() {
        let mismatch = notice(
            What::ResumeMismatch {
                stream: 7,
                last_event_id: "s4-0".into(),
                waiting: 4,
                expected: "s4-1".into(),
                mismatch: MismatchKind::Older,
            },
            Some("http://127.0.0.2:8443"),
        );
        assert_eq!(
            line(&mismatch),
            "12:00:00.000 RESUME MISMATCH   #7 resumed from event id s4-0, an older id; the last id #4 carried was s4-1"
        );
        assert!(
            line_for(&mismatch, true).starts_with("12:00:00.000 [127.0.0.2:8443] RESUME MISMATCH")
        );
        let boom = notice(
            What::CallAnswered {
                call: CallRef {
                    server: None,
                    session: Some("s1".into()),
                    request_id: serde_json::json!(3),
                    method: "tools/call".into(),
                    tool: Some("boom".into()),
                    task: None,
                },
                stream: 2,
                elapsed_ms: 5,
                is_error: true,
            },
            None,
        );
        assert!(line(&boom).contains("tools/call boom") && line(&boom).contains("isError: true"));
        let corrected = notice(
            What::SessionRevision {
                session: Some("s1".into()),
                revision: "2025-11-25".into(),
                was: Some("2026-07-28".into()),
            },
            None,
        );
        assert!(
            line(&corrected).contains("revision=2025-11-25 (was 2026-07-28)"),
            "{}",
            line(&corrected)
        );
    }
}
