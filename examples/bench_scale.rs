//! The model, the TUI and replays at scale (run by `scripts/bench.sh`; see docs/benchmarks.md).
//!
//! 1. Folds a synthetic 1,000,000-event vector (many sessions, calls, SSE events; see
//!    `bench/synth.rs`): time per event and memory per event.
//! 2. Renders one TUI frame on ratatui's `TestBackend` with the resulting model (the calls the
//!    default retention holds of the >100,000 folded):
//!    a fresh view (a new `App` laid out and drawn with `render_to_buffer`) and a steady-state view (one `App` reused).
//! 3. Writes the events as a recording with `Recorder` (no index beside it), then opens it the
//!    way `mcpscope replay` does (`FileCursor`, its index pass over the whole file) and seeks to
//!    its end.
//!
//! Usage: bench_scale [--events N] [--out FILE] [--work DIR]

#[path = "../bench/synth.rs"]
mod synth;

use std::alloc::{GlobalAlloc, Layout};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{anyhow, bail};
use chrono::{Offset, Utc};

use mcpscope_engine::model::Model;
use mcpscope_engine::model::Retention;
use mcpscope_engine::record::Recorder;
use mcpscope_timeline::FileCursor;
use mcpscope_timeline::indexer::IndexConfig;
use mcpscope_tui::{App, Info, Theme, render_to_buffer};

/// Counts live heap bytes (and their peak) so the model's own memory is measured exactly, over
/// mimalloc, the allocator of the `mcpscope` binary (its timings are the product's).
/// The harness is single-threaded, so plain loads and stores (no read-modify-write atomics)
/// keep the counting cheap enough not to distort the timings.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

#[inline]
fn grow(by: usize) {
    let live = LIVE.load(Ordering::Relaxed) + by;
    LIVE.store(live, Ordering::Relaxed);
    if live > PEAK.load(Ordering::Relaxed) {
        PEAK.store(live, Ordering::Relaxed);
    }
}

#[inline]
fn shrink(by: usize) {
    LIVE.store(
        LIVE.load(Ordering::Relaxed).wrapping_sub(by),
        Ordering::Relaxed,
    );
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { mimalloc::MiMalloc.alloc(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) };
        shrink(layout.size());
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grow(new_size - layout.size());
            } else {
                shrink(layout.size() - new_size);
            }
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Resets the peak to the current live size.
fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

fn mib(b: usize) -> f64 {
    b as f64 / 1048576.0
}

fn vm(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn percentiles(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    (q(0.5), q(0.99), v[v.len() - 1])
}

fn verdict(ok: bool) -> &'static str {
    if ok { "**met**" } else { "**MISSED**" }
}

fn main() -> anyhow::Result<()> {
    let mut n = 1_000_000usize;
    let mut out = PathBuf::from("bench-out/scale.md");
    let mut work = PathBuf::from("bench-out");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| anyhow!("{a} needs a value"));
        match a.as_str() {
            "--events" => n = val()?.parse()?,
            "--out" => out = PathBuf::from(val()?),
            "--work" => work = PathBuf::from(val()?),
            other => bail!("unknown argument {other}"),
        }
    }
    std::fs::create_dir_all(&work)?;
    let mut md = String::new();
    let mut targets: Vec<(String, String, bool)> = Vec::new();

    // ------------------------------------------------------------------ fold
    let heap0 = live();
    let t0 = Instant::now();
    let events = synth::events(n, 100);
    let gen_time = t0.elapsed();
    let heap_events = live() - heap0;
    eprintln!(
        "bench_scale: generated {} events in {gen_time:.2?}",
        events.len()
    );

    // Three folds; the memory of the kept (last) one is measured.
    let mut fold_times = Vec::new();
    let mut model = Model::new();
    let mut notices = 0usize;
    let mut model_heap = 0usize;
    let mut model_peak = 0usize;
    for rep in 0..3 {
        drop(std::mem::take(&mut model));
        let before = live();
        reset_peak();
        let t0 = Instant::now();
        let mut m = Model::new();
        let mut k = 0usize;
        for e in &events {
            k += m.apply(e).len();
        }
        fold_times.push(t0.elapsed().as_secs_f64());
        notices = k;
        model = m;
        if rep == 2 {
            model_heap = live().saturating_sub(before);
            model_peak = peak().saturating_sub(before);
        }
    }
    let calls = model.calls.len();
    let calls_folded = model.calls.next_index();
    let (fold_p50, _, fold_max) = percentiles(&mut fold_times.clone());
    let ns_per_event = fold_p50 * 1e9 / events.len() as f64;
    let _ = writeln!(md, "## Model fold at scale\n");
    let _ = writeln!(
        md,
        "{} synthetic events (100 sessions, {} calls, {} streams, {} messages; SSE progress events; \
         1 % orphaned, 0.5 % pending); {notices} notices. Median of 3 folds. The whole harness \
         allocates through mimalloc, as the `mcpscope` binary does.\n",
        events.len(),
        calls,
        model.streams.len(),
        model.messages.len()
    );
    let _ = writeln!(md, "| figure | value |\n|---|---:|");
    let _ = writeln!(
        md,
        "| fold time, 1 M events (median / max of 3) | {:.3} s / {:.3} s |",
        fold_p50, fold_max
    );
    let _ = writeln!(
        md,
        "| per event | {:.0} ns ({:.2} M events/s) |",
        ns_per_event,
        1e3 / ns_per_event
    );
    let ne = events.len() as f64;
    let _ = writeln!(
        md,
        "| model heap after the fold (live bytes, counting allocator) | {:.1} MiB = {:.0} B/event |",
        mib(model_heap),
        model_heap as f64 / ne
    );
    let _ = writeln!(
        md,
        "| peak heap during the fold, above the start | {:.1} MiB = {:.0} B/event |",
        mib(model_peak),
        model_peak as f64 / ne
    );
    let _ = writeln!(
        md,
        "| for scale: the event vector itself | {:.1} MiB = {:.0} B/event |",
        mib(heap_events),
        heap_events as f64 / ne
    );

    // ------------------------------------------------------------------ render
    let now = events.last().map(|e| e.t).unwrap_or_else(Utc::now);
    let (w, h) = (200u16, 50u16);
    let mut fresh = Vec::new();
    for _ in 0..7 {
        let t0 = Instant::now();
        let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
        let buf = render_to_buffer(&mut app, &model, now, w, h);
        fresh.push(t0.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(buf);
    }
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    let mut steady = Vec::new();
    for _ in 0..21 {
        let t0 = Instant::now();
        let buf = render_to_buffer(&mut app, &model, now, w, h);
        steady.push(t0.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(buf);
    }
    let first_steady = steady[0];
    let steady_rest = &mut steady[1..].to_vec();
    // A frame after new traffic, as the live view draws one: the rows are built again (one
    // event folded before each frame, a note, which changes nothing else on screen).
    let mut model = model;
    let mut traffic = Vec::new();
    for n in 0..20 {
        model.apply(&mcpscope_engine::event::Event::at(
            now,
            mcpscope_engine::event::EventKind::Note {
                stream: None,
                text: format!("traffic {n}"),
            },
        ));
        let t0 = Instant::now();
        let buf = render_to_buffer(&mut app, &model, now, w, h);
        traffic.push(t0.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(buf);
    }
    let (f50, _, fmax) = percentiles(&mut fresh);
    let (s50, s99, smax) = percentiles(steady_rest);
    let (t50, t99, tmax) = percentiles(&mut traffic);
    let _ = writeln!(
        md,
        "\n## One TUI frame with {calls} calls ({w}×{h} TestBackend)\n\nThe model folded from the \
         events above: {calls_folded} calls, of which the default retention holds {calls} \
         (recent ones in full, older ones as compact rows).\n"
    );
    let _ = writeln!(
        md,
        "| frame | p50 | max | target ≤ 16 ms |\n|---|---:|---:|---|"
    );
    let _ = writeln!(
        md,
        "| fresh view (new `App` each frame), 7 frames | {f50:.2} ms | {fmax:.2} ms | {} |",
        verdict(f50 <= 16.0)
    );
    let _ = writeln!(
        md,
        "| steady view (one `App`, first frame {first_steady:.2} ms), 20 frames | {s50:.2} ms (p99 {s99:.2}) | {smax:.2} ms | {} |",
        verdict(s50 <= 16.0)
    );
    let _ = writeln!(
        md,
        "| after traffic (one `App`, an event folded before each frame), 20 frames | {t50:.2} ms (p99 {t99:.2}) | {tmax:.2} ms | {} |",
        verdict(t50 <= 16.0)
    );
    targets.push((
        format!("TUI frame with {calls} calls ≤ 16 ms (fresh view p50)"),
        format!("{f50:.2} ms"),
        f50 <= 16.0,
    ));
    targets.push((
        format!("TUI frame with {calls} calls ≤ 16 ms (steady view p50)"),
        format!("{s50:.2} ms"),
        s50 <= 16.0,
    ));
    targets.push((
        format!("TUI frame with {calls} calls ≤ 16 ms (after traffic p50)"),
        format!("{t50:.2} ms"),
        t50 <= 16.0,
    ));
    drop(model);

    // ------------------------------------------------------------------ recording + replay
    let path = work.join("scale-1m.jsonl");
    let t0 = Instant::now();
    {
        let mut rec = Recorder::create(&path, mcpscope_engine::record::Create::Replace, true)?;
        for e in &events {
            rec.write(e)?;
        }
    }
    let write_time = t0.elapsed().as_secs_f64();
    let size = std::fs::metadata(&path)?.len();
    let total = events.len();
    drop(events);
    let mut opens = Vec::new();
    let mut indexed = Vec::new();
    let mut seeks = Vec::new();
    let mut totals = Vec::new();
    let mut back = Vec::new();
    let mut replay_peak = 0usize;
    let mut replay_live = 0usize;
    let retention = Retention::window(Retention::DEFAULT_KEEP_CALLS);
    for _ in 0..3 {
        let base = live();
        reset_peak();
        let t0 = Instant::now();
        // No saved index and no cache: the first opening of a recording the live proxy did not
        // index (an older one, or one cut short), the index pass over the whole file included.
        let mut cursor = FileCursor::open_cached(&path, retention, IndexConfig::default(), None)
            .map_err(|e| anyhow!("opening {}: {e}", path.display()))?;
        let t1 = Instant::now();
        if !cursor.indexer().wait(std::time::Duration::from_secs(300)) {
            bail!("the index pass did not end within 300 s");
        }
        let t2 = Instant::now();
        let end = cursor.known_len();
        cursor.seek(end);
        let t3 = Instant::now();
        if cursor.position() != total as u64 {
            bail!("seek ended at {} of {total}", cursor.position());
        }
        replay_live = live() - base;
        cursor.seek(end / 2);
        let t4 = Instant::now();
        replay_peak = peak() - base;
        opens.push((t1 - t0).as_secs_f64() * 1e3);
        indexed.push((t2 - t1).as_secs_f64());
        seeks.push((t3 - t2).as_secs_f64() * 1e3);
        totals.push((t3 - t0).as_secs_f64());
        back.push((t4 - t3).as_secs_f64() * 1e3);
    }
    let _ = std::fs::remove_file(&path);
    let med = |v: &mut Vec<f64>| percentiles(v).0;
    let (o, i, s, t, b) = (
        med(&mut opens),
        med(&mut indexed),
        med(&mut seeks),
        med(&mut totals),
        med(&mut back),
    );
    let _ = writeln!(
        md,
        "\n## Open a {total}-event recording and seek to its end\n"
    );
    let _ = writeln!(
        md,
        "Written with `Recorder` ({:.0} MiB, {write_time:.1} s, one flushed line per event), with no \
         index saved beside it or in a cache (a recording the live proxy did not index: an \
         older one, or one cut short), then opened as `mcpscope replay` opens it: \
         `FileCursor::open_cached` (the first event read, the index pass started in the \
         background), the wait for that pass (a parse and fold of the whole file), `seek(len)`; \
         median of 3. The viewer's own timings, with the index the live proxy saves, are in \
         *Opening a long recording in the viewer* below.\n",
        size as f64 / 1048576.0
    );
    let _ = writeln!(md, "| step | median |\n|---|---:|");
    let _ = writeln!(
        md,
        "| `FileCursor::open_cached` (first event read) | {o:.1} ms |"
    );
    let _ = writeln!(
        md,
        "| index pass over the whole file (parse, fold, checkpoints) | {i:.2} s |"
    );
    let _ = writeln!(md, "| `seek(len)` (from the last checkpoint) | {s:.1} ms |");
    let _ = writeln!(
        md,
        "| **open + seek to end** | **{t:.2} s** (target ≤ 3 s: {}) |",
        verdict(t <= 3.0)
    );
    let _ = writeln!(
        md,
        "| then `seek(len / 2)` (from a checkpoint) | {b:.1} ms |"
    );
    let _ = writeln!(
        md,
        "| heap held by the open cursor at the end (model, index, checkpoints) | {:.0} MiB |",
        mib(replay_live)
    );
    let _ = writeln!(
        md,
        "| peak heap while opening and seeking | {:.0} MiB |",
        mib(replay_peak)
    );
    let _ = writeln!(
        md,
        "\nPeak RSS of this whole harness (VmHWM): {:.0} MiB.",
        vm("VmHWM:") as f64 / 1024.0
    );
    targets.push((
        format!("open {total}-event recording + seek to end ≤ 3 s"),
        format!("{t:.2} s"),
        t <= 3.0,
    ));

    let mut head =
        String::from("## Targets (scale)\n\n| target | measured | verdict |\n|---|---:|---|\n");
    for (what, value, ok) in &targets {
        let _ = writeln!(head, "| {what} | {value} | {} |", verdict(*ok));
    }
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&out, format!("{head}\n{md}"))?;
    eprintln!("bench_scale: wrote {}", out.display());
    Ok(())
}
