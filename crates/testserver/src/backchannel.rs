//! Server-to-client requests before 2026-07-28 (sampling, elicitation): sent on the SSE stream
//! of the request that needs them; the client answers with a POST of its own, routed back here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::stream::StreamLog;

/// How long a tool waits for the client's answer.
pub(crate) const ANSWER_WAIT: Duration = Duration::from_secs(30);

/// Requests sent to clients and not yet answered, by JSON-RPC id.
#[derive(Debug, Default)]
pub(crate) struct BackChannel {
    next: AtomicU64,
    waiting: Mutex<HashMap<String, oneshot::Sender<Value>>>,
}

impl BackChannel {
    fn waiting(&self) -> MutexGuard<'_, HashMap<String, oneshot::Sender<Value>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `method` with `params` on `log` and waits for the answer: `Ok(result)`, or `Err`
    /// with what went wrong (an error answer, or none within [`ANSWER_WAIT`]).
    pub(crate) async fn ask(
        &self,
        log: &StreamLog,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let id = format!("mcpscope-{}", self.next.fetch_add(1, Ordering::SeqCst) + 1);
        let (tx, rx) = oneshot::channel();
        self.waiting().insert(id.clone(), tx);
        log.push_message(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = tokio::time::timeout(ANSWER_WAIT, rx).await;
        self.waiting().remove(&id);
        match answer {
            Ok(Ok(msg)) => match msg.get("result") {
                Some(result) => Ok(result.clone()),
                None => Err(msg
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("error answer")
                    .to_string()),
            },
            _ => Err(format!("no answer to {method} within {ANSWER_WAIT:?}")),
        }
    }

    /// Hands a client's response to the tool waiting for it; false when nobody waits for its id.
    pub(crate) fn answer(&self, msg: &Value) -> bool {
        let Some(id) = msg.get("id").and_then(Value::as_str) else {
            return false;
        };
        match self.waiting().remove(id) {
            Some(tx) => tx.send(msg.clone()).is_ok(),
            None => false,
        }
    }
}
