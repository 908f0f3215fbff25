//! The third stage: the fault planned for the request; a status fault is answered here.

use http::{Response, StatusCode};

use super::read::ClientRequest;
use super::{Exchange, answer};
use crate::ProxyBody;
use crate::shared::Shared;
use mcpscope_engine::event::EventKind;
use mcpscope_engine::fault::{Fault, Plan, RequestInfo, Trigger};

/// What becomes of a request.
pub(crate) enum Decision {
    /// It goes upstream, with the fault planned for its response (if any).
    Forward(Option<Plan>),
    /// The proxy answered it (a status fault).
    Answered(Response<ProxyBody>),
}

/// Asks the rule engine; carries out a status fault (after its delay).
pub(crate) async fn decide(
    shared: &Shared,
    exchange: &Exchange,
    request: &ClientRequest,
) -> Decision {
    let stream = exchange.stream;
    let plan = shared.faults.planner(&shared.sink).and_then(|p| {
        p.plan(&RequestInfo {
            stream,
            http_method: &exchange.http_method,
            session: exchange.session.as_deref(),
            server: exchange.server(shared),
            body: request.message.as_ref(),
        })
    });
    let Some(Plan {
        fault: Fault::Status(code),
        trigger,
        origin,
    }) = plan
    else {
        return Decision::Forward(plan);
    };
    if let Trigger::After(d) = trigger {
        tokio::time::sleep(d).await;
    }
    shared.sink.emit(EventKind::FaultInjected {
        stream,
        fault: format!("status:{code}"),
        rule: Some(origin),
    });
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let (content_type, body) = if code == 404 {
        let id = answer::request_id(request.message.as_ref(), &request.body);
        (
            "application/json",
            answer::jsonrpc_error(id, -32001, "Session not found"),
        )
    } else {
        ("text/plain", format!("{} (injected by mcpscope)", status))
    };
    Decision::Answered(answer::local(shared, stream, status, content_type, body))
}
