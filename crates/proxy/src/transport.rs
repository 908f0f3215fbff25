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
