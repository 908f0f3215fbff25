//! Pacing: bytes of events handed to a reader and not yet taken by it. Whoever hands events on
//! counts them in a [`Backlog`] and waits while it is over [`Backlog::LIMIT`]; the reader
//! releases each event it takes through its [`Pace`]. So memory is bounded by the limit, not by
//! the traffic, and nothing observed is dropped: the hub paces on its view and the taps on the
//! hub, an attached viewer's feed on its view.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use mcpscope_engine::event::{Event, EventKind};

/// Bytes of events sent and not yet taken: when the recorder falls behind the wire, the taps
/// stop reading their upstreams until it catches up ([`crate::sink::EventSink::backlogged`]),
/// so memory is bounded by [`Backlog::LIMIT`], not by the traffic, and nothing observed is
/// dropped.
#[derive(Debug, Clone, Default)]
pub struct Backlog(Arc<AtomicUsize>);

impl Backlog {
    /// Bytes the hub may have queued before the taps wait for it.
    pub const LIMIT: usize = 16 << 20;

    /// What an event weighs in the backlog ([`EventKind::weight`]).
    pub fn weight(kind: &EventKind) -> usize {
        kind.weight()
    }

    /// Counts an event sent.
    pub fn add(&self, weight: usize) {
        self.0.fetch_add(weight, Ordering::Relaxed);
    }

    /// Counts an event taken (never below zero).
    pub fn release(&self, weight: usize) {
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(weight))
            });
    }

    /// Bytes queued now.
    pub fn bytes(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// A reader's side of the pacing: told of each event the reader takes. A view's pace
/// ([`crate::hub::Hub::pace_view`]) is owned: when its last clone goes, the hub stops waiting
/// for that view.
#[derive(Debug, Clone, Default)]
pub struct Pace {
    backlog: Backlog,
    paced: Arc<AtomicBool>,
    /// Held by the reader's handles only: when the last one goes, pacing stops.
    _owner: Option<Arc<Owner>>,
}

impl Pace {
    /// A pace that releases into `backlog`, always on (a feed that counts what it holds).
    pub fn of(backlog: Backlog) -> Self {
        Self {
            backlog,
            paced: Arc::new(AtomicBool::new(true)),
            _owner: None,
        }
    }

    /// Counts an event the reader has taken.
    pub fn release(&self, event: &Event) {
        self.backlog.release(event.weight());
    }

    /// Turns pacing on and hands out a handle that turns it off when its last clone is dropped.
    pub(crate) fn owned(&self) -> Self {
        self.paced.store(true, Ordering::Relaxed);
        Self {
            backlog: self.backlog.clone(),
            paced: Arc::clone(&self.paced),
            _owner: Some(Arc::new(Owner(Arc::clone(&self.paced)))),
        }
    }

    /// Whether a reader paces now.
    pub(crate) fn on(&self) -> bool {
        self.paced.load(Ordering::Relaxed)
    }

    /// The bytes handed on and not yet released.
    pub(crate) fn backlog(&self) -> &Backlog {
        &self.backlog
    }
}

impl PartialEq for Pace {
    /// The same pacing: the same bytes counted.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.backlog.0, &other.backlog.0)
    }
}

/// Turns pacing off when the reader's last handle is dropped (the reader has gone).
#[derive(Debug)]
struct Owner(Arc<AtomicBool>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}
