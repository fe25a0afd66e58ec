//! The machinery of the fault matrix: one scratch lakehouse per scenario ([`Lab`]) with a fault store in
//! front of its storage, the observations a scenario records ([`Obs`]), and the account of objects lost.
//!
//! The scenarios (`faults/scenarios.rs`) drive it; the face (`faults.rs`) runs them and signs the report.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::evidence::fault_matrix::ContentFileFigures;
use crate::govern::closure;
use crate::io::fault_store::FaultState;
use crate::io::store::Storage;
use crate::lab::ContentFiles;
use crate::model::location;
use crate::ops::context::Context;
use crate::ops::quarantine::QuarantineMode;
use crate::registry::State;
use crate::report::output::{Outcome, Verdict};
use crate::table::TableSource;

/// Expectation bookkeeping of one scenario.
#[derive(Default)]
pub(super) struct Obs {
    pub(super) lines: Vec<String>,
    pub(super) holds: bool,
    pub(super) readers: Vec<Value>,
    /// The candidate's data and delete files, and how many were deleted (see [`Lab::expect_data_in_candidate`]).
    pub(super) content: Option<ContentFileFigures>,
}

impl Obs {
    pub(super) fn new() -> Self {
        Self {
            holds: true,
            ..Self::default()
        }
    }

    pub(super) fn expect(&mut self, ok: bool, what: impl Into<String>) {
        let what = what.into();
        self.lines.push(if ok {
            format!("ok: {what}")
        } else {
            format!("NOT OBSERVED: {what}")
        });
        self.holds &= ok;
    }

    pub(super) fn saw(&mut self, what: impl Into<String>) {
        self.lines.push(format!("seen: {}", what.into()));
    }
}

/// One scratch lakehouse with its fault layer.
pub(super) struct Lab {
    pub(super) dir: PathBuf,
    /// Where the table, bundles, reports and receipts live: `file://DIR` or `s3://bucket/prefix/SCENARIO`.
    pub(super) base: String,
    pub(super) ctx: Context,
    pub(super) truth: Context,
    pub(super) state: Arc<FaultState>,
    pub(super) source: TableSource,
    pub(super) policy: PathBuf,
    pub(super) keys: PathBuf,
    pub(super) key: PathBuf,
    /// The key `purge` and `reconcile` sign with: never the drills' key, which `purge` would refuse.
    pub(super) deleter: PathBuf,
    pub(super) digest: String,
}

pub(super) const LAB_KEY: &str = "fault-matrix-scratch";

impl Lab {
    pub(super) async fn new(env: &LabEnv<'_>, name: &str, policy_extra: &str) -> Result<Lab> {
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
        let storage = Storage::with_fault_layer(config.storage_options(), Arc::clone(&state));
        let ctx = Context::with_storage(config.clone(), storage);
        let truth = Context::new(config);
        // The trust folder holds the public key only (the private key stays in keys/).
        let keys = dir.join("keys").join("trust");
        let key = crate::evidence::keys::generate_in(LAB_KEY, &dir.join("keys"), &keys)?;
        let deleter = crate::evidence::keys::generate_in("fault-matrix-deleter", &dir.join("keys"), &keys)?;
        let policy = dir.join("policy.yaml");
        let source = TableSource::Catalog {
            catalog: "demo".into(),
            table: "sales.orders".into(),
            table_root: None,
        };
        let uuid = truth.table(&source).await?.metadata().uuid();
        let text = format!(
            "# Written by `lakedrill drill faults` for a scratch lakehouse.\nschema: lakehouseRetentionPolicy.v1\ntable: orders/{uuid}\nprotectedRefs: [main, audit-q2]\nminSnapshotAge: 1s\nmaxReaderLease: 14d\nlegalHoldGeneration: 0\nregulatedData: false\nreclamationImplementationDigest: {digest}\n{policy_extra}"
        );
        let text = if policy_extra.contains("maxWriterDuration") {
            text
        } else {
            format!("{text}maxWriterDuration: 6h\norphanSafetyInterval: 12h\n")
        };
        std::fs::write(&policy, text).map_err(|e| Error::io("write", &policy, e))?;
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
            deleter: deleter.private_path,
            digest: digest.to_owned(),
        };
        lab.bind_policy().await?;
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await; // past minSnapshotAge
        Ok(lab)
    }

    /// Moves the scratch table to rollout stage `test` under the lab's policy file as it is now (forced: it has no
    /// report-only history): purge and quarantine refuse any policy but the one bound at `rollout set`, so a
    /// scenario that edits the policy binds it again.
    pub(super) async fn bind_policy(&self) -> Result<()> {
        let stage = crate::ops::rollout::set(
            &self.ctx,
            &self.source,
            "test",
            "drill faults: scratch lakehouse with synthetic data (forced: it has no report-only history)",
            "lakedrill drill faults",
            Some(&self.policy),
            true,
        )
        .await?;
        if stage.verdict != Verdict::Ok {
            return Err(Error::Internal(format!(
                "scratch rollout stage refused: {}",
                stage.human
            )));
        }
        Ok(())
    }

    pub(super) fn uri(&self, sub: &str) -> String {
        location::join(&self.base, sub)
    }

    pub(super) async fn plan(&self) -> Result<Value> {
        Ok(
            crate::ops::plan::plan(&self.ctx, &self.source, &self.policy, &Default::default())
                .await?
                .json,
        )
    }

    pub(super) async fn table_root(&self) -> Result<String> {
        Ok(self.truth.table(&self.source).await?.location().root_uri().to_owned())
    }

    pub(super) async fn quarantine(&self, id: &str, mode: QuarantineMode) -> Result<Outcome> {
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

    pub(super) async fn drill(&self) -> Result<crate::ops::drill::DrillOutcome> {
        let plan = self.dir.join("weekly.toml");
        let text = format!(
            "name = \"weekly\"\nkind = \"quarantine\"\nbundles = \"{}\"\nsample = 30\ntrust = \"{}\"\nkey = \"{}\"\nreports = \"{}\"\n",
            self.uri("bundles"),
            self.keys.display(),
            self.key.display(),
            self.uri("reports")
        );
        std::fs::write(&plan, text).map_err(|e| Error::io("write", &plan, e))?;
        crate::ops::drill::run(&self.ctx.storage, &plan, self.ctx.clock.as_ref(), &|| {
            Ok(self.digest.clone())
        })
        .await
    }

    pub(super) async fn purge(&self, id: &str, evidence: &str) -> Result<Outcome> {
        crate::ops::deleter::purge(
            &self.ctx,
            &self.source,
            &crate::ops::deleter::PurgeOptions {
                candidate_id: id.to_owned(),
                evidence: Some(evidence.to_owned()),
                reports: None,
                trust: self.keys.clone(),
                policy: self.policy.clone(),
                key: self.deleter.clone(),
                receipts: self.uri("receipts"),
                dry_run: false,
            },
        )
        .await
    }

    pub(super) async fn reconcile(&self, id: &str) -> Result<Outcome> {
        crate::ops::deleter::reconcile(
            &self.ctx,
            &self.source,
            id,
            &self.deleter,
            Some(&self.keys),
            &self.uri("receipts"),
            &self.policy,
        )
        .await
    }

    /// A fresh plan's expired-snapshots candidate (id, snapshot ids); its absence is a failed expectation.
    pub(super) async fn candidate(&self, obs: &mut Obs) -> Result<Option<(String, Vec<i64>)>> {
        let found = expired(&self.plan().await?);
        if found.is_none() {
            obs.expect(false, "the plan proposes an expired-snapshots candidate");
        }
        Ok(found)
    }

    /// Plan → quarantine (tag mode) → drill: the candidate, its snapshots and the signed report.
    pub(super) async fn to_evidence(&self, obs: &mut Obs) -> Result<Option<(String, Vec<i64>, String)>> {
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

    pub(super) async fn state(&self, id: &str) -> Result<State> {
        Ok(crate::ops::plan::registry(&self.ctx).await?.candidate(id).await?.state)
    }

    pub(super) async fn object_states(&self, id: &str) -> Result<BTreeMap<String, usize>> {
        let mut by = BTreeMap::new();
        for o in crate::ops::plan::registry(&self.ctx).await?.object_states(id).await? {
            *by.entry(o.state.as_str().to_owned()).or_default() += 1;
        }
        Ok(by)
    }

    /// The paths of a candidate's inventory, from the registry.
    pub(super) async fn inventory(&self, id: &str) -> Result<BTreeSet<String>> {
        Ok(crate::ops::plan::registry(&self.ctx)
            .await?
            .object_states(id)
            .await?
            .into_iter()
            .map(|o| o.path)
            .collect())
    }

    /// Objects under the table location, as the real store lists them.
    pub(super) async fn listing(&self) -> Result<BTreeSet<String>> {
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

    /// The data and delete files of candidate `id`'s inventory, as the registry recorded it when it was
    /// planned; records their counts in `obs` and expects at least one data file (issue 18 point 5: every
    /// scenario deletes, or refuses to delete, data, not only metadata).
    pub(super) async fn expect_data_in_candidate(&self, obs: &mut Obs, id: &str) -> Result<ContentFiles> {
        // A quarantined candidate's inventory is in the registry; a candidate only planned so far is in a plan
        // (a plan is report-only: the same world proposes the same candidate id again).
        let reg = crate::ops::plan::registry(&self.truth).await?;
        let uuid = self.truth.table(&self.source).await?.metadata().uuid().to_string();
        let recorded = reg
            .candidates(&uuid)
            .await?
            .into_iter()
            .find(|c| c.candidate_id == id)
            .map(|c| c.candidate_json());
        let planned = match recorded {
            Some(c) => Some(c),
            None => self.plan().await?["candidates"]
                .as_array()
                .and_then(|a| a.iter().find(|c| c["candidate_id"] == id).cloned()),
        };
        let Some(candidate) = planned else {
            obs.expect(false, format!("candidate {id} is recorded or planned"));
            return Ok(ContentFiles::default());
        };
        let content = ContentFiles::of(&candidate["objects"]);
        obs.content = Some(ContentFileFigures {
            candidate_data_files: content.data.len(),
            candidate_delete_files: content.deletes.len(),
            ..ContentFileFigures::default()
        });
        obs.expect(
            !content.data.is_empty(),
            format!(
                "candidate {id} holds {} data files and {} delete files",
                content.data.len(),
                content.deletes.len()
            ),
        );
        Ok(content)
    }

    /// Counts the candidate's content files that are deleted: `VERIFIED` in the registry and absent from the
    /// real store's listing; records the counts in `obs` and, when `expect` (a purge that completed), expects
    /// at least one data file among them. Returns the deleted ones.
    pub(super) async fn expect_data_deleted(
        &self,
        obs: &mut Obs,
        id: &str,
        content: &ContentFiles,
        expect: bool,
    ) -> Result<ContentFiles> {
        let listing = self.listing().await?;
        let states = crate::ops::plan::registry(&self.truth).await?.object_states(id).await?;
        let gone: Vec<&str> = states
            .iter()
            .filter(|o| o.state == State::Verified && !listing.contains(&o.path))
            .map(|o| o.path.as_str())
            .collect();
        let deleted = content.among(gone);
        let (data, deletes) = (deleted.data.len(), deleted.deletes.len());
        let figures = obs.content.get_or_insert_with(|| ContentFileFigures {
            candidate_data_files: content.data.len(),
            candidate_delete_files: content.deletes.len(),
            ..ContentFileFigures::default()
        });
        figures.data_files_deleted = data;
        figures.delete_files_deleted = deletes;
        if expect {
            obs.expect(
                data >= 1,
                format!(
                    "the purge deleted {data} of {} data files and {deletes} of {} delete files (verified gone)",
                    content.data.len(),
                    content.deletes.len()
                ),
            );
        } else {
            obs.saw(format!(
                "{data} of {} data files and {deletes} of {} delete files deleted",
                content.data.len(),
                content.deletes.len()
            ));
        }
        Ok(deleted)
    }

    /// What must survive: everything reachable from ref heads, the current snapshot, the snapshots valid leases,
    /// checkpoints and snapshot holds name in the registry (all of them under a table-wide hold) and `protect`,
    /// every object under a held prefix, plus `extra`. Data and delete files are counted like every other layer.
    pub(super) async fn account(&self, protect: &[i64], extra: &[String]) -> Result<Account> {
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
        let p = &input.protections;
        ids.extend(p.leases.iter().map(|(id, _)| *id));
        ids.extend(p.checkpoints.iter().map(|(id, _)| *id));
        let (mut held_prefixes, mut table_held) = (Vec::new(), false);
        for (_, scope) in &p.holds {
            match scope {
                crate::registry::HoldScope::Table => table_held = true,
                crate::registry::HoldScope::Snapshot(id) => {
                    ids.insert(*id);
                }
                crate::registry::HoldScope::Prefix(prefix) => held_prefixes.push(prefix.clone()),
            }
        }
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
        let before = self.listing().await?;
        must.extend(
            before
                .iter()
                .filter(|path| {
                    table_held
                        || held_prefixes
                            .iter()
                            .any(|h| path.starts_with(h.trim_start_matches('/')))
                })
                .cloned(),
        );
        must.extend(extra.iter().cloned());
        Ok(Account { before, must })
    }

    /// Objects lost since `acct`: protected ones gone, and any vanished object no accepted inventory holds.
    pub(super) async fn lost(&self, acct: &Account) -> Result<Vec<String>> {
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

pub(super) struct Account {
    pub(super) before: BTreeSet<String>,
    pub(super) must: BTreeSet<String>,
}

/// The expired-snapshots candidate of a plan document: id and snapshot ids.
pub(super) fn expired(plan: &Value) -> Option<(String, Vec<i64>)> {
    let c = plan["candidates"]
        .as_array()?
        .iter()
        .find(|c| c["kind"] == "expired-snapshots")?;
    let ids = c["snapshot_ids"].as_array()?.iter().filter_map(Value::as_i64).collect();
    Some((c["candidate_id"].as_str()?.to_owned(), ids))
}

/// Where a matrix run builds its labs.
pub(super) struct LabEnv<'a> {
    pub(super) root: &'a Path,
    pub(super) store: Option<&'a str>,
    pub(super) digest: &'a str,
}
