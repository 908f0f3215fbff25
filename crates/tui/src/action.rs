//! What a key or the mouse asks for ([`Action`]) and how the view applies it ([`App::update`]).
//! Anything that reaches outside the view comes back as an [`Effect`] for the runner.

use chrono::{NaiveTime, Utc};
use ratatui::layout::{Position, Rect};

use super::app::{App, Effect, FaultMenu, Input, InputKind, Pane, Selected};
use super::filter::Filter;
use mcpscope_engine::model::{FORWARD_PROXY_UPSTREAM, Model};
use mcpscope_timeline::player::Command;

/// The first or the last entry of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jump {
    /// The first row (top of the detail).
    First,
    /// The last row (bottom of the detail).
    Last,
}

/// One thing the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Quit.
    Quit,
    /// Show the help overlay.
    ShowHelp,
    /// Close the help overlay.
    CloseHelp,
    /// Focus the next pane.
    NextPane,
    /// Focus the previous pane.
    PrevPane,
    /// Start typing a filter.
    StartFilter,
    /// Hide or show answered calls.
    ToggleAnswered,
    /// Follow the newest call, or stop following.
    ToggleFollow,
    /// Pause or resume the live view.
    TogglePause,
    /// Switch to the next colour theme.
    CycleTheme,
    /// Copy the selected JSON.
    Copy,
    /// Copy the selected call's request as a `curl` command.
    CopyCurl,
    /// Show the notifications and logs of the selected call's session, full screen.
    ShowLogs,
    /// Send the selected call's request again through the live proxy.
    Resend,
    /// Start typing the intercept's filter.
    StartIntercept,
    /// Open the list of held requests.
    HeldList,
    /// Close the list of held requests.
    HeldClose,
    /// Highlight the previous / next held request.
    HeldMove(i64),
    /// Forward the highlighted held request as sent.
    HeldForward,
    /// Edit the highlighted held request in `$EDITOR`, then forward it.
    HeldEdit,
    /// Drop the highlighted held request.
    HeldDrop,
    /// Answer the highlighted held request with an error.
    HeldError,
    /// Write the selected call's Mermaid diagram and Markdown row to a file.
    Export,
    /// Open the fault menu for the selection's stream.
    FaultMenu,
    /// Start typing a fault rule to arm.
    StartArm,
    /// Disarm the oldest armed fault rule (as shown in the status bar).
    DisarmOldest,
    /// Drill in: detail full screen, or open a tree node.
    DrillIn,
    /// Back: leave the detail, clear the filter, return to the calls.
    Back,
    /// Move the focused pane's selection (or scroll) by this many rows.
    Move(i64),
    /// Move up by a screenful of calls.
    PageUp,
    /// Move down by a screenful of calls.
    PageDown,
    /// Move to the first or last row.
    Jump(Jump),
    /// Tree: close the node or go to its parent.
    TreeLeft,
    /// Tree: open the node or go to its first child.
    TreeRight,
    /// A replay cursor command.
    Replay(Command),
    /// Start typing a time to seek to (replay).
    StartSeek,
    /// Close the fault menu.
    MenuClose,
    /// Highlight the previous fault.
    MenuUp,
    /// Highlight the next fault.
    MenuDown,
    /// Apply the highlighted fault.
    MenuApply,
    /// Abandon the line being typed.
    InputCancel,
    /// Submit the line being typed.
    InputSubmit,
    /// Delete the last character typed.
    InputBackspace,
    /// Type a character.
    Type(char),
    /// Scroll the pane under the pointer by this many rows.
    Scroll(Pane, i64),
    /// A click at a screen position.
    Click(Position),
    /// Show or hide the stats overlay (latency, errors and definition bytes per tool).
    ToggleStats,
}

const NO_FAULTS: &str = "no live proxy: faults are unavailable";

impl App {
    /// Applies one action; returns what the runner must do outside the view.
    pub fn update(&mut self, action: Action, model: &Model) -> Vec<Effect> {
        let before = self.calls.call;
        let effects = self.apply(action, model);
        if self.calls.call != before {
            self.calls.cursor_chosen = true;
        }
        self.sync(model);
        effects
    }

    fn apply(&mut self, action: Action, model: &Model) -> Vec<Effect> {
        match action {
            Action::StartIntercept
            | Action::HeldList
            | Action::HeldClose
            | Action::HeldMove(_)
            | Action::HeldForward
            | Action::HeldDrop
            | Action::HeldError
            | Action::HeldEdit => self.apply_held(action),
            Action::FaultMenu
            | Action::StartArm
            | Action::DisarmOldest
            | Action::MenuClose
            | Action::MenuUp
            | Action::MenuDown
            | Action::MenuApply => self.apply_faults(action, model),
            Action::StartFilter
            | Action::StartSeek
            | Action::InputCancel
            | Action::InputSubmit
            | Action::InputBackspace
            | Action::Type(_) => self.apply_input(action),
            Action::Copy
            | Action::ShowLogs
            | Action::Resend
            | Action::CopyCurl
            | Action::Export => self.apply_selection(action, model),
            _ => self.apply_view(action, model),
        }
    }

    /// The intercept: what to hold, and the held requests' menu (forward, drop, answer with an
    /// error, edit).
    fn apply_held(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::StartIntercept => match self.faults {
                Some(_) => self.start_input(InputKind::Intercept),
                None => self.flash = Some("intercepting needs a live proxy".into()),
            },
            Action::HeldList => match self.faults {
                Some(_) => self.held_menu = Some(0),
                None => self.flash = Some("intercepting needs a live proxy".into()),
            },
            Action::HeldClose => self.held_menu = None,
            Action::HeldMove(delta) => {
                if let Some(row) = &mut self.held_menu {
                    let last = self.intercepted.len().saturating_sub(1) as i64;
                    *row = (*row as i64 + delta).clamp(0, last.max(0)) as usize;
                }
            }
            Action::HeldForward | Action::HeldDrop | Action::HeldError | Action::HeldEdit => {
                let held = self
                    .held_menu
                    .and_then(|row| self.intercepted.get(row))
                    .cloned();
                let Some(held) = held else {
                    self.flash = Some("nothing held".into());
                    return Vec::new();
                };
                use mcpscope_engine::fault::Release;
                let how = match action {
                    Action::HeldForward => Release::Forward(None),
                    Action::HeldDrop => Release::Drop,
                    Action::HeldError => Release::Error("rejected in the intercept".into()),
                    _ => {
                        return vec![Effect::EditHeld {
                            id: held.id,
                            body: held.body,
                        }];
                    }
                };
                return vec![Effect::Release { id: held.id, how }];
            }
            // The other actions are dispatched elsewhere by `apply`.
            _ => {}
        }
        Vec::new()
    }

    /// The fault menu and the armed rules.
    fn apply_faults(&mut self, action: Action, model: &Model) -> Vec<Effect> {
        match action {
            Action::FaultMenu => self.open_fault_menu(model),
            Action::StartArm => match self.faults {
                Some(_) => self.start_input(InputKind::Arm),
                None => self.flash = Some(NO_FAULTS.into()),
            },
            Action::DisarmOldest => match (&self.faults, self.armed.first()) {
                (None, _) => self.flash = Some(NO_FAULTS.into()),
                (Some(_), None) => self.flash = Some("no armed fault rule".into()),
                (Some(_), Some((id, label))) => {
                    return vec![Effect::Disarm {
                        id: *id,
                        label: label.clone(),
                    }];
                }
            },
            Action::MenuClose => self.fault_menu = None,
            Action::MenuUp => {
                if let Some(menu) = &mut self.fault_menu {
                    menu.selected = menu.selected.saturating_sub(1);
                }
            }
            Action::MenuDown => {
                if let Some(menu) = &mut self.fault_menu {
                    menu.selected = (menu.selected + 1).min(menu.choices.len().saturating_sub(1));
                }
            }
            Action::MenuApply => {
                if let Some(menu) = self.fault_menu.take()
                    && let Some(choice) = menu.choices.get(menu.selected)
                {
                    return vec![Effect::ApplyFault {
                        stream: menu.stream,
                        spec: choice.spec.clone(),
                    }];
                }
            }
            // The other actions are dispatched elsewhere by `apply`.
            _ => {}
        }
        Vec::new()
    }

    /// The input line: filter, seek, arm and intercept texts typed and submitted.
    fn apply_input(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::StartFilter => self.start_input(InputKind::Filter),
            Action::StartSeek => self.start_input(InputKind::Seek),
            Action::InputCancel => {
                if let Some(input) = self.input.take()
                    && input.kind == InputKind::Filter
                {
                    self.filter = Filter::default();
                }
            }
            Action::InputSubmit => {
                if let Some(Input { kind, text }) = self.input.take() {
                    match kind {
                        InputKind::Filter => self.filter = Filter::parse(&text),
                        InputKind::Arm => return vec![Effect::Arm(text.trim().to_string())],
                        InputKind::Seek => return vec![Effect::Replay(self.seek_command(&text))],
                        InputKind::Intercept => {
                            let text = text.trim().to_string();
                            return vec![Effect::Intercept((!text.is_empty()).then_some(text))];
                        }
                    }
                }
            }
            Action::InputBackspace => self.edit_input(|text| {
                text.pop();
            }),
            Action::Type(c) => self.edit_input(|text| text.push(c)),
            // The other actions are dispatched elsewhere by `apply`.
            _ => {}
        }
        Vec::new()
    }

    /// What acts on the selected call or message: copy, copy as curl, export, re-send, logs.
    fn apply_selection(&mut self, action: Action, model: &Model) -> Vec<Effect> {
        match action {
            Action::Copy => match self.selected_json(model) {
                Some(text) => {
                    self.flash = Some(format!("copied {} bytes of JSON", text.len()));
                    return vec![Effect::Copy(text)];
                }
                None => self.flash = Some("nothing to copy: select a call or message".into()),
            },
            Action::ShowLogs => {
                let session = match self.selected {
                    Selected::Session(s) => Some(s),
                    _ => self
                        .calls
                        .call
                        .and_then(|c| model.calls.get(c))
                        .map(|c| c.session),
                };
                match session {
                    Some(session) => {
                        self.selected = Selected::Session(session);
                        self.detail.scroll = 0;
                        self.zoom = true;
                    }
                    None => self.flash = Some("no session: select a call".into()),
                }
            }
            Action::Resend => match (&self.faults, self.resend_of_selection(model)) {
                (None, _) => self.flash = Some("re-sending needs a live proxy".into()),
                (Some(_), None) => {
                    self.flash = Some("nothing to re-send: select a client call".into())
                }
                (Some(_), Some(request)) => return vec![Effect::Resend(request)],
            },
            Action::CopyCurl => match self.curl_of_selection(model) {
                Some(text) => {
                    self.flash = Some(format!(
                        "copied the request as curl ({} bytes; secrets redacted)",
                        text.len()
                    ));
                    return vec![Effect::Copy(text)];
                }
                None => self.flash = Some("nothing to copy as curl: select a call".into()),
            },
            Action::Export => match self.calls.call.filter(|&c| model.calls.contains(c)) {
                Some(call) => return vec![Effect::Export { call }],
                None => self.flash = Some("nothing to export: select a call".into()),
            },
            // The other actions are dispatched elsewhere by `apply`.
            _ => {}
        }
        Vec::new()
    }

    /// The view itself: help, statistics, panes, toggles, theme, navigation and replay control.
    fn apply_view(&mut self, action: Action, model: &Model) -> Vec<Effect> {
        match action {
            Action::Quit => return vec![Effect::Quit],
            Action::ShowHelp => self.help = true,
            Action::CloseHelp => self.help = false,
            Action::ToggleStats => self.stats = !self.stats,
            Action::NextPane => self.focus = self.focus.next(),
            Action::PrevPane => self.focus = self.focus.prev(),
            Action::ToggleAnswered => {
                self.hide_answered = !self.hide_answered;
                self.flash = Some(if self.hide_answered {
                    "answered calls hidden".into()
                } else {
                    "answered calls shown".into()
                });
            }
            Action::ToggleFollow => self.follow = !self.follow,
            Action::TogglePause => return vec![Effect::TogglePause],
            Action::CycleTheme => self.cycle_theme(),
            Action::DrillIn => {
                self.drill_in();
                if let Some(effect) = self.recall(model) {
                    return vec![effect];
                }
            }
            Action::Back => self.back(),
            Action::Move(delta) => self.move_by(model, delta),
            Action::PageUp => self.move_by(model, -(self.calls.page.max(1) as i64)),
            Action::PageDown => self.move_by(model, self.calls.page.max(1) as i64),
            Action::Jump(to) => self.jump(model, to),
            Action::TreeLeft => {
                self.tree.state_mut().key_left();
                self.selection_from_tree(model);
            }
            Action::TreeRight => {
                self.tree.state_mut().key_right();
                self.selection_from_tree(model);
            }
            Action::Replay(cmd) => return vec![Effect::Replay(cmd)],
            Action::Scroll(pane, delta) => {
                let saved = self.focus;
                self.focus = pane;
                self.move_by(model, delta);
                self.focus = saved;
            }
            Action::Click(at) => self.click(model, at),

            // The other actions are dispatched elsewhere by `apply`.
            _ => {}
        }
        Vec::new()
    }
    fn start_input(&mut self, kind: InputKind) {
        let text = match kind {
            InputKind::Filter => self.filter.text.clone(),
            InputKind::Intercept => self.intercept.clone().unwrap_or_default(),
            InputKind::Arm | InputKind::Seek => String::new(),
        };
        self.input = Some(Input { kind, text });
    }

    fn edit_input(&mut self, edit: impl FnOnce(&mut String)) {
        if let Some(input) = &mut self.input {
            edit(&mut input.text);
            if input.kind == InputKind::Filter {
                self.filter = Filter::parse(&input.text);
            }
        }
    }

    /// Asks for the selected call's detail from the recording when the model evicted it.
    fn recall(&self, model: &Model) -> Option<Effect> {
        let Selected::Call(call) = self.selected else {
            return None;
        };
        let span = model.calls.get(call)?.evicted?;
        if self.recalled.as_ref().is_some_and(|r| r.call == call) {
            return None;
        }
        Some(Effect::Recall { call, span })
    }

    fn drill_in(&mut self) {
        match self.focus {
            Pane::Tree => {
                self.tree.state_mut().toggle_selected();
            }
            Pane::Detail if self.zoom => {}
            _ => {
                self.zoom = true;
                self.focus = Pane::Detail;
            }
        }
    }

    fn back(&mut self) {
        if self.zoom {
            self.zoom = false;
            self.focus = Pane::Calls;
        } else if !self.filter.is_empty() {
            self.filter = Filter::default();
            self.flash = Some("filter cleared".into());
        } else if self.focus != Pane::Calls {
            self.focus = Pane::Calls;
        }
    }

    /// The pane the selection keys act on: the detail while zoomed, else the focused one.
    fn active_pane(&self) -> Pane {
        if self.zoom { Pane::Detail } else { self.focus }
    }

    /// The selected call's request as a `curl` command aimed at the proxy (or, in a replay of a
    /// recording, at the address it was recorded on); through a forward proxy, at the request's
    /// own server by way of the proxy.
    pub fn curl_of_selection(&self, model: &Model) -> Option<String> {
        let call = model.calls.get(self.calls.call?)?;
        let listen = self
            .info
            .listen
            .clone()
            .or_else(|| model.proxy.as_ref().map(|p| p.listen.clone()))?;
        let base = if listen.contains("://") {
            listen
        } else {
            format!("http://{listen}")
        };
        let forward = model.proxy.as_ref().is_some_and(|p| p.is_forward())
            || self.info.upstream.as_deref() == Some(FORWARD_PROXY_UPSTREAM);
        let target = if forward {
            crate::curl::Target::Forward {
                proxy: &base,
                ca_cert: self.info.ca_cert.as_deref(),
            }
        } else {
            crate::curl::Target::Reverse { base: &base }
        };
        crate::curl::command(model, call, &target)
    }

    /// The selected client call's request, to send again as it was sent.
    pub fn resend_of_selection(&self, model: &Model) -> Option<mcpscope_engine::fault::Resend> {
        let call = model.calls.get(self.calls.call?)?;
        if call.dir != mcpscope_engine::event::Direction::ClientToServer {
            return None;
        }
        let stream = model.stream(call.request_stream)?;
        let message = model.request_message(call)?;
        Some(mcpscope_engine::fault::Resend {
            method: stream.method.clone(),
            path: stream.path.clone(),
            origin: stream.origin.clone(),
            headers: stream.request_headers.clone(),
            body: message.body.to_string(),
            of: call.id_text(),
        })
    }

    /// Moves the selection of the focused pane by `delta` rows (clamped).
    pub fn move_by(&mut self, model: &Model, delta: i64) {
        match self.active_pane() {
            Pane::Calls => {
                if self.calls.rows.is_empty() {
                    return;
                }
                self.follow = false;
                let last = self.calls.rows.len() as i64 - 1;
                let row = (self.calls.row as i64).saturating_add(delta).clamp(0, last) as usize;
                self.select_row(model, row);
            }
            Pane::Tree => {
                let changed = if delta < 0 {
                    self.tree.state_mut().select_relative(|i| {
                        i.map_or(0, |i| i.saturating_sub(delta.unsigned_abs() as usize))
                    })
                } else {
                    self.tree
                        .state_mut()
                        .select_relative(|i| i.map_or(0, |i| i.saturating_add(delta as usize)))
                };
                if changed {
                    self.selection_from_tree(model);
                }
            }
            Pane::Detail => {
                let scroll = i64::from(self.detail.scroll).saturating_add(delta);
                self.detail.scroll = scroll.clamp(0, i64::from(u16::MAX)) as u16;
            }
            Pane::Waterfall => {
                if model.streams.is_empty() {
                    return;
                }
                let last = model.streams.len() as i64 - 1;
                self.waterfall.stream = (self.waterfall.stream as i64)
                    .saturating_add(delta)
                    .clamp(0, last) as usize;
                self.selection_from_waterfall(model);
            }
        }
    }

    /// Moves the selection of the focused pane to its first or last row.
    pub fn jump(&mut self, model: &Model, to: Jump) {
        match self.active_pane() {
            Pane::Calls => {
                if self.calls.rows.is_empty() {
                    return;
                }
                self.follow = false;
                let row = match to {
                    Jump::First => 0,
                    Jump::Last => self.calls.rows.len() - 1,
                };
                self.select_row(model, row);
            }
            Pane::Tree => {
                let changed = match to {
                    Jump::First => self.tree.state_mut().select_first(),
                    Jump::Last => {
                        let moved = self.tree.state_mut().select_last();
                        self.tree.past_the_last_count(model) || moved
                    }
                };
                if changed {
                    self.selection_from_tree(model);
                }
            }
            Pane::Detail => {
                self.detail.scroll = match to {
                    Jump::First => 0,
                    Jump::Last => u16::MAX,
                };
            }
            Pane::Waterfall => {
                if model.streams.is_empty() {
                    return;
                }
                self.waterfall.stream = match to {
                    Jump::First => 0,
                    Jump::Last => model.streams.len() - 1,
                };
                self.selection_from_waterfall(model);
            }
        }
    }

    fn open_fault_menu(&mut self, model: &Model) {
        let Some(faults) = &self.faults else {
            self.flash = Some(NO_FAULTS.into());
            return;
        };
        let Some(stream) = self.selected_stream(model) else {
            self.flash = Some("select a call or stream first".into());
            return;
        };
        let choices = faults.stream_faults();
        if choices.is_empty() {
            self.flash = Some("no faults available".into());
            return;
        }
        self.fault_menu = Some(FaultMenu {
            stream,
            choices,
            selected: 0,
        });
    }

    fn click(&mut self, model: &Model, at: Position) {
        let Some(pane) = self.pane_at(at) else {
            return;
        };
        self.focus = pane;
        match pane {
            Pane::Calls => {
                let r = self.areas.calls_rows;
                if r.contains(at) {
                    let row = self.calls.offset + usize::from(at.y - r.y);
                    if row < self.calls.rows.len() {
                        self.select_row(model, row);
                    }
                }
            }
            Pane::Tree => {
                if self.tree.state_mut().click_at(at) {
                    self.selection_from_tree(model);
                }
            }
            Pane::Waterfall => {
                let r = self.areas.waterfall_rows;
                if r.contains(at) {
                    let rows = waterfall_rows(model, self.waterfall.stream, usize::from(r.height));
                    let clicked = usize::from(at.y - r.y);
                    // A task row stands for the stream that created it, the nearest above.
                    let stream = rows
                        .get(..=clicked.min(rows.len().saturating_sub(1)))
                        .and_then(|above| {
                            above.iter().rev().find_map(|row| match row {
                                WaterfallRow::Stream(pos) => Some(*pos),
                                WaterfallRow::Task(_) => None,
                            })
                        });
                    if clicked < rows.len()
                        && let Some(pos) = stream
                    {
                        self.waterfall.stream = pos;
                        self.selection_from_waterfall(model);
                    }
                }
            }
            Pane::Detail => {}
        }
    }

    /// The pane drawn at a screen position (as of the last layout pass).
    pub fn pane_at(&self, at: Position) -> Option<Pane> {
        let areas = [
            (self.areas.calls, Pane::Calls),
            (self.areas.tree, Pane::Tree),
            (self.areas.detail, Pane::Detail),
            (self.areas.waterfall, Pane::Waterfall),
        ];
        areas
            .iter()
            .find(|(r, _)| *r != Rect::ZERO && r.contains(at))
            .map(|(_, p)| *p)
    }
}

/// A row of the waterfall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaterfallRow {
    /// A stream, by its position in [`Model::streams`].
    Stream(usize),
    /// The task operation a stream's answer created, by its root call's index: one span from
    /// the request to the result, drawn under the stream that created it.
    Task(usize),
}

/// The waterfall's rows for `height` lines keeping stream `selected` in view: each stream,
/// then a row for each task operation whose task its answer created.
pub(crate) fn waterfall_rows(model: &Model, selected: usize, height: usize) -> Vec<WaterfallRow> {
    let streams = model.streams.as_slice();
    let mut rows = Vec::new();
    let first = waterfall_first(selected, height, streams.len());
    let mut selected_at = None;
    for (pos, stream) in streams.iter().enumerate().skip(first) {
        if rows.len() >= height && selected_at.is_some() {
            break;
        }
        if pos == selected {
            selected_at = Some(rows.len());
        }
        rows.push(WaterfallRow::Stream(pos));
        rows.extend(
            stream
                .calls
                .iter()
                .filter(|&&c| model.calls.get(c).is_some_and(|call| call.task().is_some()))
                .map(|&c| WaterfallRow::Task(c)),
        );
    }
    if let Some(at) = selected_at
        && at >= height
    {
        rows.drain(..at + 1 - height);
    }
    rows.truncate(height);
    rows
}

/// The first stream shown on a waterfall of `height` rows keeping `selected` in view.
pub(crate) fn waterfall_first(selected: usize, height: usize, len: usize) -> usize {
    if height == 0 || len <= height {
        return 0;
    }
    selected
        .saturating_sub(height / 2)
        .min(len.saturating_sub(height))
}

impl App {
    /// The replay command for a typed seek: `HH:MM:SS[.mmm]` on the day of the event at the
    /// cursor, in the view's time zone. A time that cannot be understood is said in the status
    /// bar and still drops a seek that was waiting, as every seek does.
    fn seek_command(&mut self, text: &str) -> Command {
        let time = NaiveTime::parse_from_str(text.trim(), "%H:%M:%S%.f")
            .or_else(|_| NaiveTime::parse_from_str(text.trim(), "%H:%M:%S"))
            .ok();
        let around = self.replay.as_ref().and_then(|status| status.time);
        let at = time.zip(around).and_then(|(time, around)| {
            let day = around.with_timezone(&self.tz).date_naive();
            let local = day.and_time(time).and_local_timezone(self.tz).single()?;
            Some(local.with_timezone(&Utc))
        });
        match at {
            Some(at) => Command::SeekTime(at),
            None => {
                self.flash = Some(format!("bad time {text:?}: use HH:MM:SS[.mmm]"));
                Command::StopWaiting
            }
        }
    }
}
