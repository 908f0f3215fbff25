//! The live feed's model, with a pause: while paused the view shows the model as it was at the
//! pause, and the live one goes on folding (a pause holds no events and costs at most one
//! bounded copy of the model).

use chrono::{DateTime, Utc};
use mcpscope_engine::event::Event;
use mcpscope_engine::model::{Model, Retention};

/// The model a live view shows, fed event by event.
pub struct Live {
    model: Model,
    /// While paused: the model as it was at the pause.
    frozen: Option<Box<Model>>,
    /// Events folded since the pause.
    held: usize,
    closed: bool,
}

impl Live {
    /// An empty model holding the past by `retention`.
    pub fn new(retention: Retention) -> Self {
        Self {
            model: Model::with_retention(retention),
            frozen: None,
            held: 0,
            closed: false,
        }
    }

    /// Folds `event`; returns whether what is shown changed (not while paused).
    pub fn apply(&mut self, event: &Event) -> bool {
        self.model.apply(event);
        if self.frozen.is_some() {
            self.held += 1;
            false
        } else {
            true
        }
    }

    /// Notes that the feed ended; returns whether that is news.
    pub fn close(&mut self) -> bool {
        !std::mem::replace(&mut self.closed, true)
    }

    /// Moves the model's clock to `now` (expiries); returns whether what is shown changed.
    pub fn advance(&mut self, now: DateTime<Utc>) -> bool {
        !self.model.advance(now).is_empty() && self.frozen.is_none()
    }

    /// Pauses, or resumes showing the live model.
    pub fn toggle_pause(&mut self) {
        self.frozen = match self.frozen.take() {
            Some(_) => None,
            None => Some(Box::new(self.model.clone())),
        };
        self.held = 0;
    }

    /// Whether the view is paused.
    pub fn paused(&self) -> bool {
        self.frozen.is_some()
    }

    /// Events folded since the pause.
    pub fn held(&self) -> usize {
        self.held
    }

    /// The model to show: the frozen one while paused, else the live one.
    pub fn model(&self) -> &Model {
        self.frozen.as_deref().unwrap_or(&self.model)
    }
}
