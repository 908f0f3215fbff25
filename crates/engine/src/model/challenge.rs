//! Auth challenges: an MCP request answered 401 or 403 (a scope step-up) with a
//! `WWW-Authenticate` challenge is the start of the OAuth flow, not a failure. The client
//! authorises and sends the request again, so the call is not reported as failed and the request
//! sent again is not a retry of a failure.

use chrono::{DateTime, Utc};

use super::notice::{Notice, What};
use super::{Model, Verdict};
use crate::event::{Header, StreamId, header};

/// How the error verdict of a challenged call begins.
pub const CHALLENGE_PREFIX: &str = "auth challenge: ";

/// The verdict message when a response head is an auth challenge: 401, or 403 (insufficient
/// scope: the client asks for more and sends the request again), with a `WWW-Authenticate`.
pub fn challenge(status: u16, headers: &[Header]) -> Option<String> {
    let value = header(headers, "www-authenticate")?;
    matches!(status, 401 | 403).then(|| format!("{CHALLENGE_PREFIX}HTTP {status} ({value})"))
}

/// Whether a verdict is that of a challenged call (its request is sent again after the OAuth
/// flow; that is not a retry of a failure).
pub fn is_challenged(verdict: &Verdict) -> bool {
    matches!(verdict, Verdict::Error { message } if message.starts_with(CHALLENGE_PREFIX))
}

impl Model {
    /// Ends the open calls a challenged exchange owned, each with an `auth_challenge` notice.
    pub(super) fn challenged(
        &mut self,
        si: usize,
        stream: StreamId,
        status: u16,
        message: &str,
        t: DateTime<Utc>,
        out: &mut Vec<Notice>,
    ) {
        for index in self.open_calls_owned_by(si) {
            self.set_verdict(
                index,
                Verdict::Error {
                    message: message.to_string(),
                },
                Some(t),
            );
            out.push(Notice {
                server: None,
                t,
                what: What::AuthChallenge {
                    call: self.call_ref(index),
                    stream,
                    status,
                },
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(value: &str) -> Vec<Header> {
        vec![("WWW-Authenticate".into(), value.into())]
    }

    #[test]
    fn challenges_are_401_or_403_insufficient_scope() {
        assert!(challenge(401, &h("Bearer resource_metadata=\"x\"")).is_some());
        assert!(challenge(403, &h("Bearer error=\"insufficient_scope\"")).is_some());
        assert!(challenge(403, &[]).is_none());
        assert!(challenge(401, &[]).is_none());
        assert!(challenge(500, &h("Bearer")).is_none());
        let message = challenge(401, &h("Bearer")).expect("challenge");
        assert!(is_challenged(&Verdict::Error { message }));
        assert!(!is_challenged(&Verdict::Error {
            message: "HTTP 401".into()
        }));
    }
}
