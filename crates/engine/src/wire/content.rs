//! What a response body is, from its `Content-Type`: the one classification live, replay, the
//! mock upstream and the test clients share.

use crate::event::{Header, header};

/// The kind of an MCP response body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ContentKind {
    /// `text/event-stream`: an SSE stream of JSON-RPC messages.
    Sse,
    /// `application/json`: one JSON-RPC message (or batch).
    Json,
    /// Anything else, or no `Content-Type`: forwarded and counted, not parsed.
    Other,
}

impl ContentKind {
    /// Classifies a `Content-Type` value: the media type before any `;` parameters, compared
    /// without regard to case or surrounding blanks.
    pub fn of(content_type: Option<&str>) -> Self {
        let Some(value) = content_type else {
            return Self::Other;
        };
        let media = value.split(';').next().unwrap_or("").trim();
        if media.eq_ignore_ascii_case("text/event-stream") {
            Self::Sse
        } else if media.eq_ignore_ascii_case("application/json") {
            Self::Json
        } else {
            Self::Other
        }
    }

    /// Classifies the `Content-Type` among recorded headers.
    pub fn of_headers(headers: &[Header]) -> Self {
        Self::of(header(headers, "content-type"))
    }

    /// A short word for screens: `sse`, `json` or `other`.
    pub fn word(self) -> &'static str {
        match self {
            Self::Sse => "sse",
            Self::Json => "json",
            Self::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ContentKind;

    #[test]
    fn media_types_with_parameters_and_case() {
        for (value, kind) in [
            (Some("text/event-stream"), ContentKind::Sse),
            (Some("Text/Event-Stream; charset=utf-8"), ContentKind::Sse),
            (Some(" application/json ;charset=UTF-8"), ContentKind::Json),
            (Some("application/json-seq"), ContentKind::Other),
            (Some("text/event-streamx"), ContentKind::Other),
            (Some("text/plain"), ContentKind::Other),
            (Some(""), ContentKind::Other),
            (None, ContentKind::Other),
        ] {
            assert_eq!(ContentKind::of(value), kind, "{value:?}");
        }
    }
}
