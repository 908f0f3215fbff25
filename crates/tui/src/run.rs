//! The event loops: drain the feed once per frame, lay the view out, then draw; redraw only on
//! change and once a second for the timers, at most ~60 times a second. Quit on `q`, Ctrl-C,
//! SIGINT or SIGTERM. Every [`Effect`] is carried out here, by [`perform`].

use std::io;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use ratatui::crossterm::event::{Event as TermEvent, EventStream, KeyEventKind};
use ratatui::layout::{Position, Rect};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::mpsc::error::TryRecvError;

use super::app::{App, Effect};
use super::save;
use super::term::Term;
use super::view;
use mcpscope_engine::event::{Event, StreamId};
use mcpscope_engine::model::{Model, Retention};
use mcpscope_timeline::live::Live;
use mcpscope_timeline::player::Player;
use mcpscope_timeline::{FileCursor, Speed};

/// Events folded per frame at most (the rest wait in the channel for the next frame).
const MAX_PER_FRAME: usize = 200_000;
/// How often the feed is taken in, and how soon a key or a resize is drawn.
const FRAME: Duration = Duration::from_millis(16);
/// What the traffic changes is drawn at most this often: under a flood the view draws 20
/// frames a second instead of 60, leaving the cores it shares with the proxy to the traffic.
const TRAFFIC_FRAME: Duration = Duration::from_millis(50);
/// While a replay's seek is on its way, its progress is drawn at most this often: the cores go
/// to the seek.
const BUSY_FRAME: Duration = Duration::from_millis(250);
const TIMER_REDRAW: Duration = Duration::from_secs(1);

/// Where a view's model comes from.
pub trait Source {
    /// Pulls in new facts; returns whether anything changed.
    fn pump(&mut self, app: &mut App) -> bool;
    /// The model to show.
    fn model(&self) -> &Model;
    /// The time elapsed timers count to.
    fn now(&self) -> DateTime<Utc>;
    /// Carries out an effect that concerns the source (pause, replay cursor).
    fn effect(&mut self, effect: &Effect, app: &mut App);
    /// Whether it has work on its way (a replay's seek): pumped again at once, not a frame
    /// later.
    fn busy(&self) -> bool {
        false
    }
}

/// The live feed from the proxy.
pub struct LiveSource {
    live: Live,
    feed: UnboundedReceiver<Event>,
    taken: Option<mcpscope_session::pace::Pace>,
}

impl LiveSource {
    /// A live source reading `feed`, its model holding the past by `retention`.
    pub fn new(feed: UnboundedReceiver<Event>, retention: Retention) -> Self {
        Self {
            live: Live::new(retention),
            feed,
            taken: None,
        }
    }

    /// Tells `taken` of each event taken from the feed.
    pub fn telling(mut self, taken: Option<mcpscope_session::pace::Pace>) -> Self {
        self.taken = taken;
        self
    }
}

impl Source for LiveSource {
    fn pump(&mut self, app: &mut App) -> bool {
        let mut changed = false;
        let mut n = 0;
        while n < MAX_PER_FRAME {
            match self.feed.try_recv() {
                Ok(event) => {
                    n += 1;
                    if let Some(taken) = &self.taken {
                        taken.release(&event);
                    }
                    changed |= self.live.apply(&event);
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    if self.live.close() {
                        app.feed_closed = true;
                        changed = true;
                    }
                    break;
                }
            }
        }
        changed |= self.live.advance(Utc::now());
        if app.held != self.live.held() {
            app.held = self.live.held();
            changed = true;
        }
        changed
    }

    fn model(&self) -> &Model {
        self.live.model()
    }

    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn effect(&mut self, effect: &Effect, app: &mut App) {
        if effect == &Effect::TogglePause {
            self.live.toggle_pause();
            app.paused = self.live.paused();
        }
    }
}

/// A recording with a time cursor.
pub struct ReplaySource {
    player: Player,
}

impl ReplaySource {
    /// A replay of `events`, at its first event, to be played at `speed` (see [`Speed::nearest`]).
    pub fn with_speed(events: Vec<Event>, speed: Speed) -> Self {
        Self {
            player: Player::of_events(events, speed),
        }
    }

    /// The same replay, its model holding the past by `retention`.
    pub fn with_retention(self, retention: Retention) -> Self {
        Self {
            player: self.player.with_retention(retention),
        }
    }

    /// A replay of `events`, at its first event.
    pub fn new(events: Vec<Event>) -> Self {
        Self::with_speed(events, Speed::X1)
    }

    /// Seeks to `at` (at once, or once the index reaches it).
    pub fn seek(&mut self, at: DateTime<Utc>) {
        let _ = self
            .player
            .command(mcpscope_timeline::player::Command::SeekTime(at));
    }

    /// A replay of a recording file (read as needed, indexed in the background), at its first
    /// event, to be played at `speed`.
    pub fn from_file(cursor: FileCursor, speed: Speed) -> Self {
        Self {
            player: Player::new(Box::new(cursor), speed),
        }
    }
}

impl Source for ReplaySource {
    fn pump(&mut self, app: &mut App) -> bool {
        let tick = self.player.tick();
        if tick.flash.is_some() {
            app.flash = tick.flash;
        }
        if tick.changed {
            app.replay = Some(self.player.status());
        }
        tick.changed
    }

    fn model(&self) -> &Model {
        self.player.model()
    }

    fn now(&self) -> DateTime<Utc> {
        self.player.now()
    }

    fn effect(&mut self, effect: &Effect, app: &mut App) {
        let Effect::Replay(cmd) = effect else {
            return;
        };
        if let Some(flash) = self.player.command(cmd.clone()) {
            app.flash = Some(flash);
        }
    }

    fn busy(&self) -> bool {
        self.player.busy()
    }
}

/// Whether the loop goes on after an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep running.
    Continue,
    /// Quit.
    Quit,
}

/// Carries out one effect: the fault control's (arm, disarm, fault a stream), the clipboard's
/// (`copy`), a file's (export a call) or the source's (pause, replay cursor). What came of it
/// is flashed in the status bar.
pub fn perform(
    app: &mut App,
    effect: Effect,
    source: &mut dyn Source,
    copy: &mut dyn FnMut(&str) -> io::Result<()>,
) -> io::Result<Flow> {
    match effect {
        Effect::Quit => return Ok(Flow::Quit),
        Effect::Copy(text) => copy(&text)?,
        Effect::TogglePause | Effect::Replay(_) => source.effect(&effect, app),
        Effect::Recall { call, span } => {
            let recording = app.info.recording.clone();
            app.recalled = Some(mcpscope_timeline::recall::recall(
                recording.as_deref(),
                source.model(),
                call,
                span,
            ));
        }
        Effect::Export { call } => {
            app.flash = Some(
                match save::export_call(source.model(), call, &app.export_dir) {
                    Ok(path) => format!("call {} written to {}", call + 1, path.display()),
                    Err(e) => format!("call {} not written: {e}", call + 1),
                },
            );
        }
        Effect::Intercept(filter) => {
            if let Some(faults) = &app.faults {
                app.flash = Some(match faults.set_intercept(filter.clone()) {
                    Ok(()) => match &filter {
                        Some(f) => format!("intercepting requests that match {f:?}"),
                        None => "intercept off: held requests released".into(),
                    },
                    Err(e) => format!("intercept not set: {e}"),
                });
                app.intercept = filter;
            }
            read_armed(app);
        }
        Effect::Release { id, how } => {
            if let Some(faults) = &app.faults {
                let what = match &how {
                    mcpscope_engine::fault::Release::Forward(None) => "forwarded",
                    mcpscope_engine::fault::Release::Forward(Some(_)) => "forwarded edited",
                    mcpscope_engine::fault::Release::Drop => "dropped",
                    mcpscope_engine::fault::Release::Error(_) => "answered with an error",
                };
                app.flash = Some(match faults.release(id, how) {
                    Ok(()) => format!("held request {id} {what}"),
                    Err(e) => format!("held request {id} not released: {e}"),
                });
            }
            read_armed(app);
        }
        Effect::EditHeld { id, .. } => {
            app.flash = Some(format!("held request {id}: editing needs the terminal"));
        }
        Effect::Resend(request) => {
            let what = format!("{} {} (id={})", request.method, request.path, request.of);
            app.flash = Some(match &app.faults {
                Some(faults) => match faults.resend(request) {
                    Ok(()) => format!("re-sent {what}: its answer is a new exchange marked ↻"),
                    Err(e) => format!("re-sending {what} failed: {e}"),
                },
                None => "re-sending needs a live proxy".into(),
            });
        }
        Effect::ApplyFault { stream, spec } => {
            if let Some(faults) = &app.faults {
                app.flash = Some(match faults.apply_to_stream(stream, &spec) {
                    Ok(()) => format!("fault {spec} applied to #{stream}"),
                    Err(e) => format!("fault {spec} on #{stream} failed: {e}"),
                });
            }
        }
        Effect::Arm(rule) => {
            if let Some(faults) = &app.faults {
                app.flash = Some(match faults.arm(&rule) {
                    Ok(label) => format!("armed: {label}"),
                    Err(e) => format!("rule {rule:?} rejected: {e}"),
                });
            }
            read_armed(app);
        }
        Effect::Disarm { id, label } => {
            if let Some(faults) = &app.faults {
                app.flash = Some(if faults.disarm(id) {
                    format!("disarmed: {label}")
                } else {
                    format!("not disarmed: rule {id} fired first")
                });
            }
            read_armed(app);
        }
    }
    Ok(Flow::Continue)
}

/// Reads the armed fault rules and the held requests into the view (for the status bar, `D`
/// and the held list).
pub fn read_armed(app: &mut App) {
    app.armed = app
        .faults
        .as_ref()
        .map(|faults| faults.armed())
        .unwrap_or_default();
    app.intercepted = app
        .faults
        .as_ref()
        .map(|faults| faults.held())
        .unwrap_or_default();
    if let Some(row) = &mut app.held_menu {
        *row = (*row).min(app.intercepted.len().saturating_sub(1));
    }
}

/// Lets go of whatever the intercept holds (on quit: nothing held is lost); returns the
/// exchanges released.
pub fn release_intercept(app: &mut App) -> Vec<StreamId> {
    let Some(faults) = &app.faults else {
        return Vec::new();
    };
    let held: Vec<StreamId> = faults.held().iter().map(|h| h.stream).collect();
    if app.intercept.take().is_some() || !held.is_empty() {
        let _ = faults.set_intercept(None);
    }
    held
}

/// Runs the loop until quit.
pub async fn run(mut app: App, mut source: impl Source) -> anyhow::Result<()> {
    let result = run_loop(&mut app, &mut source).await;
    // Nothing the intercept holds is lost: it goes on unchanged, and the exit waits (a while)
    // for those exchanges to end.
    let released = release_intercept(&mut app);
    let deadline = Instant::now() + RELEASE_PATIENCE;
    while !released.is_empty() && Instant::now() < deadline {
        source.pump(&mut app);
        let model = source.model();
        if released
            .iter()
            .all(|&id| model.stream(id).is_none_or(|s| !s.is_open()))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    result
}

/// How long quitting waits for the exchanges the intercept released to end.
const RELEASE_PATIENCE: Duration = Duration::from_secs(10);

/// Edits a held request in the editor (the terminal handed over meanwhile), then forwards it.
fn edit_held(app: &mut App, term: Term, id: u64, body: &str) -> anyhow::Result<Term> {
    drop(term);
    let edited = crate::edit::edit(id, body);
    let term = Term::enter()?;
    app.flash = Some(match (edited, &app.faults) {
        (Ok(body), Some(faults)) => {
            match faults.release(id, mcpscope_engine::fault::Release::Forward(Some(body))) {
                Ok(()) => format!("held request {id} forwarded edited"),
                Err(e) => format!("held request {id} not released: {e}"),
            }
        }
        (Ok(_), None) => "intercepting needs a live proxy".into(),
        (Err(e), _) => format!("held request {id} still held: {e}"),
    });
    read_armed(app);
    Ok(term)
}

async fn run_loop(app: &mut App, source: &mut impl Source) -> anyhow::Result<()> {
    let mut term = Term::enter()?;
    let mut input = EventStream::new();
    let mut tick = tokio::time::interval(FRAME);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    // `asked`: a key, a mouse event or a resize waits to be drawn (at the next tick); `dirty`:
    // the model changed (drawn once TRAFFIC_FRAME has passed since the last frame).
    let mut asked = true;
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if source.pump(app) {
                    dirty = true;
                }
                let since = last_draw.map(|t| t.elapsed());
                let gap = if source.busy() { BUSY_FRAME } else { TRAFFIC_FRAME };
                let due = since.is_none_or(|d| d >= TIMER_REDRAW)
                    || (dirty && since.is_none_or(|d| d >= gap));
                if asked || due {
                    let now = source.now();
                    let size = term.terminal.size()?;
                    read_armed(app);
                    app.layout(source.model(), now, Rect::from((Position::ORIGIN, size)));
                    term.terminal.draw(|f| view::render(f, app, source.model(), now))?;
                    asked = false;
                    dirty = false;
                    last_draw = Some(Instant::now());
                }
                if source.busy() {
                    tick.reset_immediately();
                }
            }
            ev = input.next() => {
                let effects = match ev {
                    Some(Ok(TermEvent::Key(key))) if key.kind != KeyEventKind::Release => {
                        app.handle_key(key, source.model())
                    }
                    Some(Ok(TermEvent::Mouse(mouse))) => app.handle_mouse(mouse, source.model()),
                    Some(Ok(_)) => Vec::new(),
                    Some(Err(e)) => return Err(e.into()),
                    None => return Ok(()),
                };
                for effect in effects {
                    if let Effect::EditHeld { id, body } = &effect {
                        term = edit_held(app, term, *id, body)?;
                        continue;
                    }
                    if perform(app, effect, source, &mut |text| term.copy(text))? == Flow::Quit {
                        return Ok(());
                    }
                }
                asked = true;
            }
            _ = sigint.recv() => return Ok(()),
            _ = sigterm.recv() => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Info;
    use crate::theme::Theme;
    use chrono::FixedOffset;
    use mcpscope_engine::fixtures::many_calls;

    #[test]
    fn a_paused_view_shows_the_moment_of_the_pause_and_loses_nothing() {
        let events = many_calls(40);
        let (half, rest) = events.split_at(events.len() / 2);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let mut live = LiveSource::new(rx, Retention::window(10_000));
        let mut app = App::new(
            Info::default(),
            Theme::dark(),
            FixedOffset::east_opt(0).unwrap(),
        );
        for event in half {
            tx.send(event.clone()).unwrap();
        }
        live.pump(&mut app);
        let before = live.model().calls.len();
        assert!(before > 0);

        live.effect(&Effect::TogglePause, &mut app);
        assert!(app.paused);
        for event in rest {
            tx.send(event.clone()).unwrap();
        }
        live.pump(&mut app);
        assert_eq!(
            live.model().calls.len(),
            before,
            "the screen stays as it was"
        );
        assert_eq!(app.held, rest.len(), "the status counts what arrived since");

        live.effect(&Effect::TogglePause, &mut app);
        assert!(!app.paused);
        let (whole, _) = Model::from_events(&events);
        assert_eq!(
            live.model().calls.len(),
            whole.calls.len(),
            "nothing was lost"
        );
        assert!(live.model().calls.len() > before);
    }
}
