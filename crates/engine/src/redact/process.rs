//! A stdio server's process: the secrets of its command line and of its log lines (stderr).

use super::{REDACTED, Redactor};

impl Redactor {
    /// Redacts a server's log line (a stdio server's stderr): a JSON line as a body; a line
    /// `Name: value` whose name is a secret header's, the whole value; a `Bearer`/`Basic`
    /// credential; `name=value` words whose name is a secret's; the secrets of URLs. Returns the
    /// redacted line when anything changed.
    pub fn log_line(&self, line: &str) -> Option<String> {
        if !self.enabled || line.is_empty() {
            return None;
        }
        if let Some(redacted) = self.text(line) {
            return Some(redacted);
        }
        if let Some((name, value)) = line.split_once(':')
            && !name.trim().is_empty()
            && !name.trim().contains(char::is_whitespace)
            && !value.trim().is_empty()
            && !value.starts_with("//")
            && self.is_secret_header(name.trim())
        {
            return Some(format!("{name}: {REDACTED}"));
        }
        let mut changed = false;
        let mut credential_next = false;
        let words: Vec<String> = line
            .split(' ')
            .map(|word| {
                if std::mem::take(&mut credential_next) && !word.is_empty() {
                    changed = true;
                    return REDACTED.to_string();
                }
                if word.eq_ignore_ascii_case("bearer") || word.eq_ignore_ascii_case("basic") {
                    credential_next = true;
                    return word.to_string();
                }
                let redacted = if word.contains("://") {
                    self.url(word)
                } else if word.contains('=') {
                    self.params(word, '&').into_owned()
                } else {
                    return word.to_string();
                };
                changed |= redacted != word;
                redacted
            })
            .collect();
        changed.then(|| words.join(" "))
    }

    /// Redacts a command line in place: the value of an option named like a secret
    /// (`--api-key=…`, `--token …`) and the secrets of a URL argument.
    pub fn command(&self, args: &mut [String]) {
        if !self.enabled {
            return;
        }
        let option_name = |arg: &str| -> Option<String> {
            let name = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
            Some(name.split('=').next().unwrap_or(name).to_string())
        };
        let mut secret_next = false;
        for arg in args.iter_mut() {
            if std::mem::take(&mut secret_next) && !arg.starts_with('-') {
                *arg = REDACTED.to_string();
                continue;
            }
            if option_name(arg).is_some_and(|n| self.is_secret_param(&n)) {
                match arg.split_once('=') {
                    Some((option, _)) => *arg = format!("{option}={REDACTED}"),
                    None => secret_next = true,
                }
            } else if arg.contains("://") {
                *arg = self.url(arg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_log_lines_lose_their_secrets() {
        let r = super::Redactor::new();
        let hidden = |line: &str| r.log_line(line).unwrap_or_else(|| line.to_string());
        assert_eq!(
            hidden("Authorization: Bearer abc.def"),
            "Authorization: [redacted]"
        );
        assert_eq!(
            hidden("calling upstream with Bearer abc.def now"),
            "calling upstream with Bearer [redacted] now"
        );
        assert_eq!(
            hidden("GET /v1?api_key=s3cret&page=2 200"),
            "GET /v1?api_key=[redacted]&page=2 200"
        );
        assert!(!hidden("connecting to https://user:pw@db.example/x").contains("pw"));
        assert!(!hidden(r#"{"level":"info","access_token":"s3cr3t"}"#).contains("s3cr3t"));
        assert_eq!(r.log_line("listening on port 8080"), None);
        assert_eq!(r.log_line("note: nothing secret here"), None);
        assert_eq!(
            Redactor::disabled().log_line("Authorization: Bearer x"),
            None
        );
    }

    #[test]
    fn command_lines_lose_their_secrets() {
        let mut args: Vec<String> = [
            "npx",
            "my-server",
            "--api-key=abc",
            "--token",
            "xyz",
            "--port",
            "8080",
            "https://user:pw@example.com/mcp",
        ]
        .map(String::from)
        .to_vec();
        super::Redactor::new().command(&mut args);
        assert_eq!(args[..3], ["npx", "my-server", "--api-key=[redacted]"]);
        assert_eq!(args[3..7], ["--token", "[redacted]", "--port", "8080"]);
        assert!(!args[7].contains("pw"), "{}", args[7]);
    }
}
