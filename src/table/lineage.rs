//! Row lineage (Iceberg v3): the row-id ranges a table has handed out must not overlap and must stay
//! below the table's `next-row-id`.
//!
//! Each v3 commit takes the range `[first-row-id, first-row-id + added-rows)` of the snapshot it writes,
//! and each data file the range `[first_row_id, first_row_id + record_count)`: written in the manifest
//! entry, or inherited from the manifest's `first_row_id` (manifest list) plus the record counts of the
//! entries before it that inherit too (see: the table spec, "Row Lineage", "First Row ID Inheritance").
//! Two owners of one row id, or an id at or above `next-row-id`, mean that a reader's `_row_id` names two
//! rows, or that the next commit will reuse ids: a finding.
//!
//! Pure: the caller hands over the ranges read from the metadata copies. This module does not read data
//! files (their `_row_id` columns) and does not check `_last_updated_sequence_number`.

use crate::model::findings::{Finding, FindingKind};

/// A range of row ids and who holds it (a snapshot or a data file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRange {
    /// `snapshot N` or a data file path as written.
    pub owner: String,
    /// The first row id.
    pub first: u64,
    /// How many ids.
    pub count: u64,
}

/// The ranges of a manifest's data files, in file order: explicit `first_row_id`s, and the inherited ones
/// from `manifest_first_row_id` (`None`: not assigned, no range). `entries` are (path, is data,
/// `first_row_id`, `record_count`, live); only live data files are returned, but every data entry that
/// inherits advances the counter.
pub fn data_file_ranges<'a>(
    manifest_first_row_id: Option<u64>,
    entries: impl IntoIterator<Item = (&'a str, bool, Option<i64>, u64, bool)>,
    findings: &mut Vec<Finding>,
) -> Vec<RowRange> {
    let mut next = manifest_first_row_id;
    let mut out = Vec::new();
    for (path, is_data, first_row_id, record_count, live) in entries {
        if !is_data {
            continue;
        }
        let first = match first_row_id {
            // An explicit id below zero is no row id: a finding, and the file holds no range (it does not inherit
            // one either, which would shift the ids of the files after it).
            Some(f) if f < 0 => {
                findings.push(Finding::new(
                    FindingKind::RowLineageInvalid,
                    path,
                    Some("a first_row_id of zero or more".to_owned()),
                    Some(f.to_string()),
                ));
                None
            }
            Some(f) => u64::try_from(f).ok(),
            None => {
                let f = next;
                next = next.map(|n| n.saturating_add(record_count));
                f
            }
        };
        if let (Some(first), true) = (first, live) {
            out.push(RowRange {
                owner: path.to_owned(),
                first,
                count: record_count,
            });
        }
    }
    out
}

/// Findings for ranges that overlap one another or reach `next_row_id`; `at` names where they were read
/// (the metadata file) for the snapshot ranges.
#[must_use]
pub fn check_ranges(mut ranges: Vec<RowRange>, next_row_id: u64, at: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    ranges.retain(|r| r.count > 0);
    ranges.sort_by(|a, b| (a.first, &a.owner).cmp(&(b.first, &b.owner)));
    let path = |r: &RowRange| {
        if r.owner.starts_with("snapshot ") {
            at.to_owned()
        } else {
            r.owner.clone()
        }
    };
    for r in &ranges {
        let end = r.first.saturating_add(r.count);
        if end > next_row_id {
            out.push(Finding::new(
                FindingKind::RowLineageInvalid,
                path(r),
                Some(format!("row ids of {} below next-row-id {next_row_id}", r.owner)),
                Some(format!("[{}, {end})", r.first)),
            ));
        }
    }
    // Against the range reaching furthest so far, not only the one before: [0, 100) overlaps both [10, 20) and
    // [50, 60), and each is a finding.
    let mut furthest: Option<&RowRange> = None;
    for b in &ranges {
        if let Some(a) = furthest {
            let a_end = a.first.saturating_add(a.count);
            if b.first < a_end {
                out.push(Finding::new(
                    FindingKind::RowLineageInvalid,
                    path(b),
                    Some(format!(
                        "row ids of {} disjoint from those of {} [{}, {a_end})",
                        b.owner, a.owner, a.first
                    )),
                    Some(format!("[{}, {})", b.first, b.first.saturating_add(b.count))),
                ));
            }
        }
        if furthest.is_none_or(|a| b.first.saturating_add(b.count) > a.first.saturating_add(a.count)) {
            furthest = Some(b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(owner: &str, first: u64, count: u64) -> RowRange {
        RowRange {
            owner: owner.into(),
            first,
            count,
        }
    }

    #[test]
    fn inherited_ids_follow_the_entries_before_them() {
        let got = data_file_ranges(
            Some(100),
            [
                ("a", true, None, 5, true),
                ("d", false, None, 9, true),
                ("b", true, Some(7), 3, true),
                ("c", true, None, 2, false),
                ("e", true, None, 4, true),
            ],
            &mut Vec::new(),
        );
        assert_eq!(got, vec![r("a", 100, 5), r("b", 7, 3), r("e", 107, 4)]);
        assert!(data_file_ranges(None, [("a", true, None, 5, true)], &mut Vec::new()).is_empty());
    }

    #[test]
    fn a_negative_first_row_id_is_a_finding_and_shifts_no_inherited_range() {
        let mut findings = Vec::new();
        let got = data_file_ranges(
            Some(100),
            [("a", true, Some(-5), 5, true), ("b", true, None, 3, true)],
            &mut findings,
        );
        assert_eq!(got, vec![r("b", 100, 3)]);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].kind, FindingKind::RowLineageInvalid);
        assert_eq!(findings[0].path, "a");
        assert_eq!(findings[0].actual.as_deref(), Some("-5"));
    }

    #[test]
    fn overlaps_and_ids_past_next_row_id_are_findings() {
        assert!(check_ranges(vec![r("snapshot 1", 0, 10), r("snapshot 2", 10, 5)], 15, "m").is_empty());
        let f = check_ranges(vec![r("snapshot 1", 0, 10), r("snapshot 2", 9, 5)], 15, "m.json");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].path, "m.json");
        assert_eq!(f[0].kind, FindingKind::RowLineageInvalid);
        let f = check_ranges(vec![r("data/a.parquet", 10, 6)], 15, "m.json");
        assert_eq!(f[0].path, "data/a.parquet");
        assert_eq!(f[0].actual.as_deref(), Some("[10, 16)"));
        // Each range overlapping an earlier one that reaches further is a finding, not only the one after it.
        let f = check_ranges(
            vec![r("data/a", 0, 100), r("data/b", 10, 10), r("data/c", 50, 10)],
            100,
            "m.json",
        );
        let owners: Vec<&str> = f.iter().map(|x| x.path.as_str()).collect();
        assert_eq!(owners, ["data/b", "data/c"], "{f:?}");
        // Empty ranges hold no ids.
        assert!(check_ranges(vec![r("snapshot 1", 3, 0), r("snapshot 2", 3, 2)], 5, "m").is_empty());
    }
}
