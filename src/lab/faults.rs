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

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::Utc;
use serde_json::Value;

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

fn fault_text(id: &str) -> (&'static str, &'static str) {
    match id {
        "reader-registration-delay" => (
            "control-plane delay after reader registration: the reader's lease becomes visible only after plan, quarantine and drill",
            "purge REFUSED by the lease-watermark compare-and-set and by the closure check; the leased snapshot keeps every object",
        ),
        "ref-case-collision" => (
            "branch names that differ only by case: `Main` beside `main` before the plan, `MAIN` created after the quarantine; and a commit racing the quarantine (412 on the metadata write)",
            "the plan keeps `Main`'s head and warns of the collision; the raced quarantine is REFUSED and a retry reuses its bundles; purge REFUSED by the table-generation compare-and-set and by the closure check",
        ),
        "uncommitted-writer" => (
            "a writer uploaded files without committing: one registered writer, one unregistered",
            "the registered writer's files are in no candidate (a difference saying why); the unregistered writer's old file is only an orphan candidate, which quarantine refuses",
        ),
        "lagging-listing" => (
            "eventually consistent listings: LIST under the table location hides every object written in the last hour",
            "the same candidate inventory as with a consistent listing (candidates come from metadata, not listings); purge deletes exactly that inventory",
        ),
        "hold-races-cas" => (
            "a legal hold lands between the purge's checks and its compare-and-set",
            "purge REFUSED by the hold-generation compare-and-set; nothing deleted",
        ),
        "planner-bug" => (
            "a protected snapshot wrongly in the candidate set (injected planner bug: the head of protected tag audit-q2)",
            "quarantine REFUSED by the independent closure check; the candidate is PROTECTED; nothing sealed as deletable",
        ),
        "bundle-missing-layer" => (
            "a bundle missing one metadata layer (its manifest list copy) after the snapshots left the table (bundle-mode quarantine)",
            "the drill FAILs that bundle with a MISSING finding; purge REFUSED for lack of RESTORE_VERIFIED evidence",
        ),
        "late-model-reader" => (
            "a model still referencing an expired snapshot: one takes a lease late (after the plan), one never takes one",
            "the late lease makes quarantine refuse the stale plan and the re-plan keeps the leased snapshot; the unleased snapshot is purged, its reader is listed as unprotected, and its bundle still restores it",
        ),
        "lagging-replica" => (
            "lagging cross-region replicas: reads keep returning objects after they were deleted",
            "purge ends DELETE_UNKNOWN (no object counted deleted on a stale re-check); once the replica catches up, reconcile settles every object VERIFIED",
        ),
        "lost-delete-receipts" => (
            "lost deletion receipts: every 2nd delete response is lost although the delete happened, every 3rd delete fails with 503",
            "purge ends DELETE_UNKNOWN for exactly the uncertain objects; reconcile settles them; the deleted set equals the inventory",
        ),
        "delete-marker-recovery" => (
            "recovery of purged objects (behind version delete markers on a versioned bucket; from the bundle's metadata copies on a filesystem)",
            "after the purge every bundle of the candidate still restores (RESTORE_VERIFIED) and the snapshot is brought back as a readable table",
        ),
        "stale-pass-after-fail" => (
            "an older PASS presented after a newer FAIL: the bundle's manifest-list copy is damaged after the first drill, a second drill of the same chain fails it, and the purge is given the first report",
            "purge REFUSED naming the newer failing report and the damaged copy; nothing deleted",
        ),
        "hold-lands-mid-purge" => (
            "a legal hold on the whole table lands while the purge deletes (after its first delete request, from another registry connection)",
            "no delete request after the hold committed; purge HALTED naming the hold; every object deleted before it VERIFIED, every other one still there and not counted deleted",
        ),
        _ => ("unknown scenario", "none"),
    }
}

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

fn reasons_of(o: &Outcome) -> String {
    o.json["reasons"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" | "))
        .or_else(|| o.json["reason"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn status_of(o: &Outcome) -> String {
    o.json["status"].as_str().unwrap_or("?").to_owned()
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
        crate::ops::drill::run(&self.ctx.storage, &plan, &crate::clock::SystemClock, &self.digest).await
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
        let input = crate::ops::plan::gather(&self.truth, &table, &policy, &reg, Utc::now(), None).await?;
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

async fn commit_ref(ctx: &Context, source: &TableSource, name: &str, id: i64, branch: bool) -> Result<()> {
    use iceberg::spec::{SnapshotReference, SnapshotRetention};
    let (table, cat, ident) = ctx.catalog_table(source).await?;
    let retention = if branch {
        SnapshotRetention::branch(None, None, None)
    } else {
        SnapshotRetention::Tag { max_ref_age_ms: None }
    };
    let new = table
        .metadata()
        .clone()
        .into_builder(Some(table.generation().metadata_location.clone()))
        .set_ref(name, SnapshotReference::new(id, retention))
        .map_err(|e| Error::iceberg(format!("ref {name}"), e))?
        .build()
        .map_err(|e| Error::iceberg("build metadata", e))?
        .metadata;
    cat.commit(&ctx.storage, &ident, &table.generation().metadata_location, &new)
        .await?;
    Ok(())
}

/// Runs one scenario in its own lab; returns what it observed, the lab and its account.
/// Where a matrix run builds its labs.
struct LabEnv<'a> {
    root: &'a Path,
    store: Option<&'a str>,
    digest: &'a str,
}

/// Scenario `stale-pass-after-fail` (see [`fault_text`]).
async fn stale_pass_after_fail(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "stale-pass-after-fail";
    let mut obs = Obs::new();
    let lab = Lab::new(env, id, "").await?;
    let Some((cid, ids, first)) = lab.to_evidence(&mut obs).await? else {
        return Ok((obs, Vec::new(), lab.state));
    };
    let acct = lab.account(&ids, &[]).await?;
    let rec = crate::ops::plan::registry(&lab.ctx).await?.candidate(&cid).await?;
    let bundle = rec
        .quarantine
        .as_ref()
        .and_then(|q| q["bundles"][0]["uri"].as_str())
        .unwrap_or_default()
        .to_owned();
    let trust = crate::evidence::keys::TrustStore::load_dir(&lab.keys)?;
    let (pred, _) = crate::bundle::verified_predicate(&lab.ctx.storage, &bundle, &trust).await?;
    let Some(member) = pred
        .inventory
        .iter()
        .find(|e| e.layer == crate::bundle::Layer::ManifestList)
        .and_then(|e| e.copy.clone())
    else {
        obs.expect(false, "the bundle holds a manifest list copy to damage");
        return Ok((obs, lab.lost(&acct).await?, lab.state));
    };
    let copy = location::join(&crate::bundle::bundle_dir(&bundle)?, &member);
    let mut bytes = lab.truth.storage.get(&copy).await?.bytes.to_vec();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    lab.truth.storage.put(&copy, bytes::Bytes::from(bytes)).await?;
    obs.saw(format!("flipped byte {at} of {copy}"));
    let second = lab.drill().await?;
    obs.expect(
        second.predicate.summary.gate == "FAIL",
        format!(
            "the second drill of the chain FAILs (gate {})",
            second.predicate.summary.gate
        ),
    );
    let p = lab.purge(&cid, &first).await?;
    let why = reasons_of(&p);
    obs.saw(format!("purge with the first report {}: {why}", status_of(&p)));
    obs.expect(status_of(&p) == "REFUSED", "purge REFUSED");
    obs.expect(
        why.contains("newer drill report") && why.contains(location::file_name(&second.report)),
        "the refusal names the newer failing report",
    );
    obs.expect(
        why.contains("is missing or differs"),
        "the refusal names the damaged copy (the bundle re-verified at acceptance)",
    );
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// Scenario `hold-lands-mid-purge` (see [`fault_text`]).
async fn hold_lands_mid_purge(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "hold-lands-mid-purge";
    let mut obs = Obs::new();
    let mut lab = Lab::new(env, id, "").await?;
    let Some((cid, _, report)) = lab.to_evidence(&mut obs).await? else {
        return Ok((obs, Vec::new(), lab.state));
    };
    let inventory = lab.inventory(&cid).await?;
    obs.expect(
        inventory.len() >= 3,
        format!("the candidate has objects for several batches ({})", inventory.len()),
    );
    let acct = lab.account(&[], &[]).await?;
    // Batches of two; the hold is set from another connection right before the second delete
    // request, and the next batch waits (without a lock) until the hold has committed.
    let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let committed_at: Arc<std::sync::Mutex<Option<usize>>> = Arc::new(std::sync::Mutex::new(None));
    let task: Arc<std::sync::Mutex<Option<tokio::task::JoinHandle<Result<()>>>>> =
        Arc::new(std::sync::Mutex::new(None));
    lab.ctx.hooks.purge_batch_size = Some(2);
    // The hold goes straight into the registry (as another tool's or a crashed `hold set` would leave
    // it: no protect pass moved the candidate), so only the per-batch hold check can stop the purge.
    let config = lab.ctx.config.clone();
    let uuid = lab.truth.table(&lab.source).await?.metadata().uuid().to_string();
    let (req, done, spawned) = (Arc::clone(&requests), Arc::clone(&committed_at), Arc::clone(&task));
    lab.ctx.hooks.before_delete = Some(Arc::new(move |sent| {
        req.store(sent + 1, std::sync::atomic::Ordering::SeqCst);
        if sent == 1 {
            let (config, uuid, req, done) = (config.clone(), uuid.clone(), Arc::clone(&req), Arc::clone(&done));
            let handle = tokio::spawn(async move {
                let reg = crate::ops::plan::registry(&Context::new(config)).await?;
                reg.hold_set(
                    &uuid,
                    crate::registry::HoldScope::Table,
                    "litigation: preserve everything",
                    Utc::now(),
                )
                .await?;
                reg.close().await;
                if let Ok(mut d) = done.lock() {
                    *d = Some(req.load(std::sync::atomic::Ordering::SeqCst));
                }
                Ok(())
            });
            if let Ok(mut t) = spawned.lock() {
                *t = Some(handle);
            }
        }
        Box::pin(async { Ok(()) })
    }));
    let done = Arc::clone(&committed_at);
    lab.ctx.hooks.before_batch = Some(Arc::new(move |sent| {
        let done = Arc::clone(&done);
        Box::pin(async move {
            if sent < 2 {
                return Ok(());
            }
            for _ in 0..400 {
                if done.lock().map(|d| d.is_some()).unwrap_or(true) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Ok(())
        })
    }));
    let p = lab.purge(&cid, &report).await?;
    let why = reasons_of(&p);
    obs.saw(format!("purge {}: {why}", status_of(&p)));
    let handle = task.lock().ok().and_then(|mut t| t.take());
    match handle {
        Some(h) => match h.await {
            Ok(r) => r?,
            Err(e) => return Err(Error::Internal(format!("the hold task failed: {e}"))),
        },
        None => obs.expect(false, "the hold was set during the purge"),
    }
    let sent = requests.load(std::sync::atomic::Ordering::SeqCst);
    let at_commit = committed_at.lock().ok().and_then(|d| *d);
    obs.saw(format!(
        "{sent} delete requests in all; {at_commit:?} sent when the hold committed"
    ));
    obs.expect(at_commit == Some(sent), "no delete request after the hold committed");
    obs.expect(
        status_of(&p) == "HALTED" && why.contains("legal hold changed") && why.contains("litigation"),
        "purge HALTED naming the hold",
    );
    let listing = lab.listing().await?;
    let states = crate::ops::plan::registry(&lab.truth)
        .await?
        .object_states(&cid)
        .await?;
    let wrong: Vec<String> = states
        .iter()
        .filter(|o| match o.state {
            State::Verified => listing.contains(&o.path),
            State::DeleteApproved | State::Protected => !listing.contains(&o.path),
            _ => true,
        })
        .map(|o| format!("{} {}", o.state, o.path))
        .collect();
    obs.expect(
            wrong.is_empty() && states.iter().any(|o| o.state == State::Verified),
            format!("each object keeps its true state: deleted ones VERIFIED, the rest not deleted and present (wrong: {wrong:?})"),
        );
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

async fn scenario(id: &str, env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let mut obs = Obs::new();
    match id {
        "reader-registration-delay" => {
            let lab = Lab::new(env, id, "").await?;
            let Some((cid, ids, report)) = lab.to_evidence(&mut obs).await? else {
                return Ok((obs, Vec::new(), lab.state));
            };
            let s = ids[0];
            let acct = lab.account(&[s], &[]).await?;
            // The reader registered before the plan; the control plane made the lease visible only now.
            crate::ops::protect::lease_add(&lab.ctx, &lab.source, &lab.policy, s, "training run", "ml-team", "7d")
                .await?;
            let p = lab.purge(&cid, &report).await?;
            let why = reasons_of(&p);
            obs.saw(format!("purge {}: {why}", status_of(&p)));
            obs.expect(status_of(&p) == "REFUSED", "purge REFUSED");
            obs.expect(
                why.contains("leases changed"),
                "refused by the lease-watermark compare-and-set",
            );
            obs.expect(
                why.contains("independent closure check") && why.contains(&format!("snapshot {s}")),
                format!("refused by the closure check naming snapshot {s}"),
            );
            Ok((obs, lab.lost(&acct).await?, lab.state))
        }
        "ref-case-collision" => {
            let lab = Lab::new(env, id, "").await?;
            let Some((_, ids)) = lab.candidate(&mut obs).await? else {
                return Ok((obs, Vec::new(), lab.state));
            };
            let (a, b) = (ids[0], ids[ids.len() - 1]);
            commit_ref(&lab.ctx, &lab.source, "Main", a, true).await?;
            let plan = lab.plan().await?;
            let warned = plan["warnings"].to_string();
            let (cid, cids) = expired(&plan).unwrap_or_default();
            obs.expect(
                !cids.contains(&a),
                format!("snapshot {a} (head of `Main`) is not a candidate"),
            );
            obs.expect(
                warned.contains("differ only by case"),
                "the plan warns that `Main` and `main` differ only by case",
            );
            let acct = lab.account(&[a, b], &[]).await?;
            // A commit racing the quarantine: another writer creates the next metadata file first (412).
            lab.state.fail_conditional_puts(Some(".metadata.json"));
            let raced = lab.quarantine(&cid, QuarantineMode::Tag).await;
            lab.state.fail_conditional_puts(None);
            let raced = match raced {
                Ok(o) => format!("{} {}", status_of(&o), reasons_of(&o)),
                Err(e) => format!("error: {e}"),
            };
            obs.saw(format!("quarantine while a commit races it: {raced}"));
            obs.expect(
                raced.starts_with("REFUSED") && raced.contains("lost the race"),
                "a quarantine whose commit loses the race is REFUSED, nothing committed",
            );
            obs.expect(
                lab.state(&cid).await? == State::UnreferencedEligible,
                "the candidate is not quarantined by the lost commit",
            );
            let q = lab.quarantine(&cid, QuarantineMode::Tag).await?;
            let d = lab.drill().await?;
            obs.expect(
                q.verdict == Verdict::Ok && d.predicate.summary.gate == "PASS",
                "quarantine and drill of the remaining candidate pass",
            );
            commit_ref(&lab.ctx, &lab.source, "MAIN", b, true).await?;
            let p = lab.purge(&cid, &d.report).await?;
            let why = reasons_of(&p);
            obs.saw(format!("purge {}: {why}", status_of(&p)));
            obs.expect(status_of(&p) == "REFUSED", "purge REFUSED after `MAIN` was created");
            obs.expect(
                why.contains("the table changed"),
                "refused by the table-generation compare-and-set",
            );
            obs.expect(why.contains("ref MAIN"), "refused by the closure check naming ref MAIN");
            Ok((obs, lab.lost(&acct).await?, lab.state))
        }
        "uncommitted-writer" => {
            let lab = Lab::new(env, id, "maxWriterDuration: 1s\norphanSafetyInterval: 2s\n").await?;
            let root_uri = lab.table_root().await?;
            crate::ops::protect::writer_begin(&lab.ctx, &lab.source, "data/_staging/w1").await?;
            let staged = ["data/_staging/w1/part-0.parquet", "data/_staging/w1/part-1.parquet"];
            let unregistered = "data/_staging/w2/part-0.parquet";
            for p in staged.iter().chain([&unregistered]) {
                lab.ctx
                    .storage
                    .put_new(
                        &location::join(&root_uri, p),
                        bytes::Bytes::from_static(b"uncommitted upload"),
                    )
                    .await?;
            }
            tokio::time::sleep(std::time::Duration::from_millis(2100)).await; // past orphanSafetyInterval
            let extra: Vec<String> = staged.iter().chain([&unregistered]).map(|s| (*s).to_owned()).collect();
            let acct = lab.account(&[], &extra).await?;
            let plan = lab.plan().await?;
            let cands = plan["candidates"].as_array().cloned().unwrap_or_default();
            let in_any = |p: &str| cands.iter().any(|c| c["objects"].to_string().contains(p));
            for p in staged {
                obs.expect(!in_any(p), format!("{p} (open writer w1) is in no candidate"));
            }
            obs.expect(
                plan["differences"].to_string().contains("writer:"),
                "the plan lists the writer's files as differences with the writer as reason",
            );
            let orphan = cands
                .iter()
                .find(|c| c["kind"] == "orphans" && c["objects"].to_string().contains(unregistered));
            obs.expect(
                orphan.is_some(),
                format!("{unregistered} (no writer registered) is an orphan candidate"),
            );
            if let Some(o) = orphan.and_then(|o| o["candidate_id"].as_str()) {
                let q = lab.quarantine(o, QuarantineMode::Tag).await?;
                obs.saw(format!("quarantine {o}: {}", q.human.trim()));
                obs.expect(
                    q.verdict != Verdict::Ok,
                    "quarantine of the orphan candidate is refused",
                );
            }
            Ok((obs, lab.lost(&acct).await?, lab.state))
        }
        "lagging-listing" => {
            let lab = Lab::new(env, id, "").await?;
            let consistent = lab.plan().await?;
            let (_, table_path) = lab.ctx.storage.resolve(&lab.table_root().await?)?;
            lab.state
                .hide_listed_after(Some((table_path.to_string(), Utc::now() - chrono::Duration::hours(1))));
            let lagging = lab.plan().await?;
            let pick = |p: &Value| {
                p["candidates"]
                    .as_array()
                    .and_then(|a| a.iter().find(|c| c["kind"] == "expired-snapshots"))
                    .map(|c| (c["candidate_id"].clone(), c["inventory_root"].clone()))
            };
            obs.expect(
                pick(&consistent).is_some() && pick(&consistent) == pick(&lagging),
                "the candidate and its inventory root are the same with the lagging listing",
            );
            let acct = lab.account(&[], &[]).await?;
            let Some((cid, _, report)) = lab.to_evidence(&mut obs).await? else {
                return Ok((obs, Vec::new(), lab.state));
            };
            let inventory = lab.inventory(&cid).await?;
            let p = lab.purge(&cid, &report).await?;
            obs.saw(format!("purge {}", status_of(&p)));
            obs.expect(status_of(&p) == "VERIFIED", "purge VERIFIED under the lagging listing");
            let gone: BTreeSet<String> = acct.before.difference(&lab.listing().await?).cloned().collect();
            obs.expect(
                gone == inventory,
                format!("the deleted set equals the inventory ({} objects)", inventory.len()),
            );
            Ok((obs, lab.lost(&acct).await?, lab.state))
        }
        "hold-races-cas" => {
            let mut lab = Lab::new(env, id, "").await?;
            let Some((cid, ids, report)) = lab.to_evidence(&mut obs).await? else {
                return Ok((obs, Vec::new(), lab.state));
            };
            let acct = lab.account(&ids, &[]).await?;
            let config = lab.ctx.config.clone();
            let source = lab.source.clone();
            lab.ctx.hooks.before_accept = Some(Arc::new(move || {
                let (config, source) = (config.clone(), source.clone());
                Box::pin(async move {
                    let c = Context::new(config);
                    crate::ops::protect::hold_set(&c, &source, "table", "litigation: preserve everything").await?;
                    Ok(())
                })
            }));
            let p = lab.purge(&cid, &report).await?;
            let why = reasons_of(&p);
            obs.saw(format!("purge {}: {why}", status_of(&p)));
            obs.expect(status_of(&p) == "REFUSED", "purge REFUSED");
            obs.expect(
                why.contains("holds changed"),
                "refused by the hold-generation compare-and-set",
            );
            Ok((obs, lab.lost(&acct).await?, lab.state))
        }
        "stale-pass-after-fail" => Box::pin(stale_pass_after_fail(env)).await,
        "hold-lands-mid-purge" => Box::pin(hold_lands_mid_purge(env)).await,
        "planner-bug" => {
            let mut lab = Lab::new(env, id, "").await?;
            lab.ctx.hooks.inject_protected_snapshot = true;
            let table = lab.truth.table(&lab.source).await?;
            let victim = table.refs().get("audit-q2").map(|r| r.snapshot_id);
            let acct = lab.account(&[], &[]).await?;
            let Some((cid, ids)) = lab.candidate(&mut obs).await? else {
                return Ok((obs, Vec::new(), lab.state));
            };
            obs.expect(
                victim.is_some_and(|v| ids.contains(&v)),
                "the injected bug put audit-q2's head into the candidate",
            );
            let q = lab.quarantine(&cid, QuarantineMode::Tag).await?;
            let why = reasons_of(&q);
            obs.saw(format!("quarantine {}: {why}", status_of(&q)));
            obs.expect(
                q.verdict != Verdict::Ok && why.contains("independent closure check"),
                "quarantine REFUSED by the independent closure check",
            );
            obs.expect(lab.state(&cid).await? == State::Protected, "the candidate is PROTECTED");
            if q.verdict == Verdict::Ok {
                // Only a build without the closure check gets here: it goes on as a deleter would, and the
                // objects it loses are counted.
                let d = lab.drill().await?;
                let p = lab.purge(&cid, &d.report).await?;
                obs.saw(format!("purge {}: {}", status_of(&p), reasons_of(&p)));
            }
            Ok((obs, lab.lost(&acct).await?, lab.state))
        }
        "bundle-missing-layer" => {
            let lab = Lab::new(env, id, "").await?;
            let Some((cid, _)) = lab.candidate(&mut obs).await? else {
                return Ok((obs, Vec::new(), lab.state));
            };
            let acct = lab.account(&[], &[]).await?;
            let q = lab.quarantine(&cid, QuarantineMode::Bundle).await?;
            obs.expect(
                q.verdict == Verdict::Ok,
                "bundle-mode quarantine removes the snapshots from the table",
            );
            let bundle = q.json["bundles"][0]["uri"].as_str().unwrap_or_default().to_owned();
            let trust = crate::evidence::keys::TrustStore::load_dir(&lab.keys)?;
            let (pred, _) = crate::bundle::verified_predicate(&lab.ctx.storage, &bundle, &trust).await?;
            let member = pred
                .inventory
                .iter()
                .find(|e| e.layer == crate::bundle::Layer::ManifestList)
                .and_then(|e| e.copy.clone());
            let Some(member) = member else {
                obs.expect(false, "the bundle holds a manifest list copy to remove");
                return Ok((obs, lab.lost(&acct).await?, lab.state));
            };
            let copy = location::join(&crate::bundle::bundle_dir(&bundle)?, &member);
            lab.truth.storage.delete(&copy).await?;
            obs.saw(format!("removed {copy}"));
            let d = lab.drill().await?;
            let failed = d.predicate.results.iter().any(|r| {
                r.status == crate::bundle::RestoreStatus::Failed
                    && r.findings.iter().any(|f| f.to_string().contains("MISSING"))
            });
            obs.expect(failed, "the drill FAILs the bundle with a MISSING finding");
            let p = lab.purge(&cid, &d.report).await?;
            let why = reasons_of(&p);
            obs.saw(format!("purge {}: {why}", status_of(&p)));
            obs.expect(
                status_of(&p) == "REFUSED" && why.contains("RESTORE_VERIFIED"),
                "purge REFUSED: the evidence does not show every bundle RESTORE_VERIFIED",
            );
            Ok((obs, lab.lost(&acct).await?, lab.state))
        }
        "late-model-reader" => {
            let lab = Lab::new(env, id, "").await?;
            let Some((stale_id, ids)) = lab.candidate(&mut obs).await? else {
                return Ok((obs, Vec::new(), lab.state));
            };
            let (leased, unleased) = (ids[0], ids[ids.len() - 1]);
            let acct = lab.account(&[leased], &[]).await?;
            crate::ops::protect::lease_add(
                &lab.ctx,
                &lab.source,
                &lab.policy,
                leased,
                "model v7 features",
                "ml-team",
                "7d",
            )
            .await?;
            let q = lab.quarantine(&stale_id, QuarantineMode::Tag).await?;
            obs.saw(format!("quarantine of the stale plan: {}", q.human.trim()));
            obs.expect(
                q.verdict != Verdict::Ok,
                "quarantine refuses the plan made before the late lease",
            );
            let Some((cid, cids, report)) = lab.to_evidence(&mut obs).await? else {
                return Ok((obs, lab.lost(&acct).await?, lab.state));
            };
            obs.expect(
                !cids.contains(&leased),
                format!("the re-plan keeps leased snapshot {leased}"),
            );
            // The other model reads `unleased` without a lease: fine before the purge, not after.
            let table = lab.truth.table(&lab.source).await?;
            let before = crate::table::tree::read_tree(&table, &lab.truth.storage, unleased, 4)
                .await
                .is_ok();
            let p = lab.purge(&cid, &report).await?;
            obs.expect(
                status_of(&p) == "VERIFIED",
                "the unleased snapshot's candidate is purged (policy allows it)",
            );
            let table = lab.truth.table(&lab.source).await?;
            let after = match crate::table::tree::read_tree(&table, &lab.truth.storage, unleased, 4).await {
                Ok(_) => "still readable".to_owned(),
                Err(e) => format!("read fails: {e}"),
            };
            let q = crate::ops::plan::registry(&lab.ctx).await?.candidate(&cid).await?;
            let bundle = q
                .quarantine
                .as_ref()
                .and_then(|q| q["bundles"].as_array().cloned())
                .unwrap_or_default()
                .into_iter()
                .find(|b| b["snapshot_id"].as_i64() == Some(unleased))
                .and_then(|b| b["uri"].as_str().map(str::to_owned))
                .unwrap_or_default();
            let restored = crate::ops::commands::restore(&lab.truth, &bundle, &lab.keys, false, None).await?;
            obs.expect(
                cids.contains(&unleased) && before,
                format!("the reader read snapshot {unleased} before the purge"),
            );
            obs.readers.push(serde_json::json!({
                "snapshot_id": unleased,
                "lease": null,
                "read_before_purge": before,
                "read_after_purge": after,
                "bundle": bundle,
                "bundle_restores": restored.verdict == Verdict::Ok,
            }));
            obs.expect(
                restored.verdict == Verdict::Ok,
                "the unprotected reader is listed, and its snapshot's bundle still restores",
            );
            Ok((obs, lab.lost(&acct).await?, lab.state))
        }
        "lagging-replica" => {
            let lab = Lab::new(env, id, "").await?;
            let Some((cid, _, report)) = lab.to_evidence(&mut obs).await? else {
                return Ok((obs, Vec::new(), lab.state));
            };
            let acct = lab.account(&[], &[]).await?;
            lab.state.lagging_replica(true);
            let p = lab.purge(&cid, &report).await?;
            let st = lab.object_states(&cid).await?;
            obs.saw(format!("purge {}; objects {st:?}", status_of(&p)));
            obs.expect(
                status_of(&p) == "DELETE_UNKNOWN" && !st.contains_key("VERIFIED"),
                "purge ends DELETE_UNKNOWN and counts no object deleted on a stale re-check",
            );
            lab.state.catch_up();
            lab.state.lagging_replica(false);
            let r = lab.reconcile(&cid).await?;
            let st = lab.object_states(&cid).await?;
            obs.saw(format!("reconcile {}; objects {st:?}", status_of(&r)));
            obs.expect(
                st.keys().all(|k| k == "VERIFIED") && lab.state(&cid).await? == State::Verified,
                "reconcile settles every object VERIFIED",
            );
            Ok((obs, lab.lost(&acct).await?, lab.state))
        }
        "lost-delete-receipts" => {
            let lab = Lab::new(env, id, "").await?;
            let Some((cid, _, report)) = lab.to_evidence(&mut obs).await? else {
                return Ok((obs, Vec::new(), lab.state));
            };
            let acct = lab.account(&[], &[]).await?;
            lab.state.lose_delete_responses(2);
            lab.state.fail_deletes(3);
            let p = lab.purge(&cid, &report).await?;
            let st = lab.object_states(&cid).await?;
            let injected = lab.state.injected();
            let uncertain = injected.get("lost_delete_response").copied().unwrap_or(0)
                + injected.get("delete_503").copied().unwrap_or(0);
            obs.saw(format!(
                "purge {}; objects {st:?}; injected {injected:?}",
                status_of(&p)
            ));
            obs.expect(
                status_of(&p) == "DELETE_UNKNOWN"
                    && uncertain > 0
                    && st.get("DELETE_UNKNOWN").copied().unwrap_or(0) as u64 == uncertain,
                "exactly the objects whose delete was uncertain are DELETE_UNKNOWN",
            );
            lab.state.clear();
            let r = lab.reconcile(&cid).await?;
            let st = lab.object_states(&cid).await?;
            obs.saw(format!("reconcile {}; objects {st:?}", status_of(&r)));
            let inventory = lab.inventory(&cid).await?;
            let gone: BTreeSet<String> = acct.before.difference(&lab.listing().await?).cloned().collect();
            obs.expect(
                st.keys().all(|k| k == "VERIFIED") && gone == inventory,
                "reconcile settles them; the deleted set equals the inventory",
            );
            Ok((obs, lab.lost(&acct).await?, lab.state))
        }
        "delete-marker-recovery" => {
            let lab = Lab::new(env, id, "").await?;
            let Some((cid, _, report)) = lab.to_evidence(&mut obs).await? else {
                return Ok((obs, Vec::new(), lab.state));
            };
            let acct = lab.account(&[], &[]).await?;
            let p = lab.purge(&cid, &report).await?;
            obs.expect(status_of(&p) == "VERIFIED", "purge VERIFIED");
            let rec = crate::ops::plan::registry(&lab.ctx).await?.candidate(&cid).await?;
            let bundles: Vec<String> = rec
                .quarantine
                .as_ref()
                .and_then(|q| q["bundles"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|b| b["uri"].as_str().map(str::to_owned))
                .collect();
            let mut all = !bundles.is_empty();
            for b in &bundles {
                let r = crate::ops::commands::restore(&lab.truth, b, &lab.keys, true, None).await?;
                all &= r.verdict == Verdict::Ok;
            }
            obs.expect(all, format!("all {} bundles restore after the purge", bundles.len()));
            if env.store.is_some() {
                // A versioned bucket: the purge left delete markers; undelete removes them and verifies.
                let inventory = lab.inventory(&cid).await?;
                let root = lab.table_root().await?;
                let mut behind_markers = 0;
                for p in &inventory {
                    let v = lab.truth.storage.s3_versions(&location::join(&root, p)).await?;
                    if v.iter().any(|v| v.is_latest && v.is_delete_marker) && v.iter().any(|v| !v.is_delete_marker) {
                        behind_markers += 1;
                    }
                }
                obs.expect(
                    behind_markers == inventory.len() && !inventory.is_empty(),
                    format!(
                        "every purged object ({behind_markers} of {}) is behind a delete marker, its version kept",
                        inventory.len()
                    ),
                );
                let u = crate::ops::deleter::undelete(&lab.ctx, &lab.source, &cid, &lab.keys).await?;
                obs.saw(format!("undelete {}", status_of(&u)));
                let listed = lab.listing().await?;
                obs.expect(
                    status_of(&u) == "UNDELETED" && inventory.iter().all(|p| listed.contains(p)),
                    "undelete brings every purged object back from behind its delete marker, verified",
                );
            }
            let into = lab.dir.join("recovered");
            let r = crate::ops::materialize::restore_into(
                &lab.truth,
                &bundles[0],
                &lab.keys,
                &format!("file://{}", into.display()),
                "demo",
                "sales.recovered",
            )
            .await?;
            obs.saw(r.human.lines().next().unwrap_or_default().to_owned());
            obs.expect(
                r.verdict == Verdict::Ok,
                "the snapshot is brought back as a readable table",
            );
            Ok((obs, lab.lost(&acct).await?, lab.state))
        }
        other => Err(Error::invalid(
            "--scenario",
            format!("unknown scenario {other:?}; known: {}", SCENARIOS.join(", ")),
        )),
    }
}

/// Runs the matrix (or the scenarios of `opts.only`) and returns the unsigned predicate.
///
/// # Errors
/// Only when the scratch directory cannot be made; a scenario that fails to run is a failed scenario.
pub async fn run_matrix(opts: &MatrixOptions, digest: &str) -> Result<FaultPredicate> {
    if let Some(bad) = opts.only.iter().find(|id| !SCENARIOS.contains(&id.as_str())) {
        return Err(Error::invalid(
            "--scenario",
            format!("unknown scenario {bad:?}; known: {}", SCENARIOS.join(", ")),
        ));
    }
    let started = Utc::now();
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
        finished_at: Utc::now().to_rfc3339(),
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
    let mut p = run_matrix(opts, &digest).await?;
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
            Utc::now().format("%Y%m%dT%H%M%S%.3fZ"),
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
        run_matrix(&opts, &digest).await.unwrap()
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
