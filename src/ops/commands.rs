//! One function per subcommand: each takes parsed options, calls the pipeline and returns an
//! [`Outcome`]. The binary only parses arguments and prints.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::ops::context::Context;
use crate::report::output::{self, Outcome, Verdict};
use crate::table::inspect;
use crate::table::resolve::{self, Selector};
use crate::table::{Table, TableSource};

/// Which metadata table `inspect` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InspectWhat {
    /// `snapshots`
    Snapshots,
    /// `refs`
    Refs,
    /// `history`
    History,
    /// `files`
    Files,
    /// `manifests`
    Manifests,
}

#[derive(Serialize)]
struct SnapshotsDoc {
    table: String,
    metadata_location: String,
    current_snapshot_id: Option<i64>,
    snapshots: Vec<inspect::SnapshotRow>,
}

#[derive(Serialize)]
struct RefsDoc {
    table: String,
    refs: Vec<inspect::RefRow>,
    ambiguous_names: Vec<Vec<String>>,
}

#[derive(Serialize)]
struct HistoryDoc {
    table: String,
    history: Vec<inspect::HistoryRow>,
}

#[derive(Serialize)]
struct FilesDoc {
    table: String,
    snapshot_id: Option<i64>,
    files: Vec<crate::table::tree::FileEntry>,
}

#[derive(Serialize)]
struct ManifestsDoc {
    table: String,
    snapshot_id: Option<i64>,
    manifests: Vec<inspect::ManifestRow>,
}

/// `lakedrill inspect WHAT`.
///
/// # Errors
/// Any error of loading the table or reading the selected snapshot's layers.
pub async fn inspect(ctx: &Context, source: &TableSource, what: InspectWhat, selector: &Selector) -> Result<Outcome> {
    let table = ctx.table(source).await?;
    inspect_table(ctx, &table, what, selector).await
}

/// `inspect` on a table already loaded.
///
/// # Errors
/// Any error of reading the selected snapshot's layers.
pub async fn inspect_table(ctx: &Context, table: &Table, what: InspectWhat, selector: &Selector) -> Result<Outcome> {
    let name = table.name().to_owned();
    match what {
        InspectWhat::Snapshots => {
            let rows = inspect::snapshots(table);
            let human = output::table(
                &[
                    "snapshot_id",
                    "parent_id",
                    "seq",
                    "committed_at",
                    "operation",
                    "manifest_list",
                ],
                &rows
                    .iter()
                    .map(|r| {
                        vec![
                            r.snapshot_id.to_string(),
                            output::opt(r.parent_id),
                            r.sequence_number.to_string(),
                            output::ts(r.timestamp_ms),
                            r.operation.clone(),
                            r.manifest_list.clone(),
                        ]
                    })
                    .collect::<Vec<_>>(),
            );
            Outcome::new(
                Verdict::Ok,
                &SnapshotsDoc {
                    table: name,
                    metadata_location: table.generation().metadata_location.clone(),
                    current_snapshot_id: table.metadata().current_snapshot_id(),
                    snapshots: rows,
                },
                human,
            )
        }
        InspectWhat::Refs => {
            let rows = inspect::refs(table);
            let ambiguous = resolve::ambiguous_ref_groups(table);
            let mut human = output::table(
                &[
                    "name",
                    "type",
                    "snapshot_id",
                    "max_ref_age_ms",
                    "max_snapshot_age_ms",
                    "min_snapshots_to_keep",
                ],
                &rows
                    .iter()
                    .map(|r| {
                        vec![
                            r.name.clone(),
                            r.kind.to_owned(),
                            r.snapshot_id.to_string(),
                            output::opt(r.max_ref_age_ms),
                            output::opt(r.max_snapshot_age_ms),
                            output::opt(r.min_snapshots_to_keep),
                        ]
                    })
                    .collect::<Vec<_>>(),
            );
            for g in &ambiguous {
                human.push_str(&format!(
                    "warning: ref names {g:?} differ only by case; they are ambiguous and never merged\n"
                ));
            }
            Outcome::new(
                Verdict::Ok,
                &RefsDoc {
                    table: name,
                    refs: rows,
                    ambiguous_names: ambiguous,
                },
                human,
            )
        }
        InspectWhat::History => {
            let rows = inspect::history(table);
            let human = output::table(
                &["made_current_at", "snapshot_id", "parent_id", "is_current_ancestor"],
                &rows
                    .iter()
                    .map(|r| {
                        vec![
                            output::ts(r.made_current_at_ms),
                            r.snapshot_id.to_string(),
                            output::opt(r.parent_id),
                            r.is_current_ancestor.to_string(),
                        ]
                    })
                    .collect::<Vec<_>>(),
            );
            Outcome::new(
                Verdict::Ok,
                &HistoryDoc {
                    table: name,
                    history: rows,
                },
                human,
            )
        }
        InspectWhat::Files => {
            let snapshot_id = selected_id(table, selector)?;
            let files = inspect::files(table, &ctx.storage, selector).await?;
            // v3 columns only where a file has them: v1/v2 output stays as it was.
            let v3 = files
                .iter()
                .any(|f| f.referenced_data_file.is_some() || f.first_row_id.is_some());
            let opt = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
            let mut header = vec!["content", "file_path", "file_size_in_bytes", "record_count", "spec_id"];
            if v3 {
                header.extend([
                    "file_format",
                    "referenced_data_file",
                    "content_offset",
                    "content_size_in_bytes",
                    "first_row_id",
                ]);
            }
            let human = output::table(
                &header,
                &files
                    .iter()
                    .map(|f| {
                        let mut row = vec![
                            f.content.as_str().to_owned(),
                            f.file_path.clone(),
                            f.file_size_in_bytes.to_string(),
                            f.record_count.to_string(),
                            f.spec_id.to_string(),
                        ];
                        if v3 {
                            row.extend([
                                f.file_format.to_owned(),
                                f.referenced_data_file.clone().unwrap_or_default(),
                                opt(f.content_offset),
                                opt(f.content_size_in_bytes),
                                opt(f.first_row_id),
                            ]);
                        }
                        row
                    })
                    .collect::<Vec<_>>(),
            );
            Outcome::new(
                Verdict::Ok,
                &FilesDoc {
                    table: name,
                    snapshot_id,
                    files,
                },
                human,
            )
        }
        InspectWhat::Manifests => {
            let snapshot_id = selected_id(table, selector)?;
            let rows = inspect::manifests(table, &ctx.storage, selector).await?;
            let human = output::table(
                &[
                    "path",
                    "length",
                    "content",
                    "added_snapshot_id",
                    "added",
                    "existing",
                    "deleted",
                ],
                &rows
                    .iter()
                    .map(|r| {
                        vec![
                            r.path.clone(),
                            r.length.to_string(),
                            r.content.to_owned(),
                            r.added_snapshot_id.to_string(),
                            output::opt(r.added_files_count),
                            output::opt(r.existing_files_count),
                            output::opt(r.deleted_files_count),
                        ]
                    })
                    .collect::<Vec<_>>(),
            );
            Outcome::new(
                Verdict::Ok,
                &ManifestsDoc {
                    table: name,
                    snapshot_id,
                    manifests: rows,
                },
                human,
            )
        }
    }
}

fn selected_id(table: &Table, selector: &Selector) -> Result<Option<i64>> {
    if *selector == Selector::Current && table.metadata().current_snapshot_id().is_none() {
        Ok(None)
    } else {
        resolve::resolve(table, selector).map(Some)
    }
}

/// `lakedrill resolve`.
///
/// # Errors
/// Selection errors ([`crate::Error::AsOf`] and others), with the reason.
pub async fn resolve(ctx: &Context, source: &TableSource, selector: &Selector) -> Result<Outcome> {
    let table = ctx.table(source).await?;
    let id = resolve::resolve(&table, selector)?;
    #[derive(Serialize)]
    struct Doc {
        snapshot_id: i64,
    }
    Outcome::new(Verdict::Ok, &Doc { snapshot_id: id }, format!("{id}\n"))
}

/// `lakedrill keygen`.
///
/// # Errors
/// [`crate::Error::Module`] (a key error) when the name is invalid or a key file exists.
pub fn keygen(name: &str, dir: &std::path::Path) -> Result<Outcome> {
    let k = crate::evidence::keys::generate(name, dir)?;
    #[derive(Serialize)]
    struct Doc {
        private_key: String,
        public_key: String,
        keyid: String,
    }
    let doc = Doc {
        private_key: k.private_path.display().to_string(),
        public_key: k.public_path.display().to_string(),
        keyid: k.keyid.clone(),
    };
    let human = format!(
        "private key {} (mode 0600; keep it secret)\npublic key  {}\nkeyid       {}\n",
        doc.private_key, doc.public_key, doc.keyid
    );
    Outcome::new(Verdict::Ok, &doc, human)
}

/// `lakedrill seal`.
///
/// # Errors
/// Errors of loading the table or reading its layers; a bundle that already exists.
pub async fn seal(
    ctx: &Context,
    source: &TableSource,
    selector: &Selector,
    key: &std::path::Path,
    out: &str,
) -> Result<Outcome> {
    let key = crate::evidence::keys::load_signing_key(key)?;
    let table = ctx.table(source).await?;
    let id = resolve::resolve(&table, selector)?;
    let out = crate::model::location::canonical_uri(out)?;
    match crate::bundle::seal(&table, &ctx.storage, id, &key, &out, ctx.now()).await? {
        Ok(r) => {
            let human = format!(
                "sealed snapshot {} into {}\nbundle_id   {}\nbundle_root {}\nobjects     {}\nbytes       {}\n",
                r.snapshot_id, r.uri, r.bundle_id, r.bundle_root, r.objects, r.bytes
            );
            Outcome::new(Verdict::Ok, &r, human)
        }
        Err(findings) => {
            #[derive(Serialize)]
            struct Refused {
                status: &'static str,
                snapshot_id: i64,
                findings: Vec<crate::model::findings::Finding>,
            }
            let mut human = format!("REFUSED: snapshot {id} cannot be sealed; nothing was written\n");
            for f in &findings {
                human.push_str(&format!("  {f}\n"));
            }
            Outcome::new(
                Verdict::Findings,
                &Refused {
                    status: "REFUSED",
                    snapshot_id: id,
                    findings,
                },
                human,
            )
        }
    }
}

/// `lakedrill restore`.
///
/// # Errors
/// Only when the bundle cannot be read at all or a store is unreachable; problems are findings.
pub async fn restore(
    ctx: &Context,
    bundle: &str,
    trust: &std::path::Path,
    opts: &crate::bundle::VerifyOptions,
) -> Result<Outcome> {
    let trust = crate::evidence::keys::TrustStore::load_dir(trust)?;
    let r = crate::bundle::verify(&ctx.storage, bundle, &trust, opts).await?;
    let verdict = if r.status == crate::bundle::RestoreStatus::RestoreVerified {
        Verdict::Ok
    } else {
        Verdict::Findings
    };
    let mut human = format!(
        "{}  bundle {}  snapshot {}  objects verified {}  bytes verified {}\n",
        if verdict == Verdict::Ok {
            "RESTORE_VERIFIED"
        } else {
            "FAILED"
        },
        r.bundle_id.as_deref().unwrap_or("?"),
        output::opt(r.snapshot_id),
        r.objects_verified,
        r.bytes_verified
    );
    if let Some(p) = &r.shard {
        human.push_str(&format!(
            "  share {}/{}: {} of {} objects, share root {}\n",
            p.index, p.count, p.objects, p.inventory_objects, p.root
        ));
    }
    for f in &r.findings {
        human.push_str(&format!("  {f}\n"));
    }
    Outcome::new(verdict, &r, human)
}

/// `lakedrill restore ORPHAN_BUNDLE --trust DIR --put-back`: every file of a verified orphan bundle goes back
/// where it was ([`crate::ops::orphans::put_back`]) and is verified there; its candidate leaves reclamation as
/// `PROTECTED` (re-plan to reclaim what is still unreferenced). Refused (exit 1) while a purge of the candidate is
/// accepted or running, or its deletes are `DELETE_UNKNOWN` (checked again once the run is claimed). The claim is
/// renewed while the files go back ([`crate::ops::binding::with_heartbeat`]) and checked in the state write's own
/// transaction: a put-back taken over meanwhile stops (exit 2) naming the run that took it. Exit 0 when every file
/// is back and verified, 1 otherwise; a bundle that was read and does not verify is refused with exit 1
/// (`NOT_VERIFIED`, naming the bundle and what does not verify) and nothing is put back.
///
/// # Errors
/// A bundle that cannot be read or holds a snapshot, registry and storage errors.
pub async fn restore_put_back(ctx: &Context, bundle: &str, trust: &std::path::Path) -> Result<Outcome> {
    let trust = crate::evidence::keys::TrustStore::load_dir(trust)?;
    let dir = crate::bundle::bundle_dir(bundle)?;
    // A bundle that was read and does not verify is a finding (exit 1), as `restore` reports it; one that cannot
    // be read stays "could not decide" (exit 2). Nothing is put back either way.
    let not_verified = |bundle: String, reason: String| {
        Outcome::new(
            Verdict::Findings,
            &serde_json::json!({"status": "NOT_VERIFIED", "bundle": bundle, "reason": reason}),
            format!("NOT_VERIFIED: bundle {bundle} does not verify: {reason}; nothing was put back\n"),
        )
    };
    let pred = match crate::bundle::verified_predicate(&ctx.storage, bundle, &trust).await {
        Ok((pred, _)) => pred,
        Err(Error::BundleNotVerified { bundle, reason }) => return not_verified(bundle, reason),
        Err(e) => return Err(e),
    };
    let Some(info) = pred.orphans.clone() else {
        return Err(Error::invalid(
            &dir,
            "holds a snapshot, not orphans: --put-back puts orphans back; a snapshot comes back with `set-current \
             --from-bundle` or `restore --into`",
        ));
    };
    // An entry not bound under the table root it names is a finding of the signed bundle (as `restore` reports it).
    let files = match crate::bundle::held(&pred, &info) {
        Ok(files) => files,
        Err(f) => {
            return not_verified(dir, f.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "));
        }
    };
    let reg = crate::ops::plan::registry(ctx).await?;
    let rec = reg.candidate(&info.candidate_id).await?;
    let refuse = |reason: String| {
        Outcome::new(
            Verdict::Findings,
            &serde_json::json!({"status": "REFUSED", "bundle": dir, "candidate_id": info.candidate_id, "reason": reason}),
            format!("REFUSED: {reason}\n"),
        )
    };
    // In the deleter's hands: a purge accepted, running, or ended with deletes whose outcome is unknown (some
    // held files may be gone for good; `reconcile` settles them first).
    let in_deleter = |state: crate::registry::State, candidate: &str| -> Option<String> {
        use crate::registry::State;
        match state {
            State::Deleted | State::Verified => Some(format!(
                "candidate {candidate} is {state}: its purge deleted the held files for good; nothing can be put back"
            )),
            State::DeleteApproved => Some(format!(
                "candidate {candidate} is DELETE_APPROVED: a purge of it is accepted; stop the deleter or let it \
                 finish first"
            )),
            State::DeleteUnknown => Some(format!(
                "candidate {candidate} is DELETE_UNKNOWN: deletes of its purge may have taken effect; run \
                 `reconcile` first"
            )),
            _ => None,
        }
    };
    if let Some(why) = in_deleter(rec.state, &info.candidate_id) {
        return refuse(why);
    }
    // Only the bundle the registry recorded for the candidate (its URI and root, the candidate's table, hold and
    // quarantine folder: [`crate::ops::orphans::bound_to_record`]) puts its files back and moves the candidate on:
    // another signed bundle naming the candidate (a copy elsewhere, one of another table) would release it while
    // what the registry holds for it is not what went back.
    let (_, _, digests) = crate::bundle::verified_predicate_keeping(&ctx.storage, &dir, &trust, |_| Ok(None)).await?;
    if let Err(e) = crate::ops::orphans::bound_to_record(&dir, &pred, &digests.root, &rec) {
        return refuse(format!(
            "bundle {dir} (of table {}) is not the bundle candidate {} recorded (table {}): {}; nothing was put \
             back and the candidate stays {}",
            pred.table_uuid,
            info.candidate_id,
            rec.table_uuid,
            e.with_causes(),
            rec.state
        ));
    }
    let run = match crate::ops::binding::claim_run(&reg, &info.candidate_id, ctx.now(), "put-back").await? {
        Ok(run) => run,
        Err(why) => return refuse(why),
    };
    // Renewed while the files go back, and checked before each registry write: a put-back taken over as silent
    // writes nothing more (exit 2).
    let (candidate_id, run_id) = (info.candidate_id.as_str(), run.run_id.as_str());
    let work = async {
        // Read again under the claim: a purge accepted between the read above and the claim (whose run has since
        // ended, or never claimed) has moved the candidate into the deleter; nothing is put back over it.
        let rec = reg.candidate(candidate_id).await?;
        if let Some(why) = in_deleter(rec.state, candidate_id) {
            return Ok(Err(why));
        }
        // What a take-out killed between a rename aside and its removal left goes back first.
        for line in crate::ops::orphans::settle_removing(&ctx.storage, &rec, &files).await? {
            output::warn(line);
        }
        let back = crate::ops::orphans::put_back(&ctx.storage, &files).await?;
        ctx.storage
            .failpoint_delay(crate::io::store::DelayPoint::ReleaseWrite)
            .await;
        let all = back.iter().all(|b| b.verified);
        // Out of reclamation while it was held: RELEASED once every file is back (the next plan proposes what is
        // still unreferenced under a new id), PROTECTED otherwise (the next plan or purge tries again); a candidate
        // already purged or given up keeps its state. Only while this run still holds the claim, checked in the
        // write's own transaction.
        let rec = reg.candidate(candidate_id).await?;
        if matches!(
            rec.state,
            crate::registry::State::Quarantined | crate::registry::State::RestoreVerified
        ) {
            if all {
                let record = serde_json::json!({
                    "from": rec.state, "reason": "restore --put-back", "released_at": ctx.now(), "mode": "orphans",
                    "put_back": back,
                });
                match reg
                    .candidate_release_claimed(
                        candidate_id,
                        run_id,
                        "its orphans were put back by restore --put-back",
                        &record,
                        ctx.now(),
                    )
                    .await?
                {
                    Ok(Ok(_)) => {}
                    Ok(Err(why)) => return Ok(Err(why)),
                    Err(holder) => {
                        return Err(crate::ops::binding::taken_over(
                            candidate_id,
                            run_id,
                            holder.as_ref(),
                            "releasing the candidate",
                        ));
                    }
                }
            } else if let Err(holder) = reg
                .candidate_move_claimed(
                    candidate_id,
                    run_id,
                    crate::registry::State::Protected,
                    "restore --put-back could not put every orphan back",
                    ctx.now(),
                )
                .await?
            {
                return Err(crate::ops::binding::taken_over(
                    candidate_id,
                    run_id,
                    holder.as_ref(),
                    "moving the candidate to PROTECTED",
                ));
            }
        }
        Ok(Ok(back))
    };
    let out = crate::ops::binding::with_heartbeat(ctx, &reg, candidate_id, run_id, Box::pin(work)).await;
    let released = reg.purge_release(candidate_id, run_id, ctx.now()).await;
    let out: Result<std::result::Result<Vec<crate::ops::orphans::PutBack>, String>> = out;
    let out = out?;
    released?;
    let back = match out {
        Ok(back) => back,
        Err(why) => return refuse(why),
    };
    let all = back.iter().all(|b| b.verified);
    let mut human = format!(
        "{}: {} of {} files of orphan bundle {} put back and verified (candidate {})\n",
        if all { "PUT_BACK" } else { "INCOMPLETE" },
        back.iter().filter(|b| b.verified).count(),
        back.len(),
        pred.bundle_id,
        info.candidate_id
    );
    for b in &back {
        human.push_str(&format!(
            "  {}  {}  {}\n",
            b.path,
            b.action,
            if b.verified { "verified" } else { "NOT verified" }
        ));
    }
    Outcome::new(
        if all { Verdict::Ok } else { Verdict::Findings },
        &serde_json::json!({"status": if all { "PUT_BACK" } else { "INCOMPLETE" }, "bundle": dir, "candidate_id": info.candidate_id, "files": back}),
        human,
    )
}

/// What `drill run` and `report merge` print: the drill outcome and where the human reports went.
#[derive(Debug, Serialize)]
struct DrillDoc<'a> {
    #[serde(flatten)]
    outcome: &'a crate::ops::drill::DrillOutcome,
    /// The HTML page (absent for a shard report: the merged report gets one).
    html_report: Option<String>,
    /// The Markdown summary.
    markdown_report: Option<String>,
    /// The metrics file written, if any.
    metrics_file: Option<String>,
    /// The chain head anchored in the registry, if one is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    chain_head: Option<crate::registry::ChainHead>,
}

/// `lakedrill drill run`.
///
/// # Errors
/// When the drill cannot run at all; failed items are results (exit 1), not errors.
pub async fn drill_run(ctx: &Context, plan: &std::path::Path, opts: &crate::ops::drill::RunOptions) -> Result<Outcome> {
    if !opts.quiet {
        eprintln!("drill: running {}", plan.display());
    }
    ctx.implementation_digest_in_background();
    let shard = match &opts.shard {
        Some(s) => Some(s.clone().with_run_id(opts.run_id.as_deref())?),
        None if opts.run_id.is_some() => {
            return Err(crate::Error::invalid(
                "--run-id",
                "only a shard run (--shard I/N) takes a run id",
            ));
        }
        None => None,
    };
    let r = crate::ops::drill::run_with(
        &ctx.storage,
        &ctx.config,
        plan,
        ctx.clock.as_ref(),
        &|| ctx.implementation_digest(),
        crate::ops::drill::RunOptions {
            shard: shard.clone(),
            ..opts.clone()
        },
    )
    .await;
    let label = crate::ops::drill::load_plan(plan).map_or_else(
        |_| {
            plan.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        },
        |(p, _)| p.name,
    );
    let (chain, trust) = match crate::ops::drill::load_plan(plan) {
        Ok((p, _)) if shard.is_none() => (
            Some(crate::model::location::join(
                &crate::model::location::canonical_uri(&p.reports)?,
                &p.name,
            )),
            Some(std::path::PathBuf::from(p.trust)),
        ),
        _ => (None, None),
    };
    let finish = Finish {
        metrics_file: opts.metrics_file.as_deref(),
        plan_label: &label,
        chain_folder: chain,
        trust: trust.as_deref(),
    };
    drill_finish(ctx, &finish, shard, r).await
}

/// What `restore BUNDLE --shard I/N --key KEY` signs its share with and where it goes.
#[derive(Debug, Clone, Copy)]
pub struct SignedShare<'a> {
    /// `I/N`, as `--shard` takes it.
    pub shard: &'a str,
    /// The signing key (PKCS#8 PEM).
    pub key: &'a std::path::Path,
    /// The reports folder.
    pub reports: &'a str,
    /// `--run-id`: the run the shares belong to.
    pub run_id: Option<&'a str>,
    /// `-q`: no progress line.
    pub quiet: bool,
}

/// `lakedrill restore BUNDLE --trust DIR --shard I/N --key KEY [--reports DIR] [--run-id ID]` (#24 point 4): one
/// machine's share of one snapshot, signed. It is a drill of exactly this bundle (plan `restore-<bundle id>`,
/// kind `quarantine`, deep checks, `--split objects`): the share verifies the objects whose path hash falls in
/// it and its signed partial report names the shard, N, the bundle root, its counts and the Merkle root over the
/// objects it verified. `report merge` of the N shares (`<reports>/restore-<bundle id>/shards/<run id>/`) checks
/// they are complete and of one bundle root and signs the whole result into the `restore-<bundle id>` chain; the
/// deleter takes it like any drill report. The plan is built here, not read: its TOML form is what the report's
/// `plan_digest` covers. Exit 0 when the share verified, 1 with findings, 2 when it could not run (an unknown or
/// retired bundle, a bad key).
///
/// # Errors
/// [`Error::Invalid`] for a bad `--shard` or `--run-id`; what [`crate::ops::drill::run_plan`] returns.
pub async fn restore_share_signed(
    ctx: &Context,
    bundle: &str,
    trust: &std::path::Path,
    share: &SignedShare<'_>,
) -> Result<Outcome> {
    let object_shard = crate::bundle::ObjectShard::parse(share.shard)?;
    let shard = crate::ops::drill::Shard {
        index: object_shard.index,
        count: object_shard.count,
        run_id: None,
        split: crate::evidence::predicate::ShardSplit::Objects,
    }
    .with_run_id(share.run_id)?;
    let dir = crate::bundle::bundle_dir(bundle)?;
    let bundle_id = crate::model::location::file_name(&dir).to_owned();
    let plan = crate::ops::drill::DrillPlan {
        name: format!("restore-{bundle_id}"),
        kind: "quarantine".into(),
        bundles: Some(dir.clone()),
        backups: None,
        target: None,
        rto_limit: None,
        sample: 1,
        seed: Some(0),
        trust: trust.display().to_string(),
        key: share.key.display().to_string(),
        reports: share.reports.to_owned(),
        max_bundle_age: None,
        coverage_weeks: None,
        evidence_retention: None,
        policies: None,
        parallel_bundles: None,
    };
    let plan_text =
        toml::to_string(&plan).map_err(|e| Error::Internal(format!("the plan of restore {dir} --shard: {e}")))?;
    if !share.quiet {
        eprintln!(
            "restore: share {}/{} of {dir}, signed as plan {}",
            shard.index, shard.count, plan.name
        );
    }
    ctx.implementation_digest_in_background();
    let r = crate::ops::drill::run_plan(
        &ctx.storage,
        &ctx.config,
        &plan,
        plan_text.as_bytes(),
        &format!("restore {dir} --shard {}", share.shard),
        ctx.clock.as_ref(),
        &|| ctx.implementation_digest(),
        crate::ops::drill::RunOptions {
            shard: Some(shard.clone()),
            run_id: share.run_id.map(str::to_owned),
            quiet: share.quiet,
            ..Default::default()
        },
    )
    .await;
    let finish = Finish {
        metrics_file: None,
        plan_label: &plan.name,
        chain_folder: None,
        trust: Some(trust),
    };
    drill_finish(ctx, &finish, Some(shard), r).await
}

/// Where a drill run's (or merge's) human reports and metrics come from.
struct Finish<'a> {
    /// `--metrics-file`.
    metrics_file: Option<&'a std::path::Path>,
    /// The plan's name, the metrics' `plan` label.
    plan_label: &'a str,
    /// The plan's report chain (not for a shard).
    chain_folder: Option<String>,
    /// The trust folder the plan's reports verify under: only its drill keys' reports count for the trend and the
    /// last success.
    trust: Option<&'a std::path::Path>,
}

/// Writes the human reports and the metrics of a drill run (or merge), and builds its outcome.
async fn drill_finish(
    ctx: &Context,
    finish: &Finish<'_>,
    shard: Option<crate::ops::drill::Shard>,
    r: Result<crate::ops::drill::DrillOutcome>,
) -> Result<Outcome> {
    let Finish {
        metrics_file,
        plan_label,
        ref chain_folder,
        trust,
    } = *finish;
    let drill_keys = |t: &std::path::Path| {
        crate::evidence::keys::TrustStore::load_dir(t).map(|k| k.for_role(crate::evidence::keys::Role::Drill))
    };
    let now = ctx.now();
    let shard_label = shard.as_ref().map(|s| format!("{}/{}", s.index, s.count));
    let mut labels: Vec<(&str, &str)> = vec![("plan", plan_label)];
    if let Some(s) = &shard_label {
        labels.push(("shard", s));
    }
    let o = match r {
        Ok(o) => o,
        Err(e) => {
            if let Some(path) = metrics_file {
                let keys = trust.and_then(|t| drill_keys(t).ok());
                let last = match (chain_folder, keys) {
                    (Some(f), Some(keys)) => last_pass(
                        &crate::ops::drill::chain_trend(&ctx.storage, f, &keys)
                            .await
                            .unwrap_or_default(),
                    ),
                    _ => previous_metric(path, "lakedrill_drill_last_success_timestamp_seconds"),
                };
                crate::report::metrics::drill(&labels, now, None, 2, last).write_atomic(path)?;
            }
            return Err(e);
        }
    };
    let pass = o.predicate.summary.gate == "PASS";
    let verdict = if pass { Verdict::Ok } else { Verdict::Findings };
    // The registry the purge reads (the same `[registry]` of the same configuration), when one is configured.
    // Without one nothing is anchored or recorded, and the deleter sees only the reports beside the evidence.
    // Every bundle root the report judged, with its verdict (shard reports too: a shard that failed a root failed
    // it). The deleter refuses evidence of a root that a drill failed after it, wherever the caller keeps either
    // report: the registry answers, not the folder the evidence was given from.
    let (registry, head) = if ctx.config.registry.uri.is_some() {
        let reg = crate::ops::plan::registry(ctx).await?;
        let head = crate::ops::drill::record_verdicts(
            &ctx.storage,
            &reg,
            &o.report,
            &o.predicate,
            shard_label.as_deref(),
            now,
        )
        .await?;
        (Some(reg), head)
    } else {
        (None, String::new())
    };
    // The chain's new head, anchored in the configured registry (#23 point 4): `audit verify --chain` then finds a
    // removed or replaced newest report. The folder the report was written to, not the plan's folder read again
    // (the plan file may have changed during the run).
    let written_to = crate::model::location::parent(&o.report);
    let anchor = match (
        chain_folder.as_ref().and(written_to.as_ref()),
        shard.is_none(),
        &registry,
    ) {
        (Some(folder), true, Some(reg)) => {
            let reports = crate::ops::drill::list_reports(&ctx.storage, folder).await?;
            Some(
                reg.chain_anchor(folder, &head, i64::try_from(reports.len()).unwrap_or(i64::MAX), now)
                    .await?,
            )
        }
        _ => None,
    };
    // The human reports come after the registry's record and the anchor: a failure to write them (exit 2) must not
    // leave a failed bundle root unrecorded, where the deleter looks for newer failures.
    let human_reports = if let (None, Some(trust)) = (&shard, trust) {
        Some(crate::ops::drill::write_beside(&ctx.storage, &o.report, &o.predicate, &drill_keys(trust)?).await?)
    } else {
        None
    };
    if let Some(path) = metrics_file {
        let last = match &human_reports {
            Some(h) => last_pass(&h.trend),
            None if pass => Some(now),
            None => previous_metric(path, "lakedrill_drill_last_success_timestamp_seconds"),
        };
        crate::report::metrics::drill(&labels, now, Some(&o.predicate), verdict.exit_code(), last)
            .write_atomic(path)?;
    }
    let mut human = format!(
        "gate {}: {} passed, {} failed of {} sampled (population {}, seed {}){}\nsigned report {}\nhuman report  {}\n",
        o.predicate.summary.gate,
        o.predicate.summary.passed,
        o.predicate.summary.failed,
        o.predicate.sample.size,
        o.predicate.sample.population,
        o.predicate.sample.seed,
        shard_label.as_ref().map_or_else(String::new, |s| format!(
            ", shard {s} ({} items)",
            o.predicate.results.len()
        )),
        o.report,
        o.human_report
    );
    if let Some(h) = &human_reports {
        human.push_str(&format!(
            "html report   {}\nmarkdown      {}\n",
            h.html_report, h.markdown_report
        ));
    }
    if let Some(a) = &anchor {
        human.push_str(&format!(
            "chain head    {} ({} reports), anchored in the registry\n",
            a.head_sha256, a.reports
        ));
    }
    let doc = DrillDoc {
        chain_head: anchor.clone(),
        outcome: &o,
        html_report: human_reports.as_ref().map(|h| h.html_report.clone()),
        markdown_report: human_reports.as_ref().map(|h| h.markdown_report.clone()),
        metrics_file: metrics_file.map(|p| p.display().to_string()),
    };
    Outcome::new(verdict, &doc, human)
}

fn last_pass(trend: &[crate::report::html::TrendPoint]) -> Option<chrono::DateTime<chrono::Utc>> {
    trend
        .iter()
        .rev()
        .find(|t| t.gate == "PASS")
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t.finished_at).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
}

fn previous_metric(path: &std::path::Path, name: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    let text = std::fs::read_to_string(path).ok()?;
    let v = crate::report::metrics::previous_value(&text, name)?;
    #[allow(clippy::cast_possible_truncation)]
    let ms = (v * 1000.0) as i64;
    (ms > 0).then(|| chrono::DateTime::from_timestamp_millis(ms)).flatten()
}

/// `lakedrill report merge`.
///
/// # Errors
/// When a shard report, the key or the trust store cannot be read, or the merged report cannot be written.
pub async fn report_merge(
    ctx: &Context,
    shard_reports: &[String],
    key: &std::path::Path,
    trust: &std::path::Path,
    reports: &str,
    metrics_file: Option<&std::path::Path>,
) -> Result<Outcome> {
    let r = crate::ops::report_merge::merge(ctx, shard_reports, key, trust, reports, ctx.now()).await;
    match r {
        Ok(crate::ops::report_merge::MergeResult::Refused(reasons)) => {
            let mut human = "REFUSED: the shard reports were not merged; nothing was written\n".to_owned();
            for r in &reasons {
                human.push_str(&format!("  - {r}\n"));
            }
            Outcome::new(
                Verdict::Findings,
                &serde_json::json!({"status": "REFUSED", "reasons": reasons}),
                human,
            )
        }
        Ok(crate::ops::report_merge::MergeResult::Merged(o)) => {
            let label = o.predicate.drill.plan.clone();
            let finish = Finish {
                metrics_file,
                plan_label: &label,
                chain_folder: crate::model::location::parent(&o.report),
                trust: Some(trust),
            };
            drill_finish(ctx, &finish, None, Ok(*o)).await
        }
        Err(e) => Err(e),
    }
}

/// Writes the deleter metrics of a `purge` or `reconcile` run (when asked) and passes its result on.
///
/// A metrics file that cannot be written makes the run "could not decide" (exit 2: a monitor would read a stale
/// figure) without hiding what the run did: its document is kept with `error` and `exit_code` added, or its own
/// error is returned with the metrics error as a warning.
///
/// # Errors
/// The command's own error.
pub fn deleter_metrics(
    ctx: &Context,
    metrics_file: Option<&std::path::Path>,
    command: &str,
    candidate: &str,
    r: Result<Outcome>,
) -> Result<Outcome> {
    let Some(path) = metrics_file else {
        return r;
    };
    let previous = std::fs::read_to_string(path).ok();
    let (json, code) = match &r {
        Ok(o) => (Some(&o.json), o.verdict.exit_code()),
        Err(_) => (None, 2),
    };
    let Err(e) = crate::report::metrics::deleter(command, candidate, ctx.now(), json, code, previous.as_deref())
        .write_atomic(path)
    else {
        return r;
    };
    match r {
        Err(own) => {
            crate::report::output::warn(format!("the metrics file was not written either: {e}"));
            Err(own)
        }
        Ok(mut o) => {
            let msg = format!("{command} finished (see the rest of this document), but {e}");
            o.human.push_str(&format!("error: {msg}\n"));
            if let Some(doc) = o.json.as_object_mut() {
                doc.insert("error".into(), serde_json::Value::String(msg));
                doc.insert("exit_code".into(), serde_json::json!(2));
            }
            o.verdict = Verdict::Undecided;
            Ok(o)
        }
    }
}

/// `lakedrill recover`.
///
/// # Errors
/// Only when lakedrill cannot decide; a recovery that fails is exit 1 with findings.
pub async fn recover(
    ctx: &Context,
    from: &str,
    trust: &std::path::Path,
    into: &str,
    catalog: Option<&str>,
    table: Option<&str>,
) -> Result<Outcome> {
    let trust = crate::evidence::keys::TrustStore::load_dir(trust)?;
    let registration = match (catalog, table) {
        (Some(c), Some(t)) => Some(crate::ops::recover::Registration {
            catalog: c.to_owned(),
            table: t.to_owned(),
        }),
        _ => None,
    };
    let r = crate::ops::recover::recover(
        &ctx.storage,
        &ctx.config,
        from,
        &trust,
        into,
        registration.as_ref(),
        ctx.clock.as_ref(),
    )
    .await?;
    let ok = r.status == crate::bundle::RestoreStatus::RestoreVerified;
    let mut human = if ok {
        format!(
            "RECOVERED snapshot {} into {}
metadata    {}
registered  {}
objects     {} ({} bytes), {} position delete files rewritten
rows        {} scanned, {} promised by the manifests
RTO {:.3}s  RPO {}
",
            r.snapshot_id.map_or_else(|| "-".into(), |v| v.to_string()),
            r.into,
            r.metadata_location.as_deref().unwrap_or("-"),
            r.registered_as.as_deref().unwrap_or("no (give --catalog and --table)"),
            r.objects_restored,
            r.bytes_restored,
            r.position_deletes_rewritten,
            r.rows_scanned.map_or_else(|| "-".into(), |v| v.to_string()),
            r.rows_promised
                .map_or_else(|| "no figure (equality deletes)".into(), |v| v.to_string()),
            r.rto_seconds,
            r.rpo_seconds.map_or_else(|| "-".into(), |v| format!("{v:.3}s"))
        )
    } else {
        format!(
            "FAILED: the recovery from {from} does not verify; the table was not registered
"
        )
    };
    for f in &r.findings {
        human.push_str(&format!("  {f}\n"));
    }
    Outcome::new(if ok { Verdict::Ok } else { Verdict::Findings }, &r, human)
}

/// `lakedrill audit verify`.
///
/// # Errors
/// Only when a report cannot be read at all.
pub async fn audit_verify(
    ctx: &Context,
    report: &str,
    trust: &std::path::Path,
    chain: bool,
    expect_head: Option<&str>,
) -> Result<Outcome> {
    let trust = crate::evidence::keys::TrustStore::load_dir(trust)?;
    let mut a = crate::ops::audit::verify(&ctx.storage, report, &trust, chain).await?;
    // Every file read here is read whole: bounded like a drill report (a file of any size can be written into a
    // receipts or reports folder).
    let max = ctx.storage.options().max_metadata_bytes;
    // The chain's head against its anchor: `--expect-head`, else the configured registry's (#23 point 4).
    // Why a chain is not anchored, for the human output: no anchor given, or none in the registry for this chain.
    let mut unanchored = "no [registry] configured and no --expect-head".to_owned();
    if chain {
        let expected = match expect_head {
            Some(h) => Some((h.to_owned(), None, "--expect-head")),
            None if ctx.config.registry.uri.is_some() => {
                let folder = a.chain_folder.clone().unwrap_or_default();
                unanchored = format!(
                    "the configured registry holds no anchor for the chain {folder} (a copied chain, or one its \
                     drills never recorded there), and no --expect-head"
                );
                crate::ops::plan::registry(ctx)
                    .await?
                    .chain_head(&folder)
                    .await?
                    .map(|h| (h.head_sha256, Some(h.reports), "the registry"))
            }
            None => None,
        };
        match expected {
            Some((head, reports, from)) => {
                let ok_head = a.chain_head.as_deref() == Some(head.as_str());
                let ok_count = reports.is_none_or(|n| i64::try_from(a.reports_checked).unwrap_or(i64::MAX) >= n);
                if !ok_head || !ok_count {
                    a.findings.push(crate::ops::audit::AuditFinding {
                        check: "CHAIN_HEAD_MISMATCH".into(),
                        report: a.chain_folder.clone().unwrap_or_default(),
                        detail: format!(
                            "{from} anchors head {head}{}, but the chain's newest report is {} ({} reports): the newest \
                             report was removed or replaced",
                            reports.map(|n| format!(" after {n} reports")).unwrap_or_default(),
                            a.chain_head.as_deref().unwrap_or("none"),
                            a.reports_checked
                        ),
                    });
                    a.status = "FAILED".into();
                }
                a.anchored = Some(from.to_owned());
            }
            None => a.anchored = None,
        }
    } else if expect_head.is_some() {
        return Err(crate::Error::invalid(
            "--expect-head",
            "checks a chain's head: give --chain too",
        ));
    } else if ctx.config.registry.uri.is_some()
        && crate::model::location::file_name(report) == crate::evidence::retirement::RECORD_FILE
    {
        // A retirement record: the registry anchors the one the purge wrote, which must be this one unchanged.
        let uri = crate::model::location::canonical_uri(report)?;
        if let Some(h) = crate::ops::plan::registry(ctx).await?.chain_head(&uri).await? {
            let sha =
                crate::evidence::sha256_hex(&ctx.storage.get_bounded(&uri, max, "a retirement record").await?.bytes);
            if sha != h.head_sha256 {
                a.findings.push(crate::ops::audit::AuditFinding {
                    check: "CHAIN_HEAD_MISMATCH".into(),
                    report: uri.clone(),
                    detail: format!(
                        "the registry anchors the retirement record the purge wrote here as SHA-256 {}, but this one \
                         is {sha}: it was replaced",
                        h.head_sha256
                    ),
                });
                a.status = "FAILED".into();
            }
            a.anchored = Some("the registry".into());
        }
    } else if ctx.config.registry.uri.is_some() && crate::model::location::file_name(report).starts_with("summary-") {
        // A purge summary: the registry anchors the candidate's newest one, which must still be there unchanged.
        let uri = crate::model::location::canonical_uri(report)?;
        let folder = crate::model::location::parent(&uri).unwrap_or_default();
        if let Some(h) = crate::ops::plan::registry(ctx).await?.chain_head(&folder).await? {
            let mut found = false;
            for o in ctx.storage.list(&folder).await? {
                if crate::model::location::file_name(&o.uri).starts_with("summary-")
                    && crate::evidence::sha256_hex(
                        &ctx.storage.get_bounded(&o.uri, max, "a purge summary").await?.bytes,
                    ) == h.head_sha256
                {
                    found = true;
                }
            }
            if !found {
                a.findings.push(crate::ops::audit::AuditFinding {
                    check: "CHAIN_HEAD_MISMATCH".into(),
                    report: folder.clone(),
                    detail: format!(
                        "the registry anchors the candidate's newest purge summary {} ({} summaries), and no summary \
                         in {folder} has that digest: it was removed or replaced",
                        h.head_sha256, h.reports
                    ),
                });
                a.status = "FAILED".into();
            }
            a.anchored = Some("the registry".into());
        }
        // Every registry receipt of the candidate against its signed copy in the receipts chain.
        let summary =
            crate::evidence::peek_unverified(&ctx.storage.get_bounded(&uri, max, "a purge summary").await?.bytes)
                .map(|s| s["predicate"].clone())
                .unwrap_or_default();
        if let (Some(candidate), Some(read)) = (
            summary["candidate_id"].as_str(),
            crate::ops::receipts::check_summary(&ctx.storage, &uri, &summary, &trust).await?,
        ) {
            // The registry's rows streamed past the sealed receipts' digests (#24: two million receipts).
            let mut compare = crate::ops::receipts::Compare::new(read.receipts);
            crate::ops::plan::registry(ctx)
                .await?
                .for_each_receipt(candidate, |r| compare.row(&r))
                .await?;
            let differ = compare.finish();
            let more = differ.len().saturating_sub(20);
            let shown = differ
                .into_iter()
                .take(20)
                .chain((more > 0).then(|| format!("… and {more} more receipt(s) that differ")));
            for detail in shown {
                a.findings.push(crate::ops::audit::AuditFinding {
                    check: "RECEIPTS_MISMATCH".into(),
                    report: crate::model::location::file_name(&uri).to_owned(),
                    detail,
                });
                a.status = "FAILED".into();
            }
        }
    }
    let verdict = if a.status == "VERIFIED" {
        Verdict::Ok
    } else {
        Verdict::Findings
    };
    let mut human = format!(
        "{}: {} report(s) checked, signed by {:?}, gate {}\n",
        a.status,
        a.reports_checked,
        a.keyids,
        a.gate.as_deref().unwrap_or("-")
    );
    if chain {
        human.push_str(&format!(
            "  chain head {}: {}\n",
            a.chain_head.as_deref().unwrap_or("none"),
            match &a.anchored {
                Some(from) => format!("checked against {from}"),
                None => format!("not anchored ({unanchored}): a removed newest report would not be noticed"),
            }
        ));
    }
    for l in &a.locks {
        human.push_str(&format!(
            "  lock {}: {}{}\n",
            l.file,
            l.mode.as_deref().unwrap_or("NOT LOCKED"),
            l.retain_until
                .as_deref()
                .map(|u| format!(" until {u}"))
                .unwrap_or_default()
        ));
    }
    for f in &a.findings {
        human.push_str(&format!("  {} {}: {}\n", f.check, f.report, f.detail));
    }
    Outcome::new(verdict, &a, human)
}

/// `lakedrill policy check FILE`.
///
/// # Errors
/// [`crate::Error::Module`] (a policy error) naming the field and the rule (exit 2).
pub fn policy_check(file: &std::path::Path) -> Result<Outcome> {
    let p = crate::govern::policy::load(file)?;
    let human = format!("{}: valid {}\ndigest {}\n", file.display(), p.schema(), p.digest());
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"digest": p.digest(), "schema": p.schema()}),
        human,
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// See: issue 16 point 6 — every pool a command opened is closed before the runtime ends.
    #[tokio::test]
    async fn r16_context_opens_the_registry_once_and_closes_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.registry.uri = Some(format!("sqlite:{}", dir.path().join("r.db").display()));
        let ctx = Context::new(config);
        let a = ctx.registry().await.unwrap();
        let b = crate::ops::plan::registry(&ctx).await.unwrap();
        assert_eq!(a.generation().await.unwrap(), 0);
        ctx.close().await;
        assert!(
            a.is_closed() && b.is_closed(),
            "one pool, shared, closed by Context::close"
        );
        // A later use opens a new one.
        let c = ctx.registry().await.unwrap();
        assert!(!c.is_closed());
        assert_eq!(c.generation().await.unwrap(), 0);
        ctx.close().await;
        assert!(c.is_closed());
    }
}
