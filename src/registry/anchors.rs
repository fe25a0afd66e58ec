//! Chain anchors (#23 point 4): the registry keeps, per chain folder (a drill plan's reports folder), the
//! SHA-256 of its newest report and how many reports it holds, so that `audit verify --chain` detects a removed
//! or replaced newest report, which the hash chain alone cannot (every remaining report still links to the one
//! before it).
//!
//! An anchor only moves forward: a count below the recorded one is refused (a chain does not shrink). It uses the
//! face (`super`).

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

impl Registry {
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
}
