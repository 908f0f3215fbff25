//! The live index: a recording's sidecar index ([`savedindex::save_sidecar`]) kept up to date while
//! the recording is written, so that even its first opening starts from an index instead of a pass
//! over the whole file. A thread beside the recorder reads the whole lines the recorder has put on
//! disk, folds them as a replay's background pass does, and every few seconds while enough is new
//! (and once the recording is closed) saves what it knows: index points, stream deaths, the model
//! at the last index point read and up to two earlier ones.
//!
//! It reads the file, not the recorder's events, so what it folds is what a reader reads back, and
//! the recorder's thread pays nothing for it. It reads when the traffic pauses (the file stopped
//! growing between two looks), or once it has fallen [`LiveConfig::catch_up_behind`] bytes or
//! [`LiveConfig::catch_up_after`] behind: a burst of traffic is folded after it, not while it
//! flows, and under steady traffic the index is never further behind than that. It is only a cache:
//! it never covers more than the whole lines on disk when it is saved; a recording that grew after
//! its last save (or was cut mid-line by a crash) is extended by the viewer from there, and one
//! that no longer fits it (shortened, changed) is read as if it had none.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use mcpscope_engine::event::Event;
use mcpscope_engine::model::{Model, Retention};
use mcpscope_engine::record::{Events, Follower, Header, IndexPoint, MAX_LINE_BYTES};

use crate::checkpoint::Checkpoint;
use crate::indexer::{IndexConfig, is_death, keep_checkpoint};
use crate::savedindex::{self, Snapshot};

/// How the live index reads and saves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveConfig {
    /// The density of the index: the viewer's ([`IndexConfig::default`]) for it to be used.
    pub index: IndexConfig,
    /// How often what is known is saved while the recording grows.
    pub save_every: Duration,
    /// How often the file is looked at for new lines.
    pub poll: Duration,
    /// While the file grows, how far behind (bytes not read yet) the index may fall before it
    /// reads anyway.
    pub catch_up_behind: u64,
    /// While the file grows, how long the index may stay behind before it reads anyway.
    pub catch_up_after: Duration,
    /// Once the recording is closed, how long the thread may go on reading what it has not
    /// read yet before its last save.
    pub finish_patience: Duration,
}

impl Default for LiveConfig {
    /// The viewer's index points; checkpoints kept within 16 MiB, at most 4 (only the last
    /// and two more are saved); a save every 5 s; the file looked at every 50 ms; 300 ms to
    /// catch up at the end (quitting stays prompt: what is left unread the viewer folds on
    /// from the last save).
    fn default() -> Self {
        Self {
            index: IndexConfig {
                max_checkpoints: 4,
                checkpoint_budget: 16 << 20,
                ..IndexConfig::default()
            },
            save_every: Duration::from_secs(5),
            poll: Duration::from_millis(50),
            catch_up_behind: 128 << 20,
            catch_up_after: Duration::from_secs(2),
            finish_patience: Duration::from_millis(300),
        }
    }
}

/// What the live index did, once finished.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveReport {
    /// Events read and folded (whole index spacings only).
    pub folded: u64,
    /// Events the last save covers (0: never saved: the recording was too short, or a save
    /// failed).
    pub saved: u64,
    /// The sidecar, once saved.
    pub sidecar: Option<PathBuf>,
    /// Why it stopped following the recording before its end (a line it could not read, a
    /// save that failed), if it did.
    pub error: Option<String>,
}

/// The running live index of one recording; finishes (a last save) when dropped.
#[derive(Debug)]
pub struct LiveIndex {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<LiveReport>>,
    patience: Duration,
}

/// Tells the thread to finish: None while the recording is written, then how long it may take.
#[derive(Debug, Default)]
struct Signal {
    finish: Mutex<Option<Duration>>,
    wake: Condvar,
}

impl Signal {
    fn lock(&self) -> MutexGuard<'_, Option<Duration>> {
        self.finish
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl LiveIndex {
    /// Starts following the recording at `path` (its header already written), folding with
    /// `retention`, with the default configuration.
    pub fn start(path: &Path, retention: Retention) -> Self {
        Self::start_with(path, retention, LiveConfig::default())
    }

    /// [`LiveIndex::start`] with a chosen configuration. Without a thread (none could be
    /// started) it does nothing: the recording simply has no sidecar.
    pub fn start_with(path: &Path, retention: Retention, config: LiveConfig) -> Self {
        let signal = Arc::new(Signal::default());
        let follow = {
            let signal = signal.clone();
            let path = path.to_path_buf();
            move || follow(&path, retention, config, &signal)
        };
        let thread = std::thread::Builder::new()
            .name("record-index".into())
            .spawn(follow)
            .map_err(|e| tracing::debug!("no live index: {e}"))
            .ok();
        Self {
            signal,
            thread,
            patience: config.finish_patience,
        }
    }

    /// The recording is closed (every line written out): reads what is left, for at most
    /// `patience`, saves, and reports.
    pub fn finish(mut self, patience: Duration) -> LiveReport {
        self.end(patience)
    }

    fn end(&mut self, patience: Duration) -> LiveReport {
        *self.signal.lock() = Some(patience);
        self.signal.wake.notify_all();
        self.thread
            .take()
            .and_then(|thread| thread.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for LiveIndex {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.end(self.patience);
        }
    }
}

impl Follower for LiveIndex {}

/// How much lower than the proxy's threads the live index runs (a `nice` increment) where the
/// idle scheduling class is refused: it only saves a later opening some time, so under load it
/// yields to the traffic and catches up when the traffic pauses.
const NICENESS: libc::c_int = 10;

/// A save may take at most this share of the thread's time: after a save that took `d`, the
/// next waits at least `d × SAVE_SPACING` (and at least [`LiveConfig::save_every`]).
const SAVE_SPACING: u32 = 20;

/// Events folded since the last save below which a save while the recording grows is not worth
/// its cost: a viewer folds this many from the last save in well under a tenth of a second,
/// while a save writes the whole model (three of them) again. The last save, at the close,
/// takes whatever is new.
const WORTH_SAVING: u64 = 1 << 16;

/// Puts the calling thread in the idle scheduling class (Linux `SCHED_IDLE`: it runs on a core
/// nothing else wants and gives way at once to a thread of the traffic that wakes, so its
/// bursts of folding never lengthen an exchange), or, where that is refused, lowers its
/// priority by [`NICENESS`]. Nothing else changes if both are refused.
#[cfg(target_os = "linux")]
fn yield_to_the_traffic() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `gettid` has no preconditions; `sched_setscheduler` with our own thread id and a
    // valid parameter only changes this thread's scheduling class; `setpriority` on our own
    // thread id only changes this thread's nice value.
    let result = unsafe {
        let tid = libc::gettid();
        if libc::sched_setscheduler(tid, libc::SCHED_IDLE, &param) == 0 {
            return;
        }
        let id = libc::id_t::try_from(tid).unwrap_or(0);
        let current = libc::getpriority(libc::PRIO_PROCESS, id);
        libc::setpriority(libc::PRIO_PROCESS, id, current.saturating_add(NICENESS))
    };
    if result != 0 {
        tracing::debug!(
            "live index: priority unchanged: {}",
            io::Error::last_os_error()
        );
    }
}

/// Elsewhere the thread keeps the priority it was started with.
#[cfg(not(target_os = "linux"))]
fn yield_to_the_traffic() {}

/// The thread: follows the file until told to finish, then catches up and saves a last time.
fn follow(path: &Path, retention: Retention, config: LiveConfig, signal: &Signal) -> LiveReport {
    yield_to_the_traffic();
    let mut follower = match Following::open(path, retention, config) {
        Ok(follower) => follower,
        Err(e) => {
            return LiveReport {
                error: Some(e.to_string()),
                ..LiveReport::default()
            };
        }
    };
    let mut deadline = None;
    let mut pace = Pace::default();
    loop {
        let finishing = *signal.lock();
        if let Some(patience) = finishing {
            deadline.get_or_insert_with(|| Instant::now() + patience);
        }
        let due = match follower.length() {
            Ok(length) => deadline.is_some() || pace.due(length, follower.read.at.offset, &config),
            Err(e) => {
                follower.report.error = Some(e.to_string());
                break;
            }
        };
        let progressed = match due.then(|| follower.read_on()) {
            None => false,
            Some(Ok(progressed)) => progressed,
            Some(Err(e)) => {
                follower.report.error = Some(e);
                break;
            }
        };
        if deadline.is_some_and(|d| !progressed || Instant::now() >= d) {
            follower.save();
            break;
        }
        if follower.save_due() && !follower.save() {
            break;
        }
        if !progressed {
            let guard = signal.lock();
            if guard.is_none() {
                // Woken early by the finish; a spurious wake-up only reads again.
                let _ = signal.wake.wait_timeout(guard, config.poll);
            }
        }
    }
    follower.report
}

/// When the index reads: in a pause of the traffic, or once it is too far behind; then up to
/// where the file ended at that moment.
#[derive(Debug, Default)]
struct Pace {
    /// The file's length at the last look.
    seen: u64,
    /// Since when the file has had bytes not read yet (none while caught up).
    behind_since: Option<Instant>,
    /// Where the reading under way goes to.
    until: u64,
}

impl Pace {
    /// Whether to read now, the file being `length` bytes long and read up to `read`.
    fn due(&mut self, length: u64, read: u64, config: &LiveConfig) -> bool {
        if read < self.until {
            return true;
        }
        let grew = length != self.seen;
        self.seen = length;
        if length <= read {
            self.behind_since = None;
            return false;
        }
        let since = *self.behind_since.get_or_insert_with(Instant::now);
        let too_far =
            length - read >= config.catch_up_behind || since.elapsed() >= config.catch_up_after;
        if grew && !too_far {
            return false;
        }
        self.until = length;
        self.behind_since = None;
        true
    }
}

/// Bytes read from the file at a time (more while one line is longer).
const CHUNK_BYTES: usize = 4 << 20;

/// What the thread knows of the recording so far.
struct Following {
    path: PathBuf,
    file: File,
    header: Header,
    retention: Retention,
    config: LiveConfig,
    /// Where the index spacing not folded yet starts (the resume point of a save).
    at: IndexPoint,
    /// Where reading goes on (whole lines before it read).
    read: IndexPoint,
    /// The events read from `at` on, fewer than an index spacing.
    span: Vec<Event>,
    /// The model after the events before `at`; shared with a checkpoint or a save only until
    /// the next event is folded (copy on write), so that neither costs a copy of its own.
    model: Arc<Model>,
    points: Vec<IndexPoint>,
    times: Vec<DateTime<Utc>>,
    deaths: Vec<u64>,
    checkpoints: Vec<Checkpoint>,
    spacing: u64,
    buffer: Vec<u8>,
    chunk: usize,
    last_save: Instant,
    /// How long the last save took.
    save_took: Duration,
    report: LiveReport,
}

impl Following {
    fn open(path: &Path, retention: Retention, config: LiveConfig) -> Result<Self, String> {
        let events = Events::open(path).map_err(|e| e.to_string())?;
        let start = events.point();
        let header = events.header().clone();
        let file = File::open(path).map_err(|e| e.to_string())?;
        let every = config.index.every.max(1);
        Ok(Self {
            path: path.to_path_buf(),
            file,
            header,
            retention,
            config,
            at: start.clone(),
            read: start,
            span: Vec::new(),
            model: Arc::new(Model::with_retention(retention)),
            points: Vec::new(),
            times: Vec::new(),
            deaths: Vec::new(),
            checkpoints: vec![Checkpoint {
                seq: 0,
                model: Arc::new(Model::with_retention(retention)),
            }],
            spacing: (config.index.checkpoint_every / every).max(1) * every,
            buffer: Vec::new(),
            chunk: CHUNK_BYTES,
            last_save: Instant::now(),
            save_took: Duration::ZERO,
            report: LiveReport::default(),
        })
    }

    /// How long after the last save the next one is due: the configured interval, or longer
    /// when saving a large model takes long (a save never takes more than a twentieth of the
    /// thread's time).
    fn save_interval(&self) -> Duration {
        self.config
            .save_every
            .max(self.save_took.saturating_mul(SAVE_SPACING))
    }

    /// Whether a save is due while the recording grows: its interval passed and at least
    /// [`WORTH_SAVING`] events folded since the last one.
    fn save_due(&self) -> bool {
        self.last_save.elapsed() >= self.save_interval()
            && self.at.at.seq.saturating_sub(self.report.saved) >= WORTH_SAVING
    }

    fn every(&self) -> u64 {
        self.config.index.every.max(1)
    }

    /// Reads the whole lines written since the last read (up to a chunk of them) and folds
    /// every index spacing completed; whether there were any.
    fn read_on(&mut self) -> Result<bool, String> {
        let whole = self.whole_lines().map_err(|e| e.to_string())?;
        if whole == 0 {
            return Ok(false);
        }
        let bytes = std::mem::take(&mut self.buffer);
        let mut events =
            Events::continue_at(&bytes[..whole], &self.path, self.header.clone(), &self.read);
        let outcome = loop {
            match events.next() {
                Some(Ok(event)) => {
                    self.span.push(event);
                    if self.span.len() as u64 >= self.every() {
                        self.fold_span(events.point());
                    }
                }
                Some(Err(e)) => break Err(e.to_string()),
                // A whole line that reads as cut off is a damaged file, not one being written.
                None => match events.warnings().first() {
                    Some(warning) => break Err(warning.clone()),
                    None => break Ok(true),
                },
            }
        };
        self.read = events.point();
        self.buffer = bytes;
        outcome
    }

    /// The file's length now.
    fn length(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Reads the file from where reading stands into the buffer; how many of its bytes are
    /// whole lines (0: none yet).
    fn whole_lines(&mut self) -> io::Result<usize> {
        let offset = self.read.at.offset;
        let length = self.length()?;
        let want = usize::try_from(length.saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(self.chunk);
        if want == 0 {
            return Ok(0);
        }
        self.buffer.clear();
        self.buffer.resize(want, 0);
        self.file.seek(SeekFrom::Start(offset))?;
        self.file.read_exact(&mut self.buffer)?;
        match self.buffer.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                self.chunk = CHUNK_BYTES;
                Ok(last + 1)
            }
            None => {
                // One line longer than a chunk: read more of it next time.
                if want == self.chunk {
                    self.chunk = self.chunk.saturating_mul(2).min(MAX_LINE_BYTES + 1);
                }
                Ok(0)
            }
        }
    }

    /// Folds the index spacing read (its events start at `at`); `next` is where the next one
    /// starts.
    fn fold_span(&mut self, next: IndexPoint) {
        let mut seq = self.at.at.seq;
        if let Some(first) = self.span.first() {
            self.points.push(self.at.clone());
            self.times.push(first.t);
        }
        let model = Arc::make_mut(&mut self.model);
        for event in self.span.drain(..) {
            model.apply(&event);
            if is_death(model, &event) {
                self.deaths.push(seq);
            }
            seq += 1;
        }
        self.at = next;
        self.report.folded = seq;
        if seq.is_multiple_of(self.spacing) && self.worth_keeping() {
            let checkpoint = Checkpoint {
                seq,
                model: Arc::clone(&self.model),
            };
            keep_checkpoint(
                &mut self.checkpoints,
                &mut self.spacing,
                &self.config.index,
                checkpoint,
            );
        }
    }

    /// Whether a checkpoint of the model now could ever be saved: a saved index holds earlier
    /// models only while they and the last one fit in a twentieth of the recording
    /// ([`savedindex`]'s middle models), so a checkpoint too large for that is not held.
    fn worth_keeping(&self) -> bool {
        let length = self.length().unwrap_or(0);
        let budget = usize::try_from(length / 20).unwrap_or(usize::MAX);
        self.model.approx_heap().saturating_mul(2) <= budget
    }

    /// Saves what is folded as the recording's sidecar, if there is more than the last save
    /// holds; whether all is well (a failed save stops the live index: the last good sidecar
    /// stays).
    fn save(&mut self) -> bool {
        let started = Instant::now();
        let saved = self.save_now();
        self.save_took = started.elapsed();
        self.last_save = Instant::now();
        saved
    }

    fn save_now(&mut self) -> bool {
        let folded = self.at.at.seq;
        if folded == 0 || folded == self.report.saved {
            return true;
        }
        let mut checkpoints = self.checkpoints.clone();
        if checkpoints.last().is_none_or(|c| c.seq < folded) {
            checkpoints.push(Checkpoint {
                seq: folded,
                model: Arc::clone(&self.model),
            });
        }
        let mut points = self.points.clone();
        points.push(self.at.clone());
        let snapshot = Snapshot {
            every: self.every(),
            spacing: self.spacing,
            points,
            times: self.times.clone(),
            deaths: self.deaths.clone(),
            checkpoints,
        };
        match savedindex::save_sidecar(&self.path, self.retention, &snapshot) {
            Ok(sidecar) => {
                self.report.saved = folded;
                self.report.sidecar = Some(sidecar);
                true
            }
            Err(e) => {
                tracing::debug!("sidecar index of {} not saved: {e}", self.path.display());
                self.report.error = Some(format!("not saved: {e}"));
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(behind: u64, after: Duration) -> LiveConfig {
        LiveConfig {
            catch_up_behind: behind,
            catch_up_after: after,
            ..LiveConfig::default()
        }
    }

    #[test]
    fn a_growing_file_is_read_in_its_pause_up_to_where_it_ended() {
        let config = config(1 << 20, Duration::from_secs(3600));
        let mut pace = Pace::default();
        // Caught up: nothing to read.
        assert!(!pace.due(0, 0, &config));
        // Growing at every look: left alone.
        assert!(!pace.due(100, 0, &config));
        assert!(!pace.due(250, 0, &config));
        // The same length twice: a pause; read up to 250.
        assert!(pace.due(250, 0, &config));
        // Reading goes on to 250 while the file grows again.
        assert!(pace.due(400, 120, &config));
        assert!(pace.due(500, 249, &config));
        // At 250 the growth since is left for the next pause.
        assert!(!pace.due(600, 250, &config));
        assert!(pace.due(600, 250, &config));
        assert!(!pace.due(600, 600, &config));
    }

    #[test]
    fn a_file_that_never_pauses_is_read_once_far_enough_or_long_enough_behind() {
        let bytes = config(1000, Duration::from_secs(3600));
        let mut pace = Pace::default();
        assert!(!pace.due(400, 0, &bytes));
        assert!(!pace.due(999, 0, &bytes));
        assert!(pace.due(1000, 0, &bytes));
        assert!(pace.due(1500, 700, &bytes));
        assert!(!pace.due(1600, 1000, &bytes));

        let time = config(u64::MAX, Duration::from_millis(30));
        let mut pace = Pace::default();
        assert!(!pace.due(10, 0, &time));
        assert!(!pace.due(20, 0, &time));
        std::thread::sleep(Duration::from_millis(40));
        assert!(pace.due(30, 0, &time));
        // Behind again from the end of that reading: the time counts from there.
        assert!(!pace.due(40, 30, &time));
    }
}
