//! The drill sampler, specified so that an auditor recomputes a report's selection from what the report records
//! (pure).
//!
//! [`SAMPLER`] names it. The stream is the ChaCha20 keystream (RFC 8439 block function, 96-bit zero nonce, block
//! counter from 0) under the key `SHA-256("lakedrill-sample/v1" ‖ seed as 8 big-endian bytes)`, read as
//! little-endian 64-bit words `w0, w1, …`. [`draw`] takes `k` of `n` ids without replacement by a partial
//! Fisher–Yates shuffle of the ids in the order given: for `i` in `0..k`, `j = i + w_i mod (n − i)`, swap
//! positions `i` and `j`; the first `k` are the draw, in that order. [`select`] puts the coverage rule first: the
//! ids not drilled within `coverage_weeks` (least recently drilled first, never-drilled ones before all, ties by
//! id), at most `k`, then fills up with a draw over the remaining population (sorted), then appends the ids that
//! must be drilled whatever the sample. [`check`] recomputes a recorded selection.

use std::collections::BTreeMap;

use rand_chacha::rand_core::{RngCore, SeedableRng};
use sha2::Digest as _;

/// The sampler's name and version, recorded in every report it selected.
pub const SAMPLER: &str = "lakedrill-chacha20-fisher-yates/v1";

/// The ChaCha20 key of a seed.
#[must_use]
pub fn key(seed: u64) -> [u8; 32] {
    let mut h = sha2::Sha256::new();
    h.update(b"lakedrill-sample/v1");
    h.update(seed.to_be_bytes());
    h.finalize().into()
}

/// `k` of `ids` (at most all), drawn without replacement in the order the stream gives.
#[must_use]
pub fn draw(seed: u64, ids: &[String], k: usize) -> Vec<String> {
    let mut rng = rand_chacha::ChaCha20Rng::from_seed(key(seed));
    let mut v: Vec<&String> = ids.iter().collect();
    let n = v.len();
    let k = k.min(n);
    for i in 0..k {
        let left = (n - i) as u64;
        let j = i + usize::try_from(rng.next_u64() % left).unwrap_or(0);
        v.swap(i, j);
    }
    v.into_iter().take(k).cloned().collect()
}

/// The coverage rule of a drill plan: every bundle not drilled within `weeks` comes first.
#[derive(Debug, Clone)]
pub struct Coverage<'a> {
    /// `coverage_weeks`.
    pub weeks: u32,
    /// When each bundle id was last drilled (epoch ms), from the plan's earlier reports.
    pub last_drilled: &'a BTreeMap<String, i64>,
    /// Now (epoch ms).
    pub now_ms: i64,
}

/// A selection and where each part came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Coverage picks, then the draw, then the forced ids.
    pub selected: Vec<String>,
    /// The coverage picks.
    pub coverage: Vec<String>,
    /// The ids drilled whatever the sample (not otherwise selected).
    pub forced: Vec<String>,
}

/// Selects `k` of the sorted `population` with `seed`, the coverage rule first (see the module), then `forced`.
#[must_use]
pub fn select(
    seed: u64,
    population: &[String],
    k: usize,
    coverage: Option<&Coverage<'_>>,
    forced: &[String],
) -> Selection {
    let cov: Vec<String> = coverage.map_or_else(Vec::new, |c| coverage_picks(population, k, c));
    let rest: Vec<String> = population.iter().filter(|id| !cov.contains(id)).cloned().collect();
    let mut selected = cov.clone();
    selected.extend(draw(seed, &rest, k - cov.len()));
    let forced: Vec<String> = forced.iter().filter(|f| !selected.contains(f)).cloned().collect();
    selected.extend(forced.iter().cloned());
    Selection {
        selected,
        coverage: cov,
        forced,
    }
}

/// The coverage picks [`select`] makes for `k` draws: the ids of `population` not drilled within `c.weeks`
/// (never drilled first, then least recently), at most `k` of them. `audit verify --chain` recomputes a report's
/// picks with it from the drills the chain recorded before the report started.
#[must_use]
pub fn coverage_picks(population: &[String], k: usize, c: &Coverage<'_>) -> Vec<String> {
    let window = i64::from(c.weeks).saturating_mul(7 * 86_400_000);
    let mut due: Vec<(Option<i64>, &String)> = population
        .iter()
        .map(|id| (c.last_drilled.get(id).copied(), id))
        .filter(|(last, _)| last.is_none_or(|t| c.now_ms.saturating_sub(t) > window))
        .collect();
    due.sort();
    due.into_iter().take(k).map(|(_, id)| id.clone()).collect()
}

/// Recomputes a recorded selection: the coverage picks and forced ids must lie in the population, and what is
/// between them must be the draw over the rest of the population with the recorded seed. `Err` says what
/// differs.
///
/// # Errors
/// The first difference, as a sentence.
pub fn check(
    seed: u64,
    population: &[String],
    selected: &[String],
    coverage: (Option<u32>, &[String]),
    forced: &[String],
) -> Result<(), String> {
    let (coverage_weeks, coverage) = coverage;
    // One bundle drilled twice is not two bundles sampled: every id is selected once.
    let mut seen = std::collections::BTreeSet::new();
    if let Some(twice) = selected.iter().find(|id| !seen.insert(id.as_str())) {
        return Err(format!("the selection names {twice} more than once"));
    }
    // Coverage picks come only from a plan with a coverage rule.
    if coverage_weeks.is_none() && !coverage.is_empty() {
        return Err(format!(
            "the report has {} coverage picks but no coverage rule (coverage_weeks)",
            coverage.len()
        ));
    }
    let outside: Vec<&String> = coverage
        .iter()
        .chain(forced)
        .filter(|id| !population.contains(id))
        .collect();
    if !outside.is_empty() {
        return Err(format!("coverage or forced ids outside the population: {outside:?}"));
    }
    if selected.len() < coverage.len() + forced.len()
        || selected[..coverage.len()] != *coverage
        || selected[selected.len() - forced.len()..] != *forced
    {
        return Err("the selection does not start with its coverage picks and end with its forced ids".into());
    }
    let drawn = &selected[coverage.len()..selected.len() - forced.len()];
    let rest: Vec<String> = population.iter().filter(|id| !coverage.contains(id)).cloned().collect();
    let again = draw(seed, &rest, drawn.len());
    if again != drawn {
        return Err(format!(
            "the draw recomputed from seed {seed} over {} ids is {again:?}, the report selected {drawn:?}",
            rest.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("b{i:03}")).collect()
    }

    /// The stream is the standard ChaCha20 keystream: RFC 8439 (A.1, test vector 1: zero key, zero nonce, block
    /// counter 0) gives these first 16 bytes, which any ChaCha20 implementation reproduces.
    #[test]
    fn the_stream_is_the_rfc_8439_chacha20_keystream() {
        let mut rng = rand_chacha::ChaCha20Rng::from_seed([0; 32]);
        let w0 = rng.next_u64().to_le_bytes();
        let w1 = rng.next_u64().to_le_bytes();
        assert_eq!(hex::encode([w0, w1].concat()), "76b8e0ada0f13d90405d6ae55386bd28");
    }

    #[test]
    fn draws_are_seeded_without_replacement_and_recomputable() {
        let pop = ids(100);
        let a = draw(42, &pop, 30);
        assert_eq!(a, draw(42, &pop, 30));
        assert_ne!(a, draw(43, &pop, 30));
        let mut d = a.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), 30);
        assert_eq!(draw(1, &ids(5), 30).len(), 5);
        let s = select(42, &pop, 30, None, &["b007".to_owned()]);
        assert_eq!(check(42, &pop, &s.selected, (None, &s.coverage), &s.forced), Ok(()));
        assert!(check(43, &pop, &s.selected, (None, &s.coverage), &s.forced).is_err());
        let mut fewer = pop.clone();
        fewer.retain(|b| b != &s.selected[3]);
        assert!(check(42, &fewer, &s.selected, (None, &s.coverage), &s.forced).is_err());
    }

    /// One bundle drilled thirty times is not thirty bundles sampled, and coverage picks need a coverage rule:
    /// a report labelling a hand-picked selection `coverage` without one, or repeating an id, does not recompute.
    #[test]
    fn a_selection_repeating_an_id_or_claiming_coverage_without_a_rule_does_not_recompute() {
        let pop = ids(30);
        let thirty = vec!["b007".to_owned(); 30];
        let why = check(1, &pop, &thirty, (None, &thirty), &[]).unwrap_err();
        assert!(why.contains("b007 more than once"), "{why}");
        let why = check(1, &pop, &thirty, (Some(2), &thirty), &[]).unwrap_err();
        assert!(why.contains("more than once"), "{why}");
        let picked: Vec<String> = pop[..10].to_vec();
        let why = check(1, &pop, &picked, (None, &picked), &[]).unwrap_err();
        assert!(why.contains("no coverage rule"), "{why}");
        // The draw itself never repeats: an honest selection still recomputes.
        let s = select(1, &pop, 10, None, &[]);
        assert_eq!(check(1, &pop, &s.selected, (None, &s.coverage), &s.forced), Ok(()));
    }

    /// `coverage_weeks = 2` over 90 bundles with `sample = 30`, one drill a week (the clock advanced a week per
    /// run): every bundle is drilled within three runs, and each report's selection recomputes.
    #[test]
    fn coverage_weeks_drills_every_bundle_within_three_weekly_runs() {
        let pop = ids(90);
        let week = 7 * 86_400_000;
        let mut last: BTreeMap<String, i64> = BTreeMap::new();
        let mut drilled = std::collections::BTreeSet::new();
        for run in 0..3 {
            let now = 1_000 * week + run * week;
            let c = Coverage {
                weeks: 2,
                last_drilled: &last,
                now_ms: now,
            };
            let s = select(u64::try_from(run).unwrap(), &pop, 30, Some(&c), &[]);
            assert_eq!(s.selected.len(), 30);
            assert_eq!(
                check(
                    u64::try_from(run).unwrap(),
                    &pop,
                    &s.selected,
                    (Some(2), &s.coverage),
                    &s.forced
                ),
                Ok(())
            );
            for id in &s.selected {
                last.insert(id.clone(), now);
                drilled.insert(id.clone());
            }
        }
        assert_eq!(drilled.len(), 90, "every bundle within three runs");
        // The fourth week: the first run's bundles are three weeks old, so the rule takes them first.
        let now = 1_003 * week;
        let c = Coverage {
            weeks: 2,
            last_drilled: &last,
            now_ms: now,
        };
        let s = select(9, &pop, 30, Some(&c), &[]);
        assert_eq!(s.coverage.len(), 30);
        assert!(s.coverage.iter().all(|id| now - last[id] > 2 * week));
    }
}
