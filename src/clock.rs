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

/// Parses a duration such as `30d`, `12h`, `90m`, `30s` (one number, one unit).
///
/// # Errors
/// A message naming the rule, for the caller to attach to the field.
pub fn parse_duration(s: &str) -> Result<chrono::Duration, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 30d, 12h, 90m or 30s"))?;
    let secs = match unit {
        "d" => 86_400,
        "h" => 3_600,
        "m" => 60,
        "s" => 1,
        _ => return Err(format!("{s:?} has no unit d, h, m or s")),
    };
    n.checked_mul(secs)
        .and_then(chrono::Duration::try_seconds)
        .ok_or_else(|| format!("{s:?} is too long"))
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
    fn test_clock_steps() {
        let c = TestClock::new(1000, 250);
        assert_eq!(c.now().timestamp_millis(), 1000);
        assert_eq!(c.now().timestamp_millis(), 1250);
        c.tick(1000);
        assert_eq!(c.now().timestamp_millis(), 2500);
    }
}
