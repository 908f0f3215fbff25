//! View state: focus, selection, filter, overlays. Pure: actions come in (see
//! [`App::update`]), [`Effect`]s go out to the runner.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::FixedOffset;
use ratatui::layout::Rect;

use super::Info;
use super::filter::Filter;
use super::pane::calls::RowsKey;
use super::pane::{CallsPane, DetailPane, TreePane, WaterfallPane};
use super::rows;
use super::theme::{BUILTIN, Theme};
pub(crate) use crate::node::Node;
use mcpscope_engine::event::StreamId;
use mcpscope_engine::fault::{FaultChoice, FaultControl, RuleId};
use mcpscope_engine::model::Model;
use mcpscope_timeline::player::Command;

/// The panes Tab cycles through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    /// The pending calls table (home).
    Calls,
    /// Sessions → streams → messages.
    Tree,
    /// Details of the selection.
    Detail,
    /// The stream waterfall.
    Waterfall,
}

impl Pane {
    /// The next pane in Tab order.
    pub fn next(self) -> Self {
        match self {
            Pane::Calls => Pane::Tree,
            Pane::Tree => Pane::Detail,
            Pane::Detail => Pane::Waterfall,
            Pane::Waterfall => Pane::Calls,
        }
    }

    /// The previous pane in Tab order.
    pub fn prev(self) -> Self {
        match self {
            Pane::Calls => Pane::Waterfall,
            Pane::Tree => Pane::Calls,
            Pane::Detail => Pane::Tree,
            Pane::Waterfall => Pane::Detail,
        }
    }
}

/// What the detail pane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selected {
    /// Nothing.
    Nothing,
    /// A server (its tree node).
    Server(Node),
    /// A call (index).
    Call(usize),
    /// A session (index).
    Session(usize),
    /// A stream (id).
    Stream(StreamId),
    /// A message (index).
    Message(usize),
}

/// What a line of input is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// `/` filter.
    Filter,
    /// `a` arm a fault rule.
    Arm,
    /// `:` seek to a time (replay).
    Seek,
    /// `i` set the intercept's filter.
    Intercept,
}

/// A line being typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// What it is for.
    pub kind: InputKind,
    /// The text so far.
    pub text: String,
}

/// The `x` fault menu.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultMenu {
    /// The stream the fault applies to.
    pub stream: StreamId,
    /// The choices.
    pub choices: Vec<FaultChoice>,
    /// The highlighted choice.
    pub selected: usize,
}

/// Something outside the view the runner must do after an action (see `run::perform`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Quit.
    Quit,
    /// Copy text to the clipboard (OSC 52).
    Copy(String),
    /// Toggle pause of the live view.
    TogglePause,
    /// Move the replay cursor.
    Replay(Command),
    /// Apply a live fault (menu spec) to a stream.
    ApplyFault {
        /// The stream.
        stream: StreamId,
        /// The fault, as the menu names it.
        spec: String,
    },
    /// Read an evicted call's detail back from the recording.
    Recall {
        /// The call's index in the model.
        call: usize,
        /// Its event span ([`mcpscope_engine::model::Call::seq`]).
        span: (u64, u64),
    },
    /// Send a request again through the live proxy.
    Resend(mcpscope_engine::fault::Resend),
    /// Set (or clear, with `None`) the intercept's filter.
    Intercept(Option<String>),
    /// Release a held request.
    Release {
        /// Its id.
        id: u64,
        /// What becomes of it.
        how: mcpscope_engine::fault::Release,
    },
    /// Edit a held request's body in `$EDITOR`, then forward it.
    EditHeld {
        /// Its id.
        id: u64,
        /// The body as held.
        body: String,
    },
    /// Write a call's Mermaid diagram and Markdown row to `mcpscope-call-<N>.md`.
    Export {
        /// The call's index in the model.
        call: usize,
    },
    /// Arm a fault rule (rule grammar).
    Arm(String),
    /// Disarm the armed rule with this id (shown as `label`).
    Disarm {
        /// The rule's id.
        id: RuleId,
        /// Its label when it was shown.
        label: String,
    },
}

/// What the status bar says about a replay.
pub use mcpscope_timeline::player::Status as ReplayStatus;

/// Screen areas of the current layout (see [`App::layout`]), for drawing and the mouse.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Areas {
    /// The whole screen these areas were laid out for.
    pub screen: Rect,
    /// The calls table's rows (inside the border, below the header).
    pub calls_rows: Rect,
    /// The calls pane.
    pub calls: Rect,
    /// The tree pane.
    pub tree: Rect,
    /// The detail pane.
    pub detail: Rect,
    /// The waterfall pane.
    pub waterfall: Rect,
    /// The waterfall's rows.
    pub waterfall_rows: Rect,
    /// The status bar (or the line being typed).
    pub status: Rect,
}

/// The whole view state.
pub struct App {
    /// Where the session runs.
    pub(crate) info: Info,
    /// The active theme.
    pub(crate) theme: Theme,
    /// Themes `t` cycles through (built-ins, then a user file).
    pub(crate) themes: Vec<Theme>,
    /// Index of the active theme in `themes`.
    pub(crate) theme_index: usize,
    /// The focused pane.
    pub(crate) focus: Pane,
    /// Drilled into the detail pane (full screen).
    pub(crate) zoom: bool,
    /// What the detail pane shows.
    pub(crate) selected: Selected,
    /// The calls table's rows, cursor and page.
    pub(crate) calls: CallsPane,
    /// The tree's widget state and server level.
    pub(crate) tree: TreePane,
    /// The waterfall's highlighted stream.
    pub(crate) waterfall: WaterfallPane,
    /// The detail pane's scroll and lines.
    pub(crate) detail: DetailPane,
    /// Active filter.
    pub(crate) filter: Filter,
    /// Hide answered calls.
    pub(crate) hide_answered: bool,
    /// Follow the newest call.
    pub(crate) follow: bool,
    /// Live view paused (the screen frozen; events still folded, none lost).
    pub(crate) paused: bool,
    /// Events that arrived since the pause.
    pub(crate) held: usize,
    /// Help overlay shown.
    pub(crate) help: bool,
    /// Stats overlay shown (latency, errors and definition bytes per tool and method).
    pub(crate) stats: bool,
    /// Schema findings of the calls on screen (settled by `layout`).
    pub(crate) schema: crate::schemas::SchemaFindings,
    /// A line being typed.
    pub(crate) input: Option<Input>,
    /// The fault menu.
    pub(crate) fault_menu: Option<FaultMenu>,
    /// The intercept's filter, when one is set (`i`).
    pub(crate) intercept: Option<String>,
    /// The requests the intercept holds (read from the proxy each frame).
    pub(crate) intercepted: Vec<mcpscope_engine::fault::HeldRequest>,
    /// The held-requests list (`I`), open, with its highlighted row.
    pub(crate) held_menu: Option<usize>,
    /// The live proxy's fault control, if any.
    pub(crate) faults: Option<Arc<dyn FaultControl>>,
    /// The armed fault rules as last read by the runner: (id, label), oldest first.
    pub(crate) armed: Vec<(RuleId, String)>,
    /// A one-line message until the next key.
    pub(crate) flash: Option<String>,
    /// Replay state for the status bar (None when live).
    pub(crate) replay: Option<ReplayStatus>,
    /// Whether the feed has closed (live).
    pub(crate) feed_closed: bool,
    /// The time zone times are shown in.
    pub(crate) tz: FixedOffset,
    /// Areas of the current layout.
    pub(crate) areas: Areas,
    /// The folder `e` writes call files into (the working directory by default).
    pub(crate) export_dir: PathBuf,
    /// The last evicted call whose detail was read back from the recording.
    pub(crate) recalled: Option<mcpscope_timeline::recall::Recalled>,
}

/// What a host of the view (and its tests) reads of the view's state, and the few things it
/// sets before running it.
impl App {
    /// The line the view says last (what a key did, or why it did nothing).
    pub fn flash(&self) -> &Option<String> {
        &self.flash
    }

    /// The calls pane: rows, cursor and selected call.
    pub fn calls(&self) -> &CallsPane {
        &self.calls
    }

    /// The tree pane.
    pub fn tree(&self) -> &TreePane {
        &self.tree
    }

    /// The detail pane.
    pub fn detail(&self) -> &DetailPane {
        &self.detail
    }

    /// The focused pane.
    pub fn focus(&self) -> Pane {
        self.focus
    }

    /// What the detail shows.
    pub fn selected(&self) -> Selected {
        self.selected
    }

    /// Whether the detail fills the screen.
    pub fn zoom(&self) -> bool {
        self.zoom
    }

    /// Whether the help is shown.
    pub fn help(&self) -> bool {
        self.help
    }

    /// Whether the statistics are shown.
    pub fn stats(&self) -> bool {
        self.stats
    }

    /// The theme in use.
    pub fn theme(&self) -> &Theme {
        &self.theme
    }

    /// A replay's state (none live).
    pub fn replay(&self) -> &Option<ReplayStatus> {
        &self.replay
    }

    /// The fault menu, while open.
    pub fn fault_menu(&self) -> &Option<FaultMenu> {
        &self.fault_menu
    }

    /// What the intercept holds (`tool:NAME`, `method:M`), when it is on.
    pub fn intercept(&self) -> &Option<String> {
        &self.intercept
    }

    /// The requests and responses the intercept holds now.
    pub fn intercepted(&self) -> &[mcpscope_engine::fault::HeldRequest] {
        &self.intercepted
    }

    /// Gives the view the proxy's fault control (live sessions of its own).
    pub fn set_faults(&mut self, faults: Arc<dyn FaultControl>) {
        self.faults = Some(faults);
    }

    /// Focuses `pane`.
    pub fn set_focus(&mut self, pane: Pane) {
        self.focus = pane;
    }

    /// Fills the screen with the detail, or not.
    pub fn set_zoom(&mut self, zoom: bool) {
        self.zoom = zoom;
    }

    /// Shows `selected` in the detail.
    pub fn set_selected(&mut self, selected: Selected) {
        self.selected = selected;
    }

    /// Says `text` on the status line.
    pub fn set_flash(&mut self, text: String) {
        self.flash = Some(text);
    }

    /// Where exports are written.
    pub fn set_export_dir(&mut self, dir: PathBuf) {
        self.export_dir = dir;
    }
}

impl App {
    /// A view with the given info and theme; times shown in `tz`.
    pub fn new(info: Info, theme: Theme, tz: FixedOffset) -> Self {
        let mut themes: Vec<Theme> = BUILTIN
            .iter()
            .filter_map(|(n, _)| Theme::builtin(n))
            .collect();
        let theme_index = match themes.iter().position(|t| t.name == theme.name) {
            Some(i) => i,
            None => {
                themes.push(theme.clone());
                themes.len() - 1
            }
        };
        Self {
            info,
            theme,
            themes,
            theme_index,
            focus: Pane::Calls,
            zoom: false,
            selected: Selected::Nothing,
            calls: CallsPane::default(),
            tree: TreePane::default(),
            waterfall: WaterfallPane::default(),
            detail: DetailPane::default(),
            filter: Filter::default(),
            hide_answered: false,
            follow: false,
            paused: false,
            held: 0,
            help: false,
            stats: false,
            schema: Default::default(),
            input: None,
            fault_menu: None,
            intercept: None,
            intercepted: Vec::new(),
            held_menu: None,
            faults: None,
            armed: Vec::new(),
            flash: None,
            replay: None,
            feed_closed: false,
            tz,
            areas: Areas::default(),
            export_dir: PathBuf::from("."),
            recalled: None,
        }
    }

    /// Brings the rows and selection up to date with the model (cheap when nothing changed).
    pub fn sync(&mut self, model: &Model) {
        let key: RowsKey = (
            model.events_applied,
            model.calls.len(),
            model.counts(),
            self.filter.text.clone(),
            self.hide_answered,
        );
        if self.calls.key.as_ref() != Some(&key) {
            self.tree.sync(model);
            self.calls.rows = rows::build(model, &self.filter, self.hide_answered);
            self.calls.key = Some(key);
            if !self.calls.cursor_chosen {
                self.calls.row = 0;
            } else if let Some(call) = self.calls.call
                && let Some(pos) = self.calls.rows.iter().position(|&c| c == call)
            {
                self.calls.row = pos;
            }
        }
        if self.follow
            && let Some(newest) = self.calls.rows.iter().copied().max()
            && self.calls.call != Some(newest)
        {
            self.select_call(model, newest);
        }
        self.calls.row = self.calls.row.min(self.calls.rows.len().saturating_sub(1));
        if self.calls.rows.is_empty() {
            self.calls.call = None;
        } else if self.calls.call.is_none()
            || self.calls.rows.get(self.calls.row) != self.calls.call.as_ref()
        {
            let row = self.calls.row;
            self.select_row(model, row);
        }
        if self.selected == Selected::Nothing
            && let Some(call) = self.calls.call
        {
            self.selected = Selected::Call(call);
        }
        self.waterfall.stream = self
            .waterfall
            .stream
            .min(model.streams.len().saturating_sub(1));
    }

    /// Forces the rows to be rebuilt at the next sync.
    pub fn invalidate(&mut self) {
        self.calls.key = None;
    }

    /// Selects a row of the calls table and links the tree and waterfall to its stream.
    pub fn select_row(&mut self, model: &Model, row: usize) {
        let Some(&call) = self.calls.rows.get(row) else {
            return;
        };
        self.calls.row = row;
        self.calls.call = Some(call);
        self.selected = Selected::Call(call);
        self.detail.scroll = 0;
        if let Some(c) = model.calls.get(call) {
            self.link_stream(model, c.owner);
        }
    }

    /// Selects the row showing the call with this global index (see [`Self::select_row`]);
    /// whether one is shown.
    pub fn select_call(&mut self, model: &Model, call: usize) -> bool {
        match self.calls.rows.iter().position(|&c| c == call) {
            Some(row) => {
                self.select_row(model, row);
                true
            }
            None => false,
        }
    }

    /// Points the tree and the waterfall at a stream.
    pub fn link_stream(&mut self, model: &Model, stream: StreamId) {
        if let Some(pos) = model.stream_pos(stream) {
            self.waterfall.stream = pos;
            let session = model.streams.as_slice()[pos].session;
            let mut path = crate::grouping::session_path(model, session);
            for depth in 1..=path.len() {
                self.tree.state_mut().open(path[..depth].to_vec());
            }
            path.push(Node::Stream(stream));
            self.tree.state_mut().select(path);
        }
    }

    /// Selects the first row of a call owned by (or sent on) a stream, if one is shown.
    pub fn select_call_of_stream(&mut self, model: &Model, stream: StreamId) {
        let Some(pos) = model.stream_pos(stream) else {
            return;
        };
        let calls = &model.streams.as_slice()[pos].calls;
        if let Some(row) = self.calls.rows.iter().position(|c| calls.contains(c)) {
            self.calls.row = row;
            self.calls.call = self.calls.rows.get(row).copied();
        }
    }

    /// Sets the selection from the tree's selected node.
    pub fn selection_from_tree(&mut self, model: &Model) {
        self.detail.scroll = 0;
        match self.tree.selected().last().copied() {
            Some(node @ Node::Server(_)) => self.selected = Selected::Server(node),
            Some(Node::Session(s)) => self.selected = Selected::Session(s),
            Some(Node::Stream(id)) => {
                self.selected = Selected::Stream(id);
                if let Some(pos) = model.stream_pos(id) {
                    self.waterfall.stream = pos;
                }
                self.select_call_of_stream(model, id);
            }
            Some(Node::Message(m)) => self.selected = Selected::Message(m),
            _ => {}
        }
    }

    /// Sets the selection from the waterfall's highlighted stream.
    pub fn selection_from_waterfall(&mut self, model: &Model) {
        if let Some(stream) = model.streams.as_slice().get(self.waterfall.stream) {
            let id = stream.id;
            self.selected = Selected::Stream(id);
            self.detail.scroll = 0;
            self.link_stream(model, id);
            self.select_call_of_stream(model, id);
        }
    }

    /// Switches to the next theme.
    pub fn cycle_theme(&mut self) {
        if self.themes.is_empty() {
            return;
        }
        self.theme_index = (self.theme_index + 1) % self.themes.len();
        self.theme = self.themes[self.theme_index].clone();
        self.flash = Some(format!("theme: {}", self.theme.name));
    }

    /// The stream the selection is about (for the fault menu).
    pub fn selected_stream(&self, model: &Model) -> Option<StreamId> {
        match self.selected {
            Selected::Call(c) => model.calls.get(c).map(|c| c.owner),
            Selected::Stream(id) => Some(id),
            Selected::Message(m) => model.messages.get(m).map(|m| m.stream),
            Selected::Server(_) | Selected::Session(_) | Selected::Nothing => None,
        }
    }

    /// The JSON text `y` copies: the selected message, or the selected call's request.
    pub fn selected_json(&self, model: &Model) -> Option<String> {
        let value = match self.selected {
            Selected::Message(m) => &model.messages.get(m)?.body,
            Selected::Call(c) => &model.request_message(model.calls.get(c)?)?.body,
            Selected::Stream(id) => {
                let s = model.stream(id)?;
                &model.messages.get(*s.messages.last()?)?.body
            }
            _ => return None,
        };
        serde_json::to_string_pretty(&value.value()).ok()
    }
}
