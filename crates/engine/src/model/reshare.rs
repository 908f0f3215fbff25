//! Sharing restored in a model read back from its serialized form: a call's request and
//! response are its messages again, and the names its calls repeat are held once.

use super::Model;

impl Model {
    /// Makes a model read back (serde) share what a folded one shares: each call's request and
    /// response text with its message, and method, tool and revision names. Changes nothing
    /// the model says; only the memory it takes.
    pub fn reshare(&mut self) {
        let Model {
            calls,
            messages,
            names,
            ..
        } = self;
        for message in messages.iter() {
            let Some(call) = message.call.and_then(|c| calls.get_mut(c)) else {
                continue;
            };
            if call.request == message.body {
                call.request = message.body.clone();
            } else if call.reply.as_ref() == Some(&message.body) {
                call.reply = Some(message.body.clone());
            }
        }
        for call in calls.iter_mut() {
            call.method = names.get(&call.method);
            call.tool = call.tool.as_deref().map(|t| names.get(t));
            call.revision = call.revision.as_deref().map(|r| names.get(r));
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, Utc};
    use serde_json::json;

    use crate::event::{Direction, EndHow, Event, EventKind, Leg};
    use crate::model::Model;

    #[test]
    fn a_model_read_back_shares_its_messages_and_names_again() {
        let t = Utc::now();
        let mut model = Model::default();
        let mut at = |n: i64, kind| model.apply(&Event::at(t + Duration::milliseconds(n), kind));
        for id in 1..=2u64 {
            let n = id as i64 * 10;
            at(
                n,
                EventKind::StreamOpened {
                    stream: id,
                    conn: 1,
                    method: "POST".into(),
                    path: "/mcp".into(),
                    headers: vec![("mcp-protocol-version".into(), "2025-11-25".into())],
                    origin: None,
                },
            );
            at(
                n + 1,
                EventKind::Message {
                    stream: id,
                    dir: Direction::ClientToServer,
                    body: json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo"}}),
                },
            );
            at(
                n + 2,
                EventKind::ResponseHead {
                    stream: id,
                    status: 200,
                    headers: vec![("content-type".into(), "application/json".into())],
                },
            );
            at(
                n + 3,
                EventKind::Message {
                    stream: id,
                    dir: Direction::ServerToClient,
                    body: json!({"jsonrpc":"2.0","id":id,"result":{"content":[]}}),
                },
            );
            at(
                n + 4,
                EventKind::StreamEnded {
                    stream: id,
                    dir: Direction::ServerToClient,
                    how: EndHow::Eof,
                    leg: Leg::Upstream,
                    bytes: 10,
                    detail: None,
                },
            );
        }
        let text = serde_json::to_string(&model).expect("serializes");
        let mut back: Model = serde_json::from_str(&text).expect("reads back");
        let shared = |m: &Model| {
            m.calls.iter().all(|c| {
                let request = m.request_message(c).expect("request");
                let response = m.response_message(c).expect("response");
                c.request.is_shared_with(&request.body)
                    && c.reply
                        .as_ref()
                        .is_some_and(|r| r.is_shared_with(&response.body))
            })
        };
        assert!(shared(&model));
        assert!(!shared(&back));
        back.reshare();
        assert!(shared(&back));
        // What it says is unchanged (the hash maps' pair lists may come in another order).
        let value = |m: &Model| serde_json::to_value(m).expect("serializes");
        let (before, after) = (value(&model), value(&back));
        for part in [
            "sessions", "streams", "calls", "messages", "counts", "evicted",
        ] {
            assert_eq!(after[part], before[part], "{part}");
        }
        let (a, b) = (&back.calls[0], &back.calls[1]);
        assert!(std::ptr::eq(a.method.as_str(), b.method.as_str()));
        assert_eq!(a.revision.as_deref(), Some("2025-11-25"));
    }
}
