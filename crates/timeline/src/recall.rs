//! Reading an evicted call's detail back from the recording: the events of its span folded into
//! a model of their own, which the detail pane shows in place of the compact row.

use std::path::Path;

use mcpscope_engine::model::{Model, Retention};
use mcpscope_engine::record;

/// A call's detail read back from the recording, or why it could not be.
pub struct Recalled {
    /// The call's index in the view's model.
    pub call: usize,
    /// The events of its span folded, and the call's index in that model; or the reason.
    pub detail: Result<(Model, usize), String>,
}

/// Reads back the detail of `call` of `model`, evicted with the event span `span`.
pub fn recall(recording: Option<&Path>, model: &Model, call: usize, span: (u64, u64)) -> Recalled {
    let detail = match (recording, model.calls.get(call)) {
        (None, _) => Err(format!(
            "not recorded (--no-record): only the last {} calls are held in memory",
            model.retention().keep_calls
        )),
        (_, None) => Err("the call is no longer held".to_string()),
        (Some(path), Some(live)) => record::read_span(path, span.0, span.1)
            .map_err(|e| format!("could not read it back: {e}"))
            .and_then(|events| {
                let mut scratch = Model::with_retention(Retention::unbounded());
                for event in &events {
                    scratch.apply(event);
                }
                let found = scratch
                    .calls
                    .iter()
                    .find(|c| {
                        c.request_stream == live.request_stream
                            && c.id == live.id
                            && c.method == live.method
                    })
                    .map(|c| c.index);
                match found {
                    Some(index) => Ok((scratch, index)),
                    None => Err(format!(
                        "events {}–{} of {} do not hold it (was the file replaced?)",
                        span.0,
                        span.1,
                        path.display()
                    )),
                }
            }),
    };
    Recalled { call, detail }
}
