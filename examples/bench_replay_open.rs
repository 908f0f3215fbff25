//! Opening a long recording in the replay viewer (run by `scripts/bench.sh`; see docs/benchmarks.md).
//!
//! For each size (default 1,000,000 and 10,000,000 events): writes a version 2 recording with the
//! engine's `Recorder` (an SSE flood of progress notifications on one GET stream, with a
//! `tools/call` answered on its own SSE stream every 100 notifications and one in 50 of those
//! calls orphaned by a reset), into a temporary directory. Then runs the real binary,
//! `mcpscope replay FILE`, in a detached 200×50 tmux session and measures, by reading the screen
//! with `capture-pane`: the time to the first screen; `]` pressed at once, the time until the
//! status bar shows the last event (the viewer waits for its background index pass to reach
//! the end); then `,` (one event back from the end: the worst seek, the nearest checkpoint plus
//! the events after it) and `]` again (the end, indexed); the process's peak RSS (VmHWM). The
//! viewer is then started again on the same file (its saved index written by the first one, in
//! a cache directory of the benchmark's own): `]` and `,` again, and its peak RSS. The file and
//! the cache are deleted afterwards (kept with `BENCH_KEEP_FILES=1`). The recording is written
//! with the live index the proxy runs beside its recorder, so the first opening starts from its
//! sidecar index.
//!
//! Usage: bench_replay_open --mcpscope PATH [--events N[,N…]] [--work DIR] [--out FILE]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use serde_json::json;

use mcpscope_engine::event::{Direction, EndHow, Event, EventKind, Leg};
use mcpscope_engine::model::Retention;
use mcpscope_engine::record::{Create, Recorder};
use mcpscope_engine::wire::observe;
use mcpscope_timeline::liveindex::LiveIndex;

/// How long any one wait may last.
const PATIENCE: Duration = Duration::from_secs(900);

/// Writes a recording of exactly `target` events; returns its size in bytes.
fn write_recording(path: &Path, target: u64) -> anyhow::Result<u64> {
    let mut recorder = Recorder::create(path, Create::Replace, true)?;
    // The live index the proxy runs beside its recorder (a sidecar index written as the
    // recording is written).
    let live = LiveIndex::start(path, Retention::window(Retention::DEFAULT_KEEP_CALLS));
    let base: DateTime<Utc> = Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .ok_or_else(|| anyhow!("base time"))?;
    let mut written = 0u64;
    let mut micros = 0i64;
    let mut write = |recorder: &mut Recorder, kind: EventKind| -> anyhow::Result<bool> {
        if written >= target {
            return Ok(false);
        }
        micros += 20;
        recorder.write(&Event::at(base + TimeDelta::microseconds(micros), kind))?;
        written += 1;
        Ok(true)
    };
    let headers = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let session = ("mcp-session-id", "bench-session-1");
    // The GET stream the flood travels on.
    let flood = 1;
    write(
        &mut recorder,
        EventKind::StreamOpened {
            stream: flood,
            conn: 1,
            method: "GET".into(),
            path: "/mcp".into(),
            headers: headers(&[("accept", "text/event-stream"), session]),
            origin: None,
        },
    )?;
    write(
        &mut recorder,
        EventKind::ResponseHead {
            stream: flood,
            status: 200,
            headers: headers(&[("content-type", "text/event-stream"), session]),
        },
    )?;
    let mut offset = 0u64;
    let mut stream = flood;
    let mut call = 0u64;
    let mut n = 0u64;
    'outer: loop {
        for _ in 0..100 {
            n += 1;
            let data = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"flood","progress":{n},"message":"step {n} of the long-running job, still going"}}}}"#
            );
            let len = data.len() as u64 + 8;
            let sse = EventKind::SseEvent {
                stream: flood,
                id: None,
                event: None,
                retry: None,
                start: offset,
                end: offset + len,
                data: data.as_str().into(),
            };
            offset += len;
            if !write(&mut recorder, sse)?
                || !write(
                    &mut recorder,
                    observe::message(flood, Direction::ServerToClient, data.as_bytes()),
                )?
            {
                break 'outer;
            }
        }
        call += 1;
        stream += 1;
        let id = call as i64;
        let request = json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"echo","arguments":{"text":format!("call {call}")}}});
        let steps = [
            EventKind::StreamOpened {
                stream,
                conn: 2,
                method: "POST".into(),
                path: "/mcp".into(),
                headers: headers(&[
                    ("content-type", "application/json"),
                    ("accept", "application/json, text/event-stream"),
                    session,
                ]),
                origin: None,
            },
            EventKind::Message {
                stream,
                dir: Direction::ClientToServer,
                body: request,
            },
            EventKind::ResponseHead {
                stream,
                status: 200,
                headers: headers(&[("content-type", "text/event-stream"), session]),
            },
        ];
        for step in steps {
            if !write(&mut recorder, step)? {
                break 'outer;
            }
        }
        let dies = call.is_multiple_of(50);
        if !dies {
            let data = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"call {call}"}}]}}}}"#
            );
            let sse = EventKind::SseEvent {
                stream,
                id: None,
                event: None,
                retry: None,
                start: 0,
                end: data.len() as u64 + 8,
                data: data.as_str().into(),
            };
            if !write(&mut recorder, sse)?
                || !write(
                    &mut recorder,
                    observe::message(stream, Direction::ServerToClient, data.as_bytes()),
                )?
            {
                break 'outer;
            }
        }
        let end = EventKind::StreamEnded {
            stream,
            dir: Direction::ServerToClient,
            how: if dies { EndHow::Reset } else { EndHow::Eof },
            leg: Leg::Upstream,
            bytes: 200,
            detail: dies.then(|| "connection reset by peer".to_string()),
        };
        if !write(&mut recorder, end)? {
            break;
        }
    }
    recorder.flush()?;
    drop(recorder);
    // This flood is written far faster than any session: let the index catch up (as it does
    // live, where it reads behind the traffic) before its last save.
    let report = live.finish(PATIENCE);
    eprintln!(
        "live index: {} of {written} events saved in {}",
        report.saved,
        report
            .sidecar
            .as_ref()
            .map_or_else(|| "no sidecar".to_string(), |p| p.display().to_string())
    );
    Ok(std::fs::metadata(path)?.len())
}

/// A detached tmux session running one command.
struct Tmux {
    name: String,
}

impl Tmux {
    fn start(name: &str, command: &str) -> anyhow::Result<Self> {
        let status = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                name,
                "-x",
                "200",
                "-y",
                "50",
                command,
            ])
            .status()
            .context("tmux")?;
        if !status.success() {
            bail!("tmux new-session failed");
        }
        Ok(Self { name: name.into() })
    }

    fn screen(&self) -> String {
        Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    fn keys(&self, keys: &str) -> anyhow::Result<()> {
        Command::new("tmux")
            .args(["send-keys", "-t", &self.name, "-l", keys])
            .status()
            .context("tmux send-keys")?;
        Ok(())
    }

    fn pid(&self) -> anyhow::Result<u32> {
        let out = Command::new("tmux")
            .args(["display-message", "-p", "-t", &self.name, "#{pane_pid}"])
            .output()
            .context("tmux display-message")?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .context("pane pid")
    }

    /// Polls the screen until `done` holds; returns the time it took.
    fn until(&self, what: &str, done: impl Fn(&str) -> bool) -> anyhow::Result<Duration> {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if done(&screen) {
                return Ok(start.elapsed());
            }
            if start.elapsed() > PATIENCE {
                bail!("{what}: not seen within {PATIENCE:?}; screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .status();
    }
}

fn vm_status(pid: u32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The figures of one size.
struct Run {
    events: u64,
    bytes: u64,
    write: Duration,
    first_screen: Duration,
    end_from_open: Duration,
    end_after_key: Duration,
    step_back: Duration,
    end_again: Duration,
    peak_kib: u64,
    rss_kib: u64,
    /// The saved index: the sidecar beside the recording and the viewer's cached one.
    index_bytes: u64,
    /// `mcpscope index` on the file once its index is saved: read back and checked.
    index_up_to_date: Duration,
    /// The second opening, from the saved index.
    again: Opening,
}

/// One opening of the viewer: the figures of `]` and `,` and its peak memory.
struct Opening {
    first_screen: Duration,
    end_after_key: Duration,
    step_back: Duration,
    peak_kib: u64,
}

/// Waits (bounded) until process `pid` has gone.
fn wait_gone(pid: u32) -> anyhow::Result<()> {
    let start = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() {
        if start.elapsed() > PATIENCE {
            bail!("the viewer did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Opens the viewer again on a recording whose index was saved: `]`, `,`, the peak.
fn reopen(tmux_name: &str, command: &str, events: u64) -> anyhow::Result<Opening> {
    let tmux = Tmux::start(tmux_name, command)?;
    let first_screen = tmux.until("first screen", |s| s.contains("REPLAY"))?;
    let pid = tmux.pid()?;
    let end = format!("event {events}/{events} ");
    let pressed = Instant::now();
    tmux.keys("]")?;
    tmux.until("the end, second opening", |s| s.contains(&end))?;
    let end_after_key = pressed.elapsed();
    let back = format!("event {}/{events} ", events - 1);
    let step = Instant::now();
    tmux.keys(",")?;
    tmux.until("one event back, second opening", |s| s.contains(&back))?;
    let step_back = step.elapsed();
    let peak_kib = vm_status(pid, "VmHWM:").unwrap_or(0);
    tmux.keys("q")?;
    wait_gone(pid)?;
    drop(tmux);
    Ok(Opening {
        first_screen,
        end_after_key,
        step_back,
        peak_kib,
    })
}

/// The size of the one file in `dir` (the saved index), or 0.
fn saved_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

fn measure(mcpscope: &Path, work: &Path, events: u64) -> anyhow::Result<Run> {
    let dir = work.join(format!("replay-open-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("flood-{events}.jsonl"));
    let t0 = Instant::now();
    let bytes = write_recording(&path, events)?;
    let write = t0.elapsed();
    // The file was just written, so it is in the page cache, as a recording made moments ago is.
    let status_of = |n: u64| format!("event {n}/{n} ");
    let name = format!("mcpscope-bench-replay-{}", std::process::id());
    // The saved index goes to a cache of the benchmark's own, never the user's.
    let cache = dir.join("cache");
    let command = format!(
        "TZ=UTC XDG_CACHE_HOME={} exec {} replay {}",
        cache.display(),
        mcpscope.display(),
        path.display()
    );
    let opened = Instant::now();
    let tmux = Tmux::start(&name, &command)?;
    let first_screen = tmux.until("first screen", |s| s.contains("REPLAY"))?;
    let pid = tmux.pid()?;
    let pressed = Instant::now();
    tmux.keys("]")?;
    let end = status_of(events);
    tmux.until("the end", |s| s.contains(&end))?;
    let end_after_key = pressed.elapsed();
    let end_from_open = opened.elapsed();
    let back = format!("event {}/{events} ", events - 1);
    let step = Instant::now();
    tmux.keys(",")?;
    tmux.until("one event back", |s| s.contains(&back))?;
    let step_back = step.elapsed();
    let again = Instant::now();
    tmux.keys("]")?;
    tmux.until("the end again", |s| s.contains(&end))?;
    let end_again = again.elapsed();
    let peak_kib = vm_status(pid, "VmHWM:").unwrap_or(0);
    let rss_kib = vm_status(pid, "VmRSS:").unwrap_or(0);
    // Quitting waits for the saved index to be written.
    tmux.keys("q")?;
    wait_gone(pid)?;
    drop(tmux);
    let index_dir = cache.join("mcpscope").join("index");
    // The sidecar written beside the recording as it was written, and whatever the viewer
    // saved in its cache (nothing when the sidecar was whole).
    let index_bytes = saved_size(&index_dir)
        + std::fs::metadata(mcpscope_timeline::savedindex::sidecar_for(&path))
            .map_or(0, |m| m.len());
    let again = reopen(&name, &command, events)?;
    // The saved index read back without a viewer: `mcpscope index` on the unchanged file.
    let t = Instant::now();
    let status = Command::new(mcpscope)
        .arg("index")
        .arg(&path)
        .env("XDG_CACHE_HOME", &cache)
        .stdout(std::process::Stdio::null())
        .status()
        .context("mcpscope index")?;
    if !status.success() {
        bail!("mcpscope index failed");
    }
    let index_up_to_date = t.elapsed();
    if std::env::var_os("BENCH_KEEP_FILES").is_none() {
        std::fs::remove_file(&path)?;
        let _ = std::fs::remove_file(mcpscope_timeline::savedindex::sidecar_for(&path));
        let _ = std::fs::remove_dir_all(&cache);
        let _ = std::fs::remove_dir(&dir);
    }
    Ok(Run {
        events,
        bytes,
        write,
        first_screen,
        end_from_open,
        end_after_key,
        step_back,
        end_again,
        peak_kib,
        rss_kib,
        index_bytes,
        index_up_to_date,
        again,
    })
}

struct Args {
    mcpscope: PathBuf,
    events: Vec<u64>,
    work: PathBuf,
    out: Option<PathBuf>,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        mcpscope: PathBuf::new(),
        events: vec![1_000_000, 10_000_000],
        work: std::env::temp_dir(),
        out: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| anyhow!("{arg} needs a value"));
        match arg.as_str() {
            "--mcpscope" => args.mcpscope = PathBuf::from(value()?),
            "--events" => {
                args.events = value()?
                    .split(',')
                    .map(|n| n.trim().replace('_', "").parse::<u64>())
                    .collect::<Result<_, _>>()
                    .context("--events N[,N…]")?;
            }
            "--work" => args.work = PathBuf::from(value()?),
            "--out" => args.out = Some(PathBuf::from(value()?)),
            other => bail!("unknown argument {other}"),
        }
    }
    if args.mcpscope.as_os_str().is_empty() {
        bail!(
            "usage: bench_replay_open --mcpscope PATH [--events N[,N…]] [--work DIR] [--out FILE]"
        );
    }
    Ok(args)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn mib(kib: u64) -> String {
    format!("{:.0} MiB", kib as f64 / 1024.0)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "**met**" } else { "**MISSED**" }
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    if Command::new("tmux").arg("-V").output().is_err() {
        bail!("bench_replay_open needs tmux");
    }
    let mut runs = Vec::new();
    for &events in &args.events {
        eprintln!("bench_replay_open: {events} events");
        let run = measure(&args.mcpscope, &args.work, events)?;
        eprintln!(
            "bench_replay_open: {events} events: first screen {}, end {} after `]` ({} from open), peak {}",
            secs(run.first_screen),
            secs(run.end_after_key),
            secs(run.end_from_open),
            mib(run.peak_kib)
        );
        eprintln!(
            "bench_replay_open: {events} events, second opening: end {} after `]`, step back {:.0} ms, peak {}, saved index {:.1} MiB",
            secs(run.again.end_after_key),
            run.again.step_back.as_secs_f64() * 1e3,
            mib(run.again.peak_kib),
            run.index_bytes as f64 / 1048576.0
        );
        runs.push(run);
    }
    let mut md = String::new();
    let _ = writeln!(md, "## Opening a long recording in the viewer\n");
    let _ = writeln!(
        md,
        "`bench_replay_open`: a version 2 recording written with `Recorder` (an SSE flood of \
         ~190-byte progress notifications on one GET stream, a `tools/call` on its own SSE stream \
         every 100 notifications, one call in 50 orphaned), then the release binary, \
         `mcpscope replay FILE`, in a 200×50 tmux session, read with `capture-pane` every 10 ms. \
         *First screen*: from starting the process to the status bar drawn. *End*: `]` pressed \
         right after the first screen, until the status bar shows the last event (the viewer \
         waits for its index: the sidecar read and the events after its last save folded; \
         without a sidecar, a parse and fold of the whole file on two threads). \
         *Step back*: `,` from the end (the nearest checkpoint plus the events after it). \
         *End again*: `]` once indexed (the last checkpoint plus at most 4,096 events). Peak RSS: \
         the process's VmHWM. \
         The recording is written as the live proxy writes one: its live index saves a sidecar \
         index beside it as it goes, so even the first opening starts from an index (a viewer \
         saves one in its cache, here the benchmark's own, only for a recording without a whole \
         sidecar). *Saved index*: the sidecar's size and anything cached. *Second opening*: the viewer started again on the same file, `]` at once (the saved \
         index read instead of the pass), then `,`. *`mcpscope index`, up to date*: the command \
         run on the file afterwards (the saved index read and checked, the last events folded).\n"
    );
    let _ = writeln!(
        md,
        "| events | file | written in | first screen | end after `]` | end from open | step back from the end | end again | peak RSS | RSS at the end | saved index | `mcpscope index`, up to date | second opening: first screen | end after `]` | step back | peak RSS |"
    );
    let _ = writeln!(
        md,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in &runs {
        let _ = writeln!(
            md,
            "| {} | {:.0} MiB | {} | {} | {} | {} | {:.0} ms | {:.0} ms | {} | {} | {:.1} MiB | {} | {} | {} | {:.0} ms | {} |",
            r.events,
            r.bytes as f64 / 1048576.0,
            secs(r.write),
            secs(r.first_screen),
            secs(r.end_after_key),
            secs(r.end_from_open),
            r.step_back.as_secs_f64() * 1e3,
            r.end_again.as_secs_f64() * 1e3,
            mib(r.peak_kib),
            mib(r.rss_kib),
            r.index_bytes as f64 / 1048576.0,
            secs(r.index_up_to_date),
            secs(r.again.first_screen),
            secs(r.again.end_after_key),
            r.again.step_back.as_secs_f64() * 1e3,
            mib(r.again.peak_kib),
        );
    }
    if let Some(r) = runs.iter().find(|r| r.events >= 10_000_000) {
        let _ = writeln!(
            md,
            "\nTargets for {} events: first screen ≤ 1 s: {} ({}); seek to the end ≤ 3 s: {} ({} \
             after `]`, the wait for the index included); peak RSS ≤ 300 MiB: {} ({}). Second opening: \
             seek to the end ≤ 3 s: {} ({}); peak RSS ≤ 300 MiB: {} ({}).",
            r.events,
            verdict(r.first_screen.as_secs_f64() <= 1.0),
            secs(r.first_screen),
            verdict(r.end_after_key.as_secs_f64() <= 3.0),
            secs(r.end_after_key),
            verdict(r.peak_kib <= 300 * 1024),
            mib(r.peak_kib),
            verdict(r.again.end_after_key.as_secs_f64() <= 3.0),
            secs(r.again.end_after_key),
            verdict(r.again.peak_kib <= 300 * 1024),
            mib(r.again.peak_kib),
        );
    }
    match &args.out {
        Some(out) => std::fs::write(out, &md)?,
        None => print!("{md}"),
    }
    Ok(())
}
