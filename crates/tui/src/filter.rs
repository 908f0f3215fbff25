//! The `/` filter: `tool:`, `method:`, `status:`, `session:`, `server:`, `body:` tokens and free
//! text, all
//! ANDed. Free text and `body:` also search the request's and the response's JSON text.

use mcpscope_engine::model::{Body, Call, Model};
use mcpscope_engine::wire::oauth::Origin;

/// A parsed filter. Matching is case-insensitive and by substring.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// The text as typed.
    pub text: String,
    tokens: Vec<Token>,
}

/// The filter's grammar as the help line and the prompt show it; its keys are [`FIELDS`]'
/// (a test keeps the two the same).
macro_rules! grammar {
    () => {
        "tool: method: status: session: server: body: text"
    };
}

/// The help line of the `/` key.
pub(crate) const HELP: &str = concat!("filter by ", grammar!());

/// The prompt while a filter is typed.
pub(crate) const PROMPT: &str = concat!("filter (", grammar!(), ") / ");

/// What a `key:value` token can name: the one table the parser reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Tool,
    Method,
    Status,
    Session,
    Server,
    Body,
}

/// Each key the filter takes, in the order the help lists them.
const FIELDS: [(&str, Field); 6] = [
    ("tool", Field::Tool),
    ("method", Field::Method),
    ("status", Field::Status),
    ("session", Field::Session),
    ("server", Field::Server),
    ("body", Field::Body),
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Tool(String),
    Method(String),
    Status(String),
    Session(String),
    Server(String),
    Body(String),
    Free(String),
}

impl Token {
    fn of(field: Field, value: &str) -> Self {
        let value = value.to_string();
        match field {
            Field::Tool => Token::Tool(value),
            Field::Method => Token::Method(value),
            Field::Status => Token::Status(value),
            Field::Session => Token::Session(value),
            Field::Server => Token::Server(value),
            Field::Body => Token::Body(value),
        }
    }
}

impl Filter {
    /// Parses filter text (`tool:poke status:orphaned s1`).
    pub fn parse(text: &str) -> Self {
        let tokens = text
            .split_whitespace()
            .map(|word| {
                let lower = word.to_lowercase();
                lower
                    .split_once(':')
                    .and_then(|(key, value)| {
                        let (_, field) = FIELDS.iter().find(|(name, _)| *name == key)?;
                        Some(Token::of(*field, value))
                    })
                    .unwrap_or(Token::Free(lower))
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
            Token::Server(v) => model
                .call_server(call)
                .is_some_and(|server| server_matches(server, v)),
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

/// Whether a server answers to a filter's `server:` value (lower case): by the name fault rules
/// use (origin, host, `host:port`), or as a substring like every other key.
fn server_matches(server: &str, value: &str) -> bool {
    Origin::server_named(server, value) || server.to_lowercase().contains(value)
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
        assert_eq!(
            Filter::parse("session:S1 body:x").tokens,
            vec![Token::Session("s1".into()), Token::Body("x".into())]
        );
    }

    #[test]
    fn help_and_prompt_name_every_key_the_parser_takes() {
        let shown: Vec<&str> = grammar!()
            .split_whitespace()
            .filter_map(|w| w.strip_suffix(':'))
            .collect();
        let parsed: Vec<&str> = FIELDS.iter().map(|(name, _)| *name).collect();
        assert_eq!(shown, parsed);
        assert!(HELP.contains("session:") && PROMPT.contains("session:"));
        assert!(HELP.contains("server:") && PROMPT.contains("server:"));
    }
}
