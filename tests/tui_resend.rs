//! `r` sends the selected call's request again through the live proxy: on real sockets (the test
//! server behind the proxy), the answer arrives as a new exchange marked re-sent by mcpscope.

use std::time::{Duration, Instant};

use chrono::{Offset, Utc};
use mcpscope_engine::event::Event;
use mcpscope_engine::model::{Model, Verdict};
use mcpscope_proxy::controller as fault;
use mcpscope_testserver::client::McpClient;
use mcpscope_tui::App;
use mcpscope_tui::run::{self, LiveSource};
use mcpscope_tui::{Info, Theme, render_to_buffer};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use tokio::sync::mpsc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r_resends_the_request_and_its_answer_is_a_new_marked_exchange() {
    let mcpscope_testkit::live::Live {
        server,
        proxy,
        engine,
        events: mut rx,
        url,
    } = mcpscope_testkit::live::start().await;
    let mut client = McpClient::new(&url).expect("client");
    client.handshake().await.expect("initialize");
    let echo = client
        .call("echo", json!({"text": "again"}), false)
        .await
        .expect("echo");
    assert!(echo.result().is_some(), "{echo:?}");

    let mut events = Vec::new();
    let collect = |rx: &mut mpsc::UnboundedReceiver<Event>, events: &mut Vec<Event>| {
        while let Ok(e) = rx.try_recv() {
            events.push(e);
        }
        Model::from_events(events.iter()).0
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let model = collect(&mut rx, &mut events);
    let info = Info {
        listen: Some(proxy.addr.to_string()),
        ..Info::default()
    };
    let mut app = App::new(info, Theme::dark(), Utc.fix());
    app.set_faults(fault::controller(&proxy, engine));
    app.sync(&model);
    let echo_index = model
        .calls
        .iter()
        .find(|c| c.tool.as_deref() == Some("echo"))
        .map(|c| c.index)
        .expect("echo call");
    assert!(app.select_call(&model, echo_index), "row");
    let (_feed, feed_rx) = mpsc::unbounded_channel();
    let mut source = LiveSource::new(feed_rx, mcpscope_engine::model::Retention::default());
    for effect in app.handle_key(
        KeyEvent::new(KeyCode::Char('r'), KeyModifiers::NONE),
        &model,
    ) {
        run::perform(&mut app, effect, &mut source, &mut |_| Ok(())).expect("perform");
    }
    assert!(
        app.flash()
            .as_deref()
            .is_some_and(|f| f.starts_with("re-sent")),
        "{:?}",
        app.flash()
    );

    // The copy goes through the proxy like any request, and is answered.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (model, copy) = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let model = collect(&mut rx, &mut events);
        let copy = model
            .calls
            .iter()
            .filter(|c| c.tool.as_deref() == Some("echo"))
            .find(|c| c.index != echo_index && c.verdict == Verdict::Answered)
            .map(|c| c.index);
        if let Some(copy) = copy {
            break (model, copy);
        }
        assert!(Instant::now() < deadline, "no answered copy");
    };
    let answer = model.response_message(&model.calls[copy]).expect("answer");
    assert!(
        answer.body.to_string().contains("again"),
        "{:?}",
        answer.body
    );
    assert_eq!(model.calls[copy].session, model.calls[echo_index].session);
    app.sync(&model);
    assert!(app.select_call(&model, copy), "row");
    let buf = render_to_buffer(&mut app, &model, Utc::now(), 160, 40);
    let screen: String = mcpscope_tui::screen::text(&buf);
    assert!(screen.contains("tools/call echo ↻"), "{screen}");
    assert!(
        screen.contains(&format!(
            "re-sent    by mcpscope (a copy of id={})",
            model.calls[echo_index].id_text()
        )),
        "{screen}"
    );
    server.shutdown().await;
}
