//! The fold's reports: what the proxy says besides the traffic it carried — that it started,
//! bytes that were no message, an upstream it could not reach, a fault it injected, a call it
//! rescued, a rewrite, a note, exchanges it did not observe.

use std::ops::ControlFlow;

use super::*;

impl Model {
    /// Folds a report of the proxy's (the kinds listed above; the other kinds are other
    /// groups'). Breaks when a rescue names a stream never opened: then nothing is folded and
    /// the notices' servers are not named.
    pub(super) fn fold_proxy_report(
        &mut self,
        t: DateTime<Utc>,
        kind: &EventKind,
        out: &mut Vec<Notice>,
    ) -> ControlFlow<()> {
        match kind {
            EventKind::ProxyStarted {
                listen, upstream, ..
            } => {
                self.proxy = Some(ProxyInfo {
                    listen: listen.clone(),
                    upstream: upstream.clone(),
                });
            }
            EventKind::InvalidMessage {
                stream,
                dir,
                reason,
                raw,
            } => self.invalid_message(t, *stream, *dir, reason, raw, out),
            EventKind::UpstreamUnreachable { stream, error } => {
                self.upstream_unreachable(t, *stream, error, out)
            }
            EventKind::FaultInjected {
                stream,
                fault,
                rule,
            } => self.fault_injected(t, *stream, fault, rule.as_deref(), out),
            EventKind::CallRescued {
                stream,
                id,
                message,
            } => {
                let Some(si) = self.stream_index.get(stream).copied() else {
                    return ControlFlow::Break(());
                };
                self.call_rescued(t, si, *stream, id, message, out);
            }
            EventKind::Note { stream, text } => self.notes.push((t, *stream, text.clone())),
            EventKind::Rewritten {
                stream,
                what,
                from,
                to,
            } => self.rewritten(t, *stream, what, from, to, out),
            EventKind::Unobserved {
                bytes_up,
                bytes_down,
                ..
            } => {
                self.unobserved.exchanges += 1;
                self.unobserved.bytes += bytes_up + bytes_down;
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }

    /// Bytes that should have been a message but were not: kept as a message of their stream
    /// (its raw text, the reason), and told.
    fn invalid_message(
        &mut self,
        t: DateTime<Utc>,
        stream: StreamId,
        dir: Direction,
        reason: &str,
        raw: &str,
        out: &mut Vec<Notice>,
    ) {
        if let Some(si) = self.stream_index.get(&stream).copied() {
            let size = raw.len() + 2;
            self.detail_bytes += size;
            let index = self.messages.push(MessageRec {
                at: t,
                stream,
                dir,
                body: Body::new(&Value::String(raw.to_string())),
                invalid: Some(reason.to_string()),
                sse_id: None,
                call: None,
                size,
            });
            let s = &mut self.streams[si];
            s.messages.push(index);
            s.detail_bytes += size;
            s.invalid += 1;
            self.link_mark(si, index, false);
            self.trim_stream(si);
        }
        out.push(Notice {
            server: None,
            t,
            what: What::InvalidMessage {
                stream,
                reason: reason.to_string(),
            },
        });
    }

    /// The upstream could not be reached for a stream: the stream closed, each open call it
    /// owned resumed elsewhere or failed, and told.
    fn upstream_unreachable(
        &mut self,
        t: DateTime<Utc>,
        stream: StreamId,
        error: &str,
        out: &mut Vec<Notice>,
    ) {
        if let Some(si) = self.stream_index.get(&stream).copied() {
            if self.streams[si].is_open() {
                self.counts.open_streams -= 1;
            }
            self.streams[si].unreachable = Some(error.to_string());
            let message = format!("upstream unreachable: {error}");
            for index in self.open_calls_owned_by(si) {
                if !self.resume_unreached(si, index) {
                    self.fail(index, message.clone(), t, out);
                }
            }
        }
        out.push(Notice {
            server: None,
            t,
            what: What::UpstreamUnreachable {
                stream,
                error: error.to_string(),
            },
        });
    }

    /// A fault the proxy injected on a stream: kept on the stream, its calls marked, noted
    /// (with the rule that asked for it) and told.
    fn fault_injected(
        &mut self,
        t: DateTime<Utc>,
        stream: StreamId,
        fault: &str,
        rule: Option<&str>,
        out: &mut Vec<Notice>,
    ) {
        if let Some(si) = self.stream_index.get(&stream).copied() {
            self.streams[si].faults.push(fault.to_string());
            self.counts.faults += 1;
            for index in self.streams[si].calls.clone() {
                self.calls[index].injected = true;
            }
        }
        let text = match rule {
            Some(rule) => format!("fault {fault} injected ({rule})"),
            None => format!("fault {fault} injected"),
        };
        self.notes.push((t, Some(stream), text));
        out.push(Notice {
            server: None,
            t,
            what: What::FaultInjected {
                stream,
                fault: fault.to_string(),
            },
        });
    }

    /// A call the proxy rescued on stream `si` (`stream`): the call answering `id` there, if
    /// any, marked and told.
    fn call_rescued(
        &mut self,
        t: DateTime<Utc>,
        si: usize,
        stream: StreamId,
        id: &Value,
        message: &str,
        out: &mut Vec<Notice>,
    ) {
        if let Some(index) = self.find_call(si, Direction::ServerToClient, id) {
            self.calls[index].aside_mut().rescued = Some(message.to_string());
            out.push(Notice {
                server: None,
                t,
                what: What::CallRescued {
                    call: self.call_ref(index),
                    stream,
                    message: message.to_string(),
                },
            });
        }
    }

    /// Something the proxy rewrote on a stream (`what`, `from` → `to`): noted and told.
    fn rewritten(
        &mut self,
        t: DateTime<Utc>,
        stream: StreamId,
        what: &str,
        from: &str,
        to: &str,
        out: &mut Vec<Notice>,
    ) {
        let text = format!("rewrote {what}: {from} → {to}");
        self.notes.push((t, Some(stream), text));
        out.push(Notice {
            server: None,
            t,
            what: What::Rewritten {
                stream,
                what: what.to_string(),
                from: from.to_string(),
                to: to.to_string(),
            },
        });
    }
}
