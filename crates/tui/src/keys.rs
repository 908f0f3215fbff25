//! Keys and mouse → [`Action`]s. Every key binding is one row of [`BINDINGS`]; the help overlay
//! is generated from the same table.

use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::Position;

use super::action::{Action, Jump};
use super::app::{App, Effect, Pane};
use mcpscope_engine::model::Model;
use mcpscope_timeline::player::Command;

/// A key a binding answers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// A key, whatever the modifiers (Shift is in the character: `G`).
    Plain(KeyCode),
    /// Ctrl with a letter.
    Ctrl(char),
}

impl Key {
    /// Whether a key event is this key.
    pub(crate) fn matches(self, event: &KeyEvent) -> bool {
        match self {
            Key::Plain(code) => event.code == code,
            Key::Ctrl(c) => {
                event.modifiers.contains(KeyModifiers::CONTROL) && event.code == KeyCode::Char(c)
            }
        }
    }
}

/// When a binding applies. Only some contexts are active at once (see [`App::contexts`]); the
/// first active context with a binding for the key wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// Always, even while typing.
    Always,
    /// The help overlay is open (any other key closes it).
    Help,
    /// A line is being typed (other characters are typed into it).
    Input,
    /// The fault menu is open (other keys do nothing).
    Menu,
    /// The held-requests list is open (other keys do nothing).
    HeldList,
    /// Viewing a replay (before the ordinary keys).
    Replay,
    /// Viewing a live proxy (before the ordinary keys).
    Live,
    /// A proxy that takes commands (re-send, intercept, faults): only when the view holds its
    /// control handle; a replay and `attach` have none, so these keys are neither bound nor
    /// offered there.
    Control,
    /// The tree pane has the focus (before the ordinary keys).
    Tree,
    /// The ordinary keys.
    Normal,
}

/// How a binding is listed in the help overlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Help {
    /// A help line: (keys as shown, what they do).
    Line(&'static str, &'static str),
    /// Covered by the help line of a neighbouring binding.
    Shared,
    /// Not listed (the keys of an overlay or an input line, which say how to use them).
    Hidden,
}

/// One key binding: keys, the context they apply in, the action, the help entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    /// The keys (empty for entries listed only in the help, such as the mouse).
    pub keys: &'static [Key],
    /// When it applies.
    pub context: Context,
    /// What it does (None for entries listed only in the help).
    pub action: Option<Action>,
    /// How the help overlay lists it.
    pub help: Help,
}

const fn bind(keys: &'static [Key], context: Context, action: Action, help: Help) -> Binding {
    Binding {
        keys,
        context,
        action: Some(action),
        help,
    }
}

use Context::{Always, Control, HeldList, Input as Typing, Live, Menu, Normal, Replay, Tree};
use Help::{Hidden, Line, Shared};
use Key::{Ctrl, Plain};
use KeyCode::{
    BackTab, Backspace, Char, Down, End, Enter, Esc, Home, Left, PageDown, PageUp, Right, Tab, Up,
};

/// Every key binding, in the order the help overlay lists them.
#[rustfmt::skip]
pub(crate) const BINDINGS: &[Binding] = &[
    bind(&[Plain(Char('?'))], Normal, Action::ShowHelp, Line("?", "this help (any key closes it)")),
    bind(&[Ctrl('c')], Always, Action::Quit, Shared),
    bind(&[Plain(Char('q'))], Normal, Action::Quit, Line("q  Ctrl-C", "quit")),
    bind(&[Plain(Up), Plain(Char('k'))], Normal, Action::Move(-1), Line("↑ ↓  j k", "move the selection / scroll")),
    bind(&[Plain(Down), Plain(Char('j'))], Normal, Action::Move(1), Shared),
    bind(&[Plain(Char('g')), Plain(Home)], Normal, Action::Jump(Jump::First), Line("g G", "first / last row")),
    bind(&[Plain(Char('G')), Plain(End)], Normal, Action::Jump(Jump::Last), Shared),
    bind(&[Plain(PageUp)], Normal, Action::PageUp, Line("PgUp PgDn", "page up / down")),
    bind(&[Plain(PageDown)], Normal, Action::PageDown, Shared),
    bind(&[Plain(Tab)], Normal, Action::NextPane, Line("Tab  Shift-Tab", "next / previous pane")),
    bind(&[Plain(BackTab)], Normal, Action::PrevPane, Shared),
    bind(&[Plain(Enter)], Normal, Action::DrillIn, Line("Enter", "drill in (detail full screen; open a tree node)")),
    bind(&[Plain(Left)], Tree, Action::TreeLeft, Hidden),
    bind(&[Plain(Right)], Tree, Action::TreeRight, Hidden),
    bind(&[Plain(Esc)], Normal, Action::Back, Line("Esc", "back (close overlay, leave detail, clear filter)")),
    bind(&[Plain(Char('/'))], Normal, Action::StartFilter, Line("/", crate::filter::HELP)),
    bind(&[Plain(Char('h'))], Normal, Action::ToggleAnswered, Line("h", "hide / show answered calls")),
    bind(&[Plain(Char('f'))], Normal, Action::ToggleFollow, Line("f", "follow the newest call")),
    bind(&[Plain(Char('p'))], Live, Action::TogglePause, Line("p", "pause the live view (events are kept)")),
    bind(&[Plain(Char('t'))], Normal, Action::CycleTheme, Line("t", "next colour theme")),
    bind(&[Plain(Char('y'))], Normal, Action::Copy, Line("y", "copy the selected message JSON (OSC 52)")),
    bind(&[Plain(Char('L'))], Normal, Action::ShowLogs, Line("L", "the session's notifications and logs")),
    bind(&[Plain(Char('r'))], Control, Action::Resend, Line("r", "re-send the call's request (a new exchange ↻)")),
    bind(&[Plain(Char('i'))], Control, Action::StartIntercept, Line("i", "intercept: hold requests matching tool:N method:M")),
    bind(&[Plain(Char('I'))], Control, Action::HeldList, Line("I", "held requests: a forward, e edit, d drop, E error")),
    bind(&[Plain(Char('c'))], Normal, Action::CopyCurl, Line("c", "copy the request as curl (secrets redacted)")),
    bind(&[Plain(Char('e'))], Normal, Action::Export, Line("e", "save the call's diagram to ./mcpscope-call-N.md")),
    bind(&[Plain(Char('x'))], Control, Action::FaultMenu, Line("x", "fault menu for the selected call's stream")),
    bind(&[Plain(Char('a'))], Control, Action::StartArm, Line("a", "arm a fault rule")),
    bind(&[Plain(Char('D'))], Control, Action::DisarmOldest, Line("D", "disarm the oldest armed fault rule")),
    Binding { keys: &[], context: Normal, action: None, help: Line("mouse", "click selects, wheel scrolls") },
    bind(&[Plain(Char(' '))], Replay, Action::Replay(Command::PlayPause), Line("space", "replay: play / pause")),
    bind(&[Plain(Char('+')), Plain(Char('='))], Replay, Action::Replay(Command::Faster), Line("+ -", "replay: speed 1× / 10× / max")),
    bind(&[Plain(Char('-'))], Replay, Action::Replay(Command::Slower), Shared),
    bind(&[Plain(Char('.'))], Replay, Action::Replay(Command::StepForward), Line(". ,", "replay: one event forward / back")),
    bind(&[Plain(Char(','))], Replay, Action::Replay(Command::StepBack), Shared),
    bind(&[Plain(Char('n'))], Replay, Action::Replay(Command::NextDeath), Line("n N", "replay: next / previous stream death")),
    bind(&[Plain(Char('N'))], Replay, Action::Replay(Command::PrevDeath), Shared),
    bind(&[Plain(Char('['))], Replay, Action::Replay(Command::Start), Line("[ ]", "replay: start / end of the recording")),
    bind(&[Plain(Char(']'))], Replay, Action::Replay(Command::End), Shared),
    bind(&[Plain(Char(':'))], Replay, Action::StartSeek, Line(":", "replay: seek to HH:MM:SS[.mmm]")),
    bind(&[Plain(Esc)], Typing, Action::InputCancel, Hidden),
    bind(&[Plain(Enter)], Typing, Action::InputSubmit, Hidden),
    bind(&[Plain(Backspace)], Typing, Action::InputBackspace, Hidden),
    bind(&[Plain(Esc), Plain(Char('q')), Plain(Char('x'))], Menu, Action::MenuClose, Hidden),
    bind(&[Plain(Up), Plain(Char('k'))], Menu, Action::MenuUp, Hidden),
    bind(&[Plain(Down), Plain(Char('j'))], Menu, Action::MenuDown, Hidden),
    bind(&[Plain(Enter)], Menu, Action::MenuApply, Hidden),
    bind(&[Plain(Esc), Plain(Char('q')), Plain(Char('I'))], HeldList, Action::HeldClose, Hidden),
    bind(&[Plain(Up), Plain(Char('k'))], HeldList, Action::HeldMove(-1), Hidden),
    bind(&[Plain(Down), Plain(Char('j'))], HeldList, Action::HeldMove(1), Hidden),
    bind(&[Plain(Char('a')), Plain(Enter)], HeldList, Action::HeldForward, Hidden),
    bind(&[Plain(Char('e'))], HeldList, Action::HeldEdit, Hidden),
    bind(&[Plain(Char('d'))], HeldList, Action::HeldDrop, Hidden),
    bind(&[Plain(Char('E'))], HeldList, Action::HeldError, Hidden),
    bind(&[Plain(Char('S'))], Normal, Action::ToggleStats, Line("S", "stats: p50/p95/p99, errors, definition bytes per tool")),
];

/// The help overlay's lines, from [`BINDINGS`]: (keys as shown, what they do), for the keys
/// bound in `contexts` (what the view offers: see [`App::offered_contexts`]).
pub(crate) fn help_lines(
    contexts: &[Context],
) -> impl Iterator<Item = (&'static str, &'static str)> {
    BINDINGS
        .iter()
        .filter(|b| contexts.contains(&b.context))
        .filter_map(|b| match b.help {
            Line(keys, what) => Some((keys, what)),
            Shared | Hidden => None,
        })
}

/// The keys chapter of the book (Markdown), from [`BINDINGS`]: what the help overlay lists, and
/// where each key applies.
pub fn keys_markdown() -> String {
    let mut out = String::from(
        "# Keys\n\n\
         Generated from the TUI's key table (the same table the `?` overlay is drawn from) by \
         `mcpscope reference keys`. Where a key applies: *everywhere* in the live view, a \
         replay and `attach`; *live* only while watching a running proxy; *proxy* only in the \
         view of a proxy that takes commands (the live TUI of `mcpscope`, not a replay or \
         `attach`); *replay* only in the replay viewer.\n\n\
         | Keys | What they do | Where |\n|---|---|---|\n",
    );
    for binding in BINDINGS {
        let Line(keys, what) = binding.help else {
            continue;
        };
        let place = match binding.context {
            Live => "live",
            Control => "proxy",
            Replay => "replay",
            _ => "everywhere",
        };
        let cell = |text: &str| text.replace('|', "\\|");
        out.push_str(&format!(
            "| `{}` | {} | {place} |\n",
            keys.replace('`', "'"),
            cell(what)
        ));
    }
    out.push_str(
        "\nAn overlay (the fault menu `x`, the held requests `I`, a line being typed) says its \
         own keys at its foot.\n",
    );
    out
}

/// The action bound to `key` in the first of `contexts` that binds it.
pub(crate) fn lookup(contexts: &[Context], key: &KeyEvent) -> Option<Action> {
    contexts.iter().find_map(|&context| {
        BINDINGS
            .iter()
            .filter(|b| b.context == context)
            .find(|b| b.keys.iter().any(|k| k.matches(key)))
            .and_then(|b| b.action.clone())
    })
}

impl App {
    /// The contexts whose bindings apply now, first match first.
    pub fn contexts(&self) -> Vec<Context> {
        if self.help {
            vec![Always, Context::Help]
        } else if self.input.is_some() {
            vec![Always, Typing]
        } else if self.fault_menu.is_some() {
            vec![Always, Menu]
        } else if self.held_menu.is_some() {
            vec![Always, HeldList]
        } else {
            let mut contexts = vec![Always];
            contexts.extend(self.source_contexts());
            if self.focus == Pane::Tree {
                contexts.push(Tree);
            }
            contexts.push(Normal);
            contexts
        }
    }

    /// What the view's source offers: a replay, or a live view (and the proxy's commands when
    /// the view holds its control handle).
    fn source_contexts(&self) -> Vec<Context> {
        match (self.replay.is_some(), self.faults.is_some()) {
            (true, _) => vec![Replay],
            (false, true) => vec![Live, Control],
            (false, false) => vec![Live],
        }
    }

    /// The contexts whose keys the help lists: the ordinary keys and what the source offers.
    pub fn offered_contexts(&self) -> Vec<Context> {
        let mut contexts = vec![Always];
        contexts.extend(self.source_contexts());
        contexts.push(Normal);
        contexts
    }

    /// The action for a key now: its binding, else what the context does with unbound keys
    /// (the help closes; a line being typed takes the character).
    pub fn action_for(&self, key: &KeyEvent) -> Option<Action> {
        let contexts = self.contexts();
        lookup(&contexts, key).or_else(|| match (contexts.get(1), key.code) {
            (Some(Context::Help), _) => Some(Action::CloseHelp),
            (Some(Typing), Char(c)) => Some(Action::Type(c)),
            _ => None,
        })
    }

    /// Handles one key: looks up its action and applies it; returns what the runner must do.
    pub fn handle_key(&mut self, key: KeyEvent, model: &Model) -> Vec<Effect> {
        self.sync(model);
        let action = self.action_for(&key);
        if action != Some(Action::Quit) {
            self.flash = None;
        }
        match action {
            Some(action) => self.update(action, model),
            None => Vec::new(),
        }
    }

    /// The action for a mouse event: a click selects, the wheel scrolls the pane under the
    /// pointer.
    pub fn mouse_action(&self, mouse: &MouseEvent) -> Option<Action> {
        let at = Position::new(mouse.column, mouse.row);
        match mouse.kind {
            MouseEventKind::ScrollUp => Some(Action::Scroll(self.pane_at(at)?, -3)),
            MouseEventKind::ScrollDown => Some(Action::Scroll(self.pane_at(at)?, 3)),
            MouseEventKind::Down(MouseButton::Left) => Some(Action::Click(at)),
            _ => None,
        }
    }

    /// Handles a mouse event (see [`App::mouse_action`]).
    pub fn handle_mouse(&mut self, mouse: MouseEvent, model: &Model) -> Vec<Effect> {
        self.sync(model);
        match self.mouse_action(&mouse) {
            Some(action) => self.update(action, model),
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key bound twice in one context would make the second binding dead.
    #[test]
    fn no_key_is_bound_twice_in_a_context() {
        for (i, a) in BINDINGS.iter().enumerate() {
            for b in &BINDINGS[i + 1..] {
                if a.context == b.context {
                    for key in a.keys {
                        assert!(
                            !b.keys.contains(key),
                            "{key:?} bound twice in {:?}",
                            a.context
                        );
                    }
                }
            }
        }
    }

    /// Every binding that does something is either listed in the help or sits in an overlay
    /// that explains itself.
    #[test]
    fn every_ordinary_key_is_in_the_help() {
        for b in BINDINGS {
            if matches!(b.context, Normal | Replay | Live | Control | Always) {
                assert_ne!(b.help, Hidden, "{:?} is missing from the help", b.action);
            }
        }
    }
}
