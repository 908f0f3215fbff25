//! Text helpers shared by the panels: times, durations, verdict styles.

use chrono::{DateTime, FixedOffset, Utc};
use ratatui::style::Style;

use crate::theme::Theme;
use mcpscope_engine::model::{Call, Fate, Model, Verdict};

/// `14:02:11.512` in the view's time zone (chrono's `%H:%M:%S%.3f`, written directly: a
/// frame writes hundreds of them, and a format string is parsed anew on each use).
pub(crate) fn clock(t: DateTime<Utc>, tz: FixedOffset) -> String {
    use chrono::Timelike as _;
    let local = t.with_timezone(&tz);
    // A leap second is second 59 with a nanosecond count past one second: shown as 60.
    let nanos = local.nanosecond();
    let (second, nanos) = if nanos >= 1_000_000_000 {
        (local.second() + 1, nanos - 1_000_000_000)
    } else {
        (local.second(), nanos)
    };
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        local.hour(),
        local.minute(),
        second,
        nanos / 1_000_000
    )
}

/// `850ms`, `12.3s`, `4m05s`, `1h02m`.
pub(crate) fn duration_ms(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

/// The style of a call's verdict.
pub(crate) fn verdict_style(theme: &Theme, verdict: &Verdict) -> Style {
    match verdict {
        Verdict::Pending => theme.pending(),
        Verdict::Answered => theme.answered(),
        Verdict::Error { .. } => theme.error(),
        Verdict::Orphaned { .. } => theme.orphaned(),
        Verdict::Resumable { .. } => theme.resumable(),
        Verdict::Cancelled { .. } => theme.cancelled(),
    }
}

/// The state of a call's owning stream for a narrow table: a death's cause and age first
/// (`reset 3.5s ago`), its leg and clock time only when `room` allows; otherwise as
/// [`stream_state`].
pub(crate) fn stream_state_narrow(
    model: &Model,
    call: &Call,
    tz: FixedOffset,
    now: DateTime<Utc>,
    room: usize,
) -> (String, bool) {
    let Some(death) = call.verdict.death() else {
        return stream_state(model, call, tz);
    };
    let how = death.how.map(|h| h.as_str()).unwrap_or("no body");
    let age = duration_ms((now - death.at).num_milliseconds());
    let mut text = format!("{how} {age} ago");
    if let Some(leg) = death.leg {
        let with_leg = format!("{text} ({})", leg.as_str());
        if with_leg.chars().count() <= room {
            text = with_leg;
        }
    }
    let with_clock = format!("{text} · {}", clock(death.at, tz));
    if with_clock.chars().count() <= room {
        text = with_clock;
    }
    (text, true)
}

/// The state of a call's owning stream: `open`, `died 14:02:11.512 reset (upstream)`,
/// `closed 14:02:11.512 eof (upstream)`, `unreachable`.
pub(crate) fn stream_state(model: &Model, call: &Call, tz: FixedOffset) -> (String, bool) {
    if let Some(death) = call.verdict.death() {
        let how = death.how.map(|h| h.as_str()).unwrap_or("no body");
        let leg = death
            .leg
            .map(|l| format!(" ({})", l.as_str()))
            .unwrap_or_default();
        return (format!("died {} {how}{leg}", clock(death.at, tz)), true);
    }
    let Some(stream) = model.stream(call.owner) else {
        return ("?".to_string(), false);
    };
    let fate = model.fate(stream);
    match fate {
        Fate::Open | Fate::Unreachable(_) => (fate.word().to_string(), fate.is_death()),
        Fate::Closed(end) | Fate::Died(end) => (
            format!(
                "{} {} {} ({})",
                fate.word(),
                clock(end.at, tz),
                end.how.as_str(),
                end.leg.as_str()
            ),
            fate.is_death() && call.verdict.is_open(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_reads_as_chronos_own_format() {
        let zones = [0, 3600, -5 * 3600 - 1800, 14 * 3600];
        let times = [
            "2026-12-06T06:39:52.123456789Z",
            "2026-12-06T23:59:59.999999999Z",
            "2026-12-06T00:00:00Z",
            "1999-01-01T12:34:56.001Z",
        ];
        for secs in zones {
            let tz = FixedOffset::east_opt(secs).expect("zone");
            for text in times {
                let t = text.parse::<DateTime<Utc>>().expect("time");
                let chrono = t.with_timezone(&tz).format("%H:%M:%S%.3f").to_string();
                assert_eq!(clock(t, tz), chrono, "{text} at {secs}");
            }
            let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
                .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_250_000_000))
                .expect("leap second")
                .and_utc();
            let chrono = leap.with_timezone(&tz).format("%H:%M:%S%.3f").to_string();
            assert_eq!(clock(leap, tz), chrono, "leap second at {secs}");
        }
    }
}
