//! Where each value of a JSON text lies: byte ranges of objects, their members' keys and values,
//! and arrays' items. It lets `wrap` change a few values in place and leave every other byte of
//! a host's file as it was. The text is checked as JSON by serde_json before it is scanned, so
//! the scanner only has to find boundaries (and refuses, never panics, on what it did not
//! expect).

use std::ops::Range;

/// A JSON value and where it lies in the text.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// An object and its members in the order of the text.
    Object {
        /// From `{` to `}` inclusive.
        span: Range<usize>,
        /// Its members.
        members: Vec<Member>,
    },
    /// An array and its items.
    Array {
        /// From `[` to `]` inclusive.
        span: Range<usize>,
        /// Its items.
        items: Vec<Node>,
    },
    /// A string, number, `true`, `false` or `null`.
    Scalar {
        /// The token.
        span: Range<usize>,
    },
}

/// A member of an object: its key (decoded) and the key's token, and its value.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    /// The key, decoded.
    pub(crate) key: String,
    /// The key's string token, quotes included.
    pub(crate) key_span: Range<usize>,
    /// The value.
    pub(crate) value: Node,
}

impl Node {
    /// Its bytes in the text.
    pub(crate) fn span(&self) -> Range<usize> {
        match self {
            Node::Object { span, .. } | Node::Array { span, .. } | Node::Scalar { span } => {
                span.clone()
            }
        }
    }

    /// The member named `key` of an object (the last one, as serde_json reads duplicates).
    pub(crate) fn member(&self, key: &str) -> Option<&Member> {
        match self {
            Node::Object { members, .. } => members.iter().rev().find(|m| m.key == key),
            _ => None,
        }
    }
}

/// Scans a text that serde_json accepted as JSON; `None` if it holds something the scanner does
/// not know (which a valid JSON text never does).
pub(crate) fn scan(text: &str) -> Option<Node> {
    let mut scanner = Scanner {
        bytes: text.as_bytes(),
        text,
        at: 0,
    };
    scanner.skip_space();
    let node = scanner.value()?;
    scanner.skip_space();
    (scanner.at == scanner.bytes.len()).then_some(node)
}

struct Scanner<'a> {
    bytes: &'a [u8],
    text: &'a str,
    at: usize,
}

impl Scanner<'_> {
    fn skip_space(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    fn value(&mut self) -> Option<Node> {
        match self.bytes.get(self.at)? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string().map(|span| Node::Scalar { span }),
            _ => {
                let start = self.at;
                while self
                    .bytes
                    .get(self.at)
                    .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.'))
                {
                    self.at += 1;
                }
                (self.at > start).then_some(Node::Scalar {
                    span: start..self.at,
                })
            }
        }
    }

    fn string(&mut self) -> Option<Range<usize>> {
        let start = self.at;
        self.eat(b'"')?;
        loop {
            match self.bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(start..self.at);
                }
                b'\\' => self.at += 2,
                _ => self.at += 1,
            }
        }
    }

    fn object(&mut self) -> Option<Node> {
        let start = self.at;
        self.eat(b'{')?;
        let mut members = Vec::new();
        self.skip_space();
        if self.eat(b'}').is_some() {
            return Some(Node::Object {
                span: start..self.at,
                members,
            });
        }
        loop {
            self.skip_space();
            let key_span = self.string()?;
            let key: String = serde_json::from_str(self.text.get(key_span.clone())?).ok()?;
            self.skip_space();
            self.eat(b':')?;
            self.skip_space();
            let value = self.value()?;
            members.push(Member {
                key,
                key_span,
                value,
            });
            self.skip_space();
            if self.eat(b',').is_some() {
                continue;
            }
            self.eat(b'}')?;
            return Some(Node::Object {
                span: start..self.at,
                members,
            });
        }
    }

    fn array(&mut self) -> Option<Node> {
        let start = self.at;
        self.eat(b'[')?;
        let mut items = Vec::new();
        self.skip_space();
        if self.eat(b']').is_some() {
            return Some(Node::Array {
                span: start..self.at,
                items,
            });
        }
        loop {
            self.skip_space();
            items.push(self.value()?);
            self.skip_space();
            if self.eat(b',').is_some() {
                continue;
            }
            self.eat(b']')?;
            return Some(Node::Array {
                span: start..self.at,
                items,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cover_the_tokens() {
        let text = r#" { "a\"b" : [1, "x\\", {"c": null}], "d": -1.5e3 } "#;
        let root = scan(text).expect("scans");
        let a = root.member("a\"b").expect("member");
        assert_eq!(&text[a.key_span.clone()], r#""a\"b""#);
        assert_eq!(&text[a.value.span()], r#"[1, "x\\", {"c": null}]"#);
        let d = root.member("d").expect("member");
        assert_eq!(&text[d.value.span()], "-1.5e3");
        assert!(scan("{} x").is_none());
    }
}
