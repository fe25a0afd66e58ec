//! Restore drills: sample sealed bundles, restore and verify each, measure RTO/RPO, sign the report.
//!
//! Recovery points (`drill/recovery_point.rs`): a cold backup's RPO is its signed checkpoint time minus the
//! recovered snapshot's commit time, and the signed checkpoint is compared with the registry's record when
//! the configuration has a `[registry]`; a quarantine bundle has no RPO but a history age, its snapshot's age
//! behind the live table's head at drill time.
//!
//! A drill plan (`drills/*.toml`) names a folder of bundles, a sample size and a seed. The drill
//! samples bundles at random without replacement (the seed is always recorded, so anyone can
//! recompute the selection), verifies each deeply ([`crate::bundle::verify`]), measures the
//! recovery time per item from an injectable [`Clock`], and writes a signed report — a DSSE
//! envelope of an in-toto Statement — to `<reports>/<plan name>/<UTC time>.dsse.json`, plus a
//! human report beside it. Reports of one plan form a hash chain through `previous_report`.
//!
//! The gate is `PASS` only when every sampled item is `RESTORE_VERIFIED`. A drill never writes to
//! the tables or bundles it checks.
//!
//! Bundles after purge: a quarantine drill leaves out of its population every bundle beside which a finished
//! purge wrote a retirement record ([`crate::evidence::retirement`]) that verifies under the plan's trust store
//! and names that bundle (its id, root and envelope digest), and counts them in the report (`sample.retired`):
//! a drill never fails because the deleter did its job. A record that does not verify, or names another
//! bundle, is a finding on the bundle it lies beside; that bundle stays in the population and is drilled
//! whatever the sample (after the seeded selection), so the drill fails naming the record.
//!
//! Policies (#23 point 5): a plan's `policies` (a policy file or a folder of them) binds the drilled tables to
//! their retention policies by UUID; each result records its table's policy digest (`results[].policy_digest`),
//! and `drill.policy_digest` is set when they all name the same one. The deleter's weekly gate does not count a
//! report that names another digest for a table than the policy in force (`crate::ops::gates`).

mod recovery_point;

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::bundle::{self, RestoreStatus, VerifyOptions};
use crate::clock::{self, Clock};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::evidence::keys::{self, TrustStore};
pub use crate::evidence::predicate::{
    DrillInfo, DrillPredicate, DrillResult, PREDICATE_TYPE, SampleInfo, Shard, Summary,
};
use crate::evidence::retirement::{self, BundleIdentity, RECORD_FILE};
use crate::evidence::sample;
use crate::evidence::{self, Statement, Subject};
use crate::io::store::Storage;
use crate::model::findings::Finding;
use crate::model::location;

/// A drill plan as written in `drills/*.toml`. Relative paths are relative to the current directory.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DrillPlan {
    /// Plan name; reports go to `<reports>/<name>/`.
    pub name: String,
    /// `quarantine` (sealed quarantine bundles, verified in place) or `cold-backup` (backup
    /// bundles, each recovered in full into a scratch location).
    pub kind: String,
    /// `quarantine`: folder or prefix URI holding bundles.
    pub bundles: Option<String>,
    /// `cold-backup`: folder or prefix URI holding backup bundles (`backup --to` folders).
    pub backups: Option<String>,
    /// `cold-backup`: scratch location (local) the recoveries are made under, removed afterwards
    /// unless `drill run --keep`.
    pub target: Option<String>,
    /// `cold-backup`: the RTO each recovery must meet (default `4h`).
    pub rto_limit: Option<String>,
    /// How many bundles to sample (default 30).
    #[serde(default = "default_sample")]
    pub sample: usize,
    /// Sampling seed; default derived from the plan name and the UTC date.
    pub seed: Option<u64>,
    /// Trust store: a folder of `.pub` keys.
    pub trust: String,
    /// Signing key for the report (PKCS#8 PEM).
    pub key: String,
    /// Reports folder (default `reports`).
    #[serde(default = "default_reports")]
    pub reports: String,
    /// Bundles sealed longer ago than this are not sampled (`30d`, `12h` …).
    pub max_bundle_age: Option<String>,
    /// The coverage rule: every bundle of the population not drilled by this plan within this many weeks is
    /// sampled first (least recently drilled first, never-drilled ones before all), then the sample fills up at
    /// random. Without it the whole sample is random.
    pub coverage_weeks: Option<u32>,
    /// `[evidence_retention] mode = "governance"|"compliance", period = "400d"`: the signed report (and its text
    /// twin) are written under S3 Object Lock with this retention; the reports folder must be an S3 bucket with
    /// Object Lock (checked before the drill starts).
    pub evidence_retention: Option<PlanRetention>,
    /// The retention policies of the drilled tables: a policy file, or a folder whose `*.yaml`/`*.yml` files are
    /// each one policy. Each drilled item's table is matched by its UUID against the policies' `table` bindings
    /// (no two may bind the same table) and the item records that policy's digest (`results[].policy_digest`).
    pub policies: Option<String>,
    /// `quarantine`: how many sampled bundles are verified side by side (default 1: one after another). Each
    /// bundle's RTO is still the time from its own start to its own end, but measured while the others run it is
    /// what that restore took sharing the machine, an upper bound on it alone; the report records the figure
    /// (`drill.parallel_bundles`). Memory grows with it: each bundle in flight holds its own objects.
    pub parallel_bundles: Option<usize>,
}

/// `[evidence_retention]` of a drill plan.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRetention {
    /// `governance` or `compliance`.
    pub mode: String,
    /// How long each report stays locked (`400d`, …).
    pub period: String,
}

impl PlanRetention {
    /// The validated retention.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the key and the rule.
    pub fn parse(&self) -> Result<crate::govern::policy::EvidenceRetention> {
        let mode = crate::govern::policy::LockMode::parse(&self.mode).ok_or_else(|| {
            Error::invalid(
                "evidence_retention.mode",
                format!("must be governance or compliance, got {:?}", self.mode),
            )
        })?;
        let period = clock::parse_duration(&self.period).map_err(|r| Error::invalid("evidence_retention.period", r))?;
        if period <= chrono::Duration::zero() {
            return Err(Error::invalid("evidence_retention.period", "must be greater than zero"));
        }
        Ok(crate::govern::policy::EvidenceRetention { mode, period })
    }
}

fn default_sample() -> usize {
    30
}

fn default_reports() -> String {
    "reports".into()
}

/// Options of one drill run beyond the plan file (`drill run`'s flags).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Run only this share of the sample; the report goes to `<reports>/<plan>/shards/`, outside the chain.
    pub shard: Option<Shard>,
    /// `--run-id ID` (with `--shard`): the run the shard belongs to.
    pub run_id: Option<String>,
    /// Cold-backup drills: keep the scratch recoveries instead of removing them.
    pub keep: bool,
    /// `--metrics-file PATH`: Prometheus metrics written after the run.
    pub metrics_file: Option<std::path::PathBuf>,
    /// `-q`: no progress line.
    pub quiet: bool,
}

/// What `drill run` hands back.
#[derive(Debug, Clone, Serialize)]
pub struct DrillOutcome {
    /// The signed report.
    pub report: String,
    /// The human report.
    pub human_report: String,
    /// The predicate.
    pub predicate: DrillPredicate,
}

/// Reads and validates a plan file.
///
/// # Errors
/// [`Error::Config`] naming the file and field.
pub fn load_plan(path: &Path) -> Result<(DrillPlan, Vec<u8>)> {
    let bytes = std::fs::read(path).map_err(|e| Error::io("read drill plan", path, e))?;
    let text = String::from_utf8(bytes.clone()).map_err(|_| Error::Config {
        file: path.display().to_string(),
        reason: "not UTF-8".into(),
    })?;
    let plan: DrillPlan = toml::from_str(&text).map_err(|e| Error::Config {
        file: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let bad = |reason: String| Error::Config {
        file: path.display().to_string(),
        reason,
    };
    match plan.kind.as_str() {
        "quarantine" => {
            if plan.bundles.is_none() {
                return Err(bad("a quarantine drill needs `bundles`".into()));
            }
            if plan.backups.is_some() || plan.target.is_some() || plan.rto_limit.is_some() {
                return Err(bad(
                    "`backups`, `target` and `rto_limit` belong to cold-backup drills".into()
                ));
            }
            if plan.parallel_bundles == Some(0) {
                return Err(bad(
                    "parallel_bundles must be at least 1 (leave it out to verify one bundle at a time)".into(),
                ));
            }
        }
        "cold-backup" => {
            if plan.backups.is_none() || plan.target.is_none() {
                return Err(bad("a cold-backup drill needs `backups` and `target`".into()));
            }
            if plan.bundles.is_some() {
                return Err(bad("`bundles` belongs to quarantine drills; use `backups`".into()));
            }
            if plan.parallel_bundles.is_some() {
                return Err(bad(
                    "`parallel_bundles` belongs to quarantine drills (a cold-backup drill recovers one table at a \
                     time, each against its RTO limit)"
                        .into(),
                ));
            }
            if let Some(l) = &plan.rto_limit {
                clock::parse_duration(l).map_err(|r| bad(format!("rto_limit: {r}")))?;
            }
        }
        other => {
            return Err(bad(format!("kind = {other:?}: \"quarantine\" or \"cold-backup\"")));
        }
    }
    if plan.sample == 0 {
        return Err(bad("sample must be at least 1".into()));
    }
    if plan.coverage_weeks == Some(0) {
        return Err(bad(
            "coverage_weeks must be at least 1 (leave it out for a random sample only)".into(),
        ));
    }
    if plan.name.is_empty()
        || !plan
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        || plan.name.starts_with('.')
    {
        return Err(bad(format!(
            "name {:?} must be [A-Za-z0-9._-]+ (it names the reports folder)",
            plan.name
        )));
    }
    if let Some(a) = &plan.max_bundle_age {
        clock::parse_duration(a).map_err(|r| bad(format!("max_bundle_age: {r}")))?;
    }
    if let Some(r) = &plan.evidence_retention {
        r.parse().map_err(|e| bad(e.to_string()))?;
    }
    Ok((plan, bytes))
}

/// The default seed: derived from the plan name and the UTC date, so a day's run is reproducible.
#[must_use]
pub fn default_seed(plan: &str, now: chrono::DateTime<chrono::Utc>) -> u64 {
    let d = sha2::Sha256::digest(format!("{plan}/{}", now.format("%Y-%m-%d")).as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b)
}

/// When this plan last drilled each bundle id (epoch ms of the report's `finished_at`), from the reports of its
/// chain folder that verify under `trust`. Shard reports of a split of the sample's items count (each drilled its
/// items whole); a result that verified only a share of its bundle's objects (`object_shard`: a `--split objects`
/// shard or a signed `restore --shard`) does not, since the bundle was drilled whole only if the shares were merged,
/// and the merged report counts then.
///
/// # Errors
/// Storage errors while listing or reading the reports.
async fn last_drilled(storage: &Storage, chain_folder: &str, trust: &TrustStore) -> Result<BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    // The chain's own reports, as `audit verify --chain` recomputes the picks from them (review E8): not the
    // shard reports under `shards/`, which only their merge (a report of the chain) brings in.
    for uri in crate::ops::audit::list_reports(storage, chain_folder).await? {
        let bytes = storage
            .get_bounded(&uri, storage.options().max_metadata_bytes, "a drill report")
            .await?
            .bytes;
        // Only drill reports count, and only under keys with the drill role (the deleter's key is never one).
        let Ok(v) = evidence::verify(&bytes, &trust.for_role(keys::Role::Drill)) else {
            continue;
        };
        if v.predicate_type() != PREDICATE_TYPE {
            continue;
        }
        let Ok(p) = serde_json::from_value::<DrillPredicate>(v.predicate().clone()) else {
            continue;
        };
        let Ok(t) = chrono::DateTime::parse_from_rfc3339(&p.finished_at) else {
            continue;
        };
        for r in p.results.iter().filter(|r| r.object_shard.is_none()) {
            let e = out.entry(r.bundle_id.clone()).or_insert(i64::MIN);
            *e = (*e).max(t.timestamp_millis());
        }
    }
    Ok(out)
}

/// The implementation digest a drill report names (SHA-256 of the binary that ran it), asked for only when the report
/// is written: hashing a binary of tens of MB is ~40 ms of one core, which the command can spend while the drill
/// runs (`Context::implementation_digest_in_background`).
pub type ImplementationDigest<'a> = dyn Fn() -> Result<String> + Send + Sync + 'a;

/// Runs a quarantine drill plan (see [`run_with`]).
///
/// # Errors
/// [`Error`] when the drill cannot run at all (no bundles, unreadable key or store); item
/// failures are results, not errors.
pub async fn run(
    storage: &Storage,
    plan_path: &Path,
    clock: &dyn Clock,
    implementation_digest: &ImplementationDigest<'_>,
) -> Result<DrillOutcome> {
    run_with(
        storage,
        &Config::default(),
        plan_path,
        clock,
        implementation_digest,
        RunOptions::default(),
    )
    .await
}

/// Runs a drill plan of either kind with [`RunOptions`] (a shard of the sample; keeping a
/// cold-backup drill's scratch recoveries).
///
/// # Errors
/// [`Error`] when the drill cannot run at all (no bundles, unreadable key or store); item
/// failures are results, not errors.
pub async fn run_with(
    storage: &Storage,
    config: &Config,
    plan_path: &Path,
    clock: &dyn Clock,
    implementation_digest: &ImplementationDigest<'_>,
    opts: RunOptions,
) -> Result<DrillOutcome> {
    let (plan, plan_bytes) = load_plan(plan_path)?;
    run_plan(
        storage,
        config,
        &plan,
        &plan_bytes,
        &plan_path.display().to_string(),
        clock,
        implementation_digest,
        opts,
    )
    .await
}

/// [`run_with`] on a plan already loaded: `plan_bytes` are what the report's `plan_digest` covers, `origin`
/// names the plan in errors (its file, or the command that built it: `restore --shard … --key`).
///
/// # Errors
/// As [`run_with`].
#[allow(clippy::too_many_lines, clippy::too_many_arguments)]
pub async fn run_plan(
    storage: &Storage,
    config: &Config,
    plan: &DrillPlan,
    plan_bytes: &[u8],
    origin: &str,
    clock: &dyn Clock,
    implementation_digest: &ImplementationDigest<'_>,
    opts: RunOptions,
) -> Result<DrillOutcome> {
    if plan.kind == "cold-backup" && opts.shard.as_ref().is_some_and(|s| s.objects().is_some()) {
        return Err(Error::invalid(
            "--split",
            "objects splits the objects of quarantine bundles; a cold-backup drill recovers whole tables (split \
             its items instead)",
        ));
    }
    let trust = TrustStore::load_dir(Path::new(&plan.trust))?;
    let key = keys::load_signing_key(Path::new(&plan.key))?;
    // A drill report counts only under a key with the drill role: refused before any work, not after an hour of
    // verifying, and never a deleter's key vouching for the drill that allows its deletes.
    trust.require_role(Path::new(&plan.key), &key, keys::Role::Drill, "drill reports")?;
    let retention = plan.evidence_retention.as_ref().map(PlanRetention::parse).transpose()?;
    // Reports that must be locked go only where they can be: checked before any work.
    crate::ops::evidence_lock::preflight(storage, &location::canonical_uri(&plan.reports)?, retention).await?;
    let started = clock.now();
    let cold = plan.kind == "cold-backup";
    let source = plan
        .bundles
        .clone()
        .or_else(|| plan.backups.clone())
        .ok_or_else(|| Error::invalid(origin, "no bundles or backups named"))?;
    let rto_limit = match &plan.rto_limit {
        Some(l) => clock::parse_duration(l).map_err(|r| Error::invalid("rto_limit", r))?,
        None => chrono::Duration::hours(4),
    };
    let policies = match &plan.policies {
        Some(p) => load_policies(Path::new(p))?,
        None => Vec::new(),
    };
    #[allow(clippy::cast_precision_loss)]
    let rto_limit_seconds = rto_limit.num_milliseconds() as f64 / 1000.0;
    let drill_id = uuid::Uuid::new_v4().to_string();
    let scratch = match &plan.target {
        Some(t) => Some(location::join(&location::canonical_uri(t)?, &drill_id)),
        None => None,
    };
    let mut population = bundle::list_bundles(storage, &source).await?;
    // Bundles `max_bundle_age` left out: older than it by the sealed time their envelope states. One whose
    // sealed time cannot be read (a corrupt or truncated envelope, read here unverified) stays in the population:
    // leaving it out would drop its failure from the report and its claimed root's FAILED verdict from the
    // registry, so an older pass of that root would go on counting.
    let mut aged_out = 0usize;
    if let Some(age) = &plan.max_bundle_age {
        let max = clock::parse_duration(age).map_err(|r| Error::invalid("max_bundle_age", r))?;
        let mut keep = Vec::new();
        for b in population {
            let env = bundle::read_envelope(storage, &b).await?;
            match sealed_at(&env.bytes) {
                Some(t) if started - t > max => aged_out += 1,
                _ => keep.push(b),
            }
        }
        population = keep;
    }
    let (population, retired, mut unretired) = if cold {
        (population, 0, BTreeMap::new())
    } else {
        partition_retired(storage, &source, population, &trust).await?
    };
    if population.is_empty() && retired > 0 {
        return Err(Error::invalid(
            &source,
            format!(
                "holds no bundle to drill: all {retired} of its bundles are retired (their candidates were purged)"
            ),
        ));
    }
    if population.is_empty() && aged_out > 0 {
        let age = plan.max_bundle_age.as_deref().unwrap_or_default();
        return Err(Error::invalid(
            &source,
            format!(
                "holds no bundle to drill: {aged_out} bundle(s) are there, but all are older than max_bundle_age = {age:?}"
            ),
        ));
    }
    if population.is_empty() {
        return Err(Error::invalid(
            &source,
            "holds no bundle to drill (no */bundle.dsse.json)",
        ));
    }
    let mut population_ids: Vec<String> = population.iter().map(|d| location::file_name(d).to_owned()).collect();
    population_ids.sort();
    let population_roots = population_roots(storage, &population, &population_ids).await?;
    let seed = plan.seed.unwrap_or_else(|| default_seed(&plan.name, started));
    let chain_folder = location::join(&location::canonical_uri(&plan.reports)?, &plan.name);
    // The chain's newest report must verify for this run's report to link to it: checked before any work too.
    if opts.shard.is_none() {
        latest_report(
            storage,
            &chain_folder,
            &drill_report_check(&trust.without_granted(keys::Role::Deleter), &plan.name),
        )
        .await?;
    }
    // The coverage rule reads when this plan last drilled each bundle, from its own signed reports.
    let last_drilled = match plan.coverage_weeks {
        Some(_) => last_drilled(storage, &chain_folder, &trust).await?,
        None => BTreeMap::new(),
    };
    let coverage = plan.coverage_weeks.map(|weeks| sample::Coverage {
        weeks,
        last_drilled: &last_drilled,
        now_ms: started.timestamp_millis(),
    });
    // A bundle whose retirement record is a finding is drilled whatever the sample.
    let forced: Vec<String> = population
        .iter()
        .filter(|d| unretired.contains_key(*d))
        .map(|d| location::file_name(d).to_owned())
        .collect();
    let selection = sample::select(seed, &population_ids, plan.sample, coverage.as_ref(), &forced);
    let index: BTreeMap<&str, usize> = population
        .iter()
        .enumerate()
        .map(|(i, d)| (location::file_name(d), i))
        .collect();
    let picks: Vec<usize> = selection
        .selected
        .iter()
        .filter_map(|id| index.get(id.as_str()).copied())
        .collect();
    let selected = selection.selected.clone();
    let mut results = Vec::new();
    let mut subjects = Vec::new();
    let parallel = plan.parallel_bundles;
    // A shard keeps its share of the overall sample (same seed, same selection, disjoint shares).
    let mine: Vec<usize> = picks
        .iter()
        .enumerate()
        .filter(|(pos, _)| opts.shard.as_ref().is_none_or(|s| s.holds(*pos)))
        .map(|(_, i)| *i)
        .collect();
    if let Some(s) = &opts.shard
        && mine.is_empty()
    {
        return Err(Error::invalid(
            "--shard",
            format!(
                "shard {}/{} holds no item of a sample of {}: use at most {} shards",
                s.index,
                s.count,
                picks.len(),
                picks.len()
            ),
        ));
    }
    let progress = crate::report::output::Progress::items("drill", mine.len(), storage.options().progress);
    // Cold backups: each signed checkpoint is compared with the registry's record when the configuration has a
    // `[registry]` (#23 point 2, `recovery_point`). Boxed like every registry open: the future is large.
    let checkpoint_registry = match (cold, &config.registry.uri) {
        (true, Some(uri)) => Some(Box::pin(crate::registry::Registry::open(uri)).await?),
        _ => None,
    };
    // Quarantine items: the live heads their history age is measured against, read once per table.
    let mut heads = recovery_point::Heads::default();
    if let (true, Some(scratch)) = (cold, &scratch) {
        for i in &mine {
            let dir = &population[*i];
            let (mut result, subject) =
                cold_backup_item(storage, config, dir, &trust, scratch, rto_limit_seconds, clock).await?;
            if let Some(reg) = &checkpoint_registry {
                recovery_point::compare_with_registry(reg, &mut result).await?;
            }
            let status = if result.status == RestoreStatus::RestoreVerified {
                "RESTORE_VERIFIED"
            } else {
                "FAILED"
            };
            progress.item(&format!("{} {status}", result.bundle_id));
            results.push(result);
            subjects.push(subject);
        }
    }
    // Quarantine bundles: `parallel_bundles` at a time (one by default), each timed from its own start to its own
    // end, their results taken in sample order.
    let object_shard = opts.shard.as_ref().and_then(Shard::objects);
    let trust_ref = &trust;
    let mut verified = futures::stream::iter(mine.iter().filter(|_| !cold).map(|i| &population[*i]))
        .map(|dir| async move {
            let t0 = clock.now();
            let r = bundle::verify(
                storage,
                dir,
                trust_ref,
                &VerifyOptions {
                    deep: true,
                    table_root: None,
                    shard: object_shard,
                },
            )
            .await;
            (dir, t0, clock.now(), r)
        })
        .buffered(parallel.unwrap_or(1));
    while let Some((dir, t0, t1, r)) = verified.next().await {
        let mut r = r?;
        if let Some(f) = unretired.remove(dir) {
            r.findings.push(f);
            r.status = RestoreStatus::Failed;
        }
        #[allow(clippy::cast_precision_loss)]
        let rto = (t1 - t0).num_milliseconds() as f64 / 1000.0;
        // The envelope the verification judged (not one read again now, which may have been swapped since).
        let sha256 = match r.envelope_sha256.take() {
            Some(sha) => sha,
            None => evidence::sha256_hex(&bundle::read_envelope(storage, dir).await?.bytes),
        };
        let mut digest = BTreeMap::from([("sha256".to_owned(), sha256)]);
        if let Some(root) = &r.bundle_root {
            digest.insert("blake3".into(), root.clone());
        }
        let bundle_id = location::file_name(dir).to_owned();
        subjects.push(Subject {
            name: format!("lakedrill-bundle:{bundle_id}"),
            digest,
        });
        // A quarantine bundle declares no recovery point, so it has no RPO (before #23 point 2 a constant 0 stood
        // here). What it has is a history age: how far behind the live table's head its snapshot is.
        let (history_age, history_basis) = heads.history_age(storage, &r).await;
        results.push(DrillResult {
            table_uuid: r.table_uuid,
            snapshot_id: r.snapshot_id,
            bundle_root: r.bundle_root,
            claimed_bundle_root: r.claimed_bundle_root,
            objects_verified: r.objects_verified,
            bytes_verified: r.bytes_verified,
            rto_seconds: rto,
            findings: r.findings,
            history_age_seconds: history_age,
            history_age_basis: Some(history_basis),
            object_shard: r.shard,
            ..DrillResult::new(bundle_id, r.status)
        });
        if let Some(last) = results.last() {
            let status = if last.status == RestoreStatus::RestoreVerified {
                "RESTORE_VERIFIED"
            } else {
                "FAILED"
            };
            progress.item(&format!("{} {status}", last.bundle_id));
        }
    }
    if let Some(reg) = &checkpoint_registry {
        Box::pin(reg.close()).await;
    }
    if let (Some(scratch), false) = (&scratch, opts.keep) {
        remove_scratch(storage, scratch).await?;
    }
    // A failed item whose root was never read (its envelope did not verify, a recovery failed before it) is
    // charged to the root its envelope claims, as the population lists it (read unverified): otherwise the
    // failure judges no root and an older pass of that root stays evidence (DESIGN "Stale evidence").
    let listed: BTreeMap<&str, &str> = population_ids
        .iter()
        .zip(&population_roots)
        .filter_map(|(id, root)| Some((id.as_str(), root.as_deref()?)))
        .collect();
    for r in &mut results {
        if r.bundle_root.is_none() && r.claimed_bundle_root.is_none() && r.status != RestoreStatus::RestoreVerified {
            r.claimed_bundle_root = listed.get(r.bundle_id.as_str()).map(|root| (*root).to_owned());
        }
    }
    drop(listed);
    // Each item records the digest of the policy bound to its table (#23 point 5).
    for r in &mut results {
        r.policy_digest = policy_of(&policies, r.table_uuid.as_deref()).map(|p| p.digest().to_owned());
    }
    let finished = clock.now();
    let passed = results
        .iter()
        .filter(|r| r.status == RestoreStatus::RestoreVerified)
        .count();
    let failed = results.len() - passed;
    // Shard reports are not links of the plan's chain: the merged report is.
    let (folder, previous) = if let Some(s) = &opts.shard {
        let shards = location::join(&chain_folder, "shards");
        let folder = match &s.run_id {
            Some(id) => location::join(&shards, id),
            None => shards,
        };
        (folder, None)
    } else {
        let previous = latest_report(
            storage,
            &chain_folder,
            &drill_report_check(&trust.without_granted(keys::Role::Deleter), &plan.name),
        )
        .await?;
        (chain_folder, previous)
    };
    let implementation_digest = implementation_digest()?;
    let predicate = DrillPredicate {
        drill: DrillInfo {
            id: drill_id,
            kind: plan.kind.clone(),
            plan: plan.name.clone(),
            plan_digest: evidence::sha256_hex(plan_bytes),
            policy_digest: crate::evidence::predicate::common_policy_digest(&results),
            implementation_digest,
            evidence_retention: retention.map(crate::ops::evidence_lock::claim),
            parallel_bundles: parallel.filter(|n| *n > 1),
        },
        started_at: started.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        finished_at: finished.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        sample: SampleInfo {
            seed,
            population: population.len(),
            size: selected.len(),
            selected,
            retired,
            source: Some(location::canonical_uri(&source)?),
            population_ids,
            population_roots,
            sampler: Some(sample::SAMPLER.to_owned()),
            coverage_weeks: plan.coverage_weeks,
            coverage: selection.coverage,
            forced: selection.forced,
        },
        results,
        summary: Summary::of(passed, failed),
        previous_report: previous.map(|(_, sha)| sha),
        shard: opts.shard.clone(),
        merged_from: None,
    };
    let statement = Statement {
        subject: subjects,
        predicate_type: PREDICATE_TYPE.to_owned(),
        predicate: serde_json::to_value(&predicate).map_err(|e| Error::Internal(format!("drill predicate: {e}")))?,
    };
    let envelope = evidence::sign_statement(&statement, &key);
    let mut stamp = finished.format("%Y%m%dT%H%M%S%.3fZ").to_string();
    if let Some(s) = &opts.shard {
        stamp = match s.run_id {
            Some(_) => format!("shard-{}-of-{}", s.index, s.count),
            None => format!("{stamp}-shard-{}-of-{}", s.index, s.count),
        };
    }
    let report = location::join(&folder, &format!("{stamp}.dsse.json"));
    let human_report = location::join(&folder, &format!("{stamp}.txt"));
    let now = clock.now();
    crate::ops::evidence_lock::put(storage, &report, Bytes::from(envelope.to_json_bytes()), retention, now).await?;
    crate::ops::evidence_lock::put(
        storage,
        &human_report,
        Bytes::from(render_human(&predicate, &report)),
        retention,
        now,
    )
    .await?;
    Ok(DrillOutcome {
        report,
        human_report,
        predicate,
    })
}

/// The policies of a plan's `policies`: the file, or every `*.yaml`/`*.yml` file of the folder (sorted by
/// name). Two whose `table` bindings can match one table (one UUID prefix starts with the other) are refused,
/// naming both files: a drilled table must have at most one policy.
///
/// # Errors
/// [`Error::Config`] naming the folder or the two files; a policy that does not load or validate
/// ([`crate::govern::policy::PolicyError`], naming the file and the field).
fn load_policies(path: &Path) -> Result<Vec<crate::govern::policy::Policy>> {
    let files = if path.is_dir() {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| Error::io("read policies folder", path, e))? {
            let p = entry.map_err(|e| Error::io("read policies folder", path, e))?.path();
            if p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                files.push(p);
            }
        }
        files.sort();
        if files.is_empty() {
            return Err(Error::Config {
                file: path.display().to_string(),
                reason: "policies: the folder holds no policy (*.yaml or *.yml)".into(),
            });
        }
        files
    } else {
        vec![path.to_owned()]
    };
    let mut policies: Vec<crate::govern::policy::Policy> = Vec::with_capacity(files.len());
    for f in &files {
        let p = crate::govern::policy::load(f)?;
        if let Some(other) = policies.iter().find(|o| o.table().overlaps(p.table())) {
            return Err(Error::Config {
                file: path.display().to_string(),
                reason: format!(
                    "policies: {} (table: {}) and {} (table: {}) can bind the same table; a drilled table must have \
                     at most one policy",
                    other.source_name(),
                    other.table(),
                    p.source_name(),
                    p.table()
                ),
            });
        }
        policies.push(p);
    }
    Ok(policies)
}

/// The policy bound to the table with this UUID, if one is.
fn policy_of<'p>(
    policies: &'p [crate::govern::policy::Policy],
    table_uuid: Option<&str>,
) -> Option<&'p crate::govern::policy::Policy> {
    let id = uuid::Uuid::parse_str(table_uuid?).ok()?;
    policies.iter().find(|p| p.table().matches_uuid(&id))
}

/// The root each bundle of the population claims (its envelope's `blake3` subject digest), in the order of
/// `ids` (#23 point 1: the report records the population with its roots). Read unverified, a few envelopes at
/// a time, each decoded on the rayon pool and dropped once read; `None` for an envelope gone since the listing
/// or naming no root for its id.
async fn population_roots(storage: &Storage, population: &[String], ids: &[String]) -> Result<Vec<Option<String>>> {
    use futures::{StreamExt as _, TryStreamExt as _};
    let by_id: BTreeMap<&str, &String> = population.iter().map(|d| (location::file_name(d), d)).collect();
    futures::stream::iter(ids.iter().map(|id| {
        let dir = by_id.get(id.as_str()).copied();
        async move {
            let Some(dir) = dir else { return Ok(None) };
            let bytes = match bundle::read_envelope(storage, dir).await {
                Ok(o) => o.bytes,
                Err(Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            let want = format!("lakedrill-bundle:{id}");
            // Decoding a large bundle's payload is CPU work: on the rayon pool, off the async workers.
            let (tx, rx) = tokio::sync::oneshot::channel();
            rayon::spawn(move || {
                let root = evidence::peek_subjects(&bytes)
                    .ok()
                    .and_then(|subjects| subjects.into_iter().find(|s| s.name == want))
                    .and_then(|s| s.digest.get("blake3").cloned());
                let _ = tx.send(root);
            });
            rx.await
                .map_err(|_| Error::Internal(format!("reading the root of bundle {id} ended without a result")))
        }
    }))
    .buffered(4)
    .try_collect()
    .await
}

/// Splits a quarantine drill's population: bundles with no retirement record stay; those whose record
/// verifies under `trust` and names them (id, root and envelope digest, against the bundle's own verified
/// envelope) are counted and leave; those whose record does not stay, each with its finding (naming the record).
async fn partition_retired(
    storage: &Storage,
    source: &str,
    population: Vec<String>,
    trust: &TrustStore,
) -> Result<(Vec<String>, usize, BTreeMap<String, Finding>)> {
    let suffix = format!("/{RECORD_FILE}");
    let records: std::collections::BTreeSet<String> = storage
        .list(&location::canonical_uri(source)?)
        .await?
        .into_iter()
        .map(|o| o.uri)
        .filter(|u| u.ends_with(&suffix))
        .collect();
    let mut keep = Vec::with_capacity(population.len());
    let mut retired = 0;
    let mut unretired = BTreeMap::new();
    for dir in population {
        let record_uri = location::join(&dir, RECORD_FILE);
        if !records.contains(&record_uri) {
            keep.push(dir);
            continue;
        }
        // Within `max_metadata_bytes`, as the envelope beside it: a file of any size can be put in its place.
        let record = storage
            .get_bounded(
                &record_uri,
                storage.options().max_metadata_bytes,
                "a bundle's retirement record",
            )
            .await?
            .bytes;
        let envelope = bundle::read_envelope(storage, &dir).await?.bytes;
        // Under the keys that may seal, as everywhere bundles are verified: a bundle signed by another key of the
        // folder is no bundle to retire (it stays in the population, where its drill fails).
        let checked = match evidence::verify(&envelope, &trust.for_role(keys::Role::Seal)) {
            Err(f) => Err(Finding::new(
                crate::model::findings::FindingKind::BundleSignature,
                &record_uri,
                Some("a bundle that verifies, to check its retirement record against".into()),
                Some(format!(
                    "the bundle envelope does not verify ({f}); the bundle is not retired"
                )),
            )),
            Ok(v) => {
                let sha = evidence::sha256_hex(&envelope);
                let bundle = BundleIdentity {
                    bundle_id: location::file_name(&dir),
                    bundle_root: v.predicate()["bundle_root"].as_str().unwrap_or_default(),
                    envelope_sha256: &sha,
                };
                retirement::check(&record, trust, &bundle).map_err(|p| p.finding(&record_uri))
            }
        };
        match checked {
            Ok(_) => retired += 1,
            Err(f) => {
                unretired.insert(dir.clone(), f);
                keep.push(dir);
            }
        }
    }
    Ok((keep, retired, unretired))
}

/// One item of a cold-backup drill: a full recovery into `<scratch>/<bundle id>`, its RTO against
/// the limit and its snapshot against the declared checkpoint.
async fn cold_backup_item(
    storage: &Storage,
    config: &Config,
    dir: &str,
    trust: &TrustStore,
    scratch: &str,
    rto_limit_seconds: f64,
    clock: &dyn Clock,
) -> Result<(DrillResult, Subject)> {
    let bundle_id = location::file_name(dir).to_owned();
    let into = location::join(scratch, &bundle_id);
    let t0 = clock.now();
    let mut r = match crate::ops::recover::recover(storage, config, dir, trust, &into, None, clock).await {
        Ok(r) => r,
        // One bundle that cannot be recovered (a layer the rewrite cannot write back, a target it refuses, a
        // store that fails on one of its objects) fails its item, naming the reason; the drill goes on with the
        // others. Before, the error ended the whole drill (exit 2) and no item was recorded.
        Err(e) => {
            let mut r = crate::ops::recover::RecoverReport::failed(into.clone());
            r.findings.push(Finding::new(
                crate::model::findings::FindingKind::RecoveryFailed,
                dir,
                Some(format!("a recovery of bundle {bundle_id} into {into}")),
                Some(with_causes(&e)),
            ));
            #[allow(clippy::cast_precision_loss)]
            {
                r.rto_seconds = (clock.now() - t0).num_milliseconds() as f64 / 1000.0;
            }
            r
        }
    };
    if r.rto_seconds > rto_limit_seconds {
        r.findings.push(Finding::new(
            crate::model::findings::FindingKind::RtoExceeded,
            &bundle_id,
            Some(format!("at most {rto_limit_seconds:.3}s")),
            Some(format!("{:.3}s", r.rto_seconds)),
        ));
    }
    // Only known once the bundle verified (the declared point is read from its signed predicate).
    if r.declared_at.is_none() && r.metadata_location.is_some() {
        r.findings.push(Finding::new(
            crate::model::findings::FindingKind::CheckpointMismatch,
            &bundle_id,
            Some("a backup bundle with a declared checkpoint".into()),
            Some("a bundle without one".into()),
        ));
    }
    let env = bundle::read_envelope(storage, dir).await?;
    let mut digest = BTreeMap::from([("sha256".to_owned(), evidence::sha256_hex(&env.bytes))]);
    if let Some(root) = &r.bundle_root {
        digest.insert("blake3".into(), root.clone());
    }
    let subject = Subject {
        name: format!("lakedrill-bundle:{bundle_id}"),
        digest,
    };
    let status = if r.findings.is_empty() {
        r.status
    } else {
        RestoreStatus::Failed
    };
    Ok((
        DrillResult {
            table_uuid: r.table_uuid,
            snapshot_id: r.snapshot_id,
            bundle_root: r.bundle_root,
            objects_verified: r.objects_restored,
            bytes_verified: r.bytes_restored,
            rto_seconds: r.rto_seconds,
            rpo_seconds: if status == RestoreStatus::RestoreVerified {
                r.rpo_seconds
            } else {
                None
            },
            findings: r.findings,
            declared_snapshot_id: r.declared_snapshot_id,
            rto_limit_seconds: Some(rto_limit_seconds),
            rows_promised: r.rows_promised,
            rows_scanned: r.rows_scanned,
            checkpoint_id: r.checkpoint_id,
            declared_at: r.declared_at,
            ..DrillResult::new(bundle_id, status)
        },
        subject,
    ))
}

/// An error with its causes on one line, as `main` prints a chain (`{:#}`): the reason a finding records.
fn with_causes(e: &Error) -> String {
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// Removes a cold-backup drill's scratch recoveries (objects, then the local folders).
async fn remove_scratch(storage: &Storage, scratch: &str) -> Result<()> {
    for o in storage.list(scratch).await? {
        storage.delete(&o.uri).await?;
    }
    if let Some(path) = scratch.strip_prefix("file://")
        && std::path::Path::new(path).exists()
    {
        std::fs::remove_dir_all(path).map_err(|e| Error::io("remove scratch recoveries", path, e))?;
    }
    Ok(())
}

fn sealed_at(envelope: &[u8]) -> Option<chrono::DateTime<chrono::Utc>> {
    let st = evidence::peek_unverified(envelope)?;
    let s = st.get("predicate")?.get("sealed_at")?.as_str()?;
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// How a chain's newest file is checked before the next report links to it: `Err(why)` when it is no report of
/// the chain ([`drill_report_check`], [`crate::ops::audit::check_fault_report`]).
pub type ChainCheck<'a> = &'a (dyn Fn(&str, &[u8]) -> std::result::Result<(), String> + Sync);

/// The check of a drill report chain's newest file: it verifies as a drill report under `keys` (a signature under
/// one of them, the drill predicate type, a predicate that reads; the content checks of `audit verify` are not
/// repeated, so a report an older lakedrill wrote still links). Callers pass the trust folder without its deleter
/// keys ([`TrustStore::without_granted`]), not only the keys with the drill role: a report signed before a key
/// rotation withdrew its key's role is still the chain's (it is no evidence for the deleter, which reads drill keys
/// only); an unsigned file, one under an unknown key or one under a deleter's key is not, and neither is a report
/// of another plan than `plan` (one copied into the folder).
pub fn drill_report_check<'a>(
    keys: &'a TrustStore,
    plan: &'a str,
) -> impl Fn(&str, &[u8]) -> std::result::Result<(), String> + Sync + 'a {
    move |name, bytes| {
        let mut findings = Vec::new();
        match crate::ops::audit::check_report(name, bytes, keys, &mut findings) {
            // A report of another plan copied into the folder is no link of this chain (review E5).
            Some((_, p)) if p.drill.plan != plan => Err(format!(
                "it is a report of plan {:?}, not of this chain's plan {plan:?}",
                p.drill.plan
            )),
            Some(_) => Ok(()),
            None => Err(crate::ops::audit::findings_reason(&findings)),
        }
    }
}

/// The newest report envelope in a plan's folder and its SHA-256: what the next report of the chain names as its
/// `previous_report`.
///
/// The newest file must pass `check`: a file dropped into the folder (unsigned, or under a key without the drill
/// role) is no report of the chain, and every later report would otherwise link to it. It is refused, not skipped:
/// the folder needs an operator's look (audit verify --chain fails there too), and a chain that skipped it would be
/// anchored with it counted.
///
/// # Errors
/// [`Error::Storage`]; [`Error::Invalid`] naming the newest file and why it does not verify.
pub async fn latest_report(storage: &Storage, folder: &str, check: ChainCheck<'_>) -> Result<Option<(String, String)>> {
    let reports = list_reports(storage, folder).await?;
    match reports.last() {
        None => Ok(None),
        Some(uri) => {
            let b = storage
                .get_bounded(uri, storage.options().max_metadata_bytes, "a drill report")
                .await?;
            if let Err(why) = check(location::file_name(uri), &b.bytes) {
                return Err(Error::invalid(
                    uri,
                    format!(
                        "is the newest file of the report chain in {folder} but does not verify as one of its \
                         reports ({why}); the next report would link to it. Move it out of the folder (after \
                         looking at how it got there) and run again"
                    ),
                ));
            }
            Ok(Some((uri.clone(), evidence::sha256_hex(&b.bytes))))
        }
    }
}

// Where the chain is listed: in `audit`, which reads chains and must not import this module (the chain checks
// here use its `check_report`).
pub use crate::ops::audit::list_reports;

/// The trend of a plan's report chain: every report in `folder` that verifies under `drill_keys` with no finding
/// (as the gates count reports), oldest first. What the charts show and what the drill-staleness metric
/// (`lakedrill_drill_last_success_timestamp_seconds`) is read from: a file that does not verify (an unsigned one
/// claiming a PASS in the year 9999) counts for neither.
///
/// # Errors
/// [`crate::Error::Storage`] when the folder cannot be listed or a report read.
pub async fn chain_trend(
    storage: &Storage,
    folder: &str,
    drill_keys: &TrustStore,
) -> Result<Vec<crate::report::html::TrendPoint>> {
    let mut out = Vec::new();
    for uri in list_reports(storage, folder).await? {
        let bytes = storage
            .get_bounded(&uri, storage.options().max_metadata_bytes, "a drill report")
            .await?
            .bytes;
        let name = location::file_name(&uri);
        let mut findings = Vec::new();
        if let Some((_, p)) = crate::ops::audit::check_report(name, &bytes, drill_keys, &mut findings)
            && findings.is_empty()
        {
            out.push(crate::report::html::TrendPoint::of(name, &p));
        }
    }
    Ok(out)
}

/// Writes `<stem>.html` and `<stem>.md` beside the signed report `report` (`<folder>/<stem>.dsse.json`).
///
/// # Errors
/// [`crate::Error::Storage`]; a file that already exists is not overwritten (write-once, like the report).
pub async fn write_beside(
    storage: &Storage,
    report: &str,
    predicate: &DrillPredicate,
    drill_keys: &TrustStore,
) -> Result<crate::report::html::HumanReports> {
    let folder = location::parent(report).unwrap_or_default();
    let stem = location::file_name(report).trim_end_matches(".dsse.json").to_owned();
    let trend = chain_trend(storage, &folder, drill_keys).await?;
    let html = location::join(&folder, &format!("{stem}.html"));
    let md = location::join(&folder, &format!("{stem}.md"));
    storage
        .put_new(
            &html,
            Bytes::from(crate::report::html::render_html(predicate, report, &trend)),
        )
        .await?;
    storage
        .put_new(
            &md,
            Bytes::from(crate::report::html::render_markdown(predicate, report, &html)),
        )
        .await?;
    Ok(crate::report::html::HumanReports {
        html_report: html,
        markdown_report: md,
        trend,
    })
}

/// The plain-text report written beside a signed report (`.txt`).
#[must_use]
pub fn render_human(p: &DrillPredicate, report: &str) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "lakedrill drill report — plan {} ({})", p.drill.plan, p.drill.kind);
    let _ = writeln!(s, "signed report: {report}");
    let _ = writeln!(s, "started {}  finished {}", p.started_at, p.finished_at);
    let _ = writeln!(
        s,
        "sample: seed {}  population {}  size {}",
        p.sample.seed, p.sample.population, p.sample.size
    );
    if p.sample.retired > 0 {
        let _ = writeln!(
            s,
            "retired: {} bundles left out (a valid retirement record: their candidates were purged)",
            p.sample.retired
        );
    }
    let _ = writeln!(s, "implementation sha256 {}", p.drill.implementation_digest);
    if let Some(d) = &p.drill.policy_digest {
        let _ = writeln!(s, "policy sha256 {d}");
    }
    let _ = writeln!(
        s,
        "previous report sha256 {}",
        p.previous_report.as_deref().unwrap_or("none (first report)")
    );
    let _ = writeln!(s);
    for r in &p.results {
        let status = if r.status == RestoreStatus::RestoreVerified {
            "RESTORE_VERIFIED"
        } else {
            "FAILED"
        };
        let _ = writeln!(
            s,
            "{status:<16} {}  snapshot {}  objects {}  bytes {}  rto {:.3}s  rpo {}",
            r.bundle_id,
            r.snapshot_id.map_or_else(|| "-".into(), |v| v.to_string()),
            r.objects_verified,
            r.bytes_verified,
            r.rto_seconds,
            r.rpo_seconds.map_or_else(|| "-".into(), |v| format!("{v:.3}s"))
        );
        if r.rto_limit_seconds.is_some() {
            let _ = writeln!(
                s,
                "    declared snapshot {}  rto limit {:.0}s  rows scanned {}  promised {}",
                r.declared_snapshot_id.map_or_else(|| "-".into(), |v| v.to_string()),
                r.rto_limit_seconds.unwrap_or_default(),
                r.rows_scanned.map_or_else(|| "-".into(), |v| v.to_string()),
                r.rows_promised
                    .map_or_else(|| "- (equality deletes)".into(), |v| v.to_string()),
            );
            if let Some(c) = &r.checkpoint_id {
                let _ = writeln!(
                    s,
                    "    checkpoint {c}  declared at {}  (rpo = declared − recovered commit time)",
                    r.declared_at.as_deref().unwrap_or("-")
                );
            }
        }
        if let Some(basis) = &r.history_age_basis {
            let _ = writeln!(
                s,
                "    history age {}  ({basis})",
                r.history_age_seconds.map_or_else(|| "-".into(), |v| format!("{v:.3}s"))
            );
        }
        if let Some(root) = &r.claimed_bundle_root {
            let _ = writeln!(
                s,
                "    claimed bundle root {root}  (unverified: the envelope did not verify)"
            );
        }
        if let Some(d) = &r.policy_digest {
            let _ = writeln!(
                s,
                "    table {}  policy sha256 {d}",
                r.table_uuid.as_deref().unwrap_or("-")
            );
        }
        for f in &r.findings {
            let _ = writeln!(s, "    {f}");
        }
    }
    let _ = writeln!(
        s,
        "\npassed {}  failed {}  gate {}",
        p.summary.passed, p.summary.failed, p.summary.gate
    );
    s
}

/// Records in `reg` a drill report's verdict per bundle root ([`crate::registry::Registry::drill_record`]) and
/// returns the report's SHA-256 (the chain's new head). The deleter refuses evidence of a root a drill failed
/// after it, and warns about evidence no registry saw, so every drill that has a registry records here.
///
/// # Errors
/// The report cannot be read back, or the registry refuses the write.
pub async fn record_verdicts(
    storage: &Storage,
    reg: &crate::registry::Registry,
    report_uri: &str,
    p: &DrillPredicate,
    shard: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<String> {
    let head = evidence::sha256_hex(&storage.get(report_uri).await?.bytes);
    reg.drill_record(&verdicts(report_uri, &head, p, shard, now), now)
        .await?;
    Ok(head)
}

/// A drill report's verdict per bundle root (pure): verified only when every item of the root in the report was
/// `RESTORE_VERIFIED`. A failed item without a verified root counts as a failure of the root its envelope claims
/// ([`DrillResult::judged_root`]: a claim only ever adds a failure); items with neither are left out. A root no
/// item verified (only claimed) is recorded as claimed (`root_claimed`).
fn verdicts(
    report_uri: &str,
    report_sha256: &str,
    p: &DrillPredicate,
    shard: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<crate::registry::DrillVerdict> {
    let finished_at =
        chrono::DateTime::parse_from_rfc3339(&p.finished_at).map_or(now, |t| t.with_timezone(&chrono::Utc));
    // Per root: whether every item passed, and whether any item's root was verified (otherwise only claimed).
    let mut roots: std::collections::BTreeMap<&str, (bool, bool)> = std::collections::BTreeMap::new();
    for r in &p.results {
        if let Some(root) = r.judged_root() {
            let ok = r.status == crate::bundle::RestoreStatus::RestoreVerified;
            let e = roots.entry(root).or_insert((true, false));
            e.0 &= ok;
            e.1 |= r.bundle_root.is_some();
        }
    }
    roots
        .into_iter()
        .map(|(root, (verified, root_verified))| crate::registry::DrillVerdict {
            report_uri: report_uri.to_owned(),
            report_sha256: report_sha256.to_owned(),
            plan: p.drill.plan.clone(),
            shard: shard.map(str::to_owned),
            bundle_root: root.to_owned(),
            verified,
            finished_at,
            root_claimed: Some(!root_verified),
        })
        .collect()
}
