//! Keys and mouse → view changes and [`Effect`]s.

use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::{Position, Rect};

use super::app::{App, Effect, FaultMenu, Input, InputKind, Pane, ReplayCmd, Selected};
use super::filter::Filter;
use mcpscope_engine::model::Model;

/// Every key, for the help overlay: (keys, what they do).
pub const HELP: &[(&str, &str)] = &[
    ("?", "this help (any key closes it)"),
    ("q  Ctrl-C", "quit"),
    ("↑ ↓  j k", "move the selection / scroll"),
    ("g G", "first / last row"),
    ("PgUp PgDn", "page up / down"),
    ("Tab  Shift-Tab", "next / previous pane"),
    ("Enter", "drill in (detail full screen; open a tree node)"),
    ("Esc", "back (close overlay, leave detail, clear filter)"),
    (
        "/",
        "filter: tool:NAME method:M status:orphaned session:S text",
    ),
    ("h", "hide / show answered calls"),
    ("f", "follow the newest call"),
    ("p", "pause the live view (events are kept)"),
    ("t", "next colour theme"),
    ("y", "copy the selected message JSON (OSC 52)"),
    ("x", "fault menu for the selected call's stream (live)"),
    ("a", "arm a fault rule (live)"),
    ("D", "disarm the oldest armed fault rule (live)"),
    ("mouse", "click selects, wheel scrolls"),
    ("space", "replay: play / pause"),
    ("+ -", "replay: speed 1× / 10× / max"),
    (". ,", "replay: one event forward / back"),
    ("n N", "replay: next / previous stream death"),
    ("[ ]", "replay: start / end of the recording"),
    (":", "replay: seek to HH:MM:SS[.mmm]"),
];

impl App {
    /// Handles one key; returns what the runner must do.
    pub fn handle_key(&mut self, key: KeyEvent, model: &Model) -> Vec<Effect> {
        self.sync(model);
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('c')) {
            return vec![Effect::Quit];
        }
        self.flash = None;
        if self.help {
            self.help = false;
            return Vec::new();
        }
        if self.input.is_some() {
            return self.input_key(key, model);
        }
        if self.fault_menu.is_some() {
            self.menu_key(key);
            return Vec::new();
        }
        if self.replay.is_some() {
            let cmd = match key.code {
                KeyCode::Char(' ') => Some(ReplayCmd::PlayPause),
                KeyCode::Char('+') | KeyCode::Char('=') => Some(ReplayCmd::Faster),
                KeyCode::Char('-') => Some(ReplayCmd::Slower),
                KeyCode::Char('.') => Some(ReplayCmd::StepForward),
                KeyCode::Char(',') => Some(ReplayCmd::StepBack),
                KeyCode::Char('n') => Some(ReplayCmd::NextDeath),
                KeyCode::Char('N') => Some(ReplayCmd::PrevDeath),
                KeyCode::Char('[') => Some(ReplayCmd::Start),
                KeyCode::Char(']') => Some(ReplayCmd::End),
                KeyCode::Char(':') => {
                    self.input = Some(Input {
                        kind: InputKind::Seek,
                        text: String::new(),
                    });
                    return Vec::new();
                }
                _ => None,
            };
            if let Some(cmd) = cmd {
                return vec![Effect::Replay(cmd)];
            }
        }
        match key.code {
            KeyCode::Char('q') => return vec![Effect::Quit],
            KeyCode::Char('?') => self.help = true,
            KeyCode::Tab => self.focus = self.focus.next(),
            KeyCode::BackTab => self.focus = self.focus.prev(),
            KeyCode::Char('/') => {
                self.input = Some(Input {
                    kind: InputKind::Filter,
                    text: self.filter.text.clone(),
                })
            }
            KeyCode::Char('h') => {
                self.hide_answered = !self.hide_answered;
                self.flash = Some(if self.hide_answered {
                    "answered calls hidden".into()
                } else {
                    "answered calls shown".into()
                });
                self.sync(model);
            }
            KeyCode::Char('f') => {
                self.follow = !self.follow;
                self.sync(model);
            }
            KeyCode::Char('p') if self.replay.is_none() => return vec![Effect::TogglePause],
            KeyCode::Char('t') => self.cycle_theme(),
            KeyCode::Char('y') => match self.selected_json(model) {
                Some(text) => {
                    self.flash = Some(format!("copied {} bytes of JSON", text.len()));
                    return vec![Effect::Copy(text)];
                }
                None => self.flash = Some("nothing to copy: select a call or message".into()),
            },
            KeyCode::Char('x') => self.open_fault_menu(model),
            KeyCode::Char('a') => match &self.faults {
                Some(_) => {
                    self.input = Some(Input {
                        kind: InputKind::Arm,
                        text: String::new(),
                    })
                }
                None => self.flash = Some("no live proxy: faults are unavailable".into()),
            },
            KeyCode::Char('D') => match &self.faults {
                Some(faults) => {
                    let armed = faults.armed();
                    self.flash = Some(match armed.first() {
                        Some(label) => {
                            faults.disarm(0);
                            format!("disarmed: {label}")
                        }
                        None => "no armed fault rule".into(),
                    });
                }
                None => self.flash = Some("no live proxy: faults are unavailable".into()),
            },
            KeyCode::Enter => self.enter(),
            KeyCode::Esc => self.escape(),
            KeyCode::Up | KeyCode::Char('k') => self.move_by(model, -1),
            KeyCode::Down | KeyCode::Char('j') => self.move_by(model, 1),
            KeyCode::PageUp => self.move_by(model, -(self.page.max(1) as i64)),
            KeyCode::PageDown => self.move_by(model, self.page.max(1) as i64),
            KeyCode::Char('g') | KeyCode::Home => self.move_by(model, i64::MIN / 2),
            KeyCode::Char('G') | KeyCode::End => self.move_by(model, i64::MAX / 2),
            KeyCode::Left if self.focus == Pane::Tree => {
                self.tree.key_left();
                self.selection_from_tree(model);
            }
            KeyCode::Right if self.focus == Pane::Tree => {
                self.tree.key_right();
                self.selection_from_tree(model);
            }
            _ => {}
        }
        Vec::new()
    }

    fn enter(&mut self) {
        match self.focus {
            Pane::Tree => {
                self.tree.toggle_selected();
            }
            Pane::Detail if self.zoom => {}
            _ => {
                self.zoom = true;
                self.focus = Pane::Detail;
            }
        }
    }

    fn escape(&mut self) {
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

    /// Moves the selection of the focused pane by `delta` (clamped).
    pub fn move_by(&mut self, model: &Model, delta: i64) {
        let pane = if self.zoom { Pane::Detail } else { self.focus };
        match pane {
            Pane::Calls => {
                if self.rows.is_empty() {
                    return;
                }
                self.follow = false;
                let last = self.rows.len() as i64 - 1;
                let row = (self.row as i64).saturating_add(delta).clamp(0, last) as usize;
                self.select_row(model, row);
            }
            Pane::Tree => {
                let changed = if delta == i64::MIN / 2 {
                    self.tree.select_first()
                } else if delta == i64::MAX / 2 {
                    self.tree.select_last()
                } else if delta < 0 {
                    self.tree
                        .select_relative(|i| i.map_or(0, |i| i.saturating_sub((-delta) as usize)))
                } else {
                    self.tree
                        .select_relative(|i| i.map_or(0, |i| i.saturating_add(delta as usize)))
                };
                if changed {
                    self.selection_from_tree(model);
                }
            }
            Pane::Detail => {
                let scroll = i64::from(self.detail_scroll).saturating_add(delta);
                self.detail_scroll = scroll.clamp(0, i64::from(u16::MAX)) as u16;
            }
            Pane::Waterfall => {
                if model.streams.is_empty() {
                    return;
                }
                let last = model.streams.len() as i64 - 1;
                self.wf_stream =
                    (self.wf_stream as i64).saturating_add(delta).clamp(0, last) as usize;
                self.selection_from_waterfall(model);
            }
        }
    }

    fn open_fault_menu(&mut self, model: &Model) {
        let Some(faults) = &self.faults else {
            self.flash = Some("no live proxy: faults are unavailable".into());
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

    fn menu_key(&mut self, key: KeyEvent) {
        let Some(menu) = &mut self.fault_menu else {
            return;
        };
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('x') => self.fault_menu = None,
            KeyCode::Up | KeyCode::Char('k') => menu.selected = menu.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => {
                menu.selected = (menu.selected + 1).min(menu.choices.len().saturating_sub(1))
            }
            KeyCode::Enter => {
                let stream = menu.stream;
                let spec = menu.choices.get(menu.selected).map(|c| c.spec.clone());
                self.fault_menu = None;
                if let (Some(spec), Some(faults)) = (spec, &self.faults) {
                    self.flash = Some(match faults.apply_to_stream(stream, &spec) {
                        Ok(()) => format!("fault {spec} applied to #{stream}"),
                        Err(e) => format!("fault {spec} on #{stream} failed: {e}"),
                    });
                }
            }
            _ => {}
        }
    }

    fn input_key(&mut self, key: KeyEvent, model: &Model) -> Vec<Effect> {
        let Some(input) = &mut self.input else {
            return Vec::new();
        };
        match key.code {
            KeyCode::Esc => {
                if input.kind == InputKind::Filter {
                    self.filter = Filter::default();
                }
                self.input = None;
            }
            KeyCode::Enter => {
                let Input { kind, text } = input.clone();
                self.input = None;
                match kind {
                    InputKind::Filter => self.filter = Filter::parse(&text),
                    InputKind::Arm => {
                        if let Some(faults) = &self.faults {
                            self.flash = Some(match faults.arm(text.trim()) {
                                Ok(label) => format!("armed: {label}"),
                                Err(e) => format!("rule {:?} rejected: {e}", text.trim()),
                            });
                        }
                    }
                    InputKind::Seek => return vec![Effect::Replay(ReplayCmd::SeekTime(text))],
                }
            }
            KeyCode::Backspace => {
                input.text.pop();
                if input.kind == InputKind::Filter {
                    self.filter = Filter::parse(&input.text);
                }
            }
            KeyCode::Char(c) => {
                input.text.push(c);
                if input.kind == InputKind::Filter {
                    self.filter = Filter::parse(&input.text);
                }
            }
            _ => {}
        }
        self.sync(model);
        Vec::new()
    }

    /// Handles a mouse event: click selects, wheel scrolls the pane under the pointer.
    pub fn handle_mouse(&mut self, mouse: MouseEvent, model: &Model) {
        self.sync(model);
        let at = Position::new(mouse.column, mouse.row);
        let pane = self.pane_at(at);
        match mouse.kind {
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let delta = if mouse.kind == MouseEventKind::ScrollUp {
                    -3
                } else {
                    3
                };
                if let Some(pane) = pane {
                    let saved = self.focus;
                    self.focus = pane;
                    self.move_by(model, delta);
                    self.focus = saved;
                }
            }
            MouseEventKind::Down(MouseButton::Left) => {
                let Some(pane) = pane else {
                    return;
                };
                self.focus = pane;
                match pane {
                    Pane::Calls => {
                        let r = self.areas.calls_rows;
                        if r.contains(at) {
                            let row = self.row_offset + usize::from(at.y - r.y);
                            if row < self.rows.len() {
                                self.select_row(model, row);
                            }
                        }
                    }
                    Pane::Tree => {
                        if self.tree.click_at(at) {
                            self.selection_from_tree(model);
                        }
                    }
                    Pane::Waterfall => {
                        let r = self.areas.waterfall_rows;
                        if r.contains(at) {
                            let first = waterfall_first(
                                self.wf_stream,
                                usize::from(r.height),
                                model.streams.len(),
                            );
                            let pos = first + usize::from(at.y - r.y);
                            if pos < model.streams.len() {
                                self.wf_stream = pos;
                                self.selection_from_waterfall(model);
                            }
                        }
                    }
                    Pane::Detail => {}
                }
            }
            _ => {}
        }
    }

    fn pane_at(&self, at: Position) -> Option<Pane> {
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

    /// Whether the selection is a call (for the detail title).
    pub fn is_call_selected(&self) -> bool {
        matches!(self.selected, Selected::Call(_))
    }
}

/// The first stream shown on a waterfall of `height` rows keeping `selected` in view.
pub fn waterfall_first(selected: usize, height: usize, len: usize) -> usize {
    if height == 0 || len <= height {
        return 0;
    }
    selected
        .saturating_sub(height / 2)
        .min(len.saturating_sub(height))
}
