//! `lakedrill drill faults`: the fault matrix of DESIGN §6 as a signed drill.
//!
//! Each of the thirteen scenarios builds its own scratch lakehouse (the demo's `sales.orders`: appends, an
//! overwrite, a delete, a tag, a branch; a SQL catalog on SQLite and a registry beside it), puts the
//! fault layer ([`crate::io::fault_store::FaultStore`]) in front of its storage, drives the real pipeline —
//! plan, quarantine, drill, purge, reconcile, undelete — through the library while injecting its fault,
//! and compares what happened with what is written down as the expected outcome. Every scenario also
//! counts **objects lost**: objects reachable from a snapshot that was non-deletable when the scenario
//! started or that the scenario protects (a lease, a hold, a ref, a writer's files), plus any object that
//! vanished without being part of an accepted inventory. That count must be 0.
//!
//! The matrix passes only if every scenario shows its expected outcome and loses nothing. The report is
//! an in-toto statement (predicate type [`PREDICATE_TYPE`]) whose subject is the running binary
//! (its SHA-256, the implementation digest), signed like a drill report and checked by `audit verify`.
//!
//! Fault hooks ([`Hooks`]) are fields of [`Context`] that only this module sets, on the contexts of its
//! own scratch lakehouses. The weakened-build test switches single safety checks off ([`Check`],
//! [`weakened`]); that switch exists only in the crate's own test build (`cfg(test)`) and is a constant
//! `false` in every other build.
//!
//! This face holds the lab machinery every scenario shares (the scratch lakehouse `Lab`, where a run builds
//! its labs, `LabEnv`, and the expectation bookkeeping `Obs`), the matrix run and the command; the thirteen
//! scenarios, one function each, and the dispatcher that runs one by id are in `faults/scenarios.rs`. Times
//! come from the contexts' clocks, never from the system directly.
//!
//! [`PREDICATE_TYPE`]: crate::evidence::fault_matrix::PREDICATE_TYPE
//! [`Hooks`]: crate::ops::hooks::Hooks
//! [`Check`]: crate::safety::Check
//! [`weakened`]: crate::safety::weakened

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::clock::Clock;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::evidence::fault_matrix::{FaultPredicate, MatrixInfo, MatrixSummary, SCENARIOS, ScenarioResult, statement};
use crate::evidence::{self};
use crate::govern::closure;
use crate::io::fault_store::{FaultState, FaultStore};
use crate::io::store::Storage;
use crate::model::location;
use crate::ops::context::Context;
use crate::ops::quarantine::QuarantineMode;
use crate::registry::State;
use crate::report::output::{Outcome, Verdict};
use crate::table::TableSource;

mod scenarios;

use scenarios::{fault_text, scenario};

/// What `drill faults` needs.
#[derive(Debug, Clone, Default)]
pub struct MatrixOptions {
    /// Scratch directory (created; removed at the end unless `keep`). Default: a new temporary directory.
    pub scratch: Option<PathBuf>,
    /// Keep the scratch lakehouses.
    pub keep: bool,
    /// Run only these scenarios (default: all thirteen; a partial run never passes the gate).
    pub only: Vec<String>,
    /// Build the tables, bundles, reports and receipts on this `s3://bucket/prefix` (a versioned bucket)
    /// instead of the scratch directory; catalogs, registries and keys stay in the scratch directory.
    pub store: Option<String>,
}

/// Expectation bookkeeping of one scenario.
#[derive(Default)]
struct Obs {
    lines: Vec<String>,
    holds: bool,
    readers: Vec<Value>,
}

impl Obs {
    fn new() -> Self {
        Self {
            holds: true,
            ..Self::default()
        }
    }

    fn expect(&mut self, ok: bool, what: impl Into<String>) {
        let what = what.into();
        self.lines.push(if ok {
            format!("ok: {what}")
        } else {
            format!("NOT OBSERVED: {what}")
        });
        self.holds &= ok;
    }

    fn saw(&mut self, what: impl Into<String>) {
        self.lines.push(format!("seen: {}", what.into()));
    }
}

/// One scratch lakehouse with its fault layer.
struct Lab {
    dir: PathBuf,
    /// Where the table, bundles, reports and receipts live: `file://DIR` or `s3://bucket/prefix/SCENARIO`.
    base: String,
    ctx: Context,
    truth: Context,
    state: Arc<FaultState>,
    source: TableSource,
    policy: PathBuf,
    keys: PathBuf,
    key: PathBuf,
    digest: String,
}

const LAB_KEY: &str = "fault-matrix-scratch";

impl Lab {
    async fn new(env: &LabEnv<'_>, name: &str, policy_extra: &str) -> Result<Lab> {
        let (root, digest) = (env.root, env.digest);
        let dir = root.join(name);
        let base = match env.store {
            Some(s) => location::join(s, name),
            None => format!("file://{}", dir.display()),
        };
        let builder = Context::new(Config::default());
        let warehouse = env.store.map(|_| location::join(&base, "warehouse"));
        crate::lab::demo::build_lakehouse_in(&builder, &dir, warehouse.as_deref(), true).await?;
        let config = Config::load(&dir.join("lakedrill.toml"), true)?;
        let state = FaultState::new();
        let layer_state = Arc::clone(&state);
        let storage = Storage::with_layer(
            config.storage_options(),
            Arc::new(move |inner| Arc::new(FaultStore::new(inner, Arc::clone(&layer_state)))),
        );
        let ctx = Context::with_storage(config.clone(), storage);
        let truth = Context::new(config);
        // The trust folder holds the public key only (the private key stays in keys/).
        let keys = dir.join("keys").join("trust");
        let key = crate::evidence::keys::generate_in(LAB_KEY, &dir.join("keys"), &keys)?;
        let policy = dir.join("policy.yaml");
        let text = format!(
            "# Written by `lakedrill drill faults` for a scratch lakehouse.\nschema: lakehouseRetentionPolicy.v1\ntable: orders\nprotectedRefs: [main, audit-q2]\nminSnapshotAge: 1s\nmaxReaderLease: 14d\nlegalHoldGeneration: 0\nregulatedData: false\nreclamationImplementationDigest: {digest}\n{policy_extra}"
        );
        let text = if policy_extra.contains("maxWriterDuration") {
            text
        } else {
            format!("{text}maxWriterDuration: 6h\norphanSafetyInterval: 12h\n")
        };
        std::fs::write(&policy, text).map_err(|e| Error::io("write", &policy, e))?;
        let source = TableSource::Catalog {
            catalog: "demo".into(),
            table: "sales.orders".into(),
            table_root: None,
        };
        let lab = Lab {
            dir,
            base,
            ctx,
            truth,
            state,
            source,
            policy,
            keys,
            key: key.private_path,
            digest: digest.to_owned(),
        };
        let stage = crate::ops::rollout::set(
            &lab.ctx,
            &lab.source,
            "test",
            "drill faults: scratch lakehouse with synthetic data",
            "lakedrill drill faults",
            Some(&lab.policy),
        )
        .await?;
        if stage.verdict != Verdict::Ok {
            return Err(Error::Internal(format!(
                "scratch rollout stage refused: {}",
                stage.human
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await; // past minSnapshotAge
        Ok(lab)
    }

    fn uri(&self, sub: &str) -> String {
        location::join(&self.base, sub)
    }

    async fn plan(&self) -> Result<Value> {
        Ok(crate::ops::plan::plan(&self.ctx, &self.source, &self.policy)
            .await?
            .json)
    }

    async fn table_root(&self) -> Result<String> {
        Ok(self.truth.table(&self.source).await?.location().root_uri().to_owned())
    }

    async fn quarantine(&self, id: &str, mode: QuarantineMode) -> Result<Outcome> {
        crate::ops::quarantine::quarantine(
            &self.ctx,
            &self.source,
            id,
            &self.policy,
            &self.key,
            &self.uri("bundles"),
            mode,
        )
        .await
    }

    async fn drill(&self) -> Result<crate::ops::drill::DrillOutcome> {
        let plan = self.dir.join("weekly.toml");
        let text = format!(
            "name = \"weekly\"\nkind = \"quarantine\"\nbundles = \"{}\"\nsample = 30\ntrust = \"{}\"\nkey = \"{}\"\nreports = \"{}\"\n",
            self.uri("bundles"),
            self.keys.display(),
            self.key.display(),
            self.uri("reports")
        );
        std::fs::write(&plan, text).map_err(|e| Error::io("write", &plan, e))?;
        crate::ops::drill::run(&self.ctx.storage, &plan, self.ctx.clock.as_ref(), &self.digest).await
    }

    async fn purge(&self, id: &str, evidence: &str) -> Result<Outcome> {
        crate::ops::deleter::purge(
            &self.ctx,
            &self.source,
            &crate::ops::deleter::PurgeOptions {
                candidate_id: id.to_owned(),
                evidence: Some(evidence.to_owned()),
                trust: self.keys.clone(),
                policy: self.policy.clone(),
                key: self.key.clone(),
                receipts: self.uri("receipts"),
                dry_run: false,
            },
        )
        .await
    }

    async fn reconcile(&self, id: &str) -> Result<Outcome> {
        crate::ops::deleter::reconcile(
            &self.ctx,
            &self.source,
            id,
            &self.key,
            &self.uri("receipts"),
            &self.policy,
        )
        .await
    }

    /// A fresh plan's expired-snapshots candidate (id, snapshot ids); its absence is a failed expectation.
    async fn candidate(&self, obs: &mut Obs) -> Result<Option<(String, Vec<i64>)>> {
        let found = expired(&self.plan().await?);
        if found.is_none() {
            obs.expect(false, "the plan proposes an expired-snapshots candidate");
        }
        Ok(found)
    }

    /// Plan → quarantine (tag mode) → drill: the candidate, its snapshots and the signed report.
    async fn to_evidence(&self, obs: &mut Obs) -> Result<Option<(String, Vec<i64>, String)>> {
        let Some((id, ids)) = self.candidate(obs).await? else {
            return Ok(None);
        };
        let q = self.quarantine(&id, QuarantineMode::Tag).await?;
        if q.verdict != Verdict::Ok {
            obs.expect(false, format!("quarantine of {id}: {}", q.human.trim()));
            return Ok(None);
        }
        let d = self.drill().await?;
        if d.predicate.summary.gate != "PASS" {
            obs.expect(
                false,
                format!("the drill of {id} passes (gate {})", d.predicate.summary.gate),
            );
            return Ok(None);
        }
        Ok(Some((id, ids, d.report)))
    }

    async fn state(&self, id: &str) -> Result<State> {
        Ok(crate::ops::plan::registry(&self.ctx).await?.candidate(id).await?.state)
    }

    async fn object_states(&self, id: &str) -> Result<BTreeMap<String, usize>> {
        let mut by = BTreeMap::new();
        for o in crate::ops::plan::registry(&self.ctx).await?.object_states(id).await? {
            *by.entry(o.state.as_str().to_owned()).or_default() += 1;
        }
        Ok(by)
    }

    /// The paths of a candidate's inventory, from the registry.
    async fn inventory(&self, id: &str) -> Result<BTreeSet<String>> {
        Ok(crate::ops::plan::registry(&self.ctx)
            .await?
            .object_states(id)
            .await?
            .into_iter()
            .map(|o| o.path)
            .collect())
    }

    /// Objects under the table location, as the real store lists them.
    async fn listing(&self) -> Result<BTreeSet<String>> {
        let root = self.table_root().await?;
        Ok(self
            .truth
            .storage
            .list(&root)
            .await?
            .into_iter()
            .filter_map(|o| o.uri.strip_prefix(&root).map(|r| r.trim_start_matches('/').to_owned()))
            .collect())
    }

    /// What must survive: everything reachable from ref heads, the current snapshot and `protect`, plus `extra`.
    async fn account(&self, protect: &[i64], extra: &[String]) -> Result<Account> {
        let table = self.truth.table(&self.source).await?;
        let policy = crate::govern::policy::load(&self.policy)?;
        let reg = crate::ops::plan::registry(&self.truth).await?;
        let input = crate::ops::plan::gather(&self.truth, &table, &policy, &reg, self.truth.now(), None).await?;
        // Quarantine tags hold a candidate's snapshots only until its purge: they protect nothing.
        let mut ids: BTreeSet<i64> = input
            .refs
            .iter()
            .filter(|r| !r.name.starts_with(crate::ops::plan::QUARANTINE_TAG_PREFIX))
            .map(|r| r.snapshot_id)
            .collect();
        ids.extend(input.current_snapshot_id);
        ids.extend(protect.iter().copied());
        let mut must: BTreeSet<String> = closure::distinct_objects(
            input
                .snapshots
                .iter()
                .filter(|s| ids.contains(&s.snapshot_id))
                .filter_map(|s| s.objects.as_ref()),
        )
        .into_iter()
        .map(|o| o.path.clone())
        .collect();
        must.extend(extra.iter().cloned());
        Ok(Account {
            before: self.listing().await?,
            must,
        })
    }

    /// Objects lost since `acct`: protected ones gone, and any vanished object no accepted inventory holds.
    async fn lost(&self, acct: &Account) -> Result<Vec<String>> {
        let now = self.listing().await?;
        let reg = crate::ops::plan::registry(&self.truth).await?;
        let table = self.truth.table(&self.source).await?;
        let mut accepted = BTreeSet::new();
        for c in reg.candidates(&table.metadata().uuid().to_string()).await? {
            for o in reg.object_states(&c.candidate_id).await? {
                if matches!(
                    o.state,
                    State::DeleteApproved | State::Deleted | State::Verified | State::DeleteUnknown
                ) {
                    accepted.insert(o.path);
                }
            }
        }
        let mut lost: BTreeSet<String> = acct.must.iter().filter(|p| !now.contains(*p)).cloned().collect();
        lost.extend(
            acct.before
                .iter()
                .filter(|p| !now.contains(*p) && !accepted.contains(*p))
                .cloned(),
        );
        Ok(lost.into_iter().collect())
    }
}

struct Account {
    before: BTreeSet<String>,
    must: BTreeSet<String>,
}

/// The expired-snapshots candidate of a plan document: id and snapshot ids.
fn expired(plan: &Value) -> Option<(String, Vec<i64>)> {
    let c = plan["candidates"]
        .as_array()?
        .iter()
        .find(|c| c["kind"] == "expired-snapshots")?;
    let ids = c["snapshot_ids"].as_array()?.iter().filter_map(Value::as_i64).collect();
    Some((c["candidate_id"].as_str()?.to_owned(), ids))
}

/// Where a matrix run builds its labs.
struct LabEnv<'a> {
    root: &'a Path,
    store: Option<&'a str>,
    digest: &'a str,
}

/// Runs the matrix (or the scenarios of `opts.only`) and returns the unsigned predicate; its start and finish
/// times come from `clock` (each scenario's lab reads the time from its own contexts).
///
/// # Errors
/// Only when the scratch directory cannot be made; a scenario that fails to run is a failed scenario.
pub async fn run_matrix(opts: &MatrixOptions, digest: &str, clock: &dyn Clock) -> Result<FaultPredicate> {
    if let Some(bad) = opts.only.iter().find(|id| !SCENARIOS.contains(&id.as_str())) {
        return Err(Error::invalid(
            "--scenario",
            format!("unknown scenario {bad:?}; known: {}", SCENARIOS.join(", ")),
        ));
    }
    let started = clock.now();
    let run_id = uuid::Uuid::new_v4().to_string();
    let scratch = opts
        .scratch
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("lakedrill-faults-{run_id}")));
    std::fs::create_dir_all(&scratch).map_err(|e| Error::io("create directory", &scratch, e))?;
    let scratch = scratch.canonicalize().map_err(|e| Error::io("resolve", &scratch, e))?;
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
                r.objects_lost = lost.len();
                r.lost = lost.into_iter().take(20).collect();
                r.pass = obs.holds && r.objects_lost == 0;
            }
            Err(e) => {
                let mut text = e.to_string();
                let mut src = std::error::Error::source(&e);
                while let Some(s) = src {
                    text.push_str(&format!(": {s}"));
                    src = s.source();
                }
                r.error = Some(text);
            }
        }
        scenarios.push(r);
    }
    if !opts.keep {
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

/// `lakedrill drill faults [--key FILE --reports DIR]`.
///
/// # Errors
/// When the matrix cannot run at all, or the report cannot be written.
pub async fn command(
    ctx: &Context,
    opts: &MatrixOptions,
    key: Option<&Path>,
    reports: Option<&str>,
) -> Result<Outcome> {
    let digest = crate::ops::context::implementation_digest()?;
    let mut p = run_matrix(opts, &digest, ctx.clock.as_ref()).await?;
    let mut report = None;
    if let Some(key) = key {
        let key = crate::evidence::keys::load_signing_key(key)?;
        let folder = location::join(&location::canonical_uri(reports.unwrap_or("reports"))?, "fault-matrix");
        p.previous_report = crate::ops::drill::latest_report(&ctx.storage, &folder)
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
            if s.pass { "PASS" } else { "FAIL" },
            s.id,
            s.objects_lost,
            s.fault,
            s.expected
        ));
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
    let mut json = serde_json::to_value(&p).map_err(|e| Error::Internal(e.to_string()))?;
    json["report"] = serde_json::json!(report);
    Ok(Outcome {
        verdict: if p.summary.gate == "PASS" {
            Verdict::Ok
        } else {
            Verdict::Findings
        },
        json,
        human,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::evidence::fault_matrix::check_predicate;
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
        let scratch = std::env::temp_dir().join(format!("lakedrill-faults-test-{}", uuid::Uuid::new_v4()));
        let opts = MatrixOptions {
            scratch: Some(scratch),
            keep: false,
            only: only.iter().map(|s| (*s).to_owned()).collect(),
            store: None,
        };
        let digest = crate::ops::context::implementation_digest().unwrap();
        run_matrix(&opts, &digest, &crate::clock::SystemClock).await.unwrap()
    }

    /// Every safety check, switched off alone, makes the matrix fail: the scenario that targets it shows a
    /// different outcome than written down (or loses objects), while the full build passes the same scenario.
    /// `LAKEDRILL_WEAKENED_FULL=1` runs all thirteen scenarios against every weakened build instead.
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
        assert!(check_predicate(&p, Some("other")).iter().any(|p| p.contains("subject")));
    }
}
