//! The fourteen scenarios of the fault matrix, one async function each, and [`scenario`], which runs
//! one of them by id; [`fault_text`] says, per id, the fault injected and the outcome written down.
//!
//! Each function builds its own scratch lakehouse ([`Lab`]), injects its fault through the lab's fault
//! layer or the context's hooks, drives the real operations and records what it expected and saw
//! ([`Obs`]); the matrix around it (`run_matrix` in the face file) turns that into a scenario result.
//! Uses the face's lab machinery, [`crate::ops`] (through the lab and directly) and the wings below it;
//! nothing outside `lab::faults` calls these functions.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use super::lab::{Lab, LabEnv, Obs, expired};
use crate::error::{Error, Result};
use crate::evidence::fault_matrix::SCENARIOS;
use crate::io::fault_store::FaultState;
use crate::lab::ContentFiles;
use crate::model::location;
use crate::ops::context::Context;
use crate::ops::quarantine::QuarantineMode;
use crate::registry::State;
use crate::report::output::{Outcome, Verdict};
use crate::table::TableSource;

/// Runs one scenario in its own lab; returns what it observed, the objects it lost and its fault state.
///
/// Each scenario's future is boxed: the futures are large, and a debug build's test thread has a small stack.
pub(super) async fn scenario(id: &str, env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    match id {
        "reader-registration-delay" => Box::pin(reader_registration_delay(env)).await,
        "ref-case-collision" => Box::pin(ref_case_collision(env)).await,
        "uncommitted-writer" => Box::pin(uncommitted_writer(env)).await,
        "lagging-listing" => Box::pin(lagging_listing(env)).await,
        "hold-races-cas" => Box::pin(hold_races_cas(env)).await,
        "planner-bug" => Box::pin(planner_bug(env)).await,
        "bundle-missing-layer" => Box::pin(bundle_missing_layer(env)).await,
        "late-model-reader" => Box::pin(late_model_reader(env)).await,
        "lagging-replica" => Box::pin(lagging_replica(env)).await,
        "lost-delete-receipts" => Box::pin(lost_delete_receipts(env)).await,
        "delete-marker-recovery" => Box::pin(delete_marker_recovery(env)).await,
        "stale-pass-after-fail" => Box::pin(stale_pass_after_fail(env)).await,
        "hold-lands-mid-purge" => Box::pin(hold_lands_mid_purge(env)).await,
        "orphan-referenced-after-quarantine" => Box::pin(orphan_referenced_after_quarantine(env)).await,
        other => Err(Error::invalid(
            "--scenario",
            format!("unknown scenario {other:?}; known: {}", SCENARIOS.join(", ")),
        )),
    }
}

/// The fault a scenario injects and the outcome written down for it, by id.
pub(super) fn fault_text(id: &str) -> (&'static str, &'static str) {
    match id {
        "reader-registration-delay" => (
            "control-plane delay after reader registration: the reader's lease becomes visible only after plan, quarantine and drill, landing right before the purge's compare-and-set",
            "purge REFUSED by the lease-watermark compare-and-set; the next purge rebases and keeps the leased snapshot whole (PROTECTED); the leased snapshot keeps every object",
        ),
        "ref-case-collision" => (
            "branch names that differ only by case: `Main` beside `main` before the plan, `MAIN` created after the quarantine; and a commit racing the quarantine (412 on the metadata write)",
            "the plan keeps `Main`'s head and warns of the collision; the raced quarantine is REFUSED and a retry reuses its bundles; `MAIN` created right before the purge's compare-and-set: the purge's catalog commit (a compare-and-set on the generation) sees it, rebases before any delete and keeps `MAIN`'s head whole",
        ),
        "uncommitted-writer" => (
            "a writer uploaded files without committing: one registered writer, one unregistered",
            "the registered writer's files are in no candidate (a difference saying why); the unregistered writer's old file is only an orphan candidate: quarantine refuses it where it cannot be held reversibly (a filesystem without orphanQuarantine) and holds it behind a delete marker on a versioned bucket, and releasing the candidate puts it back in place",
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
            "the late lease makes quarantine refuse the stale plan and the re-plan keeps the leased snapshot; the unleased snapshot is purged, its reader is listed as unprotected, and its bundle still restores it, naming only its purged data files missing",
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
            "recovery of purged objects (behind version delete markers on a versioned bucket; from the bundle's metadata copies on a filesystem, where a purge of data files is final)",
            "after the purge every bundle whose data survives restores (RESTORE_VERIFIED), the others name exactly their purged data files OBJECT_MISSING; on a versioned bucket every purged object is behind a delete marker, undelete brings each back and then every bundle restores whole; a snapshot is brought back as a readable table",
        ),
        "stale-pass-after-fail" => (
            "an older PASS presented after a newer FAIL: the bundle's manifest-list copy is damaged after the first drill, a second drill of the same chain fails it, and the purge is given the first report",
            "purge REFUSED naming the newer failing report and the damaged copy; nothing deleted",
        ),
        "hold-lands-mid-purge" => (
            "a legal hold on the whole table lands while the purge deletes (after its first delete request, from another registry connection)",
            "no delete request after the hold committed; purge HALTED naming the hold; every object deleted before it VERIFIED, every other one still there and not counted deleted",
        ),
        "orphan-referenced-after-quarantine" => (
            "a slow writer commits two of its three files after lakedrill quarantined them as orphans (write-once copies under orphanQuarantine): the table references files that are held",
            "the purge puts both back where they were (verified against the orphan bundle, with a finding) and deletes only the file nothing references; the table's files are all in place",
        ),
        _ => ("unknown scenario", "none"),
    }
}

/// Scenario `reader-registration-delay` (see [`fault_text`]).
async fn reader_registration_delay(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "reader-registration-delay";
    let mut obs = Obs::new();
    let mut lab = Lab::new(env, id, "").await?;
    let Some((cid, ids, report)) = lab.to_evidence(&mut obs).await? else {
        return Ok((obs, Vec::new(), lab.state));
    };
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
    let s = ids[0];
    let acct = lab.account(&[s], &[]).await?;
    // The reader registered before the plan; the control plane makes the lease visible only now, right before
    // the purge's compare-and-set (after its rebase and closure check have read the registry).
    let (config, source, policy) = (lab.ctx.config.clone(), lab.source.clone(), lab.policy.clone());
    lab.ctx.hooks.before_accept = Some(Arc::new(move || {
        let (config, source, policy) = (config.clone(), source.clone(), policy.clone());
        Box::pin(async move {
            let c = Context::new(config);
            crate::ops::protect::lease_add(&c, &source, &policy, s, "training run", "ml-team", "7d").await?;
            c.close().await;
            Ok(())
        })
    }));
    let p = lab.purge(&cid, &report).await?;
    lab.ctx.hooks.before_accept = None;
    let why = reasons_of(&p);
    obs.saw(format!("purge {}: {why}", status_of(&p)));
    obs.expect(status_of(&p) == "REFUSED", "purge REFUSED");
    obs.expect(
        why.contains("leases changed"),
        "refused by the lease-watermark compare-and-set",
    );
    let again = lab.purge(&cid, &report).await?;
    let why = reasons_of(&again);
    obs.saw(format!("purge again {}: {why}", status_of(&again)));
    obs.expect(
        (status_of(&again) == "REFUSED" && why.contains("PROTECTED")) || status_of(&again) == "VERIFIED",
        format!("the next purge rebases: snapshot {s} is kept (PROTECTED), the rest may go"),
    );
    lab.expect_data_deleted(&mut obs, &cid, &content, status_of(&again) == "VERIFIED")
        .await?;
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// Scenario `ref-case-collision` (see [`fault_text`]).
async fn ref_case_collision(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "ref-case-collision";
    let mut obs = Obs::new();
    let mut lab = Lab::new(env, id, "").await?;
    let Some((_, ids)) = lab.candidate(&mut obs).await? else {
        return Ok((obs, Vec::new(), lab.state));
    };
    let (a, b) = (ids[0], ids[ids.len() - 1]);
    commit_ref(&lab.ctx, &lab.source, "Main", a, true).await?;
    let plan = lab.plan().await?;
    let warned = plan["warnings"].to_string();
    let (cid, cids) = expired(&plan).unwrap_or_default();
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
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
    // `MAIN` is created right before the purge's compare-and-set (after its rebase read the table).
    let (config, source) = (lab.ctx.config.clone(), lab.source.clone());
    lab.ctx.hooks.before_accept = Some(Arc::new(move || {
        let (config, source) = (config.clone(), source.clone());
        Box::pin(async move {
            let c = Context::new(config);
            commit_ref(&c, &source, "MAIN", b, true).await?;
            c.close().await;
            Ok(())
        })
    }));
    let p = lab.purge(&cid, &d.report).await?;
    lab.ctx.hooks.before_accept = None;
    let why = reasons_of(&p);
    obs.saw(format!("purge {}: {why}", status_of(&p)));
    let kept = p.json["objects"]["PROTECTED"].to_string();
    obs.expect(
        status_of(&p) == "VERIFIED" && kept.contains(&format!("snap-{b}-")),
        format!(
            "the catalog commit finds `MAIN` on the new generation: the purge rebases before any delete, snapshot {b} \
             (head of `MAIN`) leaves the candidate as PROTECTED, the rest is deleted"
        ),
    );
    lab.expect_data_deleted(&mut obs, &cid, &content, true).await?;
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// Scenario `orphan-referenced-after-quarantine` (see [`fault_text`]).
async fn orphan_referenced_after_quarantine(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "orphan-referenced-after-quarantine";
    let mut obs = Obs::new();
    let lab = Lab::new(env, id, "maxWriterDuration: 1s\norphanSafetyInterval: 2s\n").await?;
    let mut text = std::fs::read_to_string(&lab.policy).map_err(|e| Error::io("read", &lab.policy, e))?;
    text.push_str(&format!("orphanQuarantine: {}\n", lab.uri("orphan-vault")));
    std::fs::write(&lab.policy, text).map_err(|e| Error::io("write", &lab.policy, e))?;
    lab.bind_policy().await?;
    let warehouse = env.store.map(|_| location::join(&lab.base, "warehouse"));
    let mut files = crate::lab::demo::slow_writer_files(&lab.truth, &lab.dir, warehouse.as_deref(), 3).await?;
    let root = lab.table_root().await?;
    let table = lab.truth.table(&lab.source).await?;
    let rel = |p: &str| table.location().relative(p).unwrap_or_else(|_| p.to_owned());
    let paths: Vec<String> = files.iter().map(|f| rel(f.file_path())).collect();
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await; // past orphanSafetyInterval
    // The two files the writer commits must never be lost; the third may go through the deleter.
    let acct = lab.account(&[], &paths[..2]).await?;
    let plan = lab.plan().await?;
    let orphan = plan["candidates"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .find(|c| c["kind"] == "orphans" && paths.iter().all(|p| c["objects"].to_string().contains(p.as_str())));
    obs.expect(
        orphan.is_some(),
        "the writer's three uncommitted files are an orphan candidate",
    );
    let Some(cid) = orphan
        .as_ref()
        .and_then(|o| o["candidate_id"].as_str())
        .map(str::to_owned)
    else {
        return Ok((obs, lab.lost(&acct).await?, lab.state));
    };
    let q = lab.quarantine(&cid, QuarantineMode::Tag).await?;
    obs.expect(
        q.verdict == Verdict::Ok,
        "quarantine holds them reversibly (write-once copies; delete markers on a versioned bucket)",
    );
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
    let listed = lab.listing().await?;
    obs.expect(
        paths.iter().all(|p| !listed.contains(p)),
        "the held files are out of the table location",
    );
    // The slow writer commits two of them now.
    files.truncate(2);
    crate::lab::demo::late_commit(&lab.truth, &lab.dir, warehouse.as_deref(), files).await?;
    let drill = lab.drill().await?;
    obs.expect(
        drill.predicate.summary.gate == "PASS",
        "the drill over the orphan bundle PASSes",
    );
    let out = lab.purge(&cid, &drill.report).await?;
    obs.saw(format!("purge {cid}: {}", out.human.trim()));
    obs.expect(status_of(&out) == "VERIFIED", "the purge finishes VERIFIED");
    let deleted: Vec<String> = out.json["objects"]["VERIFIED"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    obs.expect(
        deleted == vec![paths[2].clone()],
        format!("the purge deletes only the file nothing references ({})", paths[2]),
    );
    lab.expect_data_deleted(&mut obs, &cid, &content, true).await?;
    let listed = lab.listing().await?;
    obs.expect(
        paths[..2].iter().all(|p| listed.contains(p)),
        "both committed files are back in place",
    );
    for p in &paths[..2] {
        let h = lab.truth.storage.hash(&location::join(&root, p)).await?;
        obs.saw(format!("{p}: {} bytes back in place", h.bytes_read));
    }
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// Scenario `uncommitted-writer` (see [`fault_text`]).
async fn uncommitted_writer(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "uncommitted-writer";
    let mut obs = Obs::new();
    let lab = Lab::new(env, id, "maxWriterDuration: 1s\norphanSafetyInterval: 2s\n").await?;
    let root_uri = lab.table_root().await?;
    crate::ops::protect::writer_begin(&lab.ctx, &lab.source, "data/staging/w1").await?;
    let staged = ["data/staging/w1/part-0.parquet", "data/staging/w1/part-1.parquet"];
    let unregistered = "data/staging/w2/part-0.parquet";
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
    match expired(&plan) {
        Some((cid, _)) => {
            lab.expect_data_in_candidate(&mut obs, &cid).await?;
        }
        None => obs.expect(false, "the plan proposes an expired-snapshots candidate"),
    }
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
        if root_uri.starts_with("s3://") {
            obs.expect(
                q.verdict == Verdict::Ok,
                "quarantine holds the orphan behind a delete marker (versioned bucket)",
            );
            let r =
                crate::ops::quarantine::release(&lab.ctx, &lab.source, o, "drill faults: the writer registers late")
                    .await?;
            obs.saw(format!("release {o}: {}", r.human.trim()));
            obs.expect(
                r.verdict == Verdict::Ok && lab.listing().await?.contains(unregistered),
                "releasing the candidate puts the orphan back in place",
            );
        } else {
            obs.expect(
                q.verdict != Verdict::Ok,
                "quarantine of the orphan candidate is refused (no versions and no orphanQuarantine)",
            );
        }
    }
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// Scenario `lagging-listing` (see [`fault_text`]).
async fn lagging_listing(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "lagging-listing";
    let mut obs = Obs::new();
    let lab = Lab::new(env, id, "").await?;
    let consistent = lab.plan().await?;
    let (_, table_path) = lab.ctx.storage.resolve(&lab.table_root().await?)?;
    lab.state.hide_listed_after(Some((
        table_path.to_string(),
        lab.ctx.now() - chrono::Duration::hours(1),
    )));
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
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
    let inventory = lab.inventory(&cid).await?;
    let p = lab.purge(&cid, &report).await?;
    obs.saw(format!("purge {}", status_of(&p)));
    obs.expect(status_of(&p) == "VERIFIED", "purge VERIFIED under the lagging listing");
    lab.expect_data_deleted(&mut obs, &cid, &content, true).await?;
    let gone: BTreeSet<String> = acct.before.difference(&lab.listing().await?).cloned().collect();
    obs.expect(
        gone == inventory,
        format!("the deleted set equals the inventory ({} objects)", inventory.len()),
    );
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// Scenario `hold-races-cas` (see [`fault_text`]).
async fn hold_races_cas(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "hold-races-cas";
    let mut obs = Obs::new();
    let mut lab = Lab::new(env, id, "").await?;
    let Some((cid, ids, report)) = lab.to_evidence(&mut obs).await? else {
        return Ok((obs, Vec::new(), lab.state));
    };
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
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
    lab.expect_data_deleted(&mut obs, &cid, &content, false).await?;
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// Scenario `planner-bug` (see [`fault_text`]).
async fn planner_bug(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "planner-bug";
    let mut obs = Obs::new();
    let mut lab = Lab::new(env, id, "").await?;
    lab.ctx.hooks.inject_protected_snapshot = true;
    let table = lab.truth.table(&lab.source).await?;
    let victim = table.refs().get("audit-q2").map(|r| r.snapshot_id);
    let acct = lab.account(&[], &[]).await?;
    let Some((cid, ids)) = lab.candidate(&mut obs).await? else {
        return Ok((obs, Vec::new(), lab.state));
    };
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
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
    lab.expect_data_deleted(&mut obs, &cid, &content, false).await?;
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// Scenario `bundle-missing-layer` (see [`fault_text`]).
async fn bundle_missing_layer(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "bundle-missing-layer";
    let mut obs = Obs::new();
    let lab = Lab::new(env, id, "").await?;
    let Some((cid, _)) = lab.candidate(&mut obs).await? else {
        return Ok((obs, Vec::new(), lab.state));
    };
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
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
        r.status == crate::bundle::RestoreStatus::Failed && r.findings.iter().any(|f| f.to_string().contains("MISSING"))
    });
    obs.expect(failed, "the drill FAILs the bundle with a MISSING finding");
    let p = lab.purge(&cid, &d.report).await?;
    let why = reasons_of(&p);
    obs.saw(format!("purge {}: {why}", status_of(&p)));
    obs.expect(
        status_of(&p) == "REFUSED" && why.contains("RESTORE_VERIFIED"),
        "purge REFUSED: the evidence does not show every bundle RESTORE_VERIFIED",
    );
    lab.expect_data_deleted(&mut obs, &cid, &content, false).await?;
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// Scenario `late-model-reader` (see [`fault_text`]).
async fn late_model_reader(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "late-model-reader";
    let mut obs = Obs::new();
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
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
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
    let purged = lab.expect_data_deleted(&mut obs, &cid, &content, true).await?;
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
    let restored = restore_after_purge(&lab, &bundle, &purged, false).await?;
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
        "bundle_restores": restored.whole,
        "purged_data_missing": restored.purged_missing,
    }));
    obs.expect(
        !bundle.is_empty() && restored.unexplained.is_empty(),
        format!(
            "the unprotected reader is listed, and its snapshot's bundle still restores it{} (unexplained findings: {:?})",
            if restored.whole {
                String::new()
            } else {
                format!(
                    " but for its {} purged data files, which it names OBJECT_MISSING",
                    restored.purged_missing.len()
                )
            },
            restored.unexplained
        ),
    );
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// Scenario `lagging-replica` (see [`fault_text`]).
async fn lagging_replica(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "lagging-replica";
    let mut obs = Obs::new();
    let lab = Lab::new(env, id, "").await?;
    let Some((cid, _, report)) = lab.to_evidence(&mut obs).await? else {
        return Ok((obs, Vec::new(), lab.state));
    };
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
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
    lab.expect_data_deleted(&mut obs, &cid, &content, true).await?;
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// Scenario `lost-delete-receipts` (see [`fault_text`]).
async fn lost_delete_receipts(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "lost-delete-receipts";
    let mut obs = Obs::new();
    let lab = Lab::new(env, id, "").await?;
    let Some((cid, _, report)) = lab.to_evidence(&mut obs).await? else {
        return Ok((obs, Vec::new(), lab.state));
    };
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
    let acct = lab.account(&[], &[]).await?;
    lab.state.lose_delete_responses(2);
    lab.state.fail_deletes(3);
    let p = lab.purge(&cid, &report).await?;
    let st = lab.object_states(&cid).await?;
    let injected = lab.state.injected();
    let uncertain =
        injected.get("lost_delete_response").copied().unwrap_or(0) + injected.get("delete_503").copied().unwrap_or(0);
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
    lab.expect_data_deleted(&mut obs, &cid, &content, true).await?;
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// Scenario `delete-marker-recovery` (see [`fault_text`]).
async fn delete_marker_recovery(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "delete-marker-recovery";
    let mut obs = Obs::new();
    let lab = Lab::new(env, id, "").await?;
    let Some((cid, _, report)) = lab.to_evidence(&mut obs).await? else {
        return Ok((obs, Vec::new(), lab.state));
    };
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
    let acct = lab.account(&[], &[]).await?;
    let p = lab.purge(&cid, &report).await?;
    obs.expect(status_of(&p) == "VERIFIED", "purge VERIFIED");
    // Counted before the undelete below brings the objects back.
    let purged = lab.expect_data_deleted(&mut obs, &cid, &content, true).await?;
    let rec = crate::ops::plan::registry(&lab.ctx).await?.candidate(&cid).await?;
    let bundles: Vec<String> = rec
        .quarantine
        .as_ref()
        .and_then(|q| q["bundles"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|b| b["uri"].as_str().map(str::to_owned))
        .collect();
    // Each bundle restored deeply. Its metadata copies bring back every layer the purge removed; the purged
    // data files are gone from the listing (on a filesystem for good, on a versioned bucket behind delete
    // markers until `undelete`), so a bundle restores whole unless its snapshot reached one of them, and then
    // its only findings name those files missing.
    let (mut whole, mut unexplained) = (Vec::new(), Vec::new());
    for b in &bundles {
        let r = restore_after_purge(&lab, b, &purged, true).await?;
        if r.whole {
            whole.push(b.clone());
        }
        unexplained.extend(r.unexplained.into_iter().map(|u| format!("{b}: {u}")));
    }
    obs.expect(
        !whole.is_empty() && unexplained.is_empty(),
        format!(
            "after the purge {} of {} bundles restore whole; the others' only findings are their purged data \
             files, OBJECT_MISSING (unexplained: {unexplained:?})",
            whole.len(),
            bundles.len()
        ),
    );
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
        let u = crate::ops::deleter::undelete(&lab.ctx, &lab.source, &cid, &lab.keys, None).await?;
        obs.saw(format!("undelete {}", status_of(&u)));
        let listed = lab.listing().await?;
        obs.expect(
            status_of(&u) == "UNDELETED" && inventory.iter().all(|p| listed.contains(p)),
            "undelete brings every purged object back from behind its delete marker, verified",
        );
        let mut restored = 0;
        for b in &bundles {
            let r = crate::ops::commands::restore(
                &lab.truth,
                b,
                &lab.keys,
                &crate::bundle::VerifyOptions {
                    deep: true,
                    ..Default::default()
                },
            )
            .await?;
            restored += usize::from(r.verdict == Verdict::Ok);
        }
        obs.expect(
            restored == bundles.len(),
            format!(
                "after the undelete all {} bundles restore whole ({restored} RESTORE_VERIFIED), data included",
                bundles.len()
            ),
        );
        whole.clone_from(&bundles);
    }
    let Some(bundle) = whole.first() else {
        obs.expect(false, "a bundle restores whole, to bring its snapshot back");
        return Ok((obs, lab.lost(&acct).await?, lab.state));
    };
    let into = lab.dir.join("recovered");
    let r = crate::ops::recover::restore_into(
        &lab.truth,
        bundle,
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

/// Scenario `stale-pass-after-fail` (see [`fault_text`]).
async fn stale_pass_after_fail(env: &LabEnv<'_>) -> Result<(Obs, Vec<String>, Arc<FaultState>)> {
    let id = "stale-pass-after-fail";
    let mut obs = Obs::new();
    let lab = Lab::new(env, id, "").await?;
    let Some((cid, ids, first)) = lab.to_evidence(&mut obs).await? else {
        return Ok((obs, Vec::new(), lab.state));
    };
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
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
    lab.expect_data_deleted(&mut obs, &cid, &content, false).await?;
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
    let content = lab.expect_data_in_candidate(&mut obs, &cid).await?;
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
    let clock = Arc::clone(&lab.ctx.clock);
    lab.ctx.hooks.before_delete = Some(Arc::new(move |sent| {
        req.store(sent + 1, std::sync::atomic::Ordering::SeqCst);
        if sent == 1 {
            let (config, uuid, req, done) = (config.clone(), uuid.clone(), Arc::clone(&req), Arc::clone(&done));
            let clock = Arc::clone(&clock);
            let handle = tokio::spawn(async move {
                let reg = crate::ops::plan::registry(&Context::new(config)).await?;
                reg.hold_set(
                    &uuid,
                    crate::registry::HoldScope::Table,
                    "litigation: preserve everything",
                    clock.now(),
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
        status_of(&p) == "HALTED"
            && why.contains("a legal hold that covers the candidate")
            && why.contains("litigation"),
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
    lab.expect_data_deleted(&mut obs, &cid, &content, false).await?;
    Ok((obs, lab.lost(&acct).await?, lab.state))
}

/// A bundle's restore after its candidate's purge: whether it verified whole, the purged content files it
/// named missing, and every finding that is not one of those (which must be none).
struct AfterPurge {
    whole: bool,
    purged_missing: Vec<String>,
    unexplained: Vec<String>,
}

/// Restores `bundle` (deeply when `deep`) after a purge that deleted `purged`: a bundle whose snapshot reached
/// a purged data or delete file cannot bring that file back, and must say so with `OBJECT_MISSING` for it and
/// nothing else.
async fn restore_after_purge(lab: &Lab, bundle: &str, purged: &ContentFiles, deep: bool) -> Result<AfterPurge> {
    let r = crate::ops::commands::restore(
        &lab.truth,
        bundle,
        &lab.keys,
        &crate::bundle::VerifyOptions {
            deep,
            ..Default::default()
        },
    )
    .await?;
    let mut out = AfterPurge {
        whole: r.verdict == Verdict::Ok,
        purged_missing: Vec::new(),
        unexplained: Vec::new(),
    };
    if out.whole {
        return Ok(out);
    }
    let findings = r.json["findings"].as_array().cloned().unwrap_or_default();
    if findings.is_empty() {
        out.unexplained
            .push(format!("{}: FAILED without findings", status_of(&r)));
    }
    for f in findings {
        let path = f["path"].as_str().unwrap_or_default();
        let purged_file = purged
            .data
            .iter()
            .chain(&purged.deletes)
            .any(|p| path == p || path.ends_with(&format!("/{p}")));
        if f["kind"] == "OBJECT_MISSING" && purged_file {
            out.purged_missing.push(path.to_owned());
        } else {
            out.unexplained.push(f.to_string());
        }
    }
    Ok(out)
}

/// The reasons an outcome gives, joined with ` | ` (or its single `reason`).
/// With a purge's tries that only its compare-and-set refused (`moved_tries`) first.
fn reasons_of(o: &Outcome) -> String {
    let list = |v: &Value| {
        v.as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" | "))
    };
    let tries: String = o.json["moved_tries"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(list)
                .map(|r| format!("an earlier try, refused by the compare-and-set: {r} | "))
                .collect()
        })
        .unwrap_or_default();
    tries
        + &list(&o.json["reasons"])
            .or_else(|| o.json["reason"].as_str().map(str::to_owned))
            .unwrap_or_default()
}

/// The status an outcome reports (`?` when it has none).
fn status_of(o: &Outcome) -> String {
    o.json["status"].as_str().unwrap_or("?").to_owned()
}

/// Points ref `name` (a branch or a tag) at snapshot `id`: a catalog commit, as another writer would make it.
async fn commit_ref(ctx: &Context, source: &TableSource, name: &str, id: i64, branch: bool) -> Result<()> {
    use iceberg::spec::{SnapshotReference, SnapshotRetention};
    let (table, cat, ident) = ctx.catalog_table(source).await?;
    let retention = if branch {
        SnapshotRetention::branch(None, None, None)
    } else {
        SnapshotRetention::Tag { max_ref_age_ms: None }
    };
    let new = table
        .change()
        .set_ref(name, SnapshotReference::new(id, retention))?
        .build()?;
    cat.commit(&ctx.storage, &ident, &table.generation().metadata_location, &new)
        .await?;
    Ok(())
}
