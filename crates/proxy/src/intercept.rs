//! The intercept: requests that match its filter, and their JSON responses, are held until the
//! view releases them (forwarded as they were or edited, dropped, or answered with an error). Clearing the filter,
//! or the proxy going away, releases every held request unchanged.

use std::sync::Mutex;

use serde_json::Value;
use tokio::sync::oneshot;

use mcpscope_engine::event::StreamId;
use mcpscope_engine::fault::{HeldRequest, Release};
use mcpscope_engine::wire::jsonrpc::{Kind, classify, id_text};

/// What the intercept matches: `tool:NAME`, `method:M`, or text in the method or tool name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Filter {
    tool: Option<String>,
    method: Option<String>,
    text: Option<String>,
}

impl Filter {
    /// Parses a filter; `None` for an empty one.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let mut filter = Self {
            tool: None,
            method: None,
            text: None,
        };
        for word in text.split_whitespace() {
            let lower = word.to_lowercase();
            match lower.split_once(':') {
                Some(("tool", v)) => filter.tool = Some(v.to_string()),
                Some(("method", v)) => filter.method = Some(v.to_string()),
                _ => filter.text = Some(lower),
            }
        }
        (filter.tool.is_some() || filter.method.is_some() || filter.text.is_some())
            .then_some(filter)
    }

    /// Whether a request message matches: a JSON-RPC request whose method and tool fit.
    pub(crate) fn matches(&self, message: &Value) -> bool {
        let Kind::Request { method, params, .. } = classify(message) else {
            return false;
        };
        let method = method.to_lowercase();
        let tool = params
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_lowercase)
            .filter(|_| method == "tools/call");
        self.method
            .as_ref()
            .is_none_or(|m| method.contains(m.as_str()))
            && self
                .tool
                .as_ref()
                .is_none_or(|t| tool.as_deref().is_some_and(|n| n.contains(t.as_str())))
            && self.text.as_ref().is_none_or(|t| {
                method.contains(t.as_str())
                    || tool.as_deref().is_some_and(|n| n.contains(t.as_str()))
            })
    }
}

struct Held {
    info: HeldRequest,
    release: oneshot::Sender<Release>,
}

/// The intercept's state, shared by the pipeline and the view's controller.
#[derive(Default)]
pub(crate) struct Intercept {
    filter: Mutex<Option<Filter>>,
    held: Mutex<Vec<Held>>,
    next: Mutex<u64>,
}

impl Intercept {
    /// Sets the filter; clearing it releases everything held, unchanged.
    pub(crate) fn set(&self, filter: Option<Filter>) {
        let clear = filter.is_none();
        if let Ok(mut slot) = self.filter.lock() {
            *slot = filter;
        }
        if clear {
            self.release_all();
        }
    }

    /// The requests held now, oldest first.
    pub(crate) fn held(&self) -> Vec<HeldRequest> {
        self.held
            .lock()
            .map(|mut held| {
                // A request whose client went away is no longer waiting.
                held.retain(|h| !h.release.is_closed());
                held.iter().map(|h| h.info.clone()).collect()
            })
            .unwrap_or_default()
    }

    /// Releases one held request.
    pub(crate) fn release(&self, id: u64, how: Release) -> Result<(), String> {
        let mut held = self.held.lock().map_err(|_| "intercept state poisoned")?;
        let at = held
            .iter()
            .position(|h| h.info.id == id)
            .ok_or_else(|| format!("request {id} is not held (released already?)"))?;
        let item = held.remove(at);
        item.release
            .send(how)
            .map_err(|_| format!("request {id}: its client went away"))
    }

    /// Releases every held request unchanged.
    pub(crate) fn release_all(&self) {
        let all = self
            .held
            .lock()
            .map(|mut held| std::mem::take(&mut *held))
            .unwrap_or_default();
        for item in all {
            let _ = item.release.send(Release::Forward(None));
        }
    }

    /// Whether a filter is set (requests and responses are then read for it).
    pub(crate) fn armed(&self) -> bool {
        self.filter.lock().ok().is_some_and(|f| f.is_some())
    }

    /// Whether the filter matches this request message.
    pub(crate) fn matches(&self, message: Option<&Value>) -> bool {
        let Some(message) = message else {
            return false;
        };
        self.filter
            .lock()
            .ok()
            .is_some_and(|f| f.as_ref().is_some_and(|f| f.matches(message)))
    }

    /// Holds the request when it matches: returns the receiver of its release, or `None` to
    /// let it pass.
    pub(crate) fn hold(
        &self,
        stream: StreamId,
        message: Option<&Value>,
        body: &[u8],
    ) -> Option<oneshot::Receiver<Release>> {
        self.hold_as(stream, message, body, "")
    }

    /// Holds the (JSON) response to a request the filter matches, like [`Intercept::hold`].
    pub(crate) fn hold_response(
        &self,
        stream: StreamId,
        request: Option<&Value>,
        body: &[u8],
    ) -> Option<oneshot::Receiver<Release>> {
        self.hold_as(stream, request, body, "response to ")
    }

    fn hold_as(
        &self,
        stream: StreamId,
        message: Option<&Value>,
        body: &[u8],
        prefix: &str,
    ) -> Option<oneshot::Receiver<Release>> {
        let message = message?;
        let matches = self
            .filter
            .lock()
            .ok()?
            .as_ref()
            .is_some_and(|f| f.matches(message));
        if !matches {
            return None;
        }
        let summary = match classify(message) {
            Kind::Request { id, method, params } => {
                match params.get("name").and_then(Value::as_str) {
                    Some(tool) if method == "tools/call" => {
                        format!("{prefix}{method} {tool} id={}", id_text(id))
                    }
                    _ => format!("{prefix}{method} id={}", id_text(id)),
                }
            }
            _ => return None,
        };
        let id = {
            let mut next = self.next.lock().ok()?;
            *next += 1;
            *next
        };
        let (tx, rx) = oneshot::channel();
        self.held.lock().ok()?.push(Held {
            info: HeldRequest {
                id,
                stream,
                summary,
                body: String::from_utf8_lossy(body).into_owned(),
            },
            release: tx,
        });
        Some(rx)
    }
}

impl Drop for Intercept {
    fn drop(&mut self) {
        self.release_all();
    }
}

#[cfg(test)]
mod tests {
    use super::Filter;
    use serde_json::json;

    #[test]
    fn filters_match_tools_and_methods() {
        let poke = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"poke"}});
        let list = json!({"jsonrpc":"2.0","id":2,"method":"tools/list"});
        let f = Filter::parse("tool:poke").expect("filter");
        assert!(f.matches(&poke) && !f.matches(&list));
        let f = Filter::parse("method:tools/list").expect("filter");
        assert!(!f.matches(&poke) && f.matches(&list));
        assert!(Filter::parse("  ").is_none());
        let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        assert!(!Filter::parse("init").expect("filter").matches(&note));
    }
}
