//! Which snapshot a user means: by id, by ref, or as of an instant.
//!
//! The rules are Iceberg's:
//! * `--snapshot-id N` must name a snapshot still in the metadata;
//! * `--ref NAME` is exact and case-sensitive. Refs whose names differ only by case
//!   (`Audit-Q2`, `audit-q2`) are ambiguous: lakedrill refuses to pick one;
//! * `--as-of T` is the last snapshot that *became current* at or before `T` according to the
//!   snapshot log (Java's `SnapshotUtil.snapshotIdAsOfTime`, PyIceberg's
//!   `snapshot_as_of_timestamp`), never the nearest one and never one from after `T`. `T` is RFC
//!   3339 with an explicit offset, or epoch milliseconds; a zone-less time is refused because it
//!   would be read in some unknown zone.
//!
//! Pure: no I/O.

use crate::error::{Error, Result};
use crate::table::Table;

/// How a snapshot is selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// The table's current snapshot.
    Current,
    /// A snapshot id.
    SnapshotId(i64),
    /// A branch or tag name.
    Ref(String),
    /// An instant, as typed by the user.
    AsOf(String),
}

/// Parses an instant given with `flag` (`--as-of`, `--at`): epoch milliseconds, or RFC 3339 with an explicit
/// offset.
///
/// # Errors
/// [`Error::AsOf`] naming the flag and saying what is wrong (no zone, not a time).
pub fn parse_instant_ms(flag: &'static str, input: &str) -> Result<i64> {
    let s = input.trim();
    if !s.is_empty() && s.trim_start_matches('-').chars().all(|c| c.is_ascii_digit()) {
        return s.parse::<i64>().map_err(|e| Error::AsOf {
            flag,
            input: input.to_owned(),
            reason: format!("not a valid epoch-millisecond number: {e}"),
        });
    }
    match chrono::DateTime::parse_from_rfc3339(s) {
        Ok(t) => Ok(t.timestamp_millis()),
        Err(e) => {
            let zoneless = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").is_ok()
                || chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").is_ok()
                || chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok();
            let reason = if zoneless {
                "the timestamp has no zone offset; write it with one (for example 2026-05-01T12:00:00Z or +02:00) or as epoch milliseconds".to_owned()
            } else {
                format!("not an RFC 3339 timestamp with offset or epoch milliseconds ({e})")
            };
            Err(Error::AsOf {
                flag,
                input: input.to_owned(),
                reason,
            })
        }
    }
}

/// Names of refs that differ from `name` only by case.
#[must_use]
pub fn case_collisions(table: &Table, name: &str) -> Vec<String> {
    let folded = name.to_lowercase();
    table
        .refs()
        .keys()
        .filter(|k| k.as_str() != name && k.to_lowercase() == folded)
        .cloned()
        .collect()
}

/// Groups of ref names that collide under case folding.
#[must_use]
pub fn ambiguous_ref_groups(table: &Table) -> Vec<Vec<String>> {
    let mut groups: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
    for k in table.refs().keys() {
        groups.entry(k.to_lowercase()).or_default().push(k.clone());
    }
    groups.into_values().filter(|g| g.len() > 1).collect()
}

/// The snapshot id the selector names.
///
/// # Errors
/// [`Error::SnapshotNotFound`], [`Error::RefNotFound`], [`Error::AmbiguousRef`] or
/// [`Error::AsOf`], each saying why.
pub fn resolve(table: &Table, selector: &Selector) -> Result<i64> {
    match selector {
        Selector::Current => table
            .metadata()
            .current_snapshot_id()
            .ok_or_else(|| Error::invalid(table.name(), "the table has no current snapshot")),
        Selector::SnapshotId(id) => Ok(table.snapshot(*id)?.snapshot_id()),
        Selector::Ref(name) => {
            let others = case_collisions(table, name);
            match table.refs().get(name) {
                Some(_) if !others.is_empty() => Err(Error::AmbiguousRef {
                    name: name.clone(),
                    others,
                }),
                Some(r) => Ok(table.snapshot(r.snapshot_id)?.snapshot_id()),
                None => Err(Error::RefNotFound {
                    name: name.clone(),
                    table: table.name().to_owned(),
                    hint: if others.is_empty() {
                        String::new()
                    } else {
                        format!(" (refs are case-sensitive; {others:?} differ only by case)")
                    },
                }),
            }
        }
        Selector::AsOf(input) => {
            let t = parse_instant_ms("--as-of", input)?;
            let log = table.metadata().history();
            if log.is_empty() {
                return Err(Error::AsOf {
                    flag: "--as-of",
                    input: input.clone(),
                    reason: "the table has no snapshot log (no snapshots)".into(),
                });
            }
            let Some(entry) = log.iter().rev().find(|e| e.timestamp_ms <= t) else {
                return Err(Error::AsOf {
                    flag: "--as-of",
                    input: input.clone(),
                    reason: format!(
                        "the instant ({t} ms) is before the first snapshot in the log ({} at {} ms)",
                        log[0].snapshot_id, log[0].timestamp_ms
                    ),
                });
            };
            if table.metadata().snapshot_by_id(entry.snapshot_id).is_none() {
                return Err(Error::AsOf {
                    flag: "--as-of",
                    input: input.clone(),
                    reason: format!(
                        "snapshot {} was current at that instant but has been expired from the metadata",
                        entry.snapshot_id
                    ),
                });
            }
            Ok(entry.snapshot_id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants() {
        assert_eq!(parse_instant_ms("--as-of", "1700000000000").unwrap(), 1_700_000_000_000);
        assert_eq!(parse_instant_ms("--as-of", "1970-01-01T00:00:01Z").unwrap(), 1000);
        assert_eq!(parse_instant_ms("--as-of", "1970-01-01T02:00:01+02:00").unwrap(), 1000);
        let e = parse_instant_ms("--as-of", "2026-05-01T12:00:00")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no zone offset"), "{e}");
        let e = parse_instant_ms("--as-of", "2026-05-01").unwrap_err().to_string();
        assert!(e.contains("no zone offset"), "{e}");
        assert!(parse_instant_ms("--as-of", "yesterday").is_err());
        let e = parse_instant_ms("--at", "2026-12-06").unwrap_err().to_string();
        assert!(
            e.starts_with("--at 2026-12-06: the timestamp has no zone offset"),
            "{e}"
        );
    }
}
