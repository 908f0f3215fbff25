//! A recording played under a time cursor: play and pause at a speed, step, seek to a time, the
//! start, the end or the next stream death — each seek past what the background index has
//! reached waits for it and is carried out once it gets there. What a view shows of it is
//! [`Status`]; the view's keys become [`Command`]s.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use mcpscope_engine::model::{Model, Retention};

use crate::cursor::{ReplayCursor, Speed};
use crate::timeline::Timeline;

/// Events per tick at `max` speed.
const MAX_SPEED_STEP: usize = 5_000;

/// How long one tick folds toward a seek's target: a seek that takes longer (millions of
/// events from the nearest checkpoint) goes on over the next ticks, the view drawn and the keys
/// read between them.
const FOLD_SLICE: Duration = Duration::from_millis(40);

/// What a player is told to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Play, or pause.
    PlayPause,
    /// The next speed up.
    Faster,
    /// The next speed down.
    Slower,
    /// One event on.
    StepForward,
    /// One event back.
    StepBack,
    /// The next stream death.
    NextDeath,
    /// The previous stream death.
    PrevDeath,
    /// The first event.
    Start,
    /// The last event (once indexed).
    End,
    /// The moment given (once indexed).
    SeekTime(DateTime<Utc>),
    /// Nothing but what every seek does first: drop a seek that waits for the index, and the
    /// playing clock (a typed time that could not be understood does this).
    StopWaiting,
}

/// What a view says of a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// Events folded.
    pub position: usize,
    /// Events in the recording.
    pub len: usize,
    /// Playing or paused.
    pub playing: bool,
    /// `1×`, `10×`, `max`.
    pub speed: String,
    /// Whether `len` is the whole recording (a file being indexed: not yet).
    pub complete: bool,
    /// What to say of the recording meanwhile (`indexing… 42%`), or of a seek waiting for it.
    pub note: Option<String>,
    /// The time of the event at the cursor (none before the first).
    pub time: Option<DateTime<Utc>>,
}

/// What one [`Player::tick`] brought.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tick {
    /// Whether anything shown changed.
    pub changed: bool,
    /// Something to tell the user (a waiting seek that found nothing).
    pub flash: Option<String>,
}

/// A seek that waits for the index.
#[derive(Debug, Clone, PartialEq)]
enum Wait {
    End,
    Time(DateTime<Utc>),
    NextDeath,
    PrevDeath,
}

impl Wait {
    fn describe(&self) -> &'static str {
        match self {
            Wait::End => "] goes to the end once indexed",
            Wait::Time(_) => "the time is not indexed yet: going there once it is",
            Wait::NextDeath => "looking for the next stream death",
            Wait::PrevDeath => "looking for the previous stream death",
        }
    }
}

/// A seek on its way: folded a slice at a time until the cursor gets there.
#[derive(Debug, Clone, PartialEq)]
enum Fold {
    To(usize),
    Time(DateTime<Utc>),
}

impl Fold {
    fn describe(&self) -> String {
        match self {
            Fold::To(index) => format!("seeking to event {index}… (a key stops it)"),
            Fold::Time(t) => format!("seeking to {}… (a key stops it)", t.format("%H:%M:%S%.3f")),
        }
    }
}

/// A recording with a time cursor, played in real time (or faster) as it is ticked.
pub struct Player {
    cursor: Box<dyn Timeline>,
    playing: bool,
    speed: Speed,
    clock: Option<DateTime<Utc>>,
    last_tick: Instant,
    dirty: bool,
    /// A seek past what is indexed, carried out once the index gets there.
    waiting: Option<Wait>,
    /// A seek on its way (each tick folds toward it for at most `slice`).
    folding: Option<Fold>,
    slice: Duration,
    /// The cursor's note as last shown.
    note: Option<String>,
}

impl Player {
    /// A player of `events` in memory, at the first event.
    pub fn of_events(events: Vec<mcpscope_engine::event::Event>, speed: Speed) -> Self {
        Self::new(Box::new(ReplayCursor::new(events)), speed)
    }

    /// A player over `cursor`, at its first event, to be played at `speed`.
    pub fn new(mut cursor: Box<dyn Timeline>, speed: Speed) -> Self {
        cursor.step_forward();
        Self {
            cursor,
            playing: false,
            speed,
            clock: None,
            last_tick: Instant::now(),
            dirty: true,
            waiting: None,
            folding: None,
            slice: FOLD_SLICE,
            note: None,
        }
    }

    /// The same player, each tick folding toward a seek's target for at most `slice` (with
    /// zero, one step of the cursor a tick: 1,024 events for a file's).
    pub fn with_fold_slice(mut self, slice: Duration) -> Self {
        self.slice = slice;
        self
    }

    /// Whether a seek is on its way (the view should tick again at once).
    pub fn busy(&self) -> bool {
        self.folding.is_some()
    }

    /// The same player, its model holding the past by `retention`.
    pub fn with_retention(mut self, retention: Retention) -> Self {
        let position = self.cursor.position();
        self.cursor.set_retention(retention);
        self.cursor.seek(position);
        self
    }

    /// The model at the cursor.
    pub fn model(&self) -> &Model {
        self.cursor.model_at()
    }

    /// The time of the event at the cursor.
    pub fn time(&self) -> Option<DateTime<Utc>> {
        self.cursor.time()
    }

    /// The time elapsed timers count to: the cursor's, or the playing clock when it is later.
    pub fn now(&self) -> DateTime<Utc> {
        let t = self.cursor.time().unwrap_or_else(Utc::now);
        self.clock.map_or(t, |c| c.max(t))
    }

    /// What a view says of the replay now.
    pub fn status(&self) -> Status {
        let doing = match (&self.folding, &self.waiting) {
            (Some(fold), _) => Some(fold.describe()),
            (None, Some(wait)) => Some(wait.describe().to_string()),
            (None, None) => None,
        };
        let note = match (&self.note, doing) {
            (Some(note), Some(doing)) => Some(format!("{note} · {doing}")),
            (Some(note), None) => Some(note.clone()),
            (None, doing) => doing,
        };
        Status {
            position: self.cursor.position(),
            len: self.cursor.known_len(),
            playing: self.playing,
            speed: self.speed.label().to_string(),
            complete: self.cursor.complete(),
            note,
            time: self.cursor.time(),
        }
    }

    /// Moves the play on by the time since the last tick, carries out a waiting seek the index
    /// now allows, and says whether anything shown changed.
    pub fn tick(&mut self) -> Tick {
        let mut tick = Tick::default();
        let dt = self.last_tick.elapsed();
        self.last_tick = Instant::now();
        if let Some(fold) = self.folding.clone() {
            self.go(fold);
            self.dirty = true;
        }
        if let Some(wait) = self.waiting.clone()
            && self.settle(&wait, &mut tick.flash)
        {
            self.waiting = None;
            self.dirty = true;
        }
        let note = self.cursor.note();
        if note != self.note {
            self.note = note;
            self.dirty = true;
        }
        if self.playing && self.folding.is_none() {
            match self.speed {
                Speed::Max => {
                    let to = self.cursor.position() + MAX_SPEED_STEP;
                    self.cursor.seek(to);
                    self.clock = None;
                }
                speed => {
                    let factor = if speed == Speed::X10 { 10 } else { 1 };
                    let base = self.clock.or_else(|| self.cursor.time());
                    if let Some(base) = base {
                        let step = chrono::Duration::from_std(dt * factor).unwrap_or_default();
                        let clock = base + step;
                        self.clock = Some(clock);
                        self.cursor.play_to(clock);
                    }
                }
            }
            if self.cursor.at_end() {
                self.playing = false;
                self.clock = None;
            }
            self.dirty = true;
        }
        if self.dirty {
            self.dirty = false;
            let now = self.now();
            self.cursor.advance(now);
            tick.changed = true;
        }
        tick
    }

    /// Carries out `command`; returns what to tell the user, if anything.
    pub fn command(&mut self, command: Command) -> Option<String> {
        self.dirty = true;
        if !matches!(command, Command::Faster | Command::Slower) {
            // A seek on its way stops where it got to.
            self.folding = None;
        }
        if !matches!(
            command,
            Command::PlayPause | Command::Faster | Command::Slower
        ) {
            self.clock = None;
            self.waiting = None;
        }
        let wait = match command {
            Command::PlayPause => {
                self.playing = !self.playing;
                self.clock = None;
                self.last_tick = Instant::now();
                None
            }
            Command::Faster => {
                self.speed = self.speed.faster();
                None
            }
            Command::Slower => {
                self.speed = self.speed.slower();
                None
            }
            Command::StepForward => {
                self.go(Fold::To(self.cursor.position() + 1));
                None
            }
            Command::StepBack => {
                self.go(Fold::To(self.cursor.position().saturating_sub(1)));
                None
            }
            Command::Start => {
                self.go(Fold::To(1));
                None
            }
            Command::End => Some(Wait::End),
            Command::NextDeath => Some(Wait::NextDeath),
            Command::PrevDeath => Some(Wait::PrevDeath),
            Command::SeekTime(t) => Some(Wait::Time(t)),
            Command::StopWaiting => None,
        };
        let mut flash = None;
        if let Some(wait) = wait
            && !self.settle(&wait, &mut flash)
        {
            self.waiting = Some(wait);
        }
        flash
    }

    /// Carries out the waiting seek if the index has got far enough; returns whether it is
    /// settled (done, or found impossible: then `flash` says so).
    fn settle(&mut self, wait: &Wait, flash: &mut Option<String>) -> bool {
        let complete = self.cursor.complete();
        match wait {
            Wait::End if complete => {
                let len = self.cursor.known_len();
                self.go(Fold::To(len));
            }
            Wait::Time(t) if self.cursor.time_reachable(*t) => self.go(Fold::Time(*t)),
            Wait::NextDeath => {
                if let Some(to) = self.cursor.next_death_at() {
                    self.go(Fold::To(to));
                } else if self.cursor.next_death().is_none() {
                    if !complete {
                        return false;
                    }
                    *flash = Some("no later stream death".into());
                }
            }
            Wait::PrevDeath => {
                let position = self.cursor.position();
                if let Some(to) = self.cursor.prev_death_at() {
                    self.go(Fold::To(to));
                } else if self.cursor.prev_death().is_none() {
                    if !complete && !self.cursor.reachable(position) {
                        return false;
                    }
                    *flash = Some("no earlier stream death".into());
                }
            }
            _ => return false,
        }
        true
    }

    /// Folds toward `fold` for at most a slice; what is left goes on at the next ticks.
    fn go(&mut self, fold: Fold) {
        let deadline = Instant::now() + self.slice;
        let there = match fold {
            Fold::To(index) => self.cursor.seek_until(index, deadline),
            Fold::Time(t) => self.cursor.seek_time_until(t, deadline),
        };
        self.folding = (!there).then_some(fold);
    }
}
