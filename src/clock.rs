//! Time, injectable: RTO/RPO and report times come from a [`Clock`], so tests need no sleeps.

use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock for tests: it stands still until [`TestClock::tick`], and can tick by itself on each read.
#[derive(Debug, Default)]
pub struct TestClock {
    ms: AtomicI64,
    step_ms: AtomicI64,
}

impl TestClock {
    /// A clock at `start_ms` (epoch ms) that advances `step_ms` on every read.
    #[must_use]
    pub fn new(start_ms: i64, step_ms: i64) -> Self {
        Self {
            ms: AtomicI64::new(start_ms),
            step_ms: AtomicI64::new(step_ms),
        }
    }

    /// Advances the clock.
    pub fn tick(&self, ms: i64) {
        self.ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        let step = self.step_ms.load(Ordering::SeqCst);
        let ms = self.ms.fetch_add(step, Ordering::SeqCst);
        DateTime::from_timestamp_millis(ms).unwrap_or_default()
    }
}

/// A commit time for a message: RFC 3339 (milliseconds, UTC) and the epoch milliseconds it was written as.
#[must_use]
pub fn commit_time(ms: i64) -> String {
    match DateTime::from_timestamp_millis(ms) {
        Some(t) => format!("{}, {ms} ms", t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        None => format!("{ms} ms"),
    }
}

/// The longest duration [`parse_duration`] reads: 100 years (36,500 days). Every duration is added to or taken
/// from a time (`now - since`, `now + retention`, a quarantine's end `+ by`), and a time has a range: a duration
/// of 1e11 days would overflow it (a panic in chrono's operators). A century is beyond any retention, window or
/// age lakedrill is given, and keeps `now ± d` far inside that range.
pub const MAX_DURATION_DAYS: i64 = 36_500;

/// Parses a duration: one whole number and one unit, `d`, `h`, `m` or `s` (`30d`, `12h`, `90m`, `30s`), at
/// most [`MAX_DURATION_DAYS`]. The one duration syntax of lakedrill: policy fields, drill plans and command-line
/// options all use it.
///
/// # Errors
/// Why it is not one (the caller names the field): no unit, not a whole number, an unknown unit, too large.
pub fn parse_duration(s: &str) -> Result<chrono::Duration, String> {
    let bad =
        |why: &str| format!("{why}; write one integer followed by d, h, m or s (e.g. 30d, 12h, 90m, 30s), got {s:?}");
    let Some(unit) = s.chars().last() else {
        return Err(bad("is empty"));
    };
    let digits = &s[..s.len() - unit.len_utf8()];
    if unit.is_ascii_digit() {
        return Err(bad("has no unit"));
    }
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("is not a whole number of units"));
    }
    let too_large = || bad(&format!("is too large: at most {MAX_DURATION_DAYS}d (100 years)"));
    let n: i64 = digits.parse().map_err(|_| too_large())?;
    let duration = match unit {
        'd' => chrono::Duration::try_days(n),
        'h' => chrono::Duration::try_hours(n),
        'm' => chrono::Duration::try_minutes(n),
        's' => chrono::Duration::try_seconds(n),
        _ => return Err(bad(&format!("has an unknown unit {unit:?}"))),
    };
    match duration {
        Some(d) if d <= chrono::Duration::days(MAX_DURATION_DAYS) => Ok(d),
        _ => Err(too_large()),
    }
}

/// Writes a duration in the syntax [`parse_duration`] reads, in the largest unit that holds it whole (`30d`,
/// `36h`, `90m`, `1s`); below a second, `0s`.
#[must_use]
pub fn format_duration(d: chrono::Duration) -> String {
    let s = d.num_seconds();
    match s {
        s if s != 0 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s != 0 && s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s != 0 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30d").unwrap(), chrono::Duration::days(30));
        assert_eq!(parse_duration("90m").unwrap(), chrono::Duration::minutes(90));
        assert!(parse_duration("30").is_err());
        assert!(parse_duration("d").is_err());
        assert!(parse_duration("3w").is_err());
    }

    #[test]
    fn durations_past_a_century_are_too_large_in_every_unit() {
        assert_eq!(parse_duration("36500d").unwrap(), chrono::Duration::days(36_500));
        assert_eq!(parse_duration("876000h").unwrap(), chrono::Duration::days(36_500));
        for s in [
            "36501d",
            "876001h",
            "100000000000d",
            "9999999999999h",
            "9223372036854775807s",
        ] {
            let e = parse_duration(s).unwrap_err();
            assert!(e.contains("is too large: at most 36500d"), "{s}: {e}");
        }
    }

    #[test]
    fn formatted_durations_read_back() {
        for text in ["30d", "36h", "90m", "1s", "0s", "7d", "25h", "61m", "3601s"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
        assert_eq!(format_duration(parse_duration("48h").unwrap()), "2d");
        assert_eq!(format_duration(chrono::Duration::milliseconds(400)), "0s");
    }

    #[test]
    fn test_clock_steps() {
        let c = TestClock::new(1000, 250);
        assert_eq!(c.now().timestamp_millis(), 1000);
        assert_eq!(c.now().timestamp_millis(), 1250);
        c.tick(1000);
        assert_eq!(c.now().timestamp_millis(), 2500);
    }
}
