//! `lakedrill drill faults`: the fault matrix of DESIGN §6 as a signed drill.
//!
//! Each of the fourteen scenarios builds its own scratch lakehouse (the demo's `sales.orders`: appends, an
//! overwrite, a delete, a tag, a branch; a SQL catalog on SQLite and a registry beside it), puts the
//! fault layer ([`crate::io::fault_store::FaultStore`]) in front of its storage, drives the real pipeline —
//! plan, quarantine, drill, purge, reconcile, undelete — through the library while injecting its fault,
//! and compares what happened with what is written down as the expected outcome. Every scenario also
//! counts **objects lost**: objects reachable from a snapshot that was non-deletable when the scenario
//! started or that the scenario protects (a lease, a hold, a ref, a writer's files), plus any object that
//! vanished without being part of an accepted inventory. That count must be 0, and it speaks about data:
//! the scratch lakehouse's expiring snapshots reach Parquet data files, every scenario expects its
//! candidate to hold at least one, and every scenario whose purge completes expects at least one data
//! file deleted (the report's per-scenario `content_files`). The tables have no delete files (all
//! rewrites are copy-on-write); delete files are counted the same way where a table has them.
//!
//! The matrix passes only if every scenario shows its expected outcome and loses nothing. The report is
//! an in-toto statement (predicate type [`PREDICATE_TYPE`]) whose subject is the running binary
//! (its SHA-256, the implementation digest), signed like a drill report and checked by `audit verify`. It is
//! drill evidence: with a trust folder whose `roles.toml` does not give `--key` the `drill` role, the run is
//! refused before any scenario ([`crate::evidence::keys::TrustStore::require_role`]), and `audit verify` reads
//! it only under `drill` keys.
//!
//! Fault hooks ([`Hooks`]) are fields of [`Context`] that only this module sets, on the contexts of its
//! own scratch lakehouses. The weakened-build test switches single safety checks off ([`Check`],
//! [`weakened`]); that switch exists only in the crate's own test build (`cfg(test)`) and is a constant
//! `false` in every other build.
//!
//! This face holds the lab machinery every scenario shares (the scratch lakehouse `Lab`, where a run builds
//! its labs, `LabEnv`, and the expectation bookkeeping `Obs`), the matrix run and the command; the fourteen
//! scenarios, one function each, and the dispatcher that runs one by id are in `faults/scenarios.rs`. Times
//! come from the contexts' clocks, never from the system directly.
//!
//! [`PREDICATE_TYPE`]: crate::evidence::fault_matrix::PREDICATE_TYPE
//! [`Hooks`]: crate::ops::hooks::Hooks
//! [`Check`]: crate::safety::Check
//! [`weakened`]: crate::safety::weakened

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::evidence::fault_matrix::{FaultPredicate, MatrixInfo, MatrixSummary, SCENARIOS, ScenarioResult, statement};
use crate::evidence::{self};
use crate::model::location;
use crate::ops::context::Context;
use crate::report::output::{Outcome, Verdict};

mod lab;
mod scenarios;

use lab::LabEnv;
use scenarios::{fault_text, scenario};

/// What `drill faults` needs.
#[derive(Debug, Clone, Default)]
pub struct MatrixOptions {
    /// Folder for the run's scratch folder (created if missing, never removed): the run makes a new
    /// `lakedrill-faults-<run id>` inside it and removes only that at the end, unless `keep`. Default: the
    /// system's temporary directory.
    pub scratch: Option<PathBuf>,
    /// Keep the scratch lakehouses.
    pub keep: bool,
    /// Run only these scenarios (default: all fourteen; a partial run never passes the gate).
    pub only: Vec<String>,
    /// Build the tables, bundles, reports and receipts on this `s3://bucket/prefix` (a versioned bucket)
    /// instead of the scratch directory; catalogs, registries and keys stay in the scratch directory.
    pub store: Option<String>,
}

/// Runs the matrix (or the scenarios of `opts.only`) and returns the unsigned predicate; its start and finish
/// times come from `clock` (each scenario's lab reads the time from its own contexts).
///
/// # Errors
/// Only when the scratch directory cannot be made; a scenario that fails to run is a failed scenario with its
/// `error` (which [`command`] turns into "could not decide" when no other scenario failed).
pub async fn run_matrix(opts: &MatrixOptions, digest: &str, clock: &dyn Clock) -> Result<FaultPredicate> {
    if let Some(bad) = opts.only.iter().find(|id| !SCENARIOS.contains(&id.as_str())) {
        return Err(Error::invalid(
            "--scenario",
            format!("unknown scenario {bad:?}; known: {}", SCENARIOS.join(", ")),
        ));
    }
    let started = clock.now();
    let run_id = uuid::Uuid::new_v4().to_string();
    let scratch = make_scratch(opts.scratch.as_deref(), &run_id)?;
    let ids: Vec<&str> = if opts.only.is_empty() {
        SCENARIOS.to_vec()
    } else {
        opts.only.iter().map(String::as_str).collect()
    };
    // On S3 every run gets its own prefix, so that runs never meet.
    let store = match &opts.store {
        Some(s) => {
            let s = location::canonical_uri(s)?;
            if !s.starts_with("s3://") {
                return Err(Error::invalid("--store", format!("{s}: expected s3://bucket/prefix")));
            }
            Some(location::join(&s, &format!("fault-matrix-{run_id}")))
        }
        None => None,
    };
    let mut scenarios = Vec::new();
    for id in ids {
        let (fault, expected) = fault_text(id);
        let mut r = ScenarioResult {
            id: id.to_owned(),
            fault: fault.to_owned(),
            expected: expected.to_owned(),
            observed: Vec::new(),
            injected: BTreeMap::new(),
            objects_lost: 0,
            lost: Vec::new(),
            unprotected_readers: Vec::new(),
            content_files: None,
            error: None,
            pass: false,
        };
        let env = LabEnv {
            root: &scratch,
            store: store.as_deref(),
            digest,
        };
        // Boxed: the scenarios' futures are large, and a debug build's test thread has a small stack.
        match Box::pin(scenario(id, &env)).await {
            Ok((obs, lost, state)) => {
                r.injected = state.injected().into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                r.observed = obs.lines;
                r.unprotected_readers = obs.readers;
                r.content_files = obs.content;
                r.objects_lost = lost.len();
                r.lost = lost.into_iter().take(20).collect();
                r.pass = obs.holds && r.objects_lost == 0;
            }
            Err(e) => {
                r.error = Some(e.with_causes());
            }
        }
        scenarios.push(r);
    }
    if !opts.keep {
        // Only the run's own folder, made new by `make_scratch`: never the folder `--scratch` named.
        let _ = std::fs::remove_dir_all(&scratch);
    }
    let passed = scenarios.iter().filter(|s| s.pass).count();
    let complete = SCENARIOS.iter().all(|id| scenarios.iter().any(|s| s.id == *id));
    Ok(FaultPredicate {
        matrix: MatrixInfo {
            id: run_id,
            implementation_digest: digest.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            store: store.clone().unwrap_or_else(|| "file".into()),
            scratch: scratch.display().to_string(),
        },
        started_at: started.to_rfc3339(),
        finished_at: clock.now().to_rfc3339(),
        summary: MatrixSummary {
            passed,
            failed: scenarios.len() - passed,
            objects_lost: scenarios.iter().map(|s| s.objects_lost).sum(),
            gate: if complete && passed == scenarios.len() {
                "PASS"
            } else {
                "FAIL"
            }
            .into(),
        },
        scenarios,
        previous_report: None,
    })
}

/// Makes the run's own scratch folder `lakedrill-faults-<run id>` inside `parent` (created if missing, and
/// never removed) or, without one, inside the system's temporary directory, and returns its resolved path.
///
/// The folder is made with `create_dir`, which fails on an existing path, so what the run removes at the end
/// is a folder it made itself and nothing that was there before: `--scratch .` or a symlink to a real
/// lakehouse loses nothing (see: review V1).
fn make_scratch(parent: Option<&Path>, run_id: &str) -> Result<PathBuf> {
    let parent = match parent {
        Some(p) => {
            std::fs::create_dir_all(p).map_err(|e| Error::io("create directory", p, e))?;
            p.to_path_buf()
        }
        None => std::env::temp_dir(),
    };
    let scratch = parent.join(format!("lakedrill-faults-{run_id}"));
    std::fs::create_dir(&scratch).map_err(|e| Error::io("create directory", &scratch, e))?;
    scratch.canonicalize().map_err(|e| Error::io("resolve", &scratch, e))
}

/// `lakedrill drill faults [--key FILE [--trust DIR] --reports DIR]`.
///
/// A fault-matrix report is drill evidence: with `trust` (the folder it will be verified under) holding a
/// roles file, `key` must hold the `drill` role there, checked with the key itself before any scenario runs.
/// Without `trust` nothing says which role the key holds, and the report is signed as asked (`audit verify`
/// still reads it only under a `drill` key of its folder).
///
/// Exit 0 when the gate passes, 1 when a scenario failed (or the run was partial), 2 when no scenario failed but
/// one could not run (its error, e.g. an unreachable store): then no report is signed, and `not_run` and the text
/// name each such scenario and why.
///
/// # Errors
/// When the key cannot be used (or lacks the `drill` role under `trust`), the matrix cannot run at all, or the
/// report cannot be written.
pub async fn command(
    ctx: &Context,
    opts: &MatrixOptions,
    key: Option<&Path>,
    trust: Option<&Path>,
    reports: Option<&str>,
) -> Result<Outcome> {
    let digest = crate::ops::context::implementation_digest()?;
    // The key, and its role, before any scenario: a key that cannot sign the report stops the run at once, not
    // after fourteen scratch lakehouses.
    let key = match key {
        Some(path) => {
            let key = crate::evidence::keys::load_signing_key(path)?;
            if let Some(trust) = trust {
                crate::evidence::keys::TrustStore::load_dir(trust)?.require_role(
                    path,
                    &key,
                    crate::evidence::keys::Role::Drill,
                    "fault-matrix reports",
                )?;
            }
            Some(key)
        }
        None => None,
    };
    let mut p = run_matrix(opts, &digest, ctx.clock.as_ref()).await?;
    // A scenario that could not run (its lab could not be built, a store could not be reached) decided nothing:
    // unless another scenario really failed (a finding, exit 1), the run cannot decide (exit 2) and signs no
    // report, so the chain of fault-matrix reports never holds a FAIL that is no safety regression (DESIGN: "the
    // fault matrix"; see: review V8).
    let not_run: Vec<(String, String)> = p
        .scenarios
        .iter()
        .filter_map(|s| s.error.as_ref().map(|e| (s.id.clone(), e.clone())))
        .collect();
    let failed = p.scenarios.iter().any(|s| !s.pass && s.error.is_none());
    let undecided = !not_run.is_empty() && !failed;
    let mut report = None;
    if let Some(key) = key.filter(|_| !undecided) {
        let folder = location::join(&location::canonical_uri(reports.unwrap_or("reports"))?, "fault-matrix");
        // With the trust folder the report will be verified under, the chain's newest file must verify as a
        // fault-matrix report there before this one links to it; without one nothing says which keys count.
        let drill_keys = match trust {
            // Any key of the folder: a report signed before a rotation withdrew its key's role is still the
            // chain's (`drill::drill_report_check`).
            Some(t) => Some(
                crate::evidence::keys::TrustStore::load_dir(t)?.without_granted(crate::evidence::keys::Role::Deleter),
            ),
            None => None,
        };
        let check = |name: &str, bytes: &[u8]| match &drill_keys {
            Some(keys) => {
                let mut findings = Vec::new();
                match crate::ops::audit::check_fault_report(name, bytes, keys, &mut findings) {
                    Some(_) => Ok(()),
                    None => Err(crate::ops::audit::findings_reason(&findings)),
                }
            }
            None => Ok(()),
        };
        p.previous_report = crate::ops::drill::latest_report(&ctx.storage, &folder, &check)
            .await?
            .map(|(_, sha)| sha);
        let env = evidence::sign_statement(&statement(&p), &key);
        let name = format!(
            "{}-{}.dsse.json",
            ctx.now().format("%Y%m%dT%H%M%S%.3fZ"),
            &p.matrix.id[..8]
        );
        let uri = location::join(&folder, &name);
        ctx.storage
            .put_new(&uri, bytes::Bytes::from(env.to_json_bytes()))
            .await?;
        report = Some(uri);
    }
    let mut human = format!(
        "fault matrix {} on {}: gate {} ({} passed, {} failed, {} objects lost)\nimplementation sha256 {}\n",
        p.matrix.id, p.matrix.store, p.summary.gate, p.summary.passed, p.summary.failed, p.summary.objects_lost, digest
    );
    for s in &p.scenarios {
        human.push_str(&format!(
            "\n{} {}  lost {}\n  fault:    {}\n  expected: {}\n",
            if s.pass {
                "PASS"
            } else if s.error.is_some() {
                "NOT RUN"
            } else {
                "FAIL"
            },
            s.id,
            s.objects_lost,
            s.fault,
            s.expected
        ));
        if let Some(c) = &s.content_files {
            human.push_str(&format!(
                "  content:  {} of {} data files and {} of {} delete files of the candidate deleted\n",
                c.data_files_deleted, c.candidate_data_files, c.delete_files_deleted, c.candidate_delete_files
            ));
        }
        for l in &s.observed {
            human.push_str(&format!("  {l}\n"));
        }
        for r in &s.unprotected_readers {
            human.push_str(&format!("  unprotected reader: {r}\n"));
        }
        if let Some(e) = &s.error {
            human.push_str(&format!("  error: {e}\n"));
        }
        for l in &s.lost {
            human.push_str(&format!("  LOST: {l}\n"));
        }
    }
    if let Some(r) = &report {
        human.push_str(&format!("\nsigned report: {r}\n"));
    }
    if undecided {
        human.push_str("\nCOULD NOT DECIDE: no scenario failed, but these could not run (no report signed):\n");
        for (id, e) in &not_run {
            human.push_str(&format!("  {id}: {e}\n"));
        }
    }
    let mut json = serde_json::to_value(&p).map_err(|e| Error::Internal(e.to_string()))?;
    json["report"] = serde_json::json!(report);
    json["not_run"] = serde_json::Value::Array(
        not_run
            .iter()
            .map(|(id, e)| serde_json::json!({"id": id, "error": e}))
            .collect(),
    );
    Ok(Outcome {
        verdict: if undecided {
            Verdict::Undecided
        } else if p.summary.gate == "PASS" {
            Verdict::Ok
        } else {
            Verdict::Findings
        },
        json,
        human,
        deferred: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::evidence::fault_matrix::{ContentFileFigures, check_predicate};
    use crate::safety::{Check, weakened, with_weakened};

    /// Which scenario catches each weakened check (DESIGN: "fault matrix and weakened builds").
    fn catcher(c: Check) -> &'static str {
        match c {
            Check::HoldGenerationCas => "hold-races-cas",
            Check::LeaseWatermarkCas => "reader-registration-delay",
            Check::TableGenerationCas => "ref-case-collision",
            Check::ClosureGate => "planner-bug",
            Check::EvidenceCoverage => "bundle-missing-layer",
            Check::UncertainDeleteIsUnknown => "lost-delete-receipts",
            Check::RecheckAfterDelete => "lagging-replica",
            Check::WriterPrefixes => "uncommitted-writer",
            Check::NewerFailure => "stale-pass-after-fail",
            Check::HoldCheckPerBatch => "hold-lands-mid-purge",
        }
    }

    async fn run(only: &[&str]) -> FaultPredicate {
        let opts = MatrixOptions {
            scratch: None,
            keep: false,
            only: only.iter().map(|s| (*s).to_owned()).collect(),
            store: None,
        };
        let digest = crate::ops::context::implementation_digest().unwrap();
        run_matrix(&opts, &digest, &crate::clock::SystemClock).await.unwrap()
    }

    /// Every safety check, switched off alone, makes the matrix fail: the scenario that targets it shows a
    /// different outcome than written down (or loses objects), while the full build passes the same scenario.
    /// `LAKEDRILL_WEAKENED_FULL=1` runs all fourteen scenarios against every weakened build instead.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_weakened_check_fails_the_matrix() {
        let full = std::env::var_os("LAKEDRILL_WEAKENED_FULL").is_some();
        let intact: Vec<&str> = Check::ALL.iter().map(|c| catcher(*c)).collect();
        let p = run(&intact).await;
        for s in &p.scenarios {
            assert!(s.pass, "{} must pass on the intact build: {s:#?}", s.id);
        }
        for c in Check::ALL {
            let only: Vec<&str> = if full { SCENARIOS.to_vec() } else { vec![catcher(c)] };
            let p = with_weakened(c, run(&only)).await;
            let failed: Vec<&str> = p.scenarios.iter().filter(|s| !s.pass).map(|s| s.id.as_str()).collect();
            assert!(
                failed.contains(&catcher(c)),
                "weakening {c:?} must fail scenario {}; failed: {failed:?}; {:#?}",
                catcher(c),
                p.scenarios
            );
            assert_eq!(p.summary.gate, "FAIL");
            eprintln!(
                "weakened {c:?}: failed {failed:?}, objects lost {}",
                p.summary.objects_lost
            );
        }
        assert!(!weakened(Check::ClosureGate), "the switch is scoped to with_weakened");
    }

    #[test]
    fn a_predicate_that_hides_a_loss_or_a_partial_run_is_inconsistent() {
        let s = ScenarioResult {
            id: "planner-bug".into(),
            fault: "f".into(),
            expected: "e".into(),
            observed: vec!["ok: x".into()],
            injected: BTreeMap::new(),
            objects_lost: 1,
            lost: vec!["data/x.parquet".into()],
            unprotected_readers: vec![],
            content_files: Some(ContentFileFigures {
                candidate_data_files: 1,
                candidate_delete_files: 0,
                data_files_deleted: 2,
                delete_files_deleted: 0,
            }),
            error: None,
            pass: true,
        };
        let p = FaultPredicate {
            matrix: MatrixInfo {
                id: "m".into(),
                implementation_digest: "d".into(),
                version: "0".into(),
                store: "file".into(),
                scratch: "/tmp".into(),
            },
            started_at: String::new(),
            finished_at: String::new(),
            scenarios: vec![s],
            summary: MatrixSummary {
                passed: 1,
                failed: 0,
                objects_lost: 0,
                gate: "PASS".into(),
            },
            previous_report: None,
        };
        let problems = check_predicate(&p, Some("d"));
        assert!(problems.iter().any(|p| p.contains("objects lost")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("passes although")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("gate PASS")), "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("more content files than its candidate holds")),
            "{problems:?}"
        );
        assert!(check_predicate(&p, Some("other")).iter().any(|p| p.contains("subject")));
    }
}
