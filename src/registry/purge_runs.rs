//! Purge runs: the claim of the one process purging a candidate ([`PurgeRun`]), the batches of its deletes
//! ([`PurgeBatch`], checked against a [`PurgeBaseline`] under the registry's write lock), the write-once
//! deletion receipts, and the per-object state transitions the deleter records before it acts.
//!
//! A batch holds the registry's write lock from [`Registry::purge_batch`] to [`PurgeBatch::commit`], so a
//! hold, a lease, the stop switch or a stage change either lands before a batch (and halts it) or waits for
//! it. A receipt is never overwritten: each attempt is a new row with its own generation and event.
//!
//! It does not decide whether a candidate may be purged (the acceptance point in `candidates` does) and does
//! not talk to storage. It uses the face (`super`), `protections`, `rollout` and `candidates`.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use super::base::{
    EventKind, Registry, RegistryError, WRITER_GAP, bump_generation, decode, fmt_time, json, optional_row, query,
    record_event, time,
};
use super::candidates::{State, open_intents, read_candidate_table};
use super::protections::{
    HOLDS_OF_TABLE, covering_new_protections, hold_from_row, prefix_covers, read_deleter_switch, read_hold_generation,
    read_lease_watermark, read_protection_generation,
};
use super::rollout;
use crate::io::db::Dialect;
use crate::model::location::TableLocation;
use crate::model::object::HoldScope;

/// One object's state within a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectState {
    /// Path relative to the table location.
    pub path: String,
    /// State.
    pub state: State,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A recorded receipt (write-once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiptRow {
    /// Candidate.
    pub candidate_id: String,
    /// Object path.
    pub path: String,
    /// Attempt number, from 1.
    pub attempt: i64,
    /// The receipt as the deleter wrote it.
    pub receipt: serde_json::Value,
    /// When it was recorded.
    pub created_at: DateTime<Utc>,
}

impl Registry {
    /// The objects of a candidate and their states, by path.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn object_states(&self, candidate_id: &str) -> Result<Vec<ObjectState>, RegistryError> {
        self.rows(
            "object_states",
            "SELECT path, state, updated_at FROM object_states WHERE candidate_id = $1 ORDER BY path",
            &[candidate_id],
            |r| {
                let path: String = r.try_get("path")?;
                let state = parse_object_state(candidate_id, &path, &r.try_get::<String, _>("state")?)?;
                Ok(ObjectState {
                    path,
                    state,
                    updated_at: time(r, "updated_at")?,
                })
            },
        )
        .await
    }

    /// The objects of a candidate and their states, visited as the rows arrive (a million-object purge does not
    /// hold them all, #24); by path.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn for_each_object_state(
        &self,
        candidate_id: &str,
        visit: impl FnMut(ObjectState),
    ) -> Result<(), RegistryError> {
        self.for_each_row(
            "object_states",
            "SELECT path, state, updated_at FROM object_states WHERE candidate_id = $1 ORDER BY path",
            candidate_id,
            |r| {
                let path: String = r.try_get("path")?;
                let state = parse_object_state(candidate_id, &path, &r.try_get::<String, _>("state")?)?;
                Ok(ObjectState {
                    path,
                    state,
                    updated_at: time(r, "updated_at")?,
                })
            },
            visit,
        )
        .await
    }

    /// Runs `sql` (one parameter: `candidate_id`) and hands each row, as it arrives, read by `read`, to `visit`.
    async fn for_each_row<T>(
        &self,
        op: &'static str,
        sql: &str,
        candidate_id: &str,
        read: impl Fn(&AnyRow) -> Result<T, sqlx::Error>,
        mut visit: impl FnMut(T),
    ) -> Result<(), RegistryError> {
        use futures::TryStreamExt;
        let mut rows = sqlx::query(sql).bind(candidate_id).fetch(&self.pool);
        while let Some(r) = rows.try_next().await.map_err(query(op))? {
            visit(read(&r).map_err(query(op))?);
        }
        Ok(())
    }

    /// Moves one object to `to` (legal transitions only), recording the change before the caller acts on it.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for an illegal transition; [`RegistryError::NotFound`].
    pub async fn object_transition(
        &self,
        candidate_id: &str,
        path: &str,
        to: State,
        now: DateTime<Utc>,
    ) -> Result<(), RegistryError> {
        const OP: &str = "object_transition";
        let mut tx = self.begin_write(OP).await?;
        set_object_state(&mut tx, candidate_id, path, to, now, OP).await?;
        tx.commit().await.map_err(query(OP))
    }

    /// Records a receipt, write-once: a second receipt for the same attempt is refused by the primary key.
    /// Returns the attempt number.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn receipt_add(
        &self,
        candidate_id: &str,
        path: &str,
        receipt: &serde_json::Value,
        now: DateTime<Utc>,
    ) -> Result<i64, RegistryError> {
        const OP: &str = "receipt_add";
        let mut tx = self.begin_write(OP).await?;
        let table = read_candidate_table(&mut tx, candidate_id).await.map_err(query(OP))?;
        let attempt = insert_receipt(&mut tx, candidate_id, table.as_deref(), path, receipt, now)
            .await
            .map_err(query(OP))?;
        tx.commit().await.map_err(query(OP))?;
        Ok(attempt)
    }

    /// How many receipts a candidate has.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn receipt_count(&self, candidate_id: &str) -> Result<u64, RegistryError> {
        const OP: &str = "receipt_count";
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM receipts WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_one(&self.pool)
            .await
            .map_err(query(OP))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Streams every receipt of a candidate (by path then attempt) through `visit`, one row at a time: what a
    /// million-object candidate's receipts would take whole is never held (#24).
    ///
    /// # Errors
    /// [`RegistryError::Query`], also for a row whose receipt does not parse.
    pub async fn for_each_receipt(
        &self,
        candidate_id: &str,
        visit: impl FnMut(ReceiptRow),
    ) -> Result<(), RegistryError> {
        self.for_each_row(
            "receipts",
            "SELECT * FROM receipts WHERE candidate_id = $1 ORDER BY path, attempt",
            candidate_id,
            receipt_from_row,
            visit,
        )
        .await
    }

    /// Every receipt of a candidate, by path then attempt.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn receipts(&self, candidate_id: &str) -> Result<Vec<ReceiptRow>, RegistryError> {
        self.rows(
            "receipts",
            "SELECT * FROM receipts WHERE candidate_id = $1 ORDER BY path, attempt",
            &[candidate_id],
            receipt_from_row,
        )
        .await
    }
}

fn receipt_from_row(r: &AnyRow) -> Result<ReceiptRow, sqlx::Error> {
    Ok(ReceiptRow {
        candidate_id: r.try_get("candidate_id")?,
        path: r.try_get("path")?,
        attempt: r.try_get("attempt")?,
        receipt: json(r, "receipt_json")?,
        created_at: time(r, "created_at")?,
    })
}

/// Moves one object to `to` inside `tx` (legal transitions only; a no-op when it is already there).
async fn set_object_state(
    tx: &mut AnyConnection,
    candidate_id: &str,
    path: &str,
    to: State,
    now: DateTime<Utc>,
    op: &'static str,
) -> Result<(), RegistryError> {
    let cur: Option<String> =
        sqlx::query_scalar("SELECT state FROM object_states WHERE candidate_id = $1 AND path = $2")
            .bind(candidate_id)
            .bind(path)
            .fetch_optional(&mut *tx)
            .await
            .map_err(query(op))?;
    let Some(cur) = cur else {
        return Err(RegistryError::NotFound {
            what: "object",
            id: format!("{candidate_id}:{path}"),
        });
    };
    let cur = parse_object_state(candidate_id, path, &cur).map_err(query(op))?;
    if cur == to {
        return Ok(());
    }
    if !cur.object_can_move_to(to) {
        return Err(RegistryError::Invalid {
            field: "state",
            reason: format!("object {path} of {candidate_id} cannot move from {cur} to {to}"),
        });
    }
    sqlx::query("UPDATE object_states SET state = $1, updated_at = $2 WHERE candidate_id = $3 AND path = $4")
        .bind(to.as_str())
        .bind(fmt_time(now))
        .bind(candidate_id)
        .bind(path)
        .execute(&mut *tx)
        .await
        .map_err(query(op))?;
    Ok(())
}

/// Inserts a receipt (write-once: the next attempt number of its object) with its own registry generation and
/// `receipt_recorded` event, inside `tx`. Returns the attempt number.
async fn insert_receipt(
    tx: &mut AnyConnection,
    candidate_id: &str,
    table: Option<&str>,
    path: &str,
    receipt: &serde_json::Value,
    now: DateTime<Utc>,
) -> Result<i64, sqlx::Error> {
    let generation = bump_generation(&mut *tx).await?;
    let attempt: i64 = sqlx::query_scalar("SELECT COUNT(*) + 1 FROM receipts WHERE candidate_id = $1 AND path = $2")
        .bind(candidate_id)
        .bind(path)
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO receipts (candidate_id, path, attempt, receipt_json, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(candidate_id)
    .bind(path)
    .bind(attempt)
    .bind(receipt.to_string())
    .bind(fmt_time(now))
    .execute(&mut *tx)
    .await?;
    let detail = serde_json::json!({"candidate_id": candidate_id, "path": path, "attempt": attempt});
    record_event(&mut *tx, generation, now, EventKind::ReceiptRecorded, table, &detail).await?;
    Ok(attempt)
}

/// What a purge run started from: the values a batch of its deletes must still find in the registry, or else
/// relate to the candidate. Starts as the candidate's world stamp (what its acceptance or last rebase judged);
/// each batch that opens advances it to what that batch judged ([`Registry::purge_batch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeBaseline {
    /// The table.
    pub table_uuid: String,
    /// The table's location: hold and writer prefixes are related to the candidate's paths through it.
    pub location: TableLocation,
    /// The run holding the candidate's claim.
    pub run_id: String,
    /// The table's hold generation last judged.
    pub hold_generation: i64,
    /// The table's lease counter last judged.
    pub lease_watermark: i64,
    /// The table's protection generation (DR checkpoints and writers) last judged.
    pub protection_generation: i64,
    /// The deletion rights the candidate was judged with ([`super::RightsInForce::digest`]), when the guard must
    /// find them unchanged: a quarantine's commit guard ([`Registry::commit_guard`]) sets it, so that a bundle-mode
    /// commit never takes out of the table a snapshot whose deletion right a governance decision withdrew while it
    /// sealed. `None` (a purge's baseline) compares nothing: the purge's acceptance compared them.
    pub deletion_rights: Option<String>,
}

impl PurgeBaseline {
    /// The baseline of run `run_id` of a candidate of table `table_uuid` at `location`, judged as of `stamp`.
    #[must_use]
    pub fn from_stamp(
        table_uuid: &str,
        location: &TableLocation,
        run_id: &str,
        stamp: &super::candidates::WorldStamp,
    ) -> Self {
        Self {
            table_uuid: table_uuid.to_owned(),
            location: location.clone(),
            run_id: run_id.to_owned(),
            hold_generation: stamp.hold_generation,
            lease_watermark: stamp.lease_watermark,
            protection_generation: stamp.protection_generation,
            deletion_rights: None,
        }
    }
}

/// One batch of a purge run's deletes, holding the registry's write lock from [`Registry::purge_batch`] to
/// [`PurgeBatch::commit`].
///
/// While a batch is open no other change can commit — no hold, lease, stop switch, rollout stage or claim —
/// so every delete request sent inside it was sent while the checks made at its start still held: a hold that
/// is set meanwhile waits for the batch and is seen by the next one. Dropping the batch rolls back what it
/// recorded. **Never call another [`Registry`] method that writes while a batch is open**: it would wait for
/// this lock (on PostgreSQL, forever).
pub struct PurgeBatch {
    tx: sqlx::Transaction<'static, sqlx::Any>,
    /// The hold generation read inside the lock (equal to the baseline's; 0 for a [`Registry::claim_lock`],
    /// which reads none).
    pub hold_generation: i64,
    /// The receipts recorded in this batch, in order (written, and handed back, by [`PurgeBatch::commit`]).
    receipts: Vec<PendingReceipt>,
    /// The state changes recorded in this batch, in order (applied by [`PurgeBatch::commit`]).
    moves: Vec<PendingMove>,
}

impl PurgeBatch {
    /// Records a receipt inside the batch (write-once, with its own registry generation and event, as
    /// [`Registry::receipt_add`]); written with the batch's others when it commits.
    pub fn receipt(&mut self, candidate_id: &str, path: &str, receipt: &serde_json::Value, now: DateTime<Utc>) {
        self.receipts.push(PendingReceipt {
            candidate_id: candidate_id.to_owned(),
            path: path.to_owned(),
            receipt: receipt.clone(),
            now,
        });
    }

    /// Moves one object inside the batch (legal transitions only, as [`Registry::object_transition`]); applied,
    /// and checked, when the batch commits.
    pub fn object_transition(&mut self, candidate_id: &str, path: &str, to: State, now: DateTime<Utc>) {
        self.object_transitions(candidate_id, path, &[to], now);
    }

    /// Moves one object through `steps` (e.g. `DELETED` then `VERIFIED`) inside the batch: each step must be
    /// legal from the one before; applied, and checked, when the batch commits.
    pub fn object_transitions(&mut self, candidate_id: &str, path: &str, steps: &[State], now: DateTime<Utc>) {
        self.moves.push(PendingMove {
            candidate_id: candidate_id.to_owned(),
            path: path.to_owned(),
            steps: steps.to_vec(),
            now,
        });
    }

    /// Writes what the batch recorded — its receipts, then its state changes, a few multi-row statements per
    /// batch instead of several round trips per object (#24) — commits, and lets the lock go. Returns the
    /// receipts it recorded, for the deleter to seal into its signed receipts chain.
    ///
    /// # Errors
    /// [`RegistryError::Query`]; [`RegistryError::NotFound`] for an object the candidate does not hold and
    /// [`RegistryError::Invalid`] for an illegal transition (nothing of the batch is committed then).
    pub async fn commit(mut self) -> Result<Vec<ReceiptRow>, RegistryError> {
        let recorded = write_receipts(&mut self.tx, std::mem::take(&mut self.receipts))
            .await
            .map_err(query("purge_batch_receipt"))?;
        write_moves(&mut self.tx, std::mem::take(&mut self.moves)).await?;
        self.tx.commit().await.map_err(query("purge_batch_commit"))?;
        Ok(recorded)
    }

    /// Rolls the batch back (nothing it recorded is written) and returns the error of a commit that failed: what
    /// the test-only failpoint `release-lock-end-fails` puts in place of [`PurgeBatch::commit`]
    /// ([`crate::io::store::Storage::failpoint_release_lock_end_fails`]), so that a test reaches a lock that could
    /// not be ended after the catalog commit made under it.
    pub async fn abandon(self, op: &'static str) -> RegistryError {
        if let Err(e) = self.tx.rollback().await {
            return query(op)(e);
        }
        query(op)(sqlx::Error::Protocol(format!(
            "failpoint release-lock-end-fails: the transaction of {op} was rolled back instead of committed"
        )))
    }
}

/// A receipt a [`PurgeBatch`] writes when it commits.
struct PendingReceipt {
    candidate_id: String,
    path: String,
    receipt: serde_json::Value,
    now: DateTime<Utc>,
}

/// A state change a [`PurgeBatch`] applies when it commits.
struct PendingMove {
    candidate_id: String,
    path: String,
    steps: Vec<State>,
    now: DateTime<Utc>,
}

/// Rows per multi-row statement (a few hundred bind parameters: far below SQLite's and PostgreSQL's limits).
const ROWS_PER_STATEMENT: usize = 100;

/// `$first, $first+1, …` for `n` parameters.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `INSERT INTO {into} VALUES ($1, …), …` for `rows` rows of `columns` parameters each.
fn insert_rows(into: &str, rows: usize, columns: usize) -> String {
    let values: Vec<String> = (0..rows)
        .map(|i| format!("({})", placeholders(1 + columns * i, columns)))
        .collect();
    format!("INSERT INTO {into} VALUES {}", values.join(", "))
}

/// For each distinct path of `candidate_id` among `paths`, the value of `select` (`path` and one more column,
/// then `group_by`: empty, `GROUP BY path`, or a further condition), read in chunks.
async fn per_path<T>(
    tx: &mut AnyConnection,
    select: &str,
    group_by: &str,
    candidate_id: &str,
    paths: &[&str],
    read: impl Fn(&AnyRow) -> Result<T, sqlx::Error>,
) -> Result<std::collections::HashMap<String, T>, sqlx::Error> {
    let mut out = std::collections::HashMap::with_capacity(paths.len());
    for chunk in paths.chunks(ROWS_PER_STATEMENT * 4) {
        let sql = format!(
            "{select} WHERE candidate_id = $1 AND path IN ({}) {group_by}",
            placeholders(2, chunk.len())
        );
        let mut q = sqlx::query(&sql).bind(candidate_id);
        for p in chunk {
            q = q.bind(*p);
        }
        for row in q.fetch_all(&mut *tx).await? {
            out.insert(row.try_get::<String, _>("path")?, read(&row)?);
        }
    }
    Ok(out)
}

/// The phases of each of `paths`' receipts (`requested`, `confirmed`, …), oldest first, for `candidate_id`.
async fn receipt_phases(
    tx: &mut AnyConnection,
    candidate_id: &str,
    paths: &[&str],
) -> Result<std::collections::HashMap<String, Vec<String>>, sqlx::Error> {
    let mut out: std::collections::HashMap<String, Vec<String>> = std::collections::HashMap::new();
    for chunk in paths.chunks(ROWS_PER_STATEMENT * 4) {
        let sql = format!(
            "SELECT path, attempt, receipt_json FROM receipts WHERE candidate_id = $1 AND path IN ({}) \
             ORDER BY path, attempt",
            placeholders(2, chunk.len())
        );
        let mut q = sqlx::query(&sql).bind(candidate_id);
        for p in chunk {
            q = q.bind(*p);
        }
        for row in q.fetch_all(&mut *tx).await? {
            let receipt: serde_json::Value = json(&row, "receipt_json")?;
            out.entry(row.try_get::<String, _>("path")?)
                .or_default()
                .push(receipt["phase"].as_str().unwrap_or_default().to_owned());
        }
    }
    Ok(out)
}

/// Writes `pending` in order: each receipt the next attempt number of its object and the next registry
/// generation, with its `receipt_recorded` event (what [`insert_receipt`] does for one).
async fn write_receipts(tx: &mut AnyConnection, pending: Vec<PendingReceipt>) -> Result<Vec<ReceiptRow>, sqlx::Error> {
    if pending.is_empty() {
        return Ok(Vec::new());
    }
    let mut tables: std::collections::HashMap<String, Option<String>> = std::collections::HashMap::new();
    let mut attempts: std::collections::HashMap<(String, String), i64> = std::collections::HashMap::new();
    let mut candidates: Vec<&str> = pending.iter().map(|r| r.candidate_id.as_str()).collect();
    candidates.sort_unstable();
    candidates.dedup();
    for c in candidates {
        tables.insert(c.to_owned(), read_candidate_table(&mut *tx, c).await?);
        let mut paths: Vec<&str> = pending
            .iter()
            .filter(|r| r.candidate_id == c)
            .map(|r| r.path.as_str())
            .collect();
        paths.sort_unstable();
        paths.dedup();
        let counts = per_path(
            &mut *tx,
            "SELECT path, COUNT(*) AS n FROM receipts",
            "GROUP BY path",
            c,
            &paths,
            |r| r.try_get::<i64, _>("n"),
        )
        .await?;
        for (path, n) in counts {
            attempts.insert((c.to_owned(), path), n);
        }
    }
    let n = i64::try_from(pending.len()).unwrap_or(i64::MAX);
    let last: i64 =
        sqlx::query_scalar("UPDATE registry_state SET generation = generation + $1 WHERE id = 1 RETURNING generation")
            .bind(n)
            .fetch_one(&mut *tx)
            .await?;
    let mut generation = last - n;
    let mut rows = Vec::with_capacity(pending.len());
    let mut events = Vec::with_capacity(pending.len());
    for r in pending {
        generation += 1;
        let a = attempts.entry((r.candidate_id.clone(), r.path.clone())).or_insert(0);
        *a += 1;
        let detail = serde_json::json!({"candidate_id": r.candidate_id, "path": r.path, "attempt": *a});
        events.push((
            generation,
            r.now,
            tables.get(&r.candidate_id).cloned().flatten(),
            detail.to_string(),
        ));
        rows.push(ReceiptRow {
            candidate_id: r.candidate_id,
            path: r.path,
            attempt: *a,
            receipt: r.receipt,
            created_at: r.now,
        });
    }
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let sql = insert_rows(
            "receipts (candidate_id, path, attempt, receipt_json, created_at)",
            chunk.len(),
            5,
        );
        let mut q = sqlx::query(&sql);
        for r in chunk {
            q = q
                .bind(r.candidate_id.as_str())
                .bind(r.path.as_str())
                .bind(r.attempt)
                .bind(r.receipt.to_string())
                .bind(fmt_time(r.created_at));
        }
        q.execute(&mut *tx).await?;
    }
    for chunk in events.chunks(ROWS_PER_STATEMENT) {
        let sql = insert_rows("events (generation, at, kind, table_uuid, detail_json)", chunk.len(), 5);
        let mut q = sqlx::query(&sql);
        for (generation, at, table, detail) in chunk {
            q = q
                .bind(*generation)
                .bind(fmt_time(*at))
                .bind(EventKind::ReceiptRecorded.as_str())
                .bind(table.as_deref())
                .bind(detail.as_str());
        }
        q.execute(&mut *tx).await?;
    }
    Ok(rows)
}

/// An object's stored state, read back: a value no lakedrill writes is an error naming the object and the value,
/// never taken for a missing object or skipped.
fn parse_object_state(candidate_id: &str, path: &str, state: &str) -> Result<State, sqlx::Error> {
    State::parse(state).ok_or_else(|| {
        decode(
            "state",
            format!("object {path} of candidate {candidate_id} has the state {state:?}, which is no object state"),
        )
    })
}

/// Applies `pending` in order (each object's steps checked from the state it is in, as [`set_object_state`]
/// does), then writes each object's final state: one read and a few updates per batch.
async fn write_moves(tx: &mut AnyConnection, pending: Vec<PendingMove>) -> Result<(), RegistryError> {
    const OP: &str = "purge_batch_transition";
    if pending.is_empty() {
        return Ok(());
    }
    let mut states: std::collections::HashMap<(String, String), (State, State)> = std::collections::HashMap::new();
    let mut candidates: Vec<&str> = pending.iter().map(|m| m.candidate_id.as_str()).collect();
    candidates.sort_unstable();
    candidates.dedup();
    for c in candidates {
        let mut paths: Vec<&str> = pending
            .iter()
            .filter(|m| m.candidate_id == c)
            .map(|m| m.path.as_str())
            .collect();
        paths.sort_unstable();
        paths.dedup();
        let found = per_path(&mut *tx, "SELECT path, state FROM object_states", "", c, &paths, |r| {
            r.try_get::<String, _>("state")
        })
        .await
        .map_err(query(OP))?;
        for (path, s) in found {
            let s = parse_object_state(c, &path, &s).map_err(query(OP))?;
            states.insert((c.to_owned(), path), (s, s));
        }
    }
    let mut at = pending[0].now;
    for m in &pending {
        at = at.max(m.now);
        let Some((_, to)) = states.get_mut(&(m.candidate_id.clone(), m.path.clone())) else {
            return Err(RegistryError::NotFound {
                what: "object",
                id: format!("{}:{}", m.candidate_id, m.path),
            });
        };
        for &step in &m.steps {
            if step == *to {
                continue;
            }
            if !to.object_can_move_to(step) {
                return Err(RegistryError::Invalid {
                    field: "state",
                    reason: format!(
                        "object {} of {} cannot move from {to} to {step}",
                        m.path, m.candidate_id
                    ),
                });
            }
            *to = step;
        }
    }
    // Each (candidate, final state) group in one UPDATE per chunk of paths.
    let mut groups: std::collections::BTreeMap<(String, &'static str), Vec<String>> = std::collections::BTreeMap::new();
    for ((c, path), (from, to)) in states {
        if from != to {
            groups.entry((c, to.as_str())).or_default().push(path);
        }
    }
    for ((c, to), paths) in groups {
        for chunk in paths.chunks(ROWS_PER_STATEMENT * 4) {
            let sql = format!(
                "UPDATE object_states SET state = $1, updated_at = $2 WHERE candidate_id = $3 AND path IN ({})",
                placeholders(4, chunk.len())
            );
            let mut q = sqlx::query(&sql).bind(to).bind(fmt_time(at)).bind(c.as_str());
            for p in chunk {
                q = q.bind(p.as_str());
            }
            q.execute(&mut *tx).await.map_err(query(OP))?;
        }
    }
    Ok(())
}

/// The process running the purge of a candidate (at most one at a time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgeRun {
    /// Unique per run.
    pub run_id: String,
    /// Host name of the process.
    pub host: String,
    /// Process id on that host.
    pub pid: i64,
    /// When the run claimed the candidate.
    pub started_at: DateTime<Utc>,
    /// Last sign of life (every batch of deletes).
    pub heartbeat_at: DateTime<Utc>,
}

fn purge_run_from_row(r: &AnyRow) -> Result<PurgeRun, sqlx::Error> {
    Ok(PurgeRun {
        run_id: r.try_get("run_id")?,
        host: r.try_get("host")?,
        pid: r.try_get("pid")?,
        started_at: time(r, "started_at")?,
        heartbeat_at: time(r, "heartbeat_at")?,
    })
}

/// The run holding a candidate's purge, if any.
async fn read_purge_run(conn: &mut AnyConnection, candidate_id: &str) -> Result<Option<PurgeRun>, sqlx::Error> {
    optional_row(
        conn,
        "SELECT * FROM purge_runs WHERE candidate_id = $1",
        candidate_id,
        purge_run_from_row,
    )
    .await
}

/// Records a sign of life of `run_id` (a no-op when another run holds the candidate).
async fn write_heartbeat(
    conn: &mut AnyConnection,
    candidate_id: &str,
    run_id: &str,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE purge_runs SET heartbeat_at = $1 WHERE candidate_id = $2 AND run_id = $3")
        .bind(fmt_time(now))
        .bind(candidate_id)
        .bind(run_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Whether run `run_id` holds `candidate_id`'s claim: `Ok(())`, or the claim as it is now (another run's, or
/// `None` when no run holds it: released by a run that took it over and ended).
async fn check_claim(
    conn: &mut AnyConnection,
    candidate_id: &str,
    run_id: &str,
) -> Result<Result<(), Option<PurgeRun>>, sqlx::Error> {
    let held = read_purge_run(conn, candidate_id).await?;
    Ok(match held {
        Some(h) if h.run_id == run_id => Ok(()),
        other => Err(other),
    })
}

/// A claim as a message names it: the run, its host and pid, and when it was last heard of; or that no run holds
/// the candidate.
#[must_use]
pub fn claim_named(holder: Option<&PurgeRun>) -> String {
    holder.map_or_else(
        || "no run holds it now".to_owned(),
        |h| {
            format!(
                "run {} on {} (pid {}) holds it since {}, last heard of {}",
                h.run_id,
                h.host,
                h.pid,
                h.started_at.to_rfc3339(),
                h.heartbeat_at.to_rfc3339()
            )
        },
    )
}

impl Registry {
    /// The run holding a candidate's purge, if any.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn purge_run(&self, candidate_id: &str) -> Result<Option<PurgeRun>, RegistryError> {
        self.read("purge_run", async |conn| read_purge_run(conn, candidate_id).await)
            .await
    }

    /// Whether run `run_id` still holds `candidate_id`'s claim: `Ok(())`, or the claim as it is now (the run that
    /// took it over, or `None` when no run holds it). What a run checks before a write that has no transaction
    /// of its own to check it in (a file of its evidence, the end of a run).
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn purge_claim_held(
        &self,
        candidate_id: &str,
        run_id: &str,
    ) -> Result<Result<(), Option<PurgeRun>>, RegistryError> {
        self.read("purge_claim_held", async |conn| {
            check_claim(conn, candidate_id, run_id).await
        })
        .await
    }

    /// [`Registry::candidate_move`] made only while run `run_id` still holds the candidate's claim, checked in
    /// the same write transaction: otherwise nothing is written and the claim as it is now comes back (the run
    /// that took it over, or `None`). A purge's and a reconcile's final state moves go through it, so that a run
    /// taken over never settles a candidate another run is working on.
    ///
    /// # Errors
    /// As [`Registry::candidate_move`].
    pub async fn candidate_move_claimed(
        &self,
        candidate_id: &str,
        run_id: &str,
        to: State,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<Result<(), Option<PurgeRun>>, RegistryError> {
        const OP: &str = "candidate_transition";
        let mut change = self.change(OP).await?;
        if let Err(holder) = check_claim(&mut change.tx, candidate_id, run_id)
            .await
            .map_err(query(OP))?
        {
            // Dropping the change rolls it back, the generation bump included.
            return Ok(Err(holder));
        }
        super::candidates::move_candidate(change, candidate_id, to, reason, None, None, now).await?;
        Ok(Ok(()))
    }

    /// [`Registry::candidate_release`] made only while run `run_id` still holds the candidate's claim, checked in
    /// the same write transaction: otherwise nothing is written and the claim as it is now comes back (the run
    /// that took it over, or `None`). `quarantine release`, `restore --put-back` and the put-back of a candidate
    /// sent to `PROTECTED` whole release through it.
    ///
    /// # Errors
    /// As [`Registry::candidate_release`].
    pub async fn candidate_release_claimed(
        &self,
        candidate_id: &str,
        run_id: &str,
        reason: &str,
        release: &serde_json::Value,
        now: DateTime<Utc>,
    ) -> Result<Result<Result<super::candidates::CandidateRecord, String>, Option<PurgeRun>>, RegistryError> {
        const OP: &str = "candidate_release";
        let mut change = self.change(OP).await?;
        if let Err(holder) = check_claim(&mut change.tx, candidate_id, run_id)
            .await
            .map_err(query(OP))?
        {
            // Dropping the change rolls it back, the generation bump included.
            return Ok(Err(holder));
        }
        if let Err(why) = super::candidates::release_candidate(change, candidate_id, reason, release, now).await? {
            return Ok(Ok(Err(why)));
        }
        self.candidate(candidate_id).await.map(|r| Ok(Ok(r)))
    }

    /// Takes the registry's write lock and, inside it, checks that run `run_id` still holds `candidate_id`'s claim
    /// and records its heartbeat: the lock of a catalog commit that takes nothing out of the table (`quarantine
    /// release` removing its tags). No run can take the claim over while the lock is held, so the commit is made
    /// by the holder; commit the returned batch once the catalog answered. `Err` is the claim as it is now (the run
    /// that took it over, or `None`), nothing written.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn claim_lock(
        &self,
        candidate_id: &str,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Result<PurgeBatch, Option<PurgeRun>>, RegistryError> {
        const OP: &str = "claim_lock";
        let mut tx = self.begin_write(OP).await?;
        if let Err(holder) = check_claim(&mut tx, candidate_id, run_id).await.map_err(query(OP))? {
            return Ok(Err(holder));
        }
        write_heartbeat(&mut tx, candidate_id, run_id, now)
            .await
            .map_err(query(OP))?;
        Ok(Ok(PurgeBatch {
            tx,
            hold_generation: 0,
            receipts: Vec::new(),
            moves: Vec::new(),
        }))
    }

    /// Claims a candidate's purge for `me`, in one registry transaction: granted when no run holds it, when
    /// `me` already does, or when the holder is exactly `take_over` as the caller judged it dead or silent: the same
    /// run with the same last heartbeat (a run that was heard of since the caller read it is not taken over).
    /// Otherwise the holder is returned and nothing changes: two purges of one candidate never run at once.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn purge_claim(
        &self,
        candidate_id: &str,
        me: &PurgeRun,
        take_over: Option<&PurgeRun>,
    ) -> Result<Result<(), PurgeRun>, RegistryError> {
        const OP: &str = "purge_claim";
        let mut change = self.change(OP).await?;
        let held = read_purge_run(&mut change.tx, candidate_id).await.map_err(query(OP))?;
        if let Some(h) = &held
            && h.run_id != me.run_id
            && !take_over.is_some_and(|t| t.run_id == h.run_id && t.heartbeat_at == h.heartbeat_at)
        {
            return Ok(Err(h.clone()));
        }
        sqlx::query(
            "INSERT INTO purge_runs (candidate_id, run_id, host, pid, started_at, heartbeat_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (candidate_id) DO UPDATE SET run_id = $2, host = $3, \
             pid = $4, started_at = $5, heartbeat_at = $6",
        )
        .bind(candidate_id)
        .bind(&me.run_id)
        .bind(&me.host)
        .bind(me.pid)
        .bind(fmt_time(me.started_at))
        .bind(fmt_time(me.heartbeat_at))
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        let table = read_candidate_table(&mut change.tx, candidate_id)
            .await
            .map_err(query(OP))?;
        let took_over = held.filter(|h| h.run_id != me.run_id);
        let detail = serde_json::json!({"candidate_id": candidate_id, "run": me, "took_over": took_over});
        change
            .commit(me.started_at, EventKind::PurgeRunClaimed, table.as_deref(), &detail)
            .await?;
        Ok(Ok(()))
    }

    /// Opens a batch of deletes for the run `base.run_id` of `candidate_id`: takes the registry's write lock
    /// and, inside it, checks that the run still holds the candidate's claim, the deleter is not stopped, the
    /// table's rollout stage deletes, no hold, lease, DR checkpoint or writer that came since the baseline
    /// covers the candidate, and the candidate is not `PROTECTED`; it records the run's heartbeat. Returns the
    /// open batch, with `base` advanced to the counters it judged, or every reason to halt (nothing written
    /// then).
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn purge_batch(
        &self,
        candidate_id: &str,
        base: &mut PurgeBaseline,
        now: DateTime<Utc>,
    ) -> Result<Result<PurgeBatch, Vec<String>>, RegistryError> {
        self.guarded(candidate_id, base, now, true).await
    }

    /// The lock of a catalog commit that deletes nothing but takes snapshots out of the table (`quarantine`'s in
    /// bundle mode, and its tags): [`Registry::purge_batch`]'s checks but the stop switch and the rollout stage,
    /// which hold back deletes only. A lease, hold, DR checkpoint or writer written before the lock and covering
    /// the candidate is seen here; one written after it finds the snapshot gone when it reads the table again.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn commit_guard(
        &self,
        candidate_id: &str,
        base: &mut PurgeBaseline,
        now: DateTime<Utc>,
    ) -> Result<Result<PurgeBatch, Vec<String>>, RegistryError> {
        self.guarded(candidate_id, base, now, false).await
    }

    /// [`Registry::purge_batch`] (`deletes`) or [`Registry::commit_guard`].
    async fn guarded(
        &self,
        candidate_id: &str,
        base: &mut PurgeBaseline,
        now: DateTime<Utc>,
        deletes: bool,
    ) -> Result<Result<PurgeBatch, Vec<String>>, RegistryError> {
        const OP: &str = "purge_batch";
        let (during, stop) = if deletes {
            ("the purge", ": no further deletes")
        } else {
            ("the quarantine", ": the snapshots stay in the table")
        };
        let mut tx = self.begin_write(OP).await?;
        let mut halt = Vec::new();
        if let Err(holder) = check_claim(&mut tx, candidate_id, &base.run_id)
            .await
            .map_err(query(OP))?
        {
            halt.push(format!(
                "another run took this candidate over ({}){stop}",
                claim_named(holder.as_ref())
            ));
        }
        let switch = read_deleter_switch(&mut tx).await.map_err(query(OP))?;
        if switch.stopped && deletes {
            halt.push(format!(
                "the deleter was stopped ({}); `lakedrill deleter start` to resume",
                switch.reason
            ));
        }
        let stage = rollout::read_stage(&mut tx, &base.table_uuid)
            .await
            .map_err(query(OP))?;
        if !stage.stage.allows_deletes() && deletes {
            halt.push(
                "the table was moved to rollout stage report-only during the purge: no further deletes".to_owned(),
            );
        }
        let hold_generation = read_hold_generation(&mut tx, &base.table_uuid)
            .await
            .map_err(query(OP))?;
        let leases = read_lease_watermark(&mut tx, &base.table_uuid)
            .await
            .map_err(query(OP))?;
        let protections = read_protection_generation(&mut tx, &base.table_uuid)
            .await
            .map_err(query(OP))?;
        // A change of the table's holds, leases, DR checkpoints or writers halts the purge when it may protect
        // what is left of this candidate: a hold on the table, on one of its snapshots or over a prefix of one of
        // its objects, any active lease or new checkpoint on one of its snapshots, or a writer begun over a prefix
        // of one of its objects. One elsewhere on the table cannot reach its objects (none of them is reachable
        // from a snapshot the table keeps), and a cleared hold or an ended writer protects nothing new.
        let holds_moved = hold_generation != base.hold_generation
            && !crate::safety::weakened(crate::safety::Check::HoldCheckPerBatch);
        let protections_moved = protections != base.protection_generation;
        if holds_moved || leases.counter != base.lease_watermark || protections_moved {
            let inline: Option<String> =
                sqlx::query_scalar("SELECT candidate_json FROM candidates WHERE candidate_id = $1")
                    .bind(candidate_id)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(query(OP))?;
            // Unreadable (no row, or parts missing) is a halt below, as unparsable is.
            let inventory = match inline {
                Some(inline) => super::candidates::candidate_text(&mut tx, candidate_id, inline)
                    .await
                    .ok(),
                None => None,
            };
            // Typed, not a JSON value: a million objects' inventory as a value is about 2 GB (#24).
            #[derive(serde::Deserialize)]
            struct Path {
                path: String,
            }
            #[derive(serde::Deserialize)]
            struct Held {
                snapshot_ids: Vec<i64>,
                #[serde(default)]
                objects: Vec<Path>,
            }
            let Some(held) = inventory.as_deref().and_then(|j| serde_json::from_str::<Held>(j).ok()) else {
                // What the candidate holds cannot be read: nothing can be shown uncovered.
                halt.push(format!(
                    "holds or leases changed during {during} and candidate {candidate_id}'s inventory cannot be read \
                     to relate them{stop}"
                ));
                return Ok(Err(halt));
            };
            let ids = held.snapshot_ids;
            let paths: Vec<&str> = held.objects.iter().map(|o| o.path.as_str()).collect();
            if holds_moved {
                let rows = sqlx::query(HOLDS_OF_TABLE)
                    .bind(&base.table_uuid)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(query(OP))?;
                let mut named = Vec::new();
                for row in &rows {
                    let h = hold_from_row(row).map_err(query(OP))?;
                    if h.hold_generation <= base.hold_generation || !h.active {
                        continue;
                    }
                    let covers = match &h.scope {
                        HoldScope::Table => true,
                        HoldScope::Snapshot(id) => ids.contains(id),
                        HoldScope::Prefix(written) => prefix_covers(&base.location, written, &paths),
                    };
                    if covers {
                        named.push(format!(
                            "hold {} (scope {}, reason {:?}) set at {}",
                            h.hold_id,
                            h.scope,
                            h.reason,
                            h.set_at.to_rfc3339_opts(SecondsFormat::Secs, true)
                        ));
                    }
                }
                if !named.is_empty() {
                    halt.push(format!(
                        "a legal hold that covers the candidate was set during {during} (hold generation {} is now \
                         {hold_generation}: {}){stop}",
                        base.hold_generation,
                        named.join("; ")
                    ));
                }
            }
            if leases.counter != base.lease_watermark {
                // Active leases: not released and not yet expired (an expired lease protects nothing, as in plan).
                let leased: Vec<i64> = sqlx::query_scalar(
                    "SELECT snapshot_id FROM leases WHERE table_uuid = $1 AND released_at IS NULL AND expires_at > $2",
                )
                .bind(&base.table_uuid)
                .bind(fmt_time(now))
                .fetch_all(&mut *tx)
                .await
                .map_err(query(OP))?;
                let covering: Vec<i64> = leased.into_iter().filter(|s| ids.contains(s)).collect();
                if !covering.is_empty() {
                    halt.push(format!(
                        "leases changed during {during} (lease watermark {} is now {}) and a lease covers snapshot(s) \
                         {covering:?} of the candidate{stop}",
                        base.lease_watermark, leases.counter
                    ));
                }
            }
            if protections_moved {
                let named = covering_new_protections(
                    &mut tx,
                    &base.table_uuid,
                    base.protection_generation,
                    &ids,
                    &paths,
                    &base.location,
                )
                .await
                .map_err(query(OP))?;
                if !named.is_empty() {
                    halt.push(format!(
                        "a DR checkpoint or writer that covers the candidate came during {during} (protection \
                         generation {} is now {protections}: {}){stop}",
                        base.protection_generation,
                        named.join("; ")
                    ));
                }
            }
        }
        let state: Option<String> = sqlx::query_scalar("SELECT state FROM candidates WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(query(OP))?;
        if state.as_deref() == Some(State::Protected.as_str()) {
            halt.push(format!("the candidate became PROTECTED during {during}{stop}"));
        }
        if let Some(judged) = &base.deletion_rights {
            let rights = rollout::read_rights_in_force(&mut tx, &base.table_uuid)
                .await
                .map_err(query(OP))?;
            if rights.digest != *judged {
                halt.push(format!(
                    "the deletion rights changed during {during}: governance decision {} is in force now, and the \
                     candidate was judged with other rights{stop}",
                    rights.version.map_or_else(|| "(none)".to_owned(), |v| format!("v{v}"))
                ));
            }
        }
        if !halt.is_empty() {
            return Ok(Err(halt));
        }
        write_heartbeat(&mut tx, candidate_id, &base.run_id, now)
            .await
            .map_err(query(OP))?;
        // Everything up to these counters was judged above: the next batch relates only what comes after them
        // (a hold elsewhere on the table is read once, not at every batch of a million-object purge).
        base.hold_generation = hold_generation;
        base.lease_watermark = leases.counter;
        base.protection_generation = protections;
        Ok(Ok(PurgeBatch {
            tx,
            hold_generation,
            receipts: Vec::new(),
            moves: Vec::new(),
        }))
    }

    /// Answers the delete intents of a batch whose requests were never sent (the run halted between recording its
    /// intents and sending them: a hold, the stop switch, a fault), in one write transaction, so that nothing
    /// stays uncertain that was never asked for. Only while `run_id` still holds the candidate's claim (another
    /// run's intents are its own to answer), and only for objects whose newest receipt is still an intent: an
    /// object still `DELETE_APPROVED` keeps its state (the intent answered: a later run re-checks and sends it
    /// anew); one the candidate's move to `PROTECTED` made `DELETE_UNKNOWN` meanwhile (an unanswered intent may
    /// have been sent) is `PROTECTED` again. `answers` are the receipts, by path. Returns the receipts written,
    /// for the signed receipts chain (none when the claim is gone).
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn purge_unsent(
        &self,
        candidate_id: &str,
        run_id: &str,
        answers: Vec<(String, serde_json::Value)>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ReceiptRow>, RegistryError> {
        const OP: &str = "purge_unsent";
        let mut tx = self.begin_write(OP).await?;
        let run: Option<String> = sqlx::query_scalar("SELECT run_id FROM purge_runs WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(query(OP))?;
        if run.as_deref() != Some(run_id) {
            return Ok(Vec::new());
        }
        let candidate: Option<String> = sqlx::query_scalar("SELECT state FROM candidates WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(query(OP))?;
        let protected = candidate.as_deref() == Some(State::Protected.as_str());
        let paths: Vec<&str> = answers.iter().map(|(p, _)| p.as_str()).collect();
        let states = per_path(
            &mut tx,
            "SELECT path, state FROM object_states",
            "",
            candidate_id,
            &paths,
            |r| r.try_get::<String, _>("state"),
        )
        .await
        .map_err(query(OP))?;
        // Each object's receipts in order: whether its newest is an intent, and whether an earlier intent was
        // left unanswered (a run that sent it died, and a later run recorded a new intent over it).
        let history = receipt_phases(&mut tx, candidate_id, &paths).await.map_err(query(OP))?;
        let mut receipts = Vec::new();
        let mut moves = Vec::new();
        for (path, receipt) in answers {
            let (intent, earlier_open) = history.get(&path).map_or((false, false), |phases| open_intents(phases));
            let state = match states.get(&path) {
                Some(s) => Some(parse_object_state(candidate_id, &path, s).map_err(query(OP))?),
                None => None,
            };
            let back = match state {
                Some(State::DeleteApproved) => None,
                // This run's intent was never sent, but an earlier run's may have been: still uncertain.
                Some(State::DeleteUnknown) if protected && earlier_open => None,
                Some(State::DeleteUnknown) if protected => Some(State::Protected),
                _ => continue,
            };
            if !intent {
                continue;
            }
            if let Some(to) = back {
                moves.push(PendingMove {
                    candidate_id: candidate_id.to_owned(),
                    path: path.clone(),
                    steps: vec![to],
                    now,
                });
            }
            receipts.push(PendingReceipt {
                candidate_id: candidate_id.to_owned(),
                path,
                receipt,
                now,
            });
        }
        let recorded = write_receipts(&mut tx, receipts).await.map_err(query(OP))?;
        write_moves(&mut tx, moves).await?;
        tx.commit().await.map_err(query(OP))?;
        Ok(recorded)
    }

    /// Records what a `reconcile` found of its candidate's `DELETE_UNKNOWN` objects — for each object its receipt
    /// and the states it moves through (none: it keeps its state) — in one write transaction, and only while
    /// run `run_id` still holds the candidate's claim, checked inside it. Either every receipt and every state
    /// lands or none does: a crash, an illegal transition or a lost claim never leaves an object with the
    /// receipt of its settling and not the state (or the state and not the receipt). `Err` is the claim as it is
    /// now (the run that took it over, or `None` when no run holds it), nothing written. Returns the receipts
    /// written, for the signed receipts chain.
    ///
    /// # Errors
    /// [`RegistryError::Query`]; [`RegistryError::NotFound`] for an object the candidate does not hold and
    /// [`RegistryError::Invalid`] for an illegal transition (nothing is written then).
    pub async fn reconcile_record(
        &self,
        candidate_id: &str,
        run_id: &str,
        settled: Vec<(String, serde_json::Value, Vec<State>)>,
        now: DateTime<Utc>,
    ) -> Result<Result<Vec<ReceiptRow>, Option<PurgeRun>>, RegistryError> {
        const OP: &str = "reconcile_record";
        let mut tx = self.begin_write(OP).await?;
        if let Err(holder) = check_claim(&mut tx, candidate_id, run_id).await.map_err(query(OP))? {
            // Dropping the transaction rolls it back.
            return Ok(Err(holder));
        }
        write_heartbeat(&mut tx, candidate_id, run_id, now)
            .await
            .map_err(query(OP))?;
        let mut receipts = Vec::with_capacity(settled.len());
        let mut moves = Vec::new();
        for (path, receipt, steps) in settled {
            if !steps.is_empty() {
                moves.push(PendingMove {
                    candidate_id: candidate_id.to_owned(),
                    path: path.clone(),
                    steps,
                    now,
                });
            }
            receipts.push(PendingReceipt {
                candidate_id: candidate_id.to_owned(),
                path,
                receipt,
                now,
            });
        }
        let recorded = write_receipts(&mut tx, receipts).await.map_err(query(OP))?;
        write_moves(&mut tx, moves).await?;
        tx.commit().await.map_err(query(OP))?;
        Ok(Ok(recorded))
    }

    /// Lets other writers in between two [`PurgeBatch`]es. PostgreSQL queues advisory-lock waiters, so nothing
    /// is needed there; SQLite's busy handler polls a waiting writer at most every 100 ms, so a deleter that
    /// takes the lock again at once could keep a `hold set` waiting for the whole purge (and fail it after
    /// [`BUSY_TIMEOUT`](super::base::BUSY_TIMEOUT)). On SQLite this pauses [`WRITER_GAP`] without holding the lock.
    pub async fn yield_to_writers(&self) {
        if self.dialect == Dialect::Sqlite {
            tokio::time::sleep(WRITER_GAP).await;
        }
    }

    /// Records a sign of life of the run holding a candidate (no event; a no-op for another run).
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn purge_heartbeat(
        &self,
        candidate_id: &str,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> Result<(), RegistryError> {
        self.read("purge_heartbeat", async |conn| {
            write_heartbeat(conn, candidate_id, run_id, now).await
        })
        .await
    }

    /// Lets a candidate go at the end of a run (a no-op when another run holds it).
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn purge_release(
        &self,
        candidate_id: &str,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> Result<(), RegistryError> {
        const OP: &str = "purge_release";
        let mut change = self.change(OP).await?;
        let n = sqlx::query("DELETE FROM purge_runs WHERE candidate_id = $1 AND run_id = $2")
            .bind(candidate_id)
            .bind(run_id)
            .execute(&mut *change.tx)
            .await
            .map_err(query(OP))?
            .rows_affected();
        if n == 0 {
            return Ok(());
        }
        let table = read_candidate_table(&mut change.tx, candidate_id)
            .await
            .map_err(query(OP))?;
        let detail = serde_json::json!({"candidate_id": candidate_id, "run_id": run_id});
        change
            .commit(now, EventKind::PurgeRunReleased, table.as_deref(), &detail)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::tests::{Backend, fresh_on, on_both_backends, stamp, t};

    on_both_backends!(
        a_batch_halts_on_a_checkpoint_or_writer_that_came_to_cover_the_candidate,
        unsent_intents_are_answered_only_by_the_run_holding_the_claim,
        an_unsent_intent_never_erases_an_earlier_runs_unanswered_one,
        an_earlier_runs_unanswered_intent_stays_in_flight_after_a_later_unsent_one_is_answered,
        an_unknown_object_state_is_an_error_naming_the_object_and_the_state,
        a_run_heard_of_after_it_was_judged_silent_is_not_taken_over,
        a_reconcile_records_each_receipt_with_its_state_or_nothing,
        a_reconcile_that_lost_the_claim_records_nothing,
    );

    /// A candidate `c` of objects `x` and `y`, both `DELETE_UNKNOWN`, claimed by run `r1`.
    async fn two_unknowns(reg: &Registry, table: &str, c: &str) -> PurgeRun {
        reg.candidate_record(
            table,
            c,
            &serde_json::json!({}),
            &stamp(),
            &["x".into(), "y".into()],
            t(0),
        )
        .await
        .unwrap();
        for to in [State::Quarantined, State::DeleteApproved] {
            reg.candidate_transition(c, to, "", None, None, t(0)).await.unwrap();
        }
        for p in ["x", "y"] {
            reg.object_transition(c, p, State::DeleteUnknown, t(1)).await.unwrap();
        }
        let run = PurgeRun {
            run_id: "r1".into(),
            host: "h".into(),
            pid: 1,
            started_at: t(2),
            heartbeat_at: t(2),
        };
        reg.purge_claim(c, &run, None).await.unwrap().unwrap();
        run
    }

    async fn states_of(reg: &Registry, c: &str) -> Vec<(String, State)> {
        reg.object_states(c)
            .await
            .unwrap()
            .into_iter()
            .map(|o| (o.path, o.state))
            .collect()
    }

    fn settled(path: &str, steps: &[State]) -> (String, serde_json::Value, Vec<State>) {
        (
            path.to_owned(),
            serde_json::json!({"phase": "reconciled", "key": path, "recheck": "absent"}),
            steps.to_vec(),
        )
    }

    /// Review of 2026-12-07 (R2-6): `reconcile` wrote each object's receipt and its state in separate
    /// transactions, so a failure between them (here: `y`'s state move is refused) left `y` with the receipt of
    /// its settling and its old state, and `x` settled. Now the receipts and the states land together or not at
    /// all.
    async fn a_reconcile_records_each_receipt_with_its_state_or_nothing(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let c = "c-rr";
        two_unknowns(&reg, "7f31a2b4-09c1-4d5e-9f00-000000000017", c).await;
        let err = reg
            .reconcile_record(
                c,
                "r1",
                vec![
                    settled("x", &[State::Deleted, State::Verified]),
                    // A move no object may make from DELETE_UNKNOWN: the failure between receipt and state.
                    settled("y", &[State::Quarantined]),
                ],
                t(3),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("cannot move"), "{err}");
        assert_eq!(reg.receipt_count(c).await.unwrap(), 0, "no receipt without its state");
        assert_eq!(
            states_of(&reg, c).await,
            vec![
                ("x".to_owned(), State::DeleteUnknown),
                ("y".to_owned(), State::DeleteUnknown)
            ],
            "no state without its receipt"
        );
        // Both legal: both receipts and both states.
        let written = reg
            .reconcile_record(
                c,
                "r1",
                vec![settled("x", &[State::Deleted, State::Verified]), settled("y", &[])],
                t(4),
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(written.len(), 2);
        assert_eq!(
            states_of(&reg, c).await,
            vec![
                ("x".to_owned(), State::Verified),
                ("y".to_owned(), State::DeleteUnknown)
            ]
        );
    }

    /// Review of 2026-12-07 (R2-6): `reconcile` checked its claim once, then wrote; a purge or reconcile that
    /// took the candidate over meanwhile had its objects settled under it. Now the record is conditional on the
    /// claim, in its own transaction: the run that took it over comes back and nothing is written.
    async fn a_reconcile_that_lost_the_claim_records_nothing(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let c = "c-rc";
        two_unknowns(&reg, "7f31a2b4-09c1-4d5e-9f00-000000000018", c).await;
        let judged = reg.purge_run(c).await.unwrap().unwrap();
        let other = PurgeRun {
            run_id: "r2".into(),
            host: "h2".into(),
            pid: 2,
            started_at: t(9),
            heartbeat_at: t(9),
        };
        reg.purge_claim(c, &other, Some(&judged)).await.unwrap().unwrap();
        let holder = reg
            .reconcile_record(c, "r1", vec![settled("x", &[State::Deleted, State::Verified])], t(10))
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(holder.map(|h| h.run_id).as_deref(), Some("r2"));
        assert_eq!(reg.receipt_count(c).await.unwrap(), 0);
        assert_eq!(
            states_of(&reg, c).await,
            vec![
                ("x".to_owned(), State::DeleteUnknown),
                ("y".to_owned(), State::DeleteUnknown)
            ]
        );
        // The claim is the other run's still, its heartbeat untouched.
        assert_eq!(reg.purge_run(c).await.unwrap().unwrap(), other);
    }

    /// Review of 2026-12-07 (R2-5): a take-over was conditional on the run id only, so a run that sent a heartbeat
    /// between the caller's "it is silent" and the claim was taken over anyway. Now it must be the run as judged,
    /// with the same last heartbeat.
    async fn a_run_heard_of_after_it_was_judged_silent_is_not_taken_over(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000016";
        reg.candidate_record(table, "c-h", &serde_json::json!({}), &stamp(), &["a".into()], t(0))
            .await
            .unwrap();
        let run = |id: &str, at: i64| PurgeRun {
            run_id: id.into(),
            host: "h".into(),
            pid: 1,
            started_at: t(at),
            heartbeat_at: t(at),
        };
        reg.purge_claim("c-h", &run("old", 0), None).await.unwrap().unwrap();
        let judged = reg.purge_run("c-h").await.unwrap().unwrap();
        // The holder is heard of after it was judged.
        reg.purge_heartbeat("c-h", "old", t(5)).await.unwrap();
        let held = reg
            .purge_claim("c-h", &run("new", 6), Some(&judged))
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(held.run_id, "old");
        // Judged again (silent since its last heartbeat), it is taken over.
        let judged = reg.purge_run("c-h").await.unwrap().unwrap();
        reg.purge_claim("c-h", &run("new", 7), Some(&judged))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(reg.purge_run("c-h").await.unwrap().unwrap().run_id, "new");
    }

    /// Every message of an error's chain, joined: what `main` prints with `{:#}`.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut next = e.source();
        while let Some(s) = next {
            out.push_str(": ");
            out.push_str(&s.to_string());
            next = s.source();
        }
        out
    }

    /// Run A sent the delete of `x` and died unanswered; run B recorded a new intent for `x` (the re-check found it
    /// present) and one for `y`; a hold made both `DELETE_UNKNOWN` (their newest receipts were intents); B halts
    /// and answers its intents "not sent". `y` was only ever B's: `PROTECTED` again. `x` keeps `DELETE_UNKNOWN`: A's
    /// request may still have taken effect. Before, `x` went back to `PROTECTED` as if no delete had been sent.
    async fn an_unsent_intent_never_erases_an_earlier_runs_unanswered_one(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000005";
        reg.candidate_record(
            table,
            "c-e",
            &serde_json::json!({}),
            &stamp(),
            &["x".into(), "y".into()],
            t(0),
        )
        .await
        .unwrap();
        for to in [State::Quarantined, State::DeleteApproved] {
            reg.candidate_transition("c-e", to, "", None, None, t(0)).await.unwrap();
        }
        // Run A's intent for x, never answered.
        reg.receipt_add("c-e", "x", &serde_json::json!({"phase": "requested"}), t(1))
            .await
            .unwrap();
        let run = PurgeRun {
            run_id: "b".into(),
            host: "h".into(),
            pid: 1,
            started_at: t(2),
            heartbeat_at: t(2),
        };
        reg.purge_claim("c-e", &run, None).await.unwrap().unwrap();
        for p in ["x", "y"] {
            reg.receipt_add("c-e", p, &serde_json::json!({"phase": "requested"}), t(2))
                .await
                .unwrap();
        }
        reg.candidate_transition("c-e", State::Protected, "hold h-1 covers it", None, None, t(3))
            .await
            .unwrap();
        let not_sent = |p: &str| {
            (
                p.to_owned(),
                serde_json::json!({"phase": "confirmed", "provider_result": "not sent: a legal hold"}),
            )
        };
        let written = reg
            .purge_unsent("c-e", "b", vec![not_sent("x"), not_sent("y")], t(4))
            .await
            .unwrap();
        let paths: Vec<&str> = written.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, vec!["x", "y"], "both of B's intents are answered");
        let states: Vec<(String, State)> = reg
            .object_states("c-e")
            .await
            .unwrap()
            .into_iter()
            .map(|o| (o.path, o.state))
            .collect();
        assert_eq!(
            states,
            vec![
                ("x".to_owned(), State::DeleteUnknown),
                ("y".to_owned(), State::Protected)
            ]
        );
        assert_eq!(reg.in_flight_deletes("c-e").await.unwrap(), Vec::<String>::new());
    }

    /// The other order of the test above (review of 2026-12-07, R2-1): run A sent the delete of `x` and died
    /// unanswered; run B recorded a new intent for `x` and answered it "not sent" while the candidate was still
    /// `DELETE_APPROVED` (a stop switch halted B before its request); only then did a hold make the candidate
    /// `PROTECTED`. `x`'s newest receipt is B's answer, but A's request may have taken effect: `x` is in flight
    /// and goes to `DELETE_UNKNOWN`, and a release is refused. Before, `x` went to `PROTECTED` and the release was
    /// allowed over it.
    async fn an_earlier_runs_unanswered_intent_stays_in_flight_after_a_later_unsent_one_is_answered(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000015";
        reg.candidate_record(
            table,
            "c-f",
            &serde_json::json!({}),
            &stamp(),
            &["x".into(), "y".into()],
            t(0),
        )
        .await
        .unwrap();
        for to in [State::Quarantined, State::DeleteApproved] {
            reg.candidate_transition("c-f", to, "", None, None, t(0)).await.unwrap();
        }
        reg.receipt_add("c-f", "x", &serde_json::json!({"phase": "requested"}), t(1))
            .await
            .unwrap();
        let run = PurgeRun {
            run_id: "b".into(),
            host: "h".into(),
            pid: 1,
            started_at: t(2),
            heartbeat_at: t(2),
        };
        reg.purge_claim("c-f", &run, None).await.unwrap().unwrap();
        for p in ["x", "y"] {
            reg.receipt_add("c-f", p, &serde_json::json!({"phase": "requested"}), t(2))
                .await
                .unwrap();
        }
        let not_sent = |p: &str| {
            (
                p.to_owned(),
                serde_json::json!({"phase": "confirmed", "provider_result": "not sent: the stop switch"}),
            )
        };
        reg.purge_unsent("c-f", "b", vec![not_sent("x"), not_sent("y")], t(3))
            .await
            .unwrap();
        assert_eq!(reg.in_flight_deletes("c-f").await.unwrap(), vec!["x".to_owned()]);
        reg.candidate_transition("c-f", State::Protected, "hold h-1 covers it", None, None, t(4))
            .await
            .unwrap();
        let states: Vec<(String, State)> = reg
            .object_states("c-f")
            .await
            .unwrap()
            .into_iter()
            .map(|o| (o.path, o.state))
            .collect();
        assert_eq!(
            states,
            vec![
                ("x".to_owned(), State::DeleteUnknown),
                ("y".to_owned(), State::Protected)
            ]
        );
    }

    /// An object state no lakedrill writes (a row changed by hand, a newer build's state) is an error naming the
    /// object and the value: in a batch's state changes it was reported as "object … does not exist", and
    /// answering unsent intents skipped the object without a word.
    async fn an_unknown_object_state_is_an_error_naming_the_object_and_the_state(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000006";
        reg.candidate_record(table, "c-s", &serde_json::json!({}), &stamp(), &["data/a".into()], t(0))
            .await
            .unwrap();
        for to in [State::Quarantined, State::DeleteApproved] {
            reg.candidate_transition("c-s", to, "", None, None, t(0)).await.unwrap();
        }
        let run = PurgeRun {
            run_id: "r1".into(),
            host: "h".into(),
            pid: 1,
            started_at: t(0),
            heartbeat_at: t(0),
        };
        reg.purge_claim("c-s", &run, None).await.unwrap().unwrap();
        reg.receipt_add("c-s", "data/a", &serde_json::json!({"phase": "requested"}), t(1))
            .await
            .unwrap();
        sqlx::query("UPDATE object_states SET state = 'HALF_DELETED' WHERE candidate_id = 'c-s'")
            .execute(&reg.pool)
            .await
            .unwrap();
        let names = |what: &str, e: &RegistryError| {
            let text = chain(e);
            assert!(
                text.contains("object data/a of candidate c-s") && text.contains("HALF_DELETED"),
                "{what}: {text}"
            );
            assert!(!matches!(e, RegistryError::NotFound { .. }), "{what}: {e:?}");
        };
        // A batch's state changes.
        let mut tx = reg.begin_write("test").await.unwrap();
        let moved = write_moves(
            &mut tx,
            vec![PendingMove {
                candidate_id: "c-s".into(),
                path: "data/a".into(),
                steps: vec![State::Deleted, State::Verified],
                now: t(2),
            }],
        )
        .await
        .unwrap_err();
        names("write_moves", &moved);
        tx.rollback().await.unwrap();
        // One object's change.
        let one = reg
            .object_transition("c-s", "data/a", State::Verified, t(2))
            .await
            .unwrap_err();
        names("object_transition", &one);
        // The answers to a halted batch's intents.
        let unsent = reg
            .purge_unsent(
                "c-s",
                "r1",
                vec![(
                    "data/a".into(),
                    serde_json::json!({"phase": "confirmed", "provider_result": "not sent"}),
                )],
                t(3),
            )
            .await
            .unwrap_err();
        names("purge_unsent", &unsent);
        // The purge's own reads of the object states (review of 2026-12-07, R2-3: "unknown state" in column
        // `state`, naming neither the object nor the candidate).
        names("object_states", &reg.object_states("c-s").await.unwrap_err());
        names(
            "for_each_object_state",
            &reg.for_each_object_state("c-s", |_| {}).await.unwrap_err(),
        );
        // Nothing was written: the intent is the only receipt.
        assert_eq!(reg.receipt_count("c-s").await.unwrap(), 1);
        // A registry error is exit 2 ("could not decide"), never a missing object.
        let e: crate::Error = unsent.into();
        assert_ne!(e.kind(), crate::ErrorKind::NotFound);
    }

    /// A batch's intents answered "not sent": an object a protection made `DELETE_UNKNOWN` meanwhile is
    /// `PROTECTED` again, one whose intent already has an answer is left alone, and a run that no longer holds
    /// the claim writes nothing.
    async fn unsent_intents_are_answered_only_by_the_run_holding_the_claim(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000004";
        let objects: Vec<String> = ["a", "b", "c"].iter().map(|s| (*s).to_owned()).collect();
        reg.candidate_record(table, "c-u", &serde_json::json!({}), &stamp(), &objects, t(0))
            .await
            .unwrap();
        for to in [State::Quarantined, State::DeleteApproved] {
            reg.candidate_transition("c-u", to, "", None, None, t(0)).await.unwrap();
        }
        let run = |id: &str| PurgeRun {
            run_id: id.into(),
            host: "h".into(),
            pid: 1,
            started_at: t(0),
            heartbeat_at: t(0),
        };
        reg.purge_claim("c-u", &run("r1"), None).await.unwrap().unwrap();
        for p in ["a", "b", "c"] {
            reg.receipt_add("c-u", p, &serde_json::json!({"phase": "requested"}), t(1))
                .await
                .unwrap();
        }
        reg.receipt_add(
            "c-u",
            "c",
            &serde_json::json!({"phase": "confirmed", "provider_result": "deleted"}),
            t(1),
        )
        .await
        .unwrap();
        reg.candidate_transition("c-u", State::Protected, "hold h-1 covers it", None, None, t(2))
            .await
            .unwrap();
        let not_sent = |p: &str| {
            (
                p.to_owned(),
                serde_json::json!({"phase": "confirmed", "provider_result": "not sent"}),
            )
        };
        let answers = || vec![not_sent("a"), not_sent("b"), not_sent("c")];
        // Another run's claim: nothing written.
        assert!(reg.purge_unsent("c-u", "r0", answers(), t(3)).await.unwrap().is_empty());
        let states = async |reg: &Registry| {
            reg.object_states("c-u")
                .await
                .unwrap()
                .into_iter()
                .map(|o| (o.path, o.state))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            states(&reg).await,
            vec![
                ("a".to_owned(), State::DeleteUnknown),
                ("b".to_owned(), State::DeleteUnknown),
                ("c".to_owned(), State::Protected),
            ]
        );
        let written = reg.purge_unsent("c-u", "r1", answers(), t(3)).await.unwrap();
        let paths: Vec<&str> = written.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, vec!["a", "b"], "c's intent had its answer");
        assert_eq!(
            states(&reg).await,
            vec![
                ("a".to_owned(), State::Protected),
                ("b".to_owned(), State::Protected),
                ("c".to_owned(), State::Protected),
            ]
        );
        // Answered once: a second call finds no open intent.
        assert!(reg.purge_unsent("c-u", "r1", answers(), t(4)).await.unwrap().is_empty());
    }

    async fn a_batch_halts_on_a_checkpoint_or_writer_that_came_to_cover_the_candidate(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000003";
        let candidate = serde_json::json!({
            "kind": "expired-snapshots",
            "snapshot_ids": [7],
            "objects": [{"path": "data/a.parquet", "layer": "data", "size": 1}],
        });
        reg.candidate_record(table, "c-p", &candidate, &stamp(), &["data/a.parquet".into()], t(0))
            .await
            .unwrap();
        let run = PurgeRun {
            run_id: "r1".into(),
            host: "h".into(),
            pid: 1,
            started_at: t(0),
            heartbeat_at: t(0),
        };
        reg.purge_claim("c-p", &run, None).await.unwrap().unwrap();
        reg.rollout_set(
            table,
            "db.t",
            &rollout::RolloutStage::Enabled,
            "test",
            "me",
            None,
            None,
            t(0),
        )
        .await
        .unwrap()
        .unwrap();
        let mut base = PurgeBaseline {
            table_uuid: table.into(),
            location: crate::registry::tests::loc(),
            run_id: "r1".into(),
            hold_generation: 0,
            lease_watermark: 0,
            protection_generation: 0,
            deletion_rights: None,
        };
        let open =
            async |reg: &Registry, base: &mut PurgeBaseline| match reg.purge_batch("c-p", base, t(5)).await.unwrap() {
                Ok(batch) => {
                    batch.commit().await.unwrap();
                    Ok(())
                }
                Err(halt) => Err(halt.join("; ")),
            };
        // A writer and a checkpoint elsewhere on the table: judged once, and the baseline moves past them.
        reg.writer_begin(table, "s3://b/t/data/staging/job-1/", t(1))
            .await
            .unwrap();
        reg.checkpoint_add(table, 8, t(0), t(1)).await.unwrap();
        open(&reg, &mut base).await.unwrap();
        assert_eq!(
            base.protection_generation,
            reg.protection_generation(table).await.unwrap()
        );
        assert!(base.protection_generation > 0);
        // A writer over the candidate's data file (written as a URI under the table) halts the batch, naming it.
        let w = reg.writer_begin(table, "s3://b/t/data", t(2)).await.unwrap();
        let halt = open(&reg, &mut base.clone()).await.unwrap_err();
        assert!(
            halt.contains(&w.writer_id) && halt.contains("no further deletes"),
            "{halt}"
        );
        // Ended, it protects nothing new.
        reg.writer_end(&w.writer_id, t(3)).await.unwrap();
        open(&reg, &mut base.clone()).await.unwrap();
        // A DR checkpoint on the candidate's snapshot halts it too.
        let c = reg.checkpoint_add(table, 7, t(0), t(4)).await.unwrap();
        let halt = open(&reg, &mut base).await.unwrap_err();
        assert!(halt.contains(&c.checkpoint_id) && halt.contains("snapshot 7"), "{halt}");
    }
}
