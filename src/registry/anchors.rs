//! Chain anchors (#23 point 4): the registry keeps, per chain folder (a drill plan's reports folder), the
//! SHA-256 of its newest report and how many reports it holds, so that `audit verify --chain` detects a removed
//! or replaced newest report, which the hash chain alone cannot (every remaining report still links to the one
//! before it).
//!
//! An anchor only moves forward: a count below the recorded one is refused (a chain does not shrink). It uses the
//! face (`super`).
//!
//! Drill verdicts (schema version 5): every drill report (shard reports and merges included) records here, per
//! bundle root it judged, whether every item of that root was `RESTORE_VERIFIED`, with the report's
//! `finished_at`, URI and SHA-256. The deleter asks [`Registry::drill_failures_after`] whether a drill failed one
//! of its candidate's roots after the evidence finished: a question whose answer does not depend on where the
//! caller keeps the evidence or the reports. Rows are never changed or deleted. The registry does not verify the
//! reports (it reads no store); it records what the drill that signed them judged, and whether the root it judged
//! was verified or only claimed by an envelope that did not verify (`root_claimed`, schema version 6).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::base::{EventKind, Registry, RegistryError, fmt_time, query, time};

/// The anchored head of one chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainHead {
    /// The chain folder (canonical URI).
    pub folder: String,
    /// SHA-256 of its newest report envelope.
    pub head_sha256: String,
    /// How many reports the chain held then.
    pub reports: i64,
    /// When it was anchored.
    pub anchored_at: DateTime<Utc>,
}

/// One drill report's verdict on one bundle root, as the drill that wrote the report recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillVerdict {
    /// The report envelope (canonical URI where the drill wrote it).
    pub report_uri: String,
    /// SHA-256 of the report envelope's bytes.
    pub report_sha256: String,
    /// The drill plan's name.
    pub plan: String,
    /// `I/N` for the report of one shard of a sharded drill; `None` for a whole (or merged) report.
    pub shard: Option<String>,
    /// The bundle root judged.
    pub bundle_root: String,
    /// Whether `bundle_root` is only the root the bundle's envelope *claims* (`claimed_bundle_root`, read without
    /// trusting it: the envelope did not verify, so no item of the root had a verified one) rather than a root the
    /// drill verified: `Some(true)`. `Some(false)`: verified. `None`: a row recorded before the registry kept the
    /// distinction (schema version 5), which cannot say.
    pub root_claimed: Option<bool>,
    /// Whether every item of this root in the report was `RESTORE_VERIFIED`.
    pub verified: bool,
    /// The report's `finished_at`.
    pub finished_at: DateTime<Utc>,
}

impl DrillVerdict {
    /// The root judged, in words for a refusal: `bundle root R`, or for a root only the envelope claims `the
    /// bundle whose envelope claims root R (not verified: …)`, or for a row that cannot say which it was, `bundle
    /// root R (…)`.
    #[must_use]
    pub fn root_words(&self) -> String {
        match self.root_claimed {
            Some(false) => format!("bundle root {}", self.bundle_root),
            Some(true) => format!(
                "the bundle whose envelope claims root {} (not verified: the envelope did not verify)",
                self.bundle_root
            ),
            None => format!(
                "bundle root {} (recorded before the registry marked claimed roots: verified or only claimed by the \
                 envelope)",
                self.bundle_root
            ),
        }
    }
}

impl Registry {
    /// Records the verdicts of one drill report (one row per bundle root; a report recorded again adds
    /// nothing). A no-op for no verdicts.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for an empty report hash, root or plan; [`RegistryError::Query`].
    pub async fn drill_record(&self, verdicts: &[DrillVerdict], now: DateTime<Utc>) -> Result<usize, RegistryError> {
        const OP: &str = "drill_record";
        let Some(first) = verdicts.first() else {
            return Ok(0);
        };
        for v in verdicts {
            super::base::require_text("report_sha256", &v.report_sha256)?;
            super::base::require_text("bundle_root", &v.bundle_root)?;
            super::base::require_text("plan", &v.plan)?;
        }
        let mut change = self.change(OP).await?;
        let mut added = 0;
        for v in verdicts {
            let n = sqlx::query(
                "INSERT INTO drill_verdicts (report_sha256, bundle_root, verified, finished_at, report_uri, plan, \
                 shard, recorded_at, root_claimed) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (report_sha256, bundle_root) DO NOTHING",
            )
            .bind(&v.report_sha256)
            .bind(&v.bundle_root)
            .bind(i64::from(v.verified))
            .bind(fmt_time(v.finished_at))
            .bind(&v.report_uri)
            .bind(&v.plan)
            .bind(v.shard.as_deref())
            .bind(fmt_time(now))
            .bind(v.root_claimed.map(i64::from))
            .execute(&mut *change.tx)
            .await
            .map_err(query(OP))?
            .rows_affected();
            added += usize::try_from(n).unwrap_or(0);
        }
        let failed: Vec<&str> = verdicts
            .iter()
            .filter(|v| !v.verified)
            .map(|v| v.bundle_root.as_str())
            .collect();
        let claimed: Vec<&str> = verdicts
            .iter()
            .filter(|v| v.root_claimed == Some(true))
            .map(|v| v.bundle_root.as_str())
            .collect();
        let detail = serde_json::json!({
            "report_uri": first.report_uri,
            "report_sha256": first.report_sha256,
            "plan": first.plan,
            "shard": first.shard,
            "finished_at": fmt_time(first.finished_at),
            "roots": verdicts.len(),
            "failed_roots": failed,
            "claimed_roots": claimed,
        });
        change.commit(now, EventKind::DrillRecorded, None, &detail).await?;
        Ok(added)
    }

    /// The recorded verdicts that failed one of `roots` in a report finished strictly after `after`, oldest
    /// first. The deleter and the gates pass their evidence's `started_at`: a failure that finished while the
    /// passing drill was still running may have seen an object after the pass read it.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn drill_failures_after(
        &self,
        roots: &[String],
        after: DateTime<Utc>,
    ) -> Result<Vec<DrillVerdict>, RegistryError> {
        let roots = roots.to_vec();
        let after = fmt_time(after);
        self.read("drill_failures_after", async move |conn| {
            let mut out = Vec::new();
            for root in &roots {
                let rows = sqlx::query(
                    "SELECT * FROM drill_verdicts WHERE bundle_root = $1 AND verified = 0 AND finished_at > $2 \
                     ORDER BY finished_at, report_sha256",
                )
                .bind(root)
                .bind(&after)
                .fetch_all(&mut *conn)
                .await?;
                for r in &rows {
                    let verified: i64 = r.try_get("verified")?;
                    let claimed: Option<i64> = r.try_get("root_claimed")?;
                    out.push(DrillVerdict {
                        report_uri: r.try_get("report_uri")?,
                        report_sha256: r.try_get("report_sha256")?,
                        plan: r.try_get("plan")?,
                        shard: r.try_get("shard")?,
                        bundle_root: r.try_get("bundle_root")?,
                        verified: verified != 0,
                        finished_at: time(r, "finished_at")?,
                        root_claimed: claimed.map(|c| c != 0),
                    });
                }
            }
            out.sort_by(|a, b| {
                a.finished_at
                    .cmp(&b.finished_at)
                    .then_with(|| a.report_uri.cmp(&b.report_uri))
            });
            Ok(out)
        })
        .await
    }

    /// Whether the registry recorded the verdicts of the report whose envelope has SHA-256 `report_sha256`.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn drill_recorded(&self, report_sha256: &str) -> Result<bool, RegistryError> {
        let sha = report_sha256.to_owned();
        self.read("drill_recorded", async move |conn| {
            let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM drill_verdicts WHERE report_sha256 = $1")
                .bind(&sha)
                .fetch_one(&mut *conn)
                .await?;
            Ok(n > 0)
        })
        .await
    }

    /// Anchors the head of the chain in `folder`. Refused ([`RegistryError::Invalid`]) when the chain holds
    /// fewer reports than the anchor already recorded.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`]; [`RegistryError::Query`].
    pub async fn chain_anchor(
        &self,
        folder: &str,
        head_sha256: &str,
        reports: i64,
        now: DateTime<Utc>,
    ) -> Result<ChainHead, RegistryError> {
        const OP: &str = "chain_anchor";
        let mut change = self.change(OP).await?;
        let before: Option<i64> = sqlx::query_scalar("SELECT reports FROM chain_heads WHERE folder = $1")
            .bind(folder)
            .fetch_optional(&mut *change.tx)
            .await
            .map_err(query(OP))?;
        if let Some(b) = before
            && reports < b
        {
            return Err(RegistryError::Invalid {
                field: "chain",
                reason: format!(
                    "{folder} holds {reports} reports, but the registry anchored {b}: reports were removed from the chain"
                ),
            });
        }
        sqlx::query(
            "INSERT INTO chain_heads (folder, head_sha256, reports, anchored_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (folder) DO UPDATE SET head_sha256 = excluded.head_sha256, reports = excluded.reports, \
             anchored_at = excluded.anchored_at",
        )
        .bind(folder)
        .bind(head_sha256)
        .bind(reports)
        .bind(fmt_time(now))
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        let head = ChainHead {
            folder: folder.to_owned(),
            head_sha256: head_sha256.to_owned(),
            reports,
            anchored_at: now,
        };
        change.commit(now, EventKind::ChainAnchored, None, &head).await?;
        Ok(head)
    }

    /// The anchored head of the chain in `folder`, if any.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn chain_head(&self, folder: &str) -> Result<Option<ChainHead>, RegistryError> {
        let folder = folder.to_owned();
        self.read("chain_head", async move |conn| {
            let row = sqlx::query("SELECT * FROM chain_heads WHERE folder = $1")
                .bind(&folder)
                .fetch_optional(&mut *conn)
                .await?;
            row.map(|r| {
                Ok(ChainHead {
                    folder: r.try_get("folder")?,
                    head_sha256: r.try_get("head_sha256")?,
                    reports: r.try_get("reports")?,
                    anchored_at: time(&r, "anchored_at")?,
                })
            })
            .transpose()
        })
        .await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::registry::tests::{Backend, fresh_on, on_both_backends, t};

    on_both_backends!(an_anchor_moves_forward_only,);

    async fn an_anchor_moves_forward_only(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let f = "file:///r/weekly";
        assert!(reg.chain_head(f).await.unwrap().is_none());
        reg.chain_anchor(f, "aa", 1, t(0)).await.unwrap();
        reg.chain_anchor(f, "bb", 2, t(1)).await.unwrap();
        let h = reg.chain_head(f).await.unwrap().unwrap();
        assert_eq!((h.head_sha256.as_str(), h.reports), ("bb", 2));
        assert!(reg.chain_anchor(f, "aa", 1, t(2)).await.is_err());
        assert_eq!(reg.chain_head(f).await.unwrap().unwrap().head_sha256, "bb");
    }

    on_both_backends!(only_failures_finished_after_the_evidence_are_found,);

    async fn only_failures_finished_after_the_evidence_are_found(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let v = |sha: &str, root: &str, verified: bool, at: i64| super::DrillVerdict {
            report_uri: format!("file:///r/weekly/{sha}.dsse.json"),
            report_sha256: sha.into(),
            plan: "weekly".into(),
            shard: None,
            bundle_root: root.into(),
            verified,
            finished_at: t(at),
            root_claimed: Some(false),
        };
        assert_eq!(
            reg.drill_record(&[v("r1", "A", true, 1), v("r1", "B", true, 1)], t(1))
                .await
                .unwrap(),
            2
        );
        reg.drill_record(&[v("r2", "A", false, 3), v("r2", "B", true, 3)], t(3))
            .await
            .unwrap();
        reg.drill_record(&[v("r0", "A", false, 0)], t(3)).await.unwrap();
        // Recorded again: nothing added.
        assert_eq!(reg.drill_record(&[v("r2", "A", false, 3)], t(4)).await.unwrap(), 0);
        let roots = vec!["A".to_owned(), "B".to_owned(), "C".to_owned()];
        let found = reg.drill_failures_after(&roots, t(1)).await.unwrap();
        assert_eq!(found, vec![v("r2", "A", false, 3)]);
        assert!(reg.drill_failures_after(&roots, t(3)).await.unwrap().is_empty());
        assert!(reg.drill_recorded("r1").await.unwrap());
        assert!(!reg.drill_recorded("r9").await.unwrap());
    }
}
