//! The `/` filter: `tool:`, `method:`, `status:`, `session:`, `body:` tokens and free text, all
//! ANDed. Free text and `body:` also search the request's and the response's JSON text.

use mcpscope_engine::model::{Body, Call, Model};

/// A parsed filter. Matching is case-insensitive and by substring.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// The text as typed.
    pub text: String,
    tokens: Vec<Token>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Tool(String),
    Method(String),
    Status(String),
    Session(String),
    Body(String),
    Free(String),
}

impl Filter {
    /// Parses filter text (`tool:poke status:orphaned s1`).
    pub fn parse(text: &str) -> Self {
        let tokens = text
            .split_whitespace()
            .map(|word| {
                let lower = word.to_lowercase();
                match lower.split_once(':') {
                    Some(("tool", v)) => Token::Tool(v.to_string()),
                    Some(("method", v)) => Token::Method(v.to_string()),
                    Some(("status", v)) => Token::Status(v.to_string()),
                    Some(("session", v)) => Token::Session(v.to_string()),
                    Some(("body", v)) => Token::Body(v.to_string()),
                    _ => Token::Free(lower),
                }
            })
            .collect();
        Self {
            text: text.to_string(),
            tokens,
        }
    }

    /// Whether the filter selects everything.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The words to highlight in message bodies (free text and `body:` values), lower case.
    pub fn search_terms(&self) -> Vec<&str> {
        self.tokens
            .iter()
            .filter_map(|t| match t {
                Token::Body(v) | Token::Free(v) if !v.is_empty() => Some(v.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Whether a call passes the filter.
    pub fn matches(&self, model: &Model, call: &Call) -> bool {
        self.tokens.iter().all(|token| match token {
            Token::Tool(v) => call
                .tool
                .as_deref()
                .is_some_and(|t| t.to_lowercase().contains(v.as_str())),
            Token::Method(v) => call.method.to_lowercase().contains(v.as_str()),
            Token::Status(v) => call.verdict.name().starts_with(v.as_str()),
            Token::Session(v) => session_label(model, call)
                .to_lowercase()
                .contains(v.as_str()),
            Token::Body(v) => body_contains(call, v),
            Token::Free(v) => {
                call.title().to_lowercase().contains(v.as_str())
                    || call.id_text().to_lowercase().contains(v.as_str())
                    || session_label(model, call)
                        .to_lowercase()
                        .contains(v.as_str())
                    || call.verdict.name().contains(v.as_str())
                    || model
                        .stream(call.owner)
                        .is_some_and(|s| s.label().to_lowercase().contains(v.as_str()))
                    || body_contains(call, v)
            }
        })
    }
}

/// Whether the call's params or its response, as JSON text, contain `needle` (lower case). A
/// message whose whole text lacks it is not parsed.
fn body_contains(call: &Call, needle: &str) -> bool {
    let in_text = |b: &Body| b.text().to_lowercase().contains(needle);
    let hit = |v: &serde_json::Value| v.to_string().to_lowercase().contains(needle);
    (in_text(&call.request) && hit(&call.params()))
        || (call.reply.as_ref().is_some_and(in_text) && call.response().is_some_and(|r| hit(&r)))
}

fn session_label(model: &Model, call: &Call) -> String {
    model
        .sessions
        .get(call.session)
        .map(|s| s.label())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tokens() {
        let f = Filter::parse("tool:Poke status:orphaned free");
        assert_eq!(
            f.tokens,
            vec![
                Token::Tool("poke".into()),
                Token::Status("orphaned".into()),
                Token::Free("free".into())
            ]
        );
        assert!(Filter::parse("  ").is_empty());
    }
}
