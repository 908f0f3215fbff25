//! Whether a client is idle or busy. A client that waits for a CPU on a loaded machine, or
//! works slowly through its error, has not shown a hang: only time in which its processes sat
//! idle (neither running nor waiting to run) counts towards a hang. The matrix samples the
//! client's process group from `/proc` (each thread's time on a CPU and time waiting for one,
//! from `schedstat`) in short intervals; an interval in which the group ran or waited for at
//! least a tenth of it is busy.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// How often the client's processes are sampled.
pub const SAMPLE: Duration = Duration::from_millis(200);

/// Intervals kept: ten minutes of samples (older ones are dropped; a cell is bounded far below).
const KEPT: usize = 3_000;

/// One sampled interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// When it began.
    pub start: DateTime<Utc>,
    /// When it ended.
    pub end: DateTime<Utc>,
    /// Nanoseconds the client's threads ran or waited to run in it (summed over threads).
    pub active_ns: u64,
}

impl Interval {
    /// Whether the client was busy in it: active for a tenth of it or more.
    pub fn busy(&self) -> bool {
        let len = (self.end - self.start)
            .num_nanoseconds()
            .unwrap_or(0)
            .max(0) as u64;
        len > 0 && self.active_ns.saturating_mul(10) >= len
    }
}

/// The sampled intervals of one client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Activity {
    /// Oldest first.
    pub intervals: VecDeque<Interval>,
}

impl Activity {
    /// Milliseconds of `from..to` in which the client was not busy. Time no sample covers
    /// counts as idle (without samples, as on a system with no `/proc`, all time is idle).
    pub fn idle_ms(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
        let wall = (to - from).num_milliseconds().max(0);
        wall - self.busy_ms(from, to).min(wall)
    }

    /// Milliseconds of `from..to` covered by busy intervals.
    pub fn busy_ms(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
        self.intervals
            .iter()
            .filter(|i| i.busy() && i.end > from && i.start < to)
            .map(|i| {
                (i.end.min(to) - i.start.max(from))
                    .num_milliseconds()
                    .max(0)
            })
            .sum()
    }

    fn push(&mut self, interval: Interval) {
        if self.intervals.len() == KEPT {
            self.intervals.pop_front();
        }
        self.intervals.push_back(interval);
    }
}

/// A client's activity as it is sampled, shared by the sampler and whoever decides when to stop.
#[derive(Debug, Clone, Default)]
pub struct ActivityLog(Arc<Mutex<Activity>>);

impl ActivityLog {
    /// What was sampled so far.
    pub fn snapshot(&self) -> Activity {
        self.0.lock().map(|a| a.clone()).unwrap_or_default()
    }

    /// Milliseconds since `from` in which the client sat idle.
    pub fn idle_ms_since(&self, from: DateTime<Utc>) -> i64 {
        self.0
            .lock()
            .map(|a| a.idle_ms(from, Utc::now()))
            .unwrap_or(0)
    }

    fn push(&self, interval: Interval) {
        if let Ok(mut activity) = self.0.lock() {
            activity.push(interval);
        }
    }
}

/// Samples process group `group` into `log` every [`SAMPLE`] until aborted.
pub async fn sample(group: i32, log: ActivityLog) {
    // The first pass only learns what each thread had used before the client was watched.
    let mut seen = match tokio::task::spawn_blocking(move || {
        let mut seen = HashMap::new();
        group_active_ns(group, &mut seen);
        seen
    })
    .await
    {
        Ok(seen) => seen,
        Err(_) => return,
    };
    let mut start = Utc::now();
    loop {
        tokio::time::sleep(SAMPLE).await;
        let (active_ns, again) = match tokio::task::spawn_blocking(move || {
            let active = group_active_ns(group, &mut seen);
            (active, seen)
        })
        .await
        {
            Ok(result) => result,
            Err(_) => return,
        };
        seen = again;
        let end = Utc::now();
        log.push(Interval {
            start,
            end,
            active_ns,
        });
        start = end;
    }
}

/// Nanoseconds the threads of process group `group` ran or waited to run since `last` (which
/// is updated): a thread seen for the first time counts with what it used so far, unless
/// `last` is empty (the first pass only learns).
fn group_active_ns(group: i32, last: &mut HashMap<i32, u64>) -> u64 {
    let learning = last.is_empty();
    let mut now: HashMap<i32, u64> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if process_group(pid) != Some(group) {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            if let Some(ns) = thread_active_ns(pid, tid) {
                now.insert(tid, ns);
            }
        }
    }
    let active = if learning {
        0
    } else {
        now.iter()
            .map(|(tid, ns)| ns.saturating_sub(last.get(tid).copied().unwrap_or(0)))
            .sum()
    };
    *last = now;
    // A group with no thread left keeps an empty map: mark it learned.
    if last.is_empty() {
        last.insert(-1, 0);
    }
    active
}

/// The process group of a process (`/proc/PID/stat`, the field after the state).
fn process_group(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields start after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let _state = fields.next()?;
    let _parent = fields.next()?;
    fields.next()?.parse().ok()
}

/// A thread's time on a CPU plus its time waiting for one, in nanoseconds (`schedstat`); its
/// user and system time from `stat` where the kernel keeps no `schedstat`.
fn thread_active_ns(pid: i32, tid: i32) -> Option<u64> {
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")) {
        let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
        if let (Some(Some(run)), Some(Some(wait))) = (fields.next(), fields.next())
            && run + wait > 0
        {
            return Some(run + wait);
        }
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(ticks * 1_000_000_000 / per_second)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp_millis(1_700_000_000_000 + ms).expect("time")
    }

    fn interval(from: i64, to: i64, active_ms: u64) -> Interval {
        Interval {
            start: at(from),
            end: at(to),
            active_ns: active_ms * 1_000_000,
        }
    }

    #[test]
    fn idle_time_leaves_out_busy_intervals() {
        let mut activity = Activity::default();
        activity.push(interval(0, 200, 150));
        activity.push(interval(200, 400, 5));
        activity.push(interval(400, 600, 40));
        assert!(activity.intervals[0].busy());
        assert!(!activity.intervals[1].busy());
        assert!(activity.intervals[2].busy(), "a fifth of it is busy");
        assert_eq!(activity.busy_ms(at(0), at(600)), 400);
        assert_eq!(activity.idle_ms(at(0), at(600)), 200);
        // Partly covered, and time past the samples counts as idle.
        assert_eq!(activity.idle_ms(at(100), at(1_000)), 900 - 300);
        assert_eq!(Activity::default().idle_ms(at(0), at(500)), 500);
    }

    #[tokio::test]
    async fn a_busy_loop_is_busy_and_a_sleeper_is_idle() {
        use std::os::unix::process::CommandExt;
        let mut busy = std::process::Command::new("sh");
        busy.args(["-c", "while :; do :; done"]).process_group(0);
        let mut busy = busy.spawn().expect("sh");
        let mut idle = std::process::Command::new("sleep");
        idle.arg("30").process_group(0);
        let mut idle = idle.spawn().expect("sleep");
        let (busy_log, idle_log) = (ActivityLog::default(), ActivityLog::default());
        let from = Utc::now();
        let a = tokio::spawn(sample(busy.id() as i32, busy_log.clone()));
        let b = tokio::spawn(sample(idle.id() as i32, idle_log.clone()));
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        a.abort();
        b.abort();
        let _ = (busy.kill(), idle.kill(), busy.wait(), idle.wait());
        let to = Utc::now();
        let busy_ms = busy_log.snapshot().busy_ms(from, to);
        let idle_ms = idle_log.snapshot().idle_ms(from, to);
        assert!(busy_ms >= 800, "the loop was busy {busy_ms} ms of 1.5 s");
        assert!(idle_ms >= 1_400, "the sleeper was idle only {idle_ms} ms");
    }
}
