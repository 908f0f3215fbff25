//! The rule grammar, parsed.
//!
//! ```text
//! RULE    := FAULT [TRIGGER] [when] MATCHER* [once | always] [per-tool]
//! FAULT   := eof | reset | server-dies[:DUR] | json-reset | status:CODE | CODE | stall
//!          | delay[:DUR] | drip[:BYTES_PER_SEC] | truncate | duplicate | vanish
//! TRIGGER := after DUR | after N events
//! MATCHER := method=M | tool=T | session=S | server=HOST | nth=N
//! DUR     := 500ms | 5s | 1.5s | 2m
//! ```
//!
//! Words may come in any order after the fault. `each-tool` is an alias of `per-tool`.

use std::time::Duration;

use super::plan::{Fault, Trigger};
use super::rules::{Repeat, Rule};

/// How long `server-dies` keeps refusing requests when no time is given.
pub const DEFAULT_DOWN: Duration = Duration::from_secs(5);
/// The hold-back of `delay` when no time is given.
pub const DEFAULT_DELAY: Duration = Duration::from_secs(1);
/// The rate of `drip` when none is given (bytes per second).
pub const DEFAULT_DRIP: u64 = 64;

/// A spec that does not parse: names the spec and the offending word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad fault spec {spec:?}: {word:?}: {problem}")]
pub struct SpecError {
    /// The whole spec.
    pub spec: String,
    /// The word that is wrong (or the spec itself when something is missing).
    pub word: String,
    /// What is wrong with it.
    pub problem: String,
}

/// Parses a fault word (`reset`, `status:503`, `503`, `delay:200ms`, `drip:64`, …).
pub fn parse_fault(word: &str) -> Result<Fault, String> {
    let (name, arg) = match word.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (word, None),
    };
    let no_arg = |fault: Fault| match arg {
        None => Ok(fault),
        Some(_) => Err(format!("`{name}` takes no argument")),
    };
    match name.to_ascii_lowercase().as_str() {
        "eof" => no_arg(Fault::Eof),
        "reset" => no_arg(Fault::Reset),
        "json-reset" => no_arg(Fault::JsonThenReset),
        "stall" => no_arg(Fault::Stall),
        "truncate" => no_arg(Fault::Truncate),
        "duplicate" => no_arg(Fault::Duplicate),
        "vanish" => no_arg(Fault::Vanish),
        "server-dies" => Ok(Fault::ServerDies {
            down: arg.map_or(Ok(DEFAULT_DOWN), parse_duration)?,
        }),
        "delay" => Ok(Fault::Delay(arg.map_or(Ok(DEFAULT_DELAY), parse_duration)?)),
        "drip" => {
            let rate = match arg {
                None => DEFAULT_DRIP,
                Some(a) => a
                    .trim_end_matches("/s")
                    .parse::<u64>()
                    .ok()
                    .filter(|r| *r > 0)
                    .ok_or_else(|| {
                        format!("drip rate {a:?} is not a positive number of bytes per second")
                    })?,
            };
            Ok(Fault::Drip {
                bytes_per_sec: rate,
            })
        }
        "status" => match arg {
            Some(code) => parse_status(code),
            None => Err("`status` needs a code, e.g. status:503".into()),
        },
        _ if arg.is_none() && name.len() == 3 && name.bytes().all(|b| b.is_ascii_digit()) => {
            parse_status(name)
        }
        _ => Err(
            "unknown fault (expected eof, reset, server-dies[:5s], json-reset, status:503, \
             stall, delay:200ms, drip:64, truncate, duplicate or vanish)"
                .into(),
        ),
    }
}

fn parse_status(code: &str) -> Result<Fault, String> {
    match code.parse::<u16>() {
        Ok(c) if (200..=599).contains(&c) => Ok(Fault::Status(c)),
        _ => Err(format!("{code:?} is not an HTTP status code (200–599)")),
    }
}

/// Parses a duration: `500ms`, `5s`, `1.5s`, `2m`, or plain seconds (`8` is `8s`, `0` is zero).
/// Every duration flag and the fault grammar read durations with it.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration (e.g. 500ms, 5s, 1.5s, 2m, or 8 for seconds)");
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else {
        (text, 1.0)
    };
    // Digits and at most one point only: no signs, exponents, `inf` or `nan`.
    if number.is_empty()
        || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        || number.bytes().filter(|b| *b == b'.').count() > 1
        || number == "."
    {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    if !value.is_finite() || value < 0.0 || value * scale > 86_400.0 {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(value * scale))
}

/// Formats a duration the way the grammar reads it (`500ms`, `5s`).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms > 0 && ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// Parses the text of a trigger without its `after`: `500ms` or `3 events`.
pub fn parse_after(text: &str) -> Result<Trigger, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    match words.as_slice() {
        [n, unit] if matches!(*unit, "events" | "event") => n
            .parse::<u32>()
            .map(Trigger::AfterEvents)
            .map_err(|_| format!("{n:?} is not a number of events")),
        [d] => parse_duration(d).map(Trigger::After),
        _ => Err(format!(
            "{text:?} is not a trigger (e.g. `after 500ms` or `after 3 events`)"
        )),
    }
}

/// Formats a trigger as grammar (`after 500ms`, `after 3 events`), or nothing for `Now`.
pub fn format_trigger(trigger: Trigger) -> Option<String> {
    match trigger {
        Trigger::Now => None,
        Trigger::After(d) => Some(format!("after {}", format_duration(d))),
        Trigger::AfterEvents(n) => Some(format!("after {n} events")),
    }
}

struct Parser<'a> {
    spec: &'a str,
    words: Vec<&'a str>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(spec: &'a str) -> Self {
        Self {
            spec,
            words: spec.split_whitespace().collect(),
            pos: 0,
        }
    }

    fn error(&self, word: &str, problem: impl Into<String>) -> SpecError {
        SpecError {
            spec: self.spec.to_string(),
            word: word.to_string(),
            problem: problem.into(),
        }
    }

    fn next(&mut self) -> Option<&'a str> {
        let word = self.words.get(self.pos).copied();
        self.pos += 1;
        word
    }

    fn fault(&mut self) -> Result<Fault, SpecError> {
        let word = self
            .next()
            .ok_or_else(|| self.error("", "empty spec: expected a fault such as `reset`"))?;
        parse_fault(word).map_err(|p| self.error(word, p))
    }

    /// After `after`: a duration, or a number followed by `events`.
    fn trigger(&mut self) -> Result<Trigger, SpecError> {
        let Some(word) = self.next() else {
            return Err(self.error("after", "expected a time or `N events` after it"));
        };
        if word.bytes().all(|b| b.is_ascii_digit())
            && let Some(unit @ ("events" | "event")) = self.words.get(self.pos).copied()
        {
            self.pos += 1;
            return parse_after(&format!("{word} {unit}")).map_err(|p| self.error(word, p));
        }
        parse_duration(word)
            .map(Trigger::After)
            .map_err(|p| self.error(word, p))
    }
}

const WORDS: &str = "after, when, method=, tool=, session=, server=, nth=, once, always, per-tool";

/// Parses a whole rule (`reset after 500ms when method=tools/call tool=poke nth=1 once`).
pub fn parse_rule(spec: &str) -> Result<Rule, SpecError> {
    let mut p = Parser::new(spec);
    let fault = p.fault()?;
    let mut rule = Rule::new(fault);
    let mut trigger_seen = false;
    let mut repeat_seen = false;
    while let Some(word) = p.next() {
        let set = |slot: &mut Option<String>, value: &str| {
            if value.is_empty() {
                return Err(p.error(word, "needs a value"));
            }
            if slot.replace(value.to_string()).is_some() {
                return Err(p.error(word, "given twice"));
            }
            Ok(())
        };
        match word.split_once('=') {
            Some(("method", v)) => set(&mut rule.method, v)?,
            Some(("tool", v)) => set(&mut rule.tool, v)?,
            Some(("session", v)) => set(&mut rule.session, v)?,
            Some(("server", v)) => set(&mut rule.server, v)?,
            Some(("nth", v)) => {
                let n = v
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| p.error(word, "nth needs a number from 1"))?;
                if rule.nth.replace(n).is_some() {
                    return Err(p.error(word, "given twice"));
                }
            }
            Some(_) => return Err(p.error(word, format!("unknown matcher (expected {WORDS})"))),
            None => match word {
                "when" => {}
                "after" => {
                    if trigger_seen {
                        return Err(p.error(word, "a rule has one trigger"));
                    }
                    trigger_seen = true;
                    rule.trigger = p.trigger()?;
                }
                "once" | "always" => {
                    if repeat_seen {
                        return Err(p.error(word, "once/always given twice"));
                    }
                    repeat_seen = true;
                    rule.repeat = if word == "once" {
                        Repeat::Once
                    } else {
                        Repeat::Always
                    };
                }
                "per-tool" | "each-tool" => rule.per_tool = true,
                _ => return Err(p.error(word, format!("unknown word (expected {WORDS})"))),
            },
        }
    }
    rule.validate().map_err(|(word, problem)| SpecError {
        spec: spec.to_string(),
        word,
        problem,
    })?;
    Ok(rule)
}

/// Parses a fault for a live stream: a fault word and an optional trigger
/// (`reset`, `eof after 2s`, `truncate after 1 events`).
pub fn parse_live(spec: &str) -> Result<(Fault, Trigger), SpecError> {
    let mut p = Parser::new(spec);
    let fault = p.fault()?;
    let mut trigger = Trigger::Now;
    match p.next() {
        None => {}
        Some("after") => trigger = p.trigger()?,
        Some(word) => {
            return Err(p.error(
                word,
                "a live fault takes only `after …` (matchers belong to rules)",
            ));
        }
    }
    if let Some(word) = p.next() {
        return Err(p.error(word, "unexpected word after the trigger"));
    }
    Ok((fault, trigger))
}

/// A timeout given on the command line (`10s`, `500ms`): a duration of the grammar, more than
/// zero.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Err(format!("{text:?}: a timeout must be more than zero"));
    }
    Ok(d)
}
