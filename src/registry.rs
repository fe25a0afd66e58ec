//! The registry: reader leases, legal holds, in-flight writers, DR checkpoints and the deleter switch.
//!
//! lakedrill protects snapshots by name, not by time windows. Everything that names something to keep lives
//! here, in one database that several lakedrill processes share: a `SQLite` file (`[registry] uri =
//! "sqlite:PATH"`, the default) or a PostgreSQL database (`uri = "postgres://USER@HOST:PORT/DATABASE"`):
//!
//! - **leases** (`snapshotLease`): a reader pins one snapshot until `expires_at` or until it releases the lease;
//! - **holds**: a legal hold on a whole table, one snapshot, or a path prefix, until it is cleared;
//! - **writers**: an in-flight writer's staging prefix, until the writer ends;
//! - **DR checkpoints**: declared recovery points (snapshot id + time);
//! - the **deleter switch**: an operator's global stop for every deleter;
//! - **rollout stages**, **governance decisions**, **quarantine extensions** and **rollout observations**
//!   (schema version 2); chain anchors and each drill report's verdict per bundle root (version 5);
//! - **candidates** and their objects' states, the deleter's **purge runs** and write-once **receipts**;
//! - an append-only **event log** of every change above.
//!
//! # Layout
//!
//! One file per record family, each adding its own `impl Registry` block; every public item is re-exported
//! here, so callers name `crate::registry::X` only; this face holds nothing else. `registry/base.rs` holds what
//! every family shares: [`Registry`] (open, schema, migrations), [`RegistryError`], the change transaction and
//! the event log, the time and row helpers. `registry/protections.rs` holds leases, holds, writers, DR checkpoints and the deleter switch;
//! `registry/rollout.rs` rollout stages, governance decisions and observations; `registry/candidates.rs`
//! candidates, their states, quarantine extensions and the acceptance point; `registry/purge_runs.rs` purge
//! claims and batches, receipts and object transitions. A family file uses `base` and the families before it
//! in that order, never one after it (quarantine extensions sit with candidates, not rollout, because the
//! acceptance point reads both the candidate and the rollout stage). The registry wing may use `io` (the database connection), `model`,
//! `govern` and the ground (`safety`, `error`); nothing in it reads the clock or the object store.
//!
//! # Guarantees
//!
//! - Every change runs in one transaction that holds a database-wide write lock from its start, so concurrent
//!   processes serialize on it (waiting up to [`WRITE_WAIT`], in attempts of [`BUSY_TIMEOUT`]) and no update is lost: on `SQLite` a
//!   `BEGIN IMMEDIATE` transaction on a WAL database with `synchronous = FULL` (a committed hold survives a
//!   power cut); on PostgreSQL a `READ COMMITTED` transaction that first takes a transaction-scoped advisory
//!   lock. Both run the same statements through sqlx's `Any` driver and store the same types (times as RFC 3339
//!   text, integers as 64-bit, text compared in byte order), so both answer every query alike.
//! - Every change bumps the monotonic **registry generation** by exactly one and appends one event row carrying
//!   that generation, in the same transaction. The generation never goes back and has no gaps.
//! - Every lease change (add or release) bumps the table's **lease watermark counter**; every hold change
//!   (set or clear) bumps the table's **hold generation**. Both are per table, monotonic, and start at 0.
//!   The deleter gate compares them (compare-and-swap) to detect a lease or a hold racing a delete
//!   (DESIGN §1, §6 "a hold racing the delete CAS").
//! - Table UUIDs are parsed and stored in canonical lowercase hyphenated form, so a hold set under
//!   `7F31…` protects the table that a later query spells `7f31…`.
//! - Time is never read here: every operation takes `now`, which the caller gets from its `Clock`.
//!
//! # What it does not do
//!
//! - It does not check that a snapshot exists, that a lease is within `maxReaderLease`, or that a writer is within
//!   `maxWriterDuration`: those rules belong to the policy and the caller applies them before calling.
//! - It does not expire anything by itself: an expired lease stays in the file with `active = false`, and an
//!   overdue writer stays open until someone ends it. Nothing is ever deleted from the registry.
//! - It does not decide what is deletable, and it does not resolve table names or UUID prefixes.
//! - It does not support an in-memory database: a registry that vanishes with its process protects nothing.
//! - It does not create a PostgreSQL database or role, and takes no password from its URI (`PGPASSWORD` or
//!   `~/.pgpass` supply one).

mod anchors;
mod base;
mod candidates;
mod protections;
mod purge_runs;
mod rollout;

pub use anchors::{ChainHead, DrillVerdict};
pub use base::*;
pub use candidates::{
    Acceptance, CandidateHead, CandidateRecord, CandidateVersion, CommitLock, FullCandidate, QuarantineExtension,
    State, WorldStamp,
};
pub use protections::{Checkpoint, DeleterSwitch, Hold, Lease, LeaseWatermark, NewLease, TableStamp, Writer};
pub use purge_runs::{ObjectState, PurgeBaseline, PurgeBatch, PurgeRun, ReceiptRow, claim_named};
pub use rollout::{
    DecisionRecord, GovernanceHoldChange, MIN_REPORT_ONLY, NewDecision, ObservationRecord, RightsInForce,
    RolloutChange, RolloutFacts, RolloutRecord, RolloutRules, RolloutStage, rollout_refusals,
};

pub use crate::model::object::{HoldScope, HoldScopeError};

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    //! The registry-wide tests (open, schema and migrations, the event log and generation, concurrency across
    //! registries and processes) and the fixtures every family's tests share: each `tests` module of a family
    //! file uses them through `crate::registry::tests`.

    use std::time::Duration;

    use chrono::{DateTime, Utc};

    use super::*;
    use chrono::TimeZone;

    pub(super) const T1: &str = "7f31c0de-0000-4000-8000-000000000001";
    pub(super) const T2: &str = "7f31c0de-0000-4000-8000-000000000002";

    pub(super) fn t(minutes: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 6, 1, 0, 0, 0).unwrap() + chrono::Duration::minutes(minutes)
    }

    pub(super) fn new_lease(table: &str, snapshot_id: i64, expires_at: DateTime<Utc>) -> NewLease {
        NewLease {
            table_uuid: table.to_owned(),
            snapshot_id,
            purpose: "nightly report".to_owned(),
            owner: "bi@example.com".to_owned(),
            expires_at,
        }
    }

    pub(super) fn loc() -> crate::model::location::TableLocation {
        crate::model::location::TableLocation::new("s3://b/t", "s3://b/t".into(), "s3://b/t/metadata/v1.json").unwrap()
    }

    pub(super) fn stamp() -> WorldStamp {
        WorldStamp {
            metadata_location: "m1".into(),
            metadata_blake3: "b1".into(),
            protected_ref_root: "r1".into(),
            lease_watermark: 0,
            hold_generation: 0,
            protection_generation: 0,
            deletion_rights: String::new(),
        }
    }

    pub(super) async fn fresh() -> (tempfile::TempDir, String, Registry) {
        let dir = tempfile::tempdir().unwrap();
        let uri = format!("sqlite:{}", dir.path().join("registry.db").display());
        let registry = Registry::open(&uri).await.unwrap();
        (dir, uri, registry)
    }

    /// Where a test's registry lives.
    #[derive(Clone, Copy)]
    pub(super) enum Backend {
        Sqlite,
        Postgres,
    }

    /// A fresh registry: a new SQLite file, or a new PostgreSQL database ([`crate::io::db::fresh_postgres_database`],
    /// which fails loudly without `LAKEDRILL_TEST_PG_URI`).
    pub(super) async fn fresh_on(backend: Backend) -> (Option<tempfile::TempDir>, String, Registry) {
        match backend {
            Backend::Sqlite => {
                let (dir, uri, registry) = fresh().await;
                (Some(dir), uri, registry)
            }
            Backend::Postgres => {
                let uri = crate::io::db::fresh_postgres_database().await;
                let registry = Registry::open(&uri).await.unwrap();
                (None, uri, registry)
            }
        }
    }

    /// Runs each named `async fn NAME(Backend)` as two tests, `NAME::sqlite` and `NAME::postgres`. The caller
    /// has `Backend` in scope.
    macro_rules! on_both_backends {
        ($($name:ident),* $(,)?) => {$(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name(super::Backend::Sqlite).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name(super::Backend::Postgres).await;
                }
            }
        )*};
    }
    pub(super) use on_both_backends;

    on_both_backends!(
        open_refuses_a_newer_schema,
        generation_increases_and_every_change_is_an_event,
        records_serialize_snake_case_rfc3339,
        times_round_trip_exactly,
        a_version_1_registry_is_migrated_to_version_2_on_open,
        concurrent_registries_lose_no_update,
    );

    #[tokio::test]
    async fn open_creates_and_reopens_idempotently() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let uri = format!("sqlite://{}", path.display());
        let r = Registry::open(&uri).await.unwrap();
        assert_eq!(r.generation().await.unwrap(), 0);
        r.hold_set(T1, HoldScope::Table, "litigation", t(0)).await.unwrap();
        r.close().await;
        assert!(path.exists());
        let r = Registry::open(&format!("sqlite:{}", path.display())).await.unwrap();
        assert_eq!(r.generation().await.unwrap(), 1);
        assert_eq!(r.holds(T1).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn open_refuses_bad_uris() {
        for uri in [
            "postgres://x",
            "sqlite:",
            "sqlite::memory:",
            "sqlite://r.db?mode=rwc",
            "r.db",
        ] {
            let err = Registry::open(uri).await.unwrap_err();
            assert!(
                matches!(
                    err,
                    RegistryError::Invalid {
                        field: "registry.uri",
                        ..
                    }
                ),
                "{uri}: {err}"
            );
        }
        let err = Registry::open("sqlite:/nonexistent-dir-lakedrill/r.db")
            .await
            .unwrap_err();
        assert!(matches!(err, RegistryError::Open { .. }), "{err}");
    }

    /// Makes the registry claim schema version `version`, as an older or newer lakedrill would have left it.
    async fn set_schema_version(r: &Registry, version: i64) {
        sqlx::query("UPDATE registry_state SET schema_version = $1")
            .bind(version)
            .execute(&r.pool)
            .await
            .unwrap();
    }

    /// Closes `r` and opens `uri` again, which must migrate it to [`SCHEMA_VERSION`].
    async fn reopen_migrated(r: Registry, uri: &str) -> Registry {
        r.close().await;
        let r = Registry::open(uri).await.unwrap();
        let v: i64 = sqlx::query_scalar("SELECT schema_version FROM registry_state")
            .fetch_one(&r.pool)
            .await
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        r
    }

    async fn open_refuses_a_newer_schema(b: Backend) {
        let (_dir, uri, r) = fresh_on(b).await;
        set_schema_version(&r, 99).await;
        r.close().await;
        let err = Registry::open(&uri).await.unwrap_err();
        assert!(
            matches!(
                err,
                RegistryError::SchemaTooNew {
                    found: 99,
                    supported: SCHEMA_VERSION
                }
            ),
            "{err}"
        );
    }

    async fn generation_increases_and_every_change_is_an_event(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let mut seen = vec![r.generation().await.unwrap()];
        let lease = r.lease_add(&new_lease(T1, 1, t(60)), t(0)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        r.lease_release(&lease.lease_id, t(1)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        let hold = r.hold_set(T1, HoldScope::Table, "legal", t(2)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        r.hold_clear(&hold.hold_id, t(3)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        let w = r.writer_begin(T1, "p/", t(4)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        r.writer_end(&w.writer_id, t(5)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        r.checkpoint_add(T1, 1, t(0), t(6)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        r.set_deleter_stopped(true, "x", t(7)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        assert_eq!(seen, (0..=8).collect::<Vec<i64>>());
        assert_eq!(r.generation().await.unwrap(), 8);

        let events = r.events(T1).await.unwrap();
        let summary: Vec<_> = events.iter().map(|e| (e.generation, e.kind, e.at)).collect();
        assert_eq!(
            summary,
            vec![
                (1, EventKind::LeaseAdded, t(0)),
                (2, EventKind::LeaseReleased, t(1)),
                (3, EventKind::HoldSet, t(2)),
                (4, EventKind::HoldCleared, t(3)),
                (5, EventKind::WriterBegun, t(4)),
                (6, EventKind::WriterEnded, t(5)),
                (7, EventKind::CheckpointAdded, t(6)),
            ]
        );
        assert_eq!(events[0].detail["lease_id"], serde_json::json!(lease.lease_id));
        assert_eq!(events[2].detail["scope"], serde_json::json!("table"));
        assert_eq!(r.all_events().await.unwrap().len(), 8);

        let stamp = r.table_stamp(T1).await.unwrap();
        assert_eq!(
            stamp,
            TableStamp {
                generation: 8,
                lease_watermark: LeaseWatermark {
                    counter: 2,
                    latest_expires_at: None
                },
                hold_generation: 2,
                deleter_stopped: true,
            }
        );
    }

    async fn records_serialize_snake_case_rfc3339(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let lease = r.lease_add(&new_lease(T1, 42, t(60)), t(0)).await.unwrap();
        let json = serde_json::to_value(&lease).unwrap();
        assert_eq!(json["expires_at"], serde_json::json!("2025-06-01T01:00:00Z"));
        assert_eq!(json["reader_generation"], serde_json::json!(1));
        assert_eq!(json["released_at"], serde_json::Value::Null);
        let back: Lease = serde_json::from_value(json).unwrap();
        assert_eq!(back, lease);
        let event = &r.events(T1).await.unwrap()[0];
        assert_eq!(
            serde_json::to_value(event).unwrap()["kind"],
            serde_json::json!("lease_added")
        );
    }

    async fn times_round_trip_exactly(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let now = t(0) + chrono::Duration::nanoseconds(123_456_789);
        let lease = r
            .lease_add(&new_lease(T1, 1, now + chrono::Duration::nanoseconds(1)), now)
            .await
            .unwrap();
        assert_eq!(r.leases(T1, now).await.unwrap(), vec![lease]);
    }

    /// Several registries on one file, as several processes would have, racing lease and hold changes.
    async fn concurrent_registries_lose_no_update(b: Backend) {
        const INSTANCES: usize = 4;
        const PER_INSTANCE: usize = 25;
        let (_dir, uri, first) = fresh_on(b).await;
        let initial = first.generation().await.unwrap();
        let mut registries = vec![first];
        for _ in 1..INSTANCES {
            registries.push(Registry::open(&uri).await.unwrap());
        }
        let mut tasks = tokio::task::JoinSet::new();
        for (i, r) in registries.iter().enumerate() {
            for j in 0..PER_INSTANCE {
                let r = r.clone();
                tasks.spawn(async move {
                    let snapshot = i64::try_from(i * PER_INSTANCE + j).unwrap();
                    r.lease_add(&new_lease(T1, snapshot, t(60)), t(0)).await.unwrap();
                    r.hold_set(T1, HoldScope::Snapshot(snapshot), "race", t(0))
                        .await
                        .unwrap();
                });
            }
        }
        while let Some(joined) = tasks.join_next().await {
            joined.unwrap();
        }
        let changes = i64::try_from(2 * INSTANCES * PER_INSTANCE).unwrap();
        let r = &registries[0];
        let leases = r.leases(T1, t(0)).await.unwrap();
        assert_eq!(leases.len(), INSTANCES * PER_INSTANCE);
        assert_eq!(r.generation().await.unwrap(), initial + changes);
        assert_eq!(
            r.hold_generation(T1).await.unwrap(),
            i64::try_from(INSTANCES * PER_INSTANCE).unwrap()
        );
        assert_eq!(
            r.lease_watermark(T1).await.unwrap().counter,
            i64::try_from(INSTANCES * PER_INSTANCE).unwrap()
        );
        // Every change got its own generation, with no gaps.
        let generations: Vec<i64> = r.events(T1).await.unwrap().iter().map(|e| e.generation).collect();
        assert_eq!(generations, (initial + 1..=initial + changes).collect::<Vec<_>>());
        let mut reader_generations: Vec<i64> = leases.iter().map(|l| l.reader_generation).collect();
        reader_generations.dedup();
        assert_eq!(reader_generations.len(), INSTANCES * PER_INSTANCE);
    }

    /// Processes that find no file yet and create it at once must agree on one schema and one generation.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_first_opens_agree() {
        let dir = tempfile::tempdir().unwrap();
        let uri = format!("sqlite:{}", dir.path().join("fresh.db").display());
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..4_i64 {
            let uri = uri.clone();
            tasks.spawn(async move {
                let r = Registry::open(&uri).await.unwrap();
                r.hold_set(T1, HoldScope::Snapshot(i), "first", t(0)).await.unwrap();
            });
        }
        while let Some(joined) = tasks.join_next().await {
            joined.unwrap();
        }
        let r = Registry::open(&uri).await.unwrap();
        assert_eq!(r.generation().await.unwrap(), 4);
        assert_eq!(r.hold_generation(T1).await.unwrap(), 4);
    }

    /// Callers spawn registry calls on tokio tasks, so every public future must be `Send`. Compile-time only.
    #[allow(dead_code)]
    fn public_futures_are_send(r: &Registry, new: &NewLease, now: DateTime<Utc>) {
        fn send<T: Send>(_: T) {}
        send(Registry::open("sqlite:x"));
        send(r.generation());
        send(r.lease_add(new, now));
        send(r.lease_release("id", now));
        send(r.leases(T1, now));
        send(r.lease_watermark(T1));
        send(r.hold_set(T1, HoldScope::Table, "r", now));
        send(r.hold_clear("id", now));
        send(r.holds(T1));
        send(r.hold_generation(T1));
        send(r.writer_begin(T1, "p", now));
        send(r.writer_end("id", now));
        send(r.writers(T1));
        send(r.checkpoint_add(T1, 1, now, now));
        send(r.checkpoints(T1));
        send(r.deleter_stopped());
        send(r.set_deleter_stopped(true, "r", now));
        send(r.events(T1));
        send(r.all_events());
        send(r.table_stamp(T1));
    }

    const CHILD_ENV: &str = "LAKEDRILL_REGISTRY_TEST_CHILD_URI";
    const CHILD_LEASES: usize = 20;

    /// The body of a child process for [`separate_processes_lose_no_update`]; does nothing when run normally.
    #[tokio::test]
    async fn child_process_adds_leases() {
        let Ok(uri) = std::env::var(CHILD_ENV) else { return };
        let r = Registry::open(&uri).await.unwrap();
        for i in 0..CHILD_LEASES {
            r.lease_add(&new_lease(T2, i64::try_from(i).unwrap(), t(60)), t(0))
                .await
                .unwrap();
            r.hold_set(T2, HoldScope::Table, "child", t(0)).await.unwrap();
        }
    }

    /// Two real OS processes (this test binary, re-executed) and this one race on one registry file.
    #[tokio::test]
    async fn separate_processes_lose_no_update() {
        if std::env::var_os(CHILD_ENV).is_some() {
            return;
        }
        let (_dir, uri, r) = fresh().await;
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..2)
            .map(|_| {
                std::process::Command::new(&exe)
                    .args([
                        "registry::tests::child_process_adds_leases",
                        "--exact",
                        "--test-threads=1",
                    ])
                    .env(CHILD_ENV, &uri)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for i in 0..CHILD_LEASES {
            r.lease_add(&new_lease(T2, i64::try_from(i).unwrap(), t(60)), t(0))
                .await
                .unwrap();
            r.hold_set(T2, HoldScope::Table, "parent", t(0)).await.unwrap();
        }
        for mut child in children {
            let status = tokio::task::spawn_blocking(move || child.wait())
                .await
                .unwrap()
                .unwrap();
            assert!(status.success(), "child failed: {status}");
        }
        let n = i64::try_from(3 * CHILD_LEASES).unwrap();
        assert_eq!(r.leases(T2, t(0)).await.unwrap().len(), 3 * CHILD_LEASES);
        assert_eq!(r.generation().await.unwrap(), 2 * n);
        assert_eq!(r.hold_generation(T2).await.unwrap(), n);
        assert_eq!(r.lease_watermark(T2).await.unwrap().counter, n);
    }

    async fn a_version_1_registry_is_migrated_to_version_2_on_open(b: Backend) {
        let (_dir, uri, r) = fresh_on(b).await;
        set_schema_version(&r, 1).await;
        sqlx::query("DROP TABLE rollout_stages").execute(&r.pool).await.unwrap();
        let r = reopen_migrated(r, &uri).await;
        assert_eq!(
            r.rollout_stage("7f31a2b4-09c1-4d5e-9f00-000000000005")
                .await
                .unwrap()
                .stage,
            RolloutStage::ReportOnly
        );
    }

    /// A version-2 file (writers and checkpoints without `generation`) keeps its order after the migration,
    /// and rows added afterwards come after it. SQLite only: no PostgreSQL registry predates version 3.
    #[tokio::test]
    async fn a_version_2_registry_is_migrated_to_version_3_keeping_insertion_order() {
        let (_dir, uri, r) = fresh().await;
        let mut before = Vec::new();
        for i in 0..3 {
            before.push(r.writer_begin(T1, &format!("p{}/", 9 - i), t(0)).await.unwrap());
            r.hold_set(T1, HoldScope::Table, "more changes than rows", t(0))
                .await
                .unwrap();
        }
        let early = r.checkpoint_add(T1, 1, t(0), t(1)).await.unwrap();
        for table in ["writers", "checkpoints"] {
            sqlx::query(&format!("ALTER TABLE {table} DROP COLUMN generation"))
                .execute(&r.pool)
                .await
                .unwrap();
        }
        set_schema_version(&r, 2).await;
        let r = reopen_migrated(r, &uri).await;
        let after = r.writer_begin(T1, "p0/", t(0)).await.unwrap();
        before.push(after);
        assert_eq!(r.writers(T1).await.unwrap(), before);
        let late = r.checkpoint_add(T1, 0, t(0), t(1)).await.unwrap();
        assert_eq!(r.checkpoints(T1).await.unwrap(), vec![early, late]);
    }

    /// A version-5 file (drill verdicts without `root_claimed`) is migrated on open: its rows stay readable and
    /// say they cannot tell a verified root from a claimed one (`None`); rows added afterwards say which.
    #[tokio::test]
    async fn a_version_5_registry_is_migrated_to_version_6_keeping_its_drill_verdicts() {
        let (_dir, uri, r) = fresh().await;
        sqlx::query("ALTER TABLE drill_verdicts DROP COLUMN root_claimed")
            .execute(&r.pool)
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO drill_verdicts (report_sha256, bundle_root, verified, finished_at, report_uri, plan, shard, \
             recorded_at) VALUES ('old', 'A', 0, '2025-06-01T00:02:00.000000000Z', 'file:///r/w/old.dsse.json', 'w', \
             NULL, '2025-06-01T00:02:00.000000000Z')",
        )
        .execute(&r.pool)
        .await
        .unwrap();
        set_schema_version(&r, 5).await;
        let r = reopen_migrated(r, &uri).await;
        let v = |sha: &str, claimed: Option<bool>| DrillVerdict {
            report_uri: format!("file:///r/w/{sha}.dsse.json"),
            report_sha256: sha.into(),
            plan: "w".into(),
            shard: None,
            bundle_root: "A".into(),
            verified: false,
            finished_at: t(2),
            root_claimed: claimed,
        };
        r.drill_record(&[v("new", Some(true))], t(3)).await.unwrap();
        let found = r.drill_failures_after(&["A".to_owned()], t(0)).await.unwrap();
        assert_eq!(found, vec![v("new", Some(true)), v("old", None)]);
        assert!(
            found[0]
                .root_words()
                .contains("whose envelope claims root A (not verified")
        );
        assert!(
            found[1]
                .root_words()
                .contains("recorded before the registry marked claimed roots")
        );
    }

    /// A server that refuses connections is reported at once with its cause, not after the pool's timeout.
    #[tokio::test]
    async fn an_unreachable_postgres_server_is_reported_with_its_cause() {
        let started = std::time::Instant::now();
        let err = Registry::open("postgres://lakedrill@127.0.0.1:1/nope")
            .await
            .unwrap_err();
        assert!(matches!(err, RegistryError::Open { .. }), "{err}");
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert!(cause.contains("refused"), "{cause}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }
}
