//! A recording's events read and decoded on a thread of their own, a few batches ahead of the
//! fold that takes them: a long seek decodes lines (the larger part of its cost) on one core
//! while it folds on another.

use std::fs::File;
use std::io::BufReader;
use std::sync::mpsc::{Receiver, sync_channel};

use mcpscope_engine::event::Event;
use mcpscope_engine::record::{Events, ReadError};

/// Events decoded per hand-over, at most.
const BATCH: usize = 1024;
/// Bytes of events ([`EventKind::weight`](mcpscope_engine::event::EventKind::weight)) per
/// hand-over: a batch ends at the event that reaches it.
const BATCH_BYTES: usize = 256 << 10;
/// Batches decoded and not yet taken, at most: the thread waits past them, and ends once the
/// taker is gone. What is held ahead is bounded by these, whatever the events' size (one
/// event apart, which any reader holds).
const BATCHES_AHEAD: usize = 4;

type Item = Result<Event, ReadError>;

/// The events of a reader, decoded ahead on a thread.
#[derive(Debug)]
pub(crate) struct ReadAhead {
    batches: Receiver<Vec<Item>>,
    batch: std::vec::IntoIter<Item>,
}

impl ReadAhead {
    /// Reads `events` on from where it stands, on a thread of its own; None when no thread can
    /// be started (the reader is gone then: open another).
    pub(crate) fn start(mut events: Events<BufReader<File>>) -> Option<Self> {
        let (tx, batches) = sync_channel(BATCHES_AHEAD);
        std::thread::Builder::new()
            .name("mcpscope-read-ahead".into())
            .spawn(move || {
                loop {
                    let mut batch = Vec::with_capacity(BATCH);
                    let mut bytes = 0;
                    let mut last = false;
                    while batch.len() < BATCH && bytes < BATCH_BYTES && !last {
                        match events.next() {
                            Some(item) => {
                                last = item.is_err();
                                bytes += item.as_ref().map_or(0, |e| e.kind.weight());
                                batch.push(item);
                            }
                            None => last = true,
                        }
                    }
                    // A taker gone (a seek elsewhere, the viewer closed) ends it too.
                    if (!batch.is_empty() && tx.send(batch).is_err()) || last {
                        return;
                    }
                }
            })
            .ok()?;
        Some(Self {
            batches,
            batch: Vec::new().into_iter(),
        })
    }
}

impl Iterator for ReadAhead {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.batch.next() {
                return Some(item);
            }
            // The thread has ended (the file's end, or an error it handed over) once the
            // channel is empty and closed.
            self.batch = self.batches.recv().ok()?.into_iter();
        }
    }
}
