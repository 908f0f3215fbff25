//! Colour themes: TOML files of semantic keys, resolved into styles by meaning.
//!
//! Call sites ask for `theme.orphaned()`, never for a colour. A theme file may omit keys; they
//! fall back to the built-in dark theme.

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};

/// The built-in themes: (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../themes/dark.toml")),
    ("light", include_str!("../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../themes/high-contrast.toml"),
    ),
];

macro_rules! keys {
    ($($method:ident => $key:literal: $doc:literal,)*) => {
        /// Every semantic key a theme file may set.
        pub const KEYS: &[&str] = &[$($key),*];

        impl Theme {
            $(
                #[doc = $doc]
                pub fn $method(&self) -> Style {
                    self.get($key)
                }
            )*
        }
    };
}

keys! {
    text => "text": "Ordinary text.",
    dim => "dim": "Secondary text.",
    orphaned => "orphaned": "An orphaned call: its stream died without the response.",
    resumable => "resumable": "A call whose stream died but may be resumed.",
    pending => "pending": "A call waiting for its response.",
    answered => "answered": "An answered call (faded).",
    cancelled => "cancelled": "A call the client cancelled.",
    error => "error": "A call answered with an error.",
    stream_open => "stream-open": "A stream that is still open.",
    stream_dead => "stream-dead": "A stream that died.",
    injected => "injected": "Something hit by an injected fault.",
    selection => "selection": "The selected row.",
    border => "border": "Pane borders.",
    border_focused => "border-focused": "The focused pane's border.",
    title => "title": "Pane titles.",
    header => "header": "Table headers and section heads.",
    json_key => "json-key": "JSON object keys.",
    json_string => "json-string": "JSON strings.",
    json_number => "json-number": "JSON numbers.",
    json_literal => "json-literal": "JSON true, false and null.",
    json_punct => "json-punct": "JSON punctuation.",
    mark => "mark": "An SSE event on the waterfall.",
    result => "result": "The response on the waterfall.",
    death => "death": "A stream's death on the waterfall.",
    status_bar => "status-bar": "The status bar.",
    status_alert => "status-alert": "Alerts in the status bar (orphans, pause).",
    help => "help": "The help overlay.",
    input => "input": "Input lines (filter, rule, seek).",
}

/// A resolved theme: a style for every semantic key.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    /// The theme's name (built-in name or file path).
    pub name: String,
    styles: HashMap<&'static str, Style>,
}

/// Why a theme could not be loaded; the message names the file, the key and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct ThemeError {
    /// The file (or built-in name).
    pub file: String,
    /// What is wrong, naming the key when there is one.
    pub problem: String,
}

impl Default for Theme {
    fn default() -> Self {
        Self::dark()
    }
}

impl Theme {
    /// A pane's border: [`Theme::border_focused`] when it has the focus, else [`Theme::border`].
    pub fn pane_border(&self, focused: bool) -> Style {
        if focused {
            self.border_focused()
        } else {
            self.border()
        }
    }

    /// The built-in dark theme.
    pub fn dark() -> Self {
        let mut styles = HashMap::new();
        if let Ok(table) = BUILTIN[0].1.parse::<toml::Table>() {
            for (key, value) in table {
                if let (Some(k), Some(v)) = (KEYS.iter().find(|k| **k == key), value.as_str())
                    && let Ok(style) = parse_style(v)
                {
                    styles.insert(*k, style);
                }
            }
        }
        Self {
            name: "dark".to_string(),
            styles,
        }
    }

    /// The style of a key (default style if unknown).
    pub fn get(&self, key: &str) -> Style {
        self.styles.get(key).copied().unwrap_or_default()
    }

    /// A built-in theme by name.
    pub fn builtin(name: &str) -> Option<Self> {
        let (name, text) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        Self::from_toml(name, text).ok()
    }

    /// Parses a theme from TOML text; `file` names it in errors. Missing keys fall back to dark.
    pub fn from_toml(file: &str, text: &str) -> Result<Self, ThemeError> {
        let err = |problem: String| ThemeError {
            file: file.to_string(),
            problem,
        };
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| err(format!("invalid TOML: {}", e.message())))?;
        let mut theme = Self::dark();
        theme.name = file.to_string();
        for (key, value) in table {
            let Some(k) = KEYS.iter().find(|k| **k == key) else {
                return Err(err(format!(
                    "unknown key {key:?} (known keys: {})",
                    KEYS.join(", ")
                )));
            };
            let Some(v) = value.as_str() else {
                return Err(err(format!(
                    "key {key:?}: expected a string such as \"light-red bold\", got {}",
                    value.type_str()
                )));
            };
            let style = parse_style(v).map_err(|p| err(format!("key {key:?}: {p}")))?;
            theme.styles.insert(k, style);
        }
        Ok(theme)
    }

    /// Loads `--theme NAME|PATH`: a built-in name, or a TOML file.
    pub fn load(name_or_path: &str) -> Result<Self, ThemeError> {
        if let Some(theme) = Self::builtin(name_or_path) {
            return Ok(theme);
        }
        let path = Path::new(name_or_path);
        let text = std::fs::read_to_string(path).map_err(|e| ThemeError {
            file: name_or_path.to_string(),
            problem: format!(
                "cannot read theme file ({e}); built-in themes are {}",
                BUILTIN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })?;
        Self::from_toml(name_or_path, &text)
    }
}

/// Parses `"light-red on #102030 bold underline"`.
pub fn parse_style(text: &str) -> Result<Style, String> {
    let mut style = Style::default();
    let mut words = text.split_whitespace();
    let mut fg_set = false;
    while let Some(word) = words.next() {
        match word.to_ascii_lowercase().as_str() {
            "bold" => style = style.add_modifier(Modifier::BOLD),
            "dim" => style = style.add_modifier(Modifier::DIM),
            "italic" => style = style.add_modifier(Modifier::ITALIC),
            "underline" | "underlined" => style = style.add_modifier(Modifier::UNDERLINED),
            "reversed" | "reverse" => style = style.add_modifier(Modifier::REVERSED),
            "on" => {
                let Some(bg) = words.next() else {
                    return Err("\"on\" must be followed by a background colour".to_string());
                };
                style = style.bg(parse_colour(bg)?);
            }
            _ => {
                if fg_set {
                    return Err(format!(
                        "unexpected {word:?} (one foreground colour; use \"on COLOUR\" for the background)"
                    ));
                }
                style = style.fg(parse_colour(word)?);
                fg_set = true;
            }
        }
    }
    Ok(style)
}

/// Parses a colour with [`Color::from_str`]: a name (`red`, `light-red`, `dark-gray`, `reset`),
/// an index (`0`–`255`) or `#rrggbb`; `default` is an alias of `reset`.
pub fn parse_colour(word: &str) -> Result<Color, String> {
    if word.eq_ignore_ascii_case("default") {
        return Ok(Color::Reset);
    }
    Color::from_str(word).map_err(|_| {
        if word.starts_with('#') {
            format!("bad hex colour {word:?} (expected #rrggbb)")
        } else {
            format!("unknown colour {word:?}")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_completely() {
        for (name, text) in BUILTIN {
            let theme = Theme::from_toml(name, text).expect("builtin parses");
            let table: toml::Table = text.parse().expect("toml");
            for key in KEYS {
                assert!(table.contains_key(*key), "{name} lacks {key}");
            }
            assert_eq!(theme.styles.len(), KEYS.len());
        }
    }
}
