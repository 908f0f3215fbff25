//! The one classifier of transport errors: how an HTTP body or connection error ended a stream.
//! The proxy's tap, its request path and the test client all ask it; nothing matches on
//! error text.

use mcpscope_engine::event::EndHow;

/// How a transport error ended a stream, and its cause in words: a reset is a reset; a clean
/// close (FIN) inside the body's framing is an error of the stream (the body is cut short).
pub fn classify(err: &(dyn std::error::Error + 'static)) -> (EndHow, String) {
    let mut source = Some(err);
    let mut fin = err
        .downcast_ref::<hyper::Error>()
        .is_some_and(hyper::Error::is_incomplete_message);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted => {
                    return (EndHow::Reset, io.to_string());
                }
                std::io::ErrorKind::UnexpectedEof => fin = true,
                _ => {}
            }
        }
        if e.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
        {
            fin = true;
        }
        source = e.source();
    }
    if fin {
        return (
            EndHow::Error,
            "the peer closed the connection (FIN) before the message's framing ended".into(),
        );
    }
    (EndHow::Error, err.to_string())
}

/// Whether a transport error is bytes that break HTTP's framing or grammar (a bad chunk size, a
/// status line that does not parse), as opposed to a peer that went away.
pub fn is_malformed(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(err);
    while let Some(e) = source {
        if e.downcast_ref::<hyper::Error>()
            .is_some_and(|h| h.is_parse() || h.is_parse_status() || h.is_parse_too_large())
        {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput
            )
        {
            return true;
        }
        source = e.source();
    }
    false
}
