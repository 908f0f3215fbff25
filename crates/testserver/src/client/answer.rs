//! Reading an answer: the response head, then the body (JSON, or SSE frames as they arrive)
//! until the response to a request, a stop condition, or the end of the body.

use std::time::{Duration, Instant};

use http::{HeaderMap, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;
use tokio::task::JoinHandle;

use mcpscope_engine::event::EndHow;
use mcpscope_engine::wire::ContentKind;
use mcpscope_engine::wire::sse::{SseFrame, SseParser};

use super::TIMEOUT;

/// One SSE frame and when it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// The frame.
    pub frame: SseFrame,
    /// When its last byte was read.
    pub at: Instant,
}

/// What became of one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The JSON-RPC response arrived (the whole message: `result` or `error`; an array for a
    /// batch answered as JSON).
    Response(Value),
    /// A non-2xx HTTP status, with the body text.
    Status(u16, String),
    /// The answer ended before the response (a stream read to its end ends so too).
    Died {
        /// How it ended.
        how: EndHow,
        /// Whether a response head had arrived.
        head: bool,
        /// SSE events seen before.
        events: usize,
        /// The last SSE event id seen.
        last_event_id: Option<String>,
    },
    /// A 2xx answer without a JSON-RPC response (202, or an empty body).
    NoResponse(u16),
}

impl Outcome {
    /// The `result`, if the request was answered with one.
    pub fn result(&self) -> Option<&Value> {
        match self {
            Outcome::Response(v) => v.get("result"),
            _ => None,
        }
    }

    /// The first text content of a tool result.
    pub fn text(&self) -> Option<&str> {
        self.result()?
            .pointer("/content/0/text")
            .and_then(Value::as_str)
    }

    /// How the answer died, if it did.
    pub fn died(&self) -> Option<EndHow> {
        match self {
            Outcome::Died { how, .. } => Some(*how),
            _ => None,
        }
    }
}

/// A whole answer: the head, every SSE frame and JSON-RPC message read, and the outcome.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status; 0 when no response head arrived.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// Every SSE frame read, priming events included.
    pub frames: Vec<Seen>,
    /// Every JSON-RPC message read (SSE data, or the JSON body; a batch's array flattened).
    pub messages: Vec<Value>,
    /// What became of the request.
    pub outcome: Outcome,
}

impl Answer {
    /// The `result`, if the request was answered with one.
    pub fn result(&self) -> Option<&Value> {
        self.outcome.result()
    }

    /// The first text content of a tool result.
    pub fn text(&self) -> Option<&str> {
        self.outcome.text()
    }

    /// How the answer died, if it did.
    pub fn died(&self) -> Option<EndHow> {
        self.outcome.died()
    }

    /// A response header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The kind of body, by its `Content-Type`.
    pub fn content(&self) -> ContentKind {
        ContentKind::of(self.header(header::CONTENT_TYPE.as_str()))
    }
}

/// An answer being read.
pub struct Reading {
    /// The status; 0 when no response head arrived.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The SSE frames read so far.
    pub frames: Vec<Seen>,
    /// The JSON-RPC messages read so far.
    pub messages: Vec<Value>,
    body: Option<Incoming>,
    sse: bool,
    parser: SseParser,
    raw: Vec<u8>,
    end: Option<EndHow>,
    patience: Option<Duration>,
    offered: usize,
    searched: usize,
}

impl Reading {
    pub(super) fn new(resp: http::Response<Incoming>) -> Self {
        let (parts, body) = resp.into_parts();
        let content = ContentKind::of(
            parts
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
        );
        Self {
            status: parts.status.as_u16(),
            sse: content == ContentKind::Sse,
            headers: parts.headers,
            body: Some(body),
            end: None,
            ..Self::failed(EndHow::Eof)
        }
    }

    /// A request that failed before any response head.
    pub(super) fn failed(how: EndHow) -> Self {
        Self {
            status: 0,
            headers: HeaderMap::new(),
            frames: Vec::new(),
            messages: Vec::new(),
            body: None,
            sse: false,
            parser: SseParser::new(),
            raw: Vec::new(),
            end: Some(how),
            patience: Some(TIMEOUT),
            offered: 0,
            searched: 0,
        }
    }

    /// How the body ended, once it has.
    pub fn ended(&self) -> Option<EndHow> {
        self.end
    }

    /// A response header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Reads one chunk of the body; false once the body has ended.
    async fn pull(&mut self) -> bool {
        let Some(body) = self.body.as_mut() else {
            return false;
        };
        let frame = match self.patience {
            Some(patience) => match tokio::time::timeout(patience, body.frame()).await {
                Ok(frame) => frame,
                Err(_) => return self.stop(EndHow::Cancelled),
            },
            None => body.frame().await,
        };
        let data = match frame {
            None => return self.stop(EndHow::Eof),
            Some(Err(e)) => return self.stop(mcpscope_transport::classify(&e).0),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => return true,
            },
        };
        if !self.sse {
            self.raw.extend_from_slice(&data);
            return true;
        }
        let mut frames = Vec::new();
        self.parser.feed(&data, &mut frames);
        let at = Instant::now();
        for frame in frames {
            tracing::debug!(id = ?frame.id, data = %frame.data, "client: SSE event");
            if let Ok(msg) = serde_json::from_str::<Value>(&frame.data) {
                self.messages.push(msg);
            }
            self.frames.push(Seen { frame, at });
        }
        true
    }

    fn stop(&mut self, how: EndHow) -> bool {
        self.body = None;
        self.end = Some(how);
        if how == EndHow::Eof && !self.raw.is_empty() {
            match serde_json::from_slice::<Value>(&self.raw) {
                Ok(Value::Array(batch)) => self.messages.extend(batch),
                Ok(msg) => self.messages.push(msg),
                Err(_) => {}
            }
        }
        false
    }

    /// Reads until `stop` accepts an SSE frame (true) or the body ends (false).
    pub async fn until(&mut self, mut stop: impl FnMut(&SseFrame) -> bool) -> bool {
        loop {
            while self.offered < self.frames.len() {
                self.offered += 1;
                if stop(&self.frames[self.offered - 1].frame) {
                    return true;
                }
            }
            if !self.pull().await {
                return false;
            }
        }
    }

    /// Reads to the response to `id` (with `None`, to the end of the body) and gives the answer.
    pub async fn answer(mut self, id: Option<&Value>) -> Answer {
        loop {
            if let Some(id) = id.filter(|_| self.sse) {
                let found = self.messages[self.searched..]
                    .iter()
                    .find(|msg| is_response(msg) && msg.get("id") == Some(id))
                    .cloned();
                self.searched = self.messages.len();
                if let Some(msg) = found {
                    return self.into_answer(Outcome::Response(msg));
                }
            }
            if !self.pull().await {
                break;
            }
        }
        let outcome = self.outcome_at_end();
        self.into_answer(outcome)
    }

    fn outcome_at_end(&self) -> Outcome {
        let how = self.end.unwrap_or(EndHow::Eof);
        let died = |events, last_event_id| Outcome::Died {
            how,
            head: self.status != 0,
            events,
            last_event_id,
        };
        if self.status == 0 {
            return died(0, None);
        }
        if !(200..300).contains(&self.status) {
            return Outcome::Status(self.status, String::from_utf8_lossy(&self.raw).into());
        }
        if self.sse {
            let last = self.frames.iter().rev().find_map(|s| s.frame.id.clone());
            return died(self.frames.len(), last);
        }
        if how != EndHow::Eof {
            return died(0, None);
        }
        if self.raw.is_empty() {
            return Outcome::NoResponse(self.status);
        }
        match serde_json::from_slice::<Value>(&self.raw) {
            Ok(v) => Outcome::Response(v),
            Err(_) => Outcome::Died {
                how: EndHow::Error,
                head: true,
                events: 0,
                last_event_id: None,
            },
        }
    }

    fn into_answer(self, outcome: Outcome) -> Answer {
        Answer {
            status: self.status,
            headers: self.headers,
            frames: self.frames,
            messages: self.messages,
            outcome,
        }
    }

    /// Reads the body to its end in a task, with no bound on the wait.
    pub fn in_background(mut self) -> Background {
        self.patience = None;
        Background {
            status: self.status,
            task: Some(tokio::spawn(self.answer(None))),
        }
    }
}

fn is_response(msg: &Value) -> bool {
    msg.get("method").is_none() && (msg.get("result").is_some() || msg.get("error").is_some())
}

/// A stream read to its end in the background (closed when dropped).
pub struct Background {
    /// The status of the request that opened it.
    pub status: u16,
    task: Option<JoinHandle<Answer>>,
}

impl Background {
    /// Waits (bounded) for the stream to end; `None` if it is still open after `within`.
    pub async fn ended(&mut self, within: Duration) -> Option<Answer> {
        let task = self.task.as_mut()?;
        match tokio::time::timeout(within, task).await {
            Ok(Ok(answer)) => {
                self.task = None;
                Some(answer)
            }
            _ => None,
        }
    }

    /// Closes the stream from the client side.
    pub fn close(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.close();
    }
}
