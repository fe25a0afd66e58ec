//! Candidates: the state machine of DESIGN §1 ([`State`]), candidate records with their [`WorldStamp`],
//! quarantine extensions, the acceptance point's compare-and-swap ([`Registry::candidate_accept`]) and the
//! operator's way out before it ([`Registry::candidate_release`]).
//!
//! A candidate moves only along legal transitions; its objects follow it through the pre-deletion states
//! (the deleter moves them one by one afterwards, in `purge_runs`). A quarantine extension is kept per
//! candidate: the earliest time it may be purged, checked at the acceptance point. The acceptance point reads
//! the deleter switch, the lease watermark and the hold generation (`protections`) and the rollout stage
//! (`rollout`) inside its own write transaction, so that any change racing it either commits first and is
//! seen, or waits.
//!
//! It does not compute a world stamp (the planner does, from the catalog) and does not delete anything. It
//! uses the face (`super`), `protections` and `rollout`.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use crate::model::location::TableLocation;
use crate::model::object::ObjectRef;

use super::base::{
    Change, EventKind, Registry, RegistryError, canonical_table_uuid, decode, fmt_time, json, parse_time, query,
    require_text, time,
};
use super::protections::{
    covering_new_protections, read_deleter_switch, read_hold_generation, read_lease_watermark,
    read_protection_generation,
};
use super::rollout::{self, RolloutStage};

/// The states of DESIGN §1. Candidates and their objects move only along legal transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    /// Seen in a listing or a plan, not yet judged.
    Discovered,
    /// Reachable only from expirable snapshots (or an old orphan): may be quarantined.
    UnreferencedEligible,
    /// Sealed in bundles (and tagged or removed from the metadata).
    Quarantined,
    /// Signed drill evidence covers every bundle root.
    RestoreVerified,
    /// The deleter's acceptance point passed; deletes may start.
    DeleteApproved,
    /// The store acknowledged the delete.
    Deleted,
    /// A re-check confirmed the delete.
    Verified,
    /// A lease, hold, writer, checkpoint or ref covers it: out of the candidate set.
    Protected,
    /// The outcome of a delete is not known for certain: must be reconciled.
    DeleteUnknown,
    /// An operator released it (`quarantine release`): its quarantine tags are gone and its objects are back
    /// in the plan, under a new candidate id. Terminal: it blocks nothing and is never purged.
    Released,
}

impl State {
    /// The stored name (`QUARANTINED` …).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            State::Discovered => "DISCOVERED",
            State::UnreferencedEligible => "UNREFERENCED_ELIGIBLE",
            State::Quarantined => "QUARANTINED",
            State::RestoreVerified => "RESTORE_VERIFIED",
            State::DeleteApproved => "DELETE_APPROVED",
            State::Deleted => "DELETED",
            State::Verified => "VERIFIED",
            State::Protected => "PROTECTED",
            State::DeleteUnknown => "DELETE_UNKNOWN",
            State::Released => "RELEASED",
        }
    }

    pub(super) fn parse(s: &str) -> Option<State> {
        [
            State::Discovered,
            State::UnreferencedEligible,
            State::Quarantined,
            State::RestoreVerified,
            State::DeleteApproved,
            State::Deleted,
            State::Verified,
            State::Protected,
            State::DeleteUnknown,
            State::Released,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }

    /// Whether `self → to` is a legal transition.
    #[must_use]
    pub fn can_move_to(self, to: State) -> bool {
        use State::{
            DeleteApproved, DeleteUnknown, Deleted, Discovered, Protected, Quarantined, Released, RestoreVerified,
            UnreferencedEligible, Verified,
        };
        matches!(
            (self, to),
            (Discovered, UnreferencedEligible | Protected)
                | (UnreferencedEligible, Quarantined | Protected)
                // `quarantine release`: only before the acceptance point, never with deletes in flight.
                | (Quarantined, RestoreVerified | DeleteApproved | Protected | Released)
                | (RestoreVerified, DeleteApproved | Protected | Released)
                | (Protected, Released)
                // A mismatch found after approval, before any delete, sends it back for re-planning.
                | (DeleteApproved, Deleted | DeleteUnknown | Quarantined | Protected)
                | (Deleted, Verified | DeleteUnknown)
                // `undelete` brought the objects back from their delete markers.
                | (Verified, Protected)
                | (DeleteUnknown, Deleted | Verified)
        )
    }

    /// Whether one object may move from this state to `to`: as a candidate may ([`State::can_move_to`]), and
    /// from `DELETE_UNKNOWN` back to `PROTECTED` — an object of a protected candidate whose delete intent had no
    /// answer and that `reconcile` found still present (its delete did not take effect; it is kept).
    #[must_use]
    pub fn object_can_move_to(self, to: State) -> bool {
        self.can_move_to(to) || (self == State::DeleteUnknown && to == State::Protected)
    }

    /// Why a candidate in this state cannot be released (`quarantine release`), naming the state; `None` when
    /// it can (`QUARANTINED`, `RESTORE_VERIFIED`, `PROTECTED`).
    #[must_use]
    pub fn release_refusal(self, candidate_id: &str) -> Option<String> {
        if self.can_move_to(State::Released) {
            return None;
        }
        let why = match self {
            State::DeleteApproved | State::Deleted | State::Verified | State::DeleteUnknown => {
                "the deleter accepted it (deletes are in flight or done)"
            }
            State::Released => "it was released already",
            _ => "it is not quarantined (nothing to release)",
        };
        Some(format!(
            "{candidate_id} is {self}: only a QUARANTINED, RESTORE_VERIFIED or PROTECTED candidate can be released; {why}"
        ))
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the deleter compares at its acceptance point (DESIGN §2): recorded at plan and quarantine time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorldStamp {
    /// The table's metadata location.
    pub metadata_location: String,
    /// BLAKE3 of that metadata file.
    pub metadata_blake3: String,
    /// BLAKE3 over the table's refs (the candidate's own quarantine tags excluded) and the policy's protected refs.
    pub protected_ref_root: String,
    /// The table's lease watermark counter.
    pub lease_watermark: i64,
    /// The table's hold generation.
    pub hold_generation: i64,
    /// The table's protection generation: the registry generation of its newest DR checkpoint or writer
    /// ([`Registry::protection_generation`]). Stamps written before it existed read 0: their candidate is re-judged
    /// once, at its next purge, when the table has a checkpoint or a writer.
    #[serde(default)]
    pub protection_generation: i64,
    /// The deletion rights the candidate was judged with: [`super::RightsInForce::digest`] of the table's newest
    /// governance decision (empty while it grants none). A decision version that withdraws or changes a right
    /// moves it, so the acceptance's compare-and-set refuses and the next try's rebase re-plans the candidate
    /// with the rights in force (before, a withdrawn right left a candidate it had made deletable purgeable).
    /// Stamps written before it existed read empty: their candidate is re-judged once, at its next purge, when
    /// the table's decision grants a right.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub deletion_rights: String,
}

/// A candidate as the registry keeps it.
///
/// Serialized (for `status`) with its inventory back inside `candidate`, as it was planned.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateRecord {
    /// Candidate id.
    pub candidate_id: String,
    /// Table UUID.
    pub table_uuid: String,
    /// State.
    pub state: State,
    /// The planned candidate (kind, snapshot ids, bytes, inventory root) without its inventory: that is
    /// [`CandidateRecord::objects`].
    pub candidate: serde_json::Value,
    /// The exact inventory, typed. As a JSON value a million-object inventory took about 2 GB (#24); typed it
    /// is a tenth of that.
    pub objects: Vec<ObjectRef>,
    /// The world at plan time, or after the quarantine commit.
    pub stamp: WorldStamp,
    /// Quarantine details (mode, bundles, tags).
    pub quarantine: Option<serde_json::Value>,
    /// Why the last transition happened.
    pub reason: String,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last transition.
    pub updated_at: DateTime<Utc>,
}

/// A candidate without its inventory ([`Registry::candidate_heads`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateHead {
    /// Candidate id.
    pub candidate_id: String,
    /// State.
    pub state: State,
    /// How its quarantine holds it (`tag`, `bundle`, `orphans`); `None` before a quarantine was recorded.
    pub mode: Option<String>,
    /// Whether a quarantine or purge run holds its claim now (or died holding it).
    pub claimed: bool,
    /// When its quarantine began (`quarantined_at` of the quarantine record).
    pub quarantined_at: Option<DateTime<Utc>>,
    /// An orphan hold a bucket lifecycle rule ends: when at the earliest (`hold_ends_at`) and the rule's ID.
    pub hold_ends: Option<(DateTime<Utc>, String)>,
    /// An orphan quarantine recorded before its files left the table whose take-out never finished (the run
    /// died in it): some of its files may be out of the table, others not.
    pub taking_out: bool,
}

impl CandidateRecord {
    /// The candidate as planned and stored, its inventory included: serializes to the bytes
    /// `serde_json::Value::to_string` gives for the whole candidate (keys sorted), without building that value.
    #[must_use]
    pub fn full_candidate(&self) -> FullCandidate<'_> {
        FullCandidate {
            rest: &self.candidate,
            objects: &self.objects,
        }
    }

    /// [`CandidateRecord::full_candidate`] as a JSON value (for small candidates: tests, the fault lab).
    #[must_use]
    pub fn candidate_json(&self) -> serde_json::Value {
        serde_json::to_value(self.full_candidate()).unwrap_or_default()
    }
}

impl Serialize for CandidateRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct View<'a> {
            candidate_id: &'a str,
            table_uuid: &'a str,
            state: State,
            candidate: FullCandidate<'a>,
            stamp: &'a WorldStamp,
            quarantine: &'a Option<serde_json::Value>,
            reason: &'a str,
            created_at: &'a DateTime<Utc>,
            updated_at: &'a DateTime<Utc>,
        }
        View {
            candidate_id: &self.candidate_id,
            table_uuid: &self.table_uuid,
            state: self.state,
            candidate: self.full_candidate(),
            stamp: &self.stamp,
            quarantine: &self.quarantine,
            reason: &self.reason,
            created_at: &self.created_at,
            updated_at: &self.updated_at,
        }
        .serialize(s)
    }
}

/// A candidate with its inventory, serialized with every object's keys in sorted order (see
/// [`CandidateRecord::full_candidate`]).
#[derive(Debug, Clone, Copy)]
pub struct FullCandidate<'a> {
    rest: &'a serde_json::Value,
    objects: &'a [ObjectRef],
}

impl Serialize for FullCandidate<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        struct Objects<'a>(&'a [ObjectRef]);
        impl Serialize for Objects<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                // The keys in sorted order, as a JSON value of the object would write them.
                #[derive(Serialize)]
                struct Sorted<'a> {
                    layer: crate::model::object::Layer,
                    path: &'a str,
                    size: u64,
                }
                let mut seq = s.serialize_seq(Some(self.0.len()))?;
                for o in self.0 {
                    seq.serialize_element(&Sorted {
                        layer: o.layer,
                        path: &o.path,
                        size: o.size,
                    })?;
                }
                seq.end()
            }
        }
        let empty = serde_json::Map::new();
        let rest = self.rest.as_object().unwrap_or(&empty);
        let mut map = s.serialize_map(Some(rest.len() + 1))?;
        let mut placed = false;
        for (k, v) in rest {
            if k == "objects" {
                continue;
            }
            if !placed && k.as_str() > "objects" {
                map.serialize_entry("objects", &Objects(self.objects))?;
                placed = true;
            }
            map.serialize_entry(k, v)?;
        }
        if !placed {
            map.serialize_entry("objects", &Objects(self.objects))?;
        }
        map.end()
    }
}

/// A stored candidate read without a JSON value of its inventory: every key but `objects` as a value, the
/// objects typed as they are parsed.
struct StoredCandidate {
    rest: serde_json::Value,
    objects: Vec<ObjectRef>,
}

impl<'de> Deserialize<'de> for StoredCandidate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = StoredCandidate;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a candidate object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<StoredCandidate, A::Error> {
                let mut rest = serde_json::Map::new();
                let mut objects = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    if k == "objects" {
                        objects = m.next_value::<Option<Vec<ObjectRef>>>()?.unwrap_or_default();
                    } else {
                        let v = m.next_value::<serde_json::Value>()?;
                        rest.insert(k, v);
                    }
                }
                Ok(StoredCandidate {
                    rest: serde_json::Value::Object(rest),
                    objects,
                })
            }
        }
        d.deserialize_map(V)
    }
}

/// The acceptance point's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Acceptance {
    /// Moved to `DELETE_APPROVED`.
    Approved,
    /// Refused, with every reason.
    Refused(Vec<String>),
    /// Refused only because the world moved past the stamp the candidate was last judged on (the table's
    /// generation or refs, the lease watermark or the hold generation: the compare-and-set), with nothing else
    /// standing in the way: judged again on the world as it is now, it may pass. The reasons say what moved.
    Moved(Vec<String>),
}

impl Acceptance {
    /// The reasons of a refusal (`Refused` or `Moved`); empty when approved.
    #[must_use]
    pub fn reasons(&self) -> &[String] {
        match self {
            Acceptance::Approved => &[],
            Acceptance::Refused(r) | Acceptance::Moved(r) => r,
        }
    }
}

/// A state column (a candidate's or an object's).
pub(super) fn state(row: &AnyRow, column: &'static str) -> Result<State, sqlx::Error> {
    let state: String = row.try_get(column)?;
    State::parse(&state).ok_or_else(|| decode(column, format!("unknown state {state}")))
}

/// A candidate from its row (every column but `candidate_json` is read) and its stored candidate.
fn candidate_from_parts(row: &AnyRow, stored: StoredCandidate) -> Result<CandidateRecord, sqlx::Error> {
    let quarantine: Option<String> = row.try_get("quarantine_json")?;
    Ok(CandidateRecord {
        candidate_id: row.try_get("candidate_id")?,
        table_uuid: row.try_get("table_uuid")?,
        state: state(row, "state")?,
        candidate: stored.rest,
        objects: stored.objects,
        stamp: json(row, "stamp_json")?,
        quarantine: quarantine
            .map(|q| serde_json::from_str(&q).map_err(|e| decode("quarantine_json", e)))
            .transpose()?,
        reason: row.try_get("reason")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

/// Bytes of a candidate's JSON kept in its row (`candidate_json`); a longer one is stored in `candidate_parts`, in
/// parts of at most this many bytes, and `candidate_json` is empty.
const CANDIDATE_PART_BYTES: usize = 4 << 20;

/// Stores `text` as candidate `id`'s JSON (its earlier parts removed): returns what goes into `candidate_json`, the
/// text itself when it is short, empty when `candidate_parts` holds it. A million objects' inventory is ~100 MB of
/// text: read as one column, or as `substr`s of one (SQLite and PostgreSQL load the whole value for each), it was
/// held several times at once (`heaptrack` of a 1M-object purge: ~300 MB inside SQLite alone, #24).
pub(super) async fn store_candidate_text(
    conn: &mut AnyConnection,
    id: &str,
    text: String,
) -> Result<String, sqlx::Error> {
    sqlx::query("DELETE FROM candidate_parts WHERE candidate_id = $1")
        .bind(id)
        .execute(&mut *conn)
        .await?;
    if text.len() <= CANDIDATE_PART_BYTES {
        return Ok(text);
    }
    let mut rest = text.as_str();
    let mut seq: i64 = 0;
    while !rest.is_empty() {
        let mut cut = rest.len().min(CANDIDATE_PART_BYTES);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (part, tail) = rest.split_at(cut);
        sqlx::query("INSERT INTO candidate_parts (candidate_id, seq, part) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(seq)
            .bind(part)
            .execute(&mut *conn)
            .await?;
        rest = tail;
        seq += 1;
    }
    Ok(String::new())
}

/// Candidate `id`'s JSON text: `inline` (its `candidate_json`), or its parts in order when that is empty. The
/// caller reads inside one snapshot (a write transaction, or [`Registry::candidate`]'s read-only one), so the parts
/// are of one version of the candidate.
pub(super) async fn candidate_text(conn: &mut AnyConnection, id: &str, inline: String) -> Result<String, sqlx::Error> {
    use futures::TryStreamExt as _;
    if !inline.is_empty() {
        return Ok(inline);
    }
    // Room for every part at once (each at most CANDIDATE_PART_BYTES): a string grown by doubling would hold its
    // old and new buffers together, half again the text's size, at the moment the record is parsed.
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM candidate_parts WHERE candidate_id = $1")
        .bind(id)
        .fetch_one(&mut *conn)
        .await?;
    let mut text = String::with_capacity(usize::try_from(count).unwrap_or(0).saturating_mul(CANDIDATE_PART_BYTES));
    let mut parts =
        sqlx::query_scalar::<_, String>("SELECT part FROM candidate_parts WHERE candidate_id = $1 ORDER BY seq")
            .bind(id)
            .fetch(&mut *conn);
    while let Some(part) = parts.try_next().await? {
        text.push_str(&part);
    }
    if text.is_empty() {
        return Err(decode(
            "candidate_json",
            format!("candidate {id}: empty, and no parts of it are stored"),
        ));
    }
    Ok(text)
}

/// The candidate `id`: its columns, then its JSON ([`candidate_text`]) parsed into the typed record.
async fn read_candidate(conn: &mut AnyConnection, id: &str) -> Result<Option<CandidateRecord>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT candidate_id, table_uuid, state, stamp_json, quarantine_json, reason, created_at, updated_at, \
         candidate_json FROM candidates WHERE candidate_id = $1",
    )
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let inline: String = row.try_get("candidate_json")?;
    let text = candidate_text(conn, id, inline).await?;
    let stored: StoredCandidate = serde_json::from_str(&text).map_err(|e| decode("candidate_json", e))?;
    drop(text);
    candidate_from_parts(&row, stored).map(Some)
}

/// The candidate `id`, or [`RegistryError::NotFound`].
async fn require_candidate(
    conn: &mut AnyConnection,
    id: &str,
    op: &'static str,
) -> Result<CandidateRecord, RegistryError> {
    read_candidate(conn, id)
        .await
        .map_err(query(op))?
        .ok_or_else(|| RegistryError::NotFound {
            what: "candidate",
            id: id.to_owned(),
        })
}

/// The table of a candidate, if the registry knows the candidate.
pub(super) async fn read_candidate_table(conn: &mut AnyConnection, id: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT table_uuid FROM candidates WHERE candidate_id = $1")
        .bind(id)
        .fetch_optional(conn)
        .await
}

/// A candidate's state and when it was last written (`updated_at`, as stored): every write to the record moves
/// the second, so a pair read again and found equal means the candidate did not move in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateVersion {
    /// Candidate id.
    pub candidate_id: String,
    /// State.
    pub state: State,
    /// `updated_at`, as stored.
    pub updated_at: String,
}

/// Every candidate of `table_uuid` (canonical) with its [`CandidateVersion`], oldest first.
async fn read_candidate_versions(
    conn: &mut AnyConnection,
    table_uuid: &str,
) -> Result<Vec<CandidateVersion>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT candidate_id, state, updated_at FROM candidates WHERE table_uuid = $1 ORDER BY created_at, candidate_id",
    )
    .bind(table_uuid)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(CandidateVersion {
                candidate_id: r.try_get("candidate_id")?,
                state: state(r, "state")?,
                updated_at: r.try_get("updated_at")?,
            })
        })
        .collect()
}

/// The registry's write lock, held with nothing written ([`Registry::commit_lock`]). A catalog commit that brings a
/// snapshot back into a table (`set-current --from-bundle`) is made while holding it, after reading again in it the
/// candidates whose purge could delete what the snapshot reaches: a purge's acceptance and each of its delete
/// batches need the same lock, so each either committed before that read (and is seen) or begins after the
/// catalog commit (and finds the snapshot back in the table). Dropping it, or [`CommitLock::release`], lets the
/// lock go. **Never call another [`Registry`] method that writes while it is held**: it would wait for this lock
/// (on PostgreSQL, forever).
pub struct CommitLock {
    tx: sqlx::Transaction<'static, sqlx::Any>,
}

impl CommitLock {
    /// Every candidate of a table with its [`CandidateVersion`], read inside the lock.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`].
    pub async fn candidate_versions(&mut self, table_uuid: &str) -> Result<Vec<CandidateVersion>, RegistryError> {
        const OP: &str = "commit_lock";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        read_candidate_versions(&mut self.tx, &table_uuid)
            .await
            .map_err(query(OP))
    }

    /// A candidate by id, read inside the lock.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Query`].
    pub async fn candidate(&mut self, candidate_id: &str) -> Result<CandidateRecord, RegistryError> {
        require_candidate(&mut self.tx, candidate_id, "commit_lock").await
    }

    /// Lets the lock go (nothing was written).
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn release(self) -> Result<(), RegistryError> {
        self.tx.rollback().await.map_err(query("commit_lock"))
    }
}

/// One quarantine extension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantineExtension {
    /// The registry generation of the change.
    pub generation: i64,
    /// The candidate.
    pub candidate_id: String,
    /// No purge before this time.
    pub not_before: DateTime<Utc>,
    /// Why.
    pub reason: String,
    /// When it was extended.
    pub extended_at: DateTime<Utc>,
}

/// Moves each object of `candidate_id` among `paths` that is in one of the states `from` to `to`.
async fn move_objects(
    conn: &mut AnyConnection,
    candidate_id: &str,
    paths: &[String],
    from: &[State],
    to: State,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let from: Vec<String> = from.iter().map(|s| format!("'{}'", s.as_str())).collect();
    let sql = format!(
        "UPDATE object_states SET state = $1, updated_at = $2 WHERE candidate_id = $3 AND path = $4 AND state IN ({})",
        from.join(", ")
    );
    for path in paths {
        sqlx::query(&sql)
            .bind(to.as_str())
            .bind(fmt_time(now))
            .bind(candidate_id)
            .bind(path)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// The objects of `candidate_id` still `DELETE_APPROVED` whose delete may be in flight: their newest receipt is a
/// delete intent (`requested`) with nothing recorded after it, or an earlier intent was never answered (a run sent,
/// or was about to send, the delete and died; a later run's intent over it was answered "not sent", which says
/// nothing of the earlier request). Whether they are gone is unknown until a re-check. A receipt that does not
/// parse counts as an intent (it cannot show the delete was answered).
pub(super) async fn in_flight_deletes(
    conn: &mut AnyConnection,
    candidate_id: &str,
) -> Result<Vec<String>, sqlx::Error> {
    use futures::TryStreamExt;
    let mut rows = sqlx::query_as::<_, (String, String)>(
        "SELECT r.path, r.receipt_json FROM receipts r JOIN object_states s \
         ON s.candidate_id = r.candidate_id AND s.path = r.path \
         WHERE r.candidate_id = $1 AND s.state = 'DELETE_APPROVED' ORDER BY r.path, r.attempt",
    )
    .bind(candidate_id)
    .fetch(&mut *conn);
    let mut out = Vec::new();
    let mut current: Option<(String, Vec<String>)> = None;
    let mut judge = |path: String, phases: Vec<String>| {
        let (newest_open, earlier_open) = open_intents(&phases);
        if newest_open || earlier_open {
            out.push(path);
        }
    };
    while let Some((path, receipt)) = rows.try_next().await? {
        let phase = serde_json::from_str::<serde_json::Value>(&receipt)
            .ok()
            .and_then(|r| r["phase"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "requested".to_owned());
        match &mut current {
            Some((p, phases)) if *p == path => phases.push(phase),
            _ => {
                if let Some((p, phases)) = current.replace((path, vec![phase])) {
                    judge(p, phases);
                }
            }
        }
    }
    if let Some((p, phases)) = current {
        judge(p, phases);
    }
    Ok(out)
}

/// Of one object's receipt phases (oldest first): whether the newest is an intent (`requested`), and whether an
/// intent before it was never answered (another intent followed it with no answer — `confirmed`, `reconciled` —
/// in between: the run that recorded it died, and its request may have gone out).
pub(super) fn open_intents(phases: &[String]) -> (bool, bool) {
    let mut open = false;
    let mut earlier_open = false;
    let Some((newest, before)) = phases.split_last() else {
        return (false, false);
    };
    for p in before {
        if p == "requested" {
            earlier_open |= open;
            open = true;
        } else {
            open = false;
        }
    }
    if newest == "requested" {
        earlier_open |= open;
        (true, earlier_open)
    } else {
        (false, earlier_open)
    }
}

async fn read_not_before(conn: &mut AnyConnection, candidate_id: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    let t: Option<String> =
        sqlx::query_scalar("SELECT MAX(not_before) FROM quarantine_extensions WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_one(conn)
            .await?;
    t.as_deref().map(|s| parse_time("not_before", s)).transpose()
}

impl Registry {
    /// Records a planned candidate in `UNREFERENCED_ELIGIBLE` with the world stamp of its plan. A candidate
    /// id already known is returned as it is (ids bind the table generation, so the same id is the same plan).
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`].
    pub async fn candidate_record(
        &self,
        table_uuid: &str,
        candidate_id: &str,
        candidate: &impl Serialize,
        stamp: &WorldStamp,
        objects: &[String],
        now: DateTime<Utc>,
    ) -> Result<CandidateRecord, RegistryError> {
        const OP: &str = "candidate_record";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        {
            let mut tx = self.read_snapshot(OP).await?;
            if let Some(existing) = read_candidate(&mut tx, candidate_id).await.map_err(query(OP))? {
                return Ok(existing);
            }
        }
        let mut change = self.change(OP).await?;
        // Recorded by another process since the read above (under the write lock now): its record stands.
        let exists: Option<i64> = sqlx::query_scalar("SELECT 1 FROM candidates WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_optional(&mut *change.tx)
            .await
            .map_err(query(OP))?;
        if exists.is_some() {
            change.tx.rollback().await.map_err(query(OP))?;
            return self.candidate(candidate_id).await;
        }
        let stamp_json = serde_json::to_string(stamp).map_err(|e| query(OP)(sqlx::Error::Encode(Box::new(e))))?;
        let text = serde_json::to_string(candidate).map_err(|e| query(OP)(sqlx::Error::Encode(Box::new(e))))?;
        let inline = store_candidate_text(&mut change.tx, candidate_id, text)
            .await
            .map_err(query(OP))?;
        sqlx::query(
            "INSERT INTO candidates (candidate_id, table_uuid, state, candidate_json, stamp_json, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
        )
        .bind(candidate_id)
        .bind(&table_uuid)
        .bind(State::UnreferencedEligible.as_str())
        .bind(inline)
        .bind(stamp_json)
        .bind(fmt_time(now))
        .bind(fmt_time(now))
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        for path in objects {
            sqlx::query(
                "INSERT INTO object_states (candidate_id, path, state, updated_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(candidate_id)
            .bind(path)
            .bind(State::UnreferencedEligible.as_str())
            .bind(fmt_time(now))
            .execute(&mut *change.tx)
            .await
            .map_err(query(OP))?;
        }
        let detail = serde_json::json!({"candidate_id": candidate_id, "to": State::UnreferencedEligible});
        change
            .commit(now, EventKind::CandidateState, Some(&table_uuid), &detail)
            .await?;
        self.candidate(candidate_id).await
    }

    /// A candidate by id.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Query`].
    pub async fn candidate(&self, candidate_id: &str) -> Result<CandidateRecord, RegistryError> {
        const OP: &str = "candidate";
        // One snapshot: the record is read in several statements.
        let mut tx = self.read_snapshot(OP).await?;
        let rec = require_candidate(&mut tx, candidate_id, OP).await?;
        tx.rollback().await.map_err(query(OP))?;
        Ok(rec)
    }

    /// When a candidate was last written (`updated_at`, as stored): a caller holding a record read after this
    /// value can tell, by reading it again, whether the record changed since, without reading the record.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Query`].
    pub async fn candidate_version(&self, candidate_id: &str) -> Result<String, RegistryError> {
        self.candidate_column(candidate_id, "updated_at", "candidate_version")
            .await
    }

    /// A candidate's state alone (its record is not read: a million-object candidate's is ~100 MB).
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Query`].
    pub async fn candidate_state(&self, candidate_id: &str) -> Result<State, RegistryError> {
        const OP: &str = "candidate_state";
        let state = self.candidate_column(candidate_id, "state", OP).await?;
        State::parse(&state).ok_or_else(|| query(OP)(decode("state", format!("unknown state {state}"))))
    }

    /// One text column of candidate `candidate_id`'s row, read alone.
    async fn candidate_column(
        &self,
        candidate_id: &str,
        column: &'static str,
        op: &'static str,
    ) -> Result<String, RegistryError> {
        let mut conn = self.pool.acquire().await.map_err(query(op))?;
        sqlx::query_scalar(&format!("SELECT {column} FROM candidates WHERE candidate_id = $1"))
            .bind(candidate_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(query(op))?
            .ok_or_else(|| RegistryError::NotFound {
                what: "candidate",
                id: candidate_id.to_owned(),
            })
    }

    /// Every candidate of a table, oldest first, as a [`CandidateHead`]: its state, how it was quarantined and
    /// whether a run holds it, without its inventory (the orphan planner asks this of every candidate at every
    /// plan; a million-object inventory is ~100 MB, #24).
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`], also for a stored
    /// quarantine record that is not JSON.
    pub async fn candidate_heads(&self, table_uuid: &str) -> Result<Vec<CandidateHead>, RegistryError> {
        let table_uuid = canonical_table_uuid(table_uuid)?;
        self.rows(
            "candidate_heads",
            "SELECT c.candidate_id, c.state, c.quarantine_json, r.run_id FROM candidates c \
             LEFT JOIN purge_runs r ON r.candidate_id = c.candidate_id \
             WHERE c.table_uuid = $1 ORDER BY c.created_at, c.candidate_id",
            &[&table_uuid],
            |r| {
                let quarantine: Option<String> = r.try_get("quarantine_json")?;
                let q = match quarantine {
                    Some(q) => {
                        serde_json::from_str::<serde_json::Value>(&q).map_err(|e| decode("quarantine_json", e))?
                    }
                    None => serde_json::Value::Null,
                };
                let time = |k: &str| {
                    q[k].as_str()
                        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                        .map(|t| t.with_timezone(&Utc))
                };
                let run: Option<String> = r.try_get("run_id")?;
                Ok(CandidateHead {
                    candidate_id: r.try_get("candidate_id")?,
                    state: state(r, "state")?,
                    mode: q["mode"].as_str().map(ToOwned::to_owned),
                    claimed: run.is_some(),
                    quarantined_at: time("quarantined_at"),
                    hold_ends: time("hold_ends_at").map(|t| {
                        let rule = q["hold_lifecycle_rule"]["rule_id"].as_str().unwrap_or("(no ID)");
                        (t, rule.to_owned())
                    }),
                    taking_out: q["taking_out"] == true,
                })
            },
        )
        .await
    }

    /// Every candidate of a table with its [`CandidateVersion`] (no inventory), oldest first.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`].
    pub async fn candidate_versions(&self, table_uuid: &str) -> Result<Vec<CandidateVersion>, RegistryError> {
        let table_uuid = canonical_table_uuid(table_uuid)?;
        self.read("candidate_versions", async |conn| {
            read_candidate_versions(conn, &table_uuid).await
        })
        .await
    }

    /// Takes the registry's write lock and holds it, writing nothing, until the [`CommitLock`] is released or
    /// dropped: the lock of a catalog commit that brings a snapshot back (see [`CommitLock`]).
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn commit_lock(&self) -> Result<CommitLock, RegistryError> {
        Ok(CommitLock {
            tx: self.begin_write("commit_lock").await?,
        })
    }

    /// Every candidate of a table, oldest first.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn candidates(&self, table_uuid: &str) -> Result<Vec<CandidateRecord>, RegistryError> {
        self.candidates_in(table_uuid, None).await
    }

    /// The table's candidates in one of `states` (every state: `None`), oldest first. A protection looks only at
    /// the candidates it may still stop, not at every inventory the table ever purged.
    ///
    /// # Errors
    /// As [`Registry::candidates`].
    pub async fn candidates_in(
        &self,
        table_uuid: &str,
        states: Option<&[State]>,
    ) -> Result<Vec<CandidateRecord>, RegistryError> {
        const OP: &str = "candidates";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        // One snapshot: each record is read in several statements.
        let mut tx = self.read_snapshot(OP).await?;
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT candidate_id, state FROM candidates WHERE table_uuid = $1 ORDER BY created_at, candidate_id",
        )
        .bind(&table_uuid)
        .fetch_all(&mut *tx)
        .await
        .map_err(query(OP))?;
        let ids: Vec<String> = rows
            .into_iter()
            .filter(|(_, state)| states.is_none_or(|want| want.iter().any(|w| w.as_str() == state)))
            .map(|(id, _)| id)
            .collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in &ids {
            out.push(require_candidate(&mut tx, id, OP).await?);
        }
        tx.rollback().await.map_err(query(OP))?;
        Ok(out)
    }

    /// Moves a candidate (and its objects not yet past it) to `to`, if the move is legal from its current
    /// state; optionally stores new quarantine details and a new world stamp. An approved candidate sent back to
    /// `PROTECTED` or `QUARANTINED` leaves every object whose delete intent has no recorded answer in
    /// `DELETE_UNKNOWN` (the delete may have happened). A move to `PROTECTED` of a
    /// candidate already `PROTECTED` is a no-op (nothing written, no event): protecting is the safe direction, and
    /// two actors may decide it at once (a `lease add` covering the candidate while its purge finds a ref on it).
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for an illegal transition (naming both states); [`RegistryError::NotFound`].
    pub async fn candidate_transition(
        &self,
        candidate_id: &str,
        to: State,
        reason: &str,
        quarantine: Option<&serde_json::Value>,
        stamp: Option<&WorldStamp>,
        now: DateTime<Utc>,
    ) -> Result<CandidateRecord, RegistryError> {
        self.candidate_move(candidate_id, to, reason, quarantine, stamp, now)
            .await?;
        self.candidate(candidate_id).await
    }

    /// The objects of a candidate still `DELETE_APPROVED` whose delete intent has no recorded answer (a run
    /// stopped between sending the delete and recording what came back): whether they are gone is unknown.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn in_flight_deletes(&self, candidate_id: &str) -> Result<Vec<String>, RegistryError> {
        const OP: &str = "in_flight_deletes";
        let mut tx = self.read_snapshot(OP).await?;
        let out = in_flight_deletes(&mut tx, candidate_id).await.map_err(query(OP))?;
        tx.rollback().await.map_err(query(OP))?;
        Ok(out)
    }

    /// Writes `quarantine`'s fields into the quarantine record of a candidate (others it holds stay; `taking_out`
    /// and `uncertain` go unless `quarantine` sets them), leaving its state as it is: an orphan quarantine records
    /// itself before its files leave the table, and what happened to each after — facts, whatever a hold or writer
    /// made of the candidate meanwhile. Returns the record.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Query`].
    pub async fn candidate_quarantine_update(
        &self,
        candidate_id: &str,
        quarantine: &serde_json::Value,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<CandidateRecord, RegistryError> {
        const OP: &str = "candidate_quarantine_update";
        let mut change = self.change(OP).await?;
        let rec = require_candidate(&mut change.tx, candidate_id, OP).await?;
        // Merged into what is recorded: what others added meanwhile (a rebase, a release) stays; the take-out
        // marks go unless the new record sets them.
        let mut merged = rec.quarantine.clone().unwrap_or_else(|| serde_json::json!({}));
        if let (Some(m), Some(new)) = (merged.as_object_mut(), quarantine.as_object()) {
            m.remove("taking_out");
            m.remove("uncertain");
            for (k, v) in new {
                m.insert(k.clone(), v.clone());
            }
        }
        sqlx::query("UPDATE candidates SET quarantine_json = $1, updated_at = $2 WHERE candidate_id = $3")
            .bind(merged.to_string())
            .bind(fmt_time(now))
            .bind(candidate_id)
            .execute(&mut *change.tx)
            .await
            .map_err(query(OP))?;
        let detail =
            serde_json::json!({"candidate_id": candidate_id, "state": rec.state, "quarantine_updated": reason});
        let table = rec.table_uuid.clone();
        change
            .commit(now, EventKind::CandidateState, Some(&table), &detail)
            .await?;
        self.candidate(candidate_id).await
    }

    /// Records in a candidate's quarantine record (`accepted_evidence`, a list) a drill report a purge of it
    /// accepted — its acceptance's, or a resume's newer one — unless the list already names the same report
    /// (`uri` and `sha256` equal). `evidence` is an object with at least `uri` and `sha256`. The purge summary
    /// signs the list. Reads and writes the quarantine record only (a million-object candidate's record is
    /// hundreds of MB, #24). Returns whether it was added.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Invalid`] for an `evidence` without `uri` or `sha256`, or a
    /// stored quarantine record that is not a JSON object; [`RegistryError::Query`].
    pub async fn candidate_evidence_accepted(
        &self,
        candidate_id: &str,
        evidence: &serde_json::Value,
        now: DateTime<Utc>,
    ) -> Result<bool, RegistryError> {
        const OP: &str = "candidate_evidence_accepted";
        let key = |e: &serde_json::Value| {
            (
                e["uri"].as_str().map(str::to_owned),
                e["sha256"].as_str().map(str::to_owned),
            )
        };
        let (Some(uri), Some(sha256)) = key(evidence) else {
            return Err(RegistryError::Invalid {
                field: "accepted_evidence",
                reason: format!(
                    "the evidence accepted for candidate {candidate_id} names no uri and sha256: {evidence}"
                ),
            });
        };
        let mut change = self.change(OP).await?;
        let row: Option<(String, String, Option<String>)> =
            sqlx::query_as("SELECT state, table_uuid, quarantine_json FROM candidates WHERE candidate_id = $1")
                .bind(candidate_id)
                .fetch_optional(&mut *change.tx)
                .await
                .map_err(query(OP))?;
        let Some((state, table, quarantine)) = row else {
            return Err(RegistryError::NotFound {
                what: "candidate",
                id: candidate_id.to_owned(),
            });
        };
        let mut q: serde_json::Value = match quarantine {
            None => serde_json::json!({}),
            Some(text) => serde_json::from_str(&text).map_err(|e| RegistryError::Invalid {
                field: "quarantine_json",
                reason: format!("candidate {candidate_id}'s quarantine record is not JSON: {e}"),
            })?,
        };
        let Some(obj) = q.as_object_mut() else {
            return Err(RegistryError::Invalid {
                field: "quarantine_json",
                reason: format!("candidate {candidate_id}'s quarantine record is not a JSON object"),
            });
        };
        let list = obj
            .entry("accepted_evidence")
            .or_insert_with(|| serde_json::Value::Array(Vec::new()));
        let Some(list) = list.as_array_mut() else {
            return Err(RegistryError::Invalid {
                field: "quarantine_json",
                reason: format!("candidate {candidate_id}'s quarantine record's accepted_evidence is not a list"),
            });
        };
        if list.iter().any(|e| key(e) == (Some(uri.clone()), Some(sha256.clone()))) {
            // Dropping the change rolls it back, the generation bump included.
            return Ok(false);
        }
        list.push(evidence.clone());
        sqlx::query("UPDATE candidates SET quarantine_json = $1, updated_at = $2 WHERE candidate_id = $3")
            .bind(q.to_string())
            .bind(fmt_time(now))
            .bind(candidate_id)
            .execute(&mut *change.tx)
            .await
            .map_err(query(OP))?;
        let detail = serde_json::json!({"candidate_id": candidate_id, "state": state, "evidence_accepted": evidence});
        change
            .commit(now, EventKind::CandidateState, Some(&table), &detail)
            .await?;
        Ok(true)
    }

    /// [`Registry::candidate_transition`] without reading the record back: the state and table are all it reads
    /// (a million-object candidate's record is hundreds of MB as JSON, #24).
    ///
    /// # Errors
    /// As [`Registry::candidate_transition`].
    pub async fn candidate_move(
        &self,
        candidate_id: &str,
        to: State,
        reason: &str,
        quarantine: Option<&serde_json::Value>,
        stamp: Option<&WorldStamp>,
        now: DateTime<Utc>,
    ) -> Result<(), RegistryError> {
        let change = self.change("candidate_transition").await?;
        move_candidate(change, candidate_id, to, reason, quarantine, stamp, now).await
    }

    /// Rebases a quarantined candidate onto a later table generation, in one write transaction: only while it is
    /// `QUARANTINED` or `RESTORE_VERIFIED` (or `DELETE_APPROVED` with no object deleted yet, by the run `run_id`
    /// that holds its claim: the purge's catalog commit lost a race) and its stamp is still `from` (another purge
    /// may have rebased it first: then nothing is written and `false` comes back). An approved candidate is the
    /// run's that executes it, with its own copy of the inventory and of the stamp its batches judge from: a caller
    /// that read the candidate before another run's acceptance (`run_id` `None`, or not the holder's) rewrites
    /// nothing under that run and gets `false` too. The candidate's snapshots and inventory become
    /// `candidate`, its stamp `to`; each object in `released` leaves it as `PROTECTED`; `record` (from/to
    /// generation, what was released and why) is appended to the quarantine's `rebases` and to the event log.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Invalid`] for a candidate in another state;
    /// [`RegistryError::Query`].
    #[allow(clippy::too_many_arguments)]
    pub async fn candidate_rebase(
        &self,
        candidate_id: &str,
        from: &WorldStamp,
        to: &WorldStamp,
        candidate: &impl Serialize,
        released: &[String],
        record: &serde_json::Value,
        run_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool, RegistryError> {
        const OP: &str = "candidate_rebase";
        let mut change = self.change(OP).await?;
        let rec = require_candidate(&mut change.tx, candidate_id, OP).await?;
        // An approved candidate is rebased only before its first delete (its catalog commit lost a race).
        let untouched: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM object_states WHERE candidate_id = $1 AND state IN ('DELETED', 'VERIFIED', 'DELETE_UNKNOWN')",
        )
        .bind(candidate_id)
        .fetch_one(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        // A delete intent with no answer recorded counts as touched: the object may be gone.
        let approved_untouched = rec.state == State::DeleteApproved
            && untouched == 0
            && in_flight_deletes(&mut change.tx, candidate_id)
                .await
                .map_err(query(OP))?
                .is_empty();
        if !matches!(rec.state, State::Quarantined | State::RestoreVerified) && !approved_untouched {
            return Err(RegistryError::Invalid {
                field: "state",
                reason: format!(
                    "candidate {candidate_id} is {}: only a quarantined candidate, or an approved one before its first \
                     delete, is rebased",
                    rec.state
                ),
            });
        }
        if rec.state == State::DeleteApproved {
            let holder: Option<String> = sqlx::query_scalar("SELECT run_id FROM purge_runs WHERE candidate_id = $1")
                .bind(candidate_id)
                .fetch_optional(&mut *change.tx)
                .await
                .map_err(query(OP))?;
            if run_id.is_none() || holder.as_deref() != run_id {
                return Ok(false);
            }
        }
        if rec.stamp != *from {
            return Ok(false);
        }
        let mut quarantine = rec.quarantine.clone().unwrap_or_else(|| serde_json::json!({}));
        if let Some(q) = quarantine.as_object_mut() {
            let list = q.entry("rebases").or_insert_with(|| serde_json::json!([]));
            if let Some(a) = list.as_array_mut() {
                a.push(record.clone());
            }
        }
        let text = serde_json::to_string(candidate).map_err(|e| query(OP)(sqlx::Error::Encode(Box::new(e))))?;
        let inline = store_candidate_text(&mut change.tx, candidate_id, text)
            .await
            .map_err(query(OP))?;
        sqlx::query(
            "UPDATE candidates SET candidate_json = $1, stamp_json = $2, quarantine_json = $3, reason = $4, \
             updated_at = $5 WHERE candidate_id = $6",
        )
        .bind(inline)
        .bind(serde_json::to_string(to).unwrap_or_default())
        .bind(quarantine.to_string())
        .bind("rebased onto a later table generation")
        .bind(fmt_time(now))
        .bind(candidate_id)
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        move_objects(
            &mut change.tx,
            candidate_id,
            released,
            &[State::Quarantined, State::RestoreVerified, State::DeleteApproved],
            State::Protected,
            now,
        )
        .await
        .map_err(query(OP))?;
        let detail = serde_json::json!({"candidate_id": candidate_id, "rebase": record});
        let table = rec.table_uuid.clone();
        change
            .commit(now, EventKind::CandidateRebased, Some(&table), &detail)
            .await?;
        Ok(true)
    }

    /// What would refuse the candidate's acceptance now whatever its world stamp (the stamp checks aside): its
    /// state, a stopped deleter, a report-only stage, a quarantine extension, unreconciled unknowns. A dry-run purge
    /// that would first rebase the candidate reports these with what the rebase would do. Writes nothing.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Query`].
    pub async fn acceptance_standing(
        &self,
        candidate_id: &str,
        max_unknowns: u32,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, RegistryError> {
        const OP: &str = "acceptance_standing";
        let mut tx = self.read_snapshot(OP).await?;
        let rec = require_candidate(&mut tx, candidate_id, OP).await?;
        let reasons = standing_refusals(&mut tx, &rec, max_unknowns, now).await?;
        tx.rollback().await.map_err(query(OP))?;
        Ok(reasons)
    }

    /// How many objects of the table's candidates are `DELETE_UNKNOWN`, whatever their candidate's state: what the
    /// policy's `maxUnreconciledUnknowns` limits, at an acceptance and at a resumed purge.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`].
    pub async fn table_unknowns(&self, table_uuid: &str) -> Result<i64, RegistryError> {
        let table_uuid = canonical_table_uuid(table_uuid)?;
        self.read("table_unknowns", async |conn| {
            super::base::read_table_unknowns(conn, &table_uuid).await
        })
        .await
    }

    /// The acceptance point: in one write transaction, checks the candidate's state, the deleter switch, the
    /// unreconciled-unknowns limit, and compares the recorded world stamp with `current_table` (table
    /// generation and protected-ref root, read by the caller from the catalog) and with the registry's own
    /// lease watermark and hold generation read inside the transaction. On success the candidate moves to
    /// `DELETE_APPROVED`; on any mismatch the refusal and every reason are recorded and returned. With
    /// `dry_run` the same checks run and nothing is written.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Query`].
    #[allow(clippy::too_many_arguments)]
    pub async fn candidate_accept(
        &self,
        candidate_id: &str,
        current_table: &WorldStamp,
        location: &TableLocation,
        max_unknowns: u32,
        extra_refusals: Vec<String>,
        dry_run: bool,
        now: DateTime<Utc>,
    ) -> Result<Acceptance, RegistryError> {
        const OP: &str = "candidate_accept";
        let mut change = self.change(OP).await?;
        let rec = require_candidate(&mut change.tx, candidate_id, OP).await?;
        let mut reasons = extra_refusals;
        reasons.extend(standing_refusals(&mut change.tx, &rec, max_unknowns, now).await?);
        // Whether anything but the compare-and-set below refuses it.
        let others = reasons.len();
        let watermark = read_lease_watermark(&mut change.tx, &rec.table_uuid)
            .await
            .map_err(query(OP))?;
        let holds = read_hold_generation(&mut change.tx, &rec.table_uuid)
            .await
            .map_err(query(OP))?;
        let protections = read_protection_generation(&mut change.tx, &rec.table_uuid)
            .await
            .map_err(query(OP))?;
        let rights = rollout::read_rights_in_force(&mut change.tx, &rec.table_uuid)
            .await
            .map_err(query(OP))?;
        let s = &rec.stamp;
        let mut covered = false;
        if (s.metadata_location != current_table.metadata_location
            || s.metadata_blake3 != current_table.metadata_blake3)
            && !crate::safety::weakened(crate::safety::Check::TableGenerationCas)
        {
            reasons.push(format!(
                "the table changed: generation {} (blake3 {}) is now {} (blake3 {})",
                s.metadata_location, s.metadata_blake3, current_table.metadata_location, current_table.metadata_blake3
            ));
        }
        if s.protected_ref_root != current_table.protected_ref_root {
            reasons.push(format!(
                "the refs changed: protected-ref root {} is now {}",
                s.protected_ref_root, current_table.protected_ref_root
            ));
        }
        if s.lease_watermark != watermark.counter && !crate::safety::weakened(crate::safety::Check::LeaseWatermarkCas) {
            reasons.push(format!(
                "leases changed: lease watermark {} is now {}",
                s.lease_watermark, watermark.counter
            ));
        }
        if s.hold_generation != holds && !crate::safety::weakened(crate::safety::Check::HoldGenerationCas) {
            reasons.push(format!(
                "holds changed: hold generation {} is now {holds}",
                s.hold_generation
            ));
        }
        // The deletion rights it was judged with: a governance decision that withdrew (or changed) one since may
        // have taken away what made part of it deletable (a right lifts `minSnapshotAge`). Only a re-plan can tell,
        // so this refuses the try as a compare-and-set does, and the next try's rebase re-plans with the rights in
        // force (a decision that changes nothing for the candidate then refuses nothing).
        if s.deletion_rights != rights.digest {
            let shown = |d: &str| {
                if d.is_empty() {
                    "(none)".to_owned()
                } else {
                    d.to_owned()
                }
            };
            reasons.push(format!(
                "the deletion rights changed: governance decision {} is in force now (rights digest {} is now {}); \
                 the candidate is re-planned with the rights in force",
                rights.version.map_or_else(|| "(none)".to_owned(), |v| format!("v{v}")),
                shown(&s.deletion_rights),
                shown(&rights.digest)
            ));
        }
        // DR checkpoints and writers are related to the candidate, not compared as a counter: a writer begins with
        // every job on a live table, and one elsewhere must not refuse every purge (leases and holds, above, are
        // compared as counters).
        if s.protection_generation != protections {
            let ids: Vec<i64> = rec.candidate["snapshot_ids"]
                .as_array()
                .map(|a| a.iter().filter_map(serde_json::Value::as_i64).collect())
                .unwrap_or_default();
            let paths: Vec<&str> = rec.objects.iter().map(|o| o.path.as_str()).collect();
            let named = covering_new_protections(
                &mut change.tx,
                &rec.table_uuid,
                s.protection_generation,
                &ids,
                &paths,
                location,
            )
            .await
            .map_err(query(OP))?;
            if !named.is_empty() {
                covered = true;
                reasons.push(format!(
                    "a DR checkpoint or writer that covers the candidate came since its stamp (protection generation \
                     {} is now {protections}): {}",
                    s.protection_generation,
                    named.join("; ")
                ));
            }
        }
        let table = rec.table_uuid.clone();
        let refusal = |reasons: Vec<String>| {
            if others == 0 && !covered {
                Acceptance::Moved(reasons)
            } else {
                Acceptance::Refused(reasons)
            }
        };
        if dry_run {
            // Dropping the transaction rolls it back: a dry run changes nothing.
            return Ok(if reasons.is_empty() {
                Acceptance::Approved
            } else {
                refusal(reasons)
            });
        }
        if reasons.is_empty() {
            sqlx::query("UPDATE candidates SET state = $1, reason = $2, updated_at = $3 WHERE candidate_id = $4")
                .bind(State::DeleteApproved.as_str())
                .bind("acceptance point passed")
                .bind(fmt_time(now))
                .bind(candidate_id)
                .execute(&mut *change.tx)
                .await
                .map_err(query(OP))?;
            sqlx::query("UPDATE object_states SET state = $1, updated_at = $2 WHERE candidate_id = $3 AND state IN ('QUARANTINED', 'RESTORE_VERIFIED')")
                .bind(State::DeleteApproved.as_str())
                .bind(fmt_time(now))
                .bind(candidate_id)
                .execute(&mut *change.tx)
                .await
                .map_err(query(OP))?;
            let detail =
                serde_json::json!({"candidate_id": candidate_id, "from": rec.state, "to": State::DeleteApproved});
            change
                .commit(now, EventKind::CandidateState, Some(&table), &detail)
                .await?;
            Ok(Acceptance::Approved)
        } else {
            let detail = serde_json::json!({"candidate_id": candidate_id, "reasons": reasons});
            change
                .commit(now, EventKind::PurgeRefused, Some(&table), &detail)
                .await?;
            Ok(refusal(reasons))
        }
    }

    /// Extends a candidate's quarantine: no purge before `max(now, the current extension) + by`. Only a
    /// candidate not yet approved for deletion (`QUARANTINED` or `RESTORE_VERIFIED`) can be extended.
    ///
    /// With `ends` (when the held files' storage ends their hold, e.g. a bucket lifecycle rule), an extension
    /// past it is not written: `Ok(Err(not_before))` names the time it would have set. The bound is checked in the
    /// write transaction, against the extension in force there, so two extensions at once cannot add up past it.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Invalid`] for a candidate in another state, a duration not
    /// above zero or an empty reason; [`RegistryError::Query`].
    pub async fn quarantine_extend(
        &self,
        candidate_id: &str,
        by: chrono::Duration,
        reason: &str,
        now: DateTime<Utc>,
        ends: Option<DateTime<Utc>>,
    ) -> Result<std::result::Result<QuarantineExtension, DateTime<Utc>>, RegistryError> {
        const OP: &str = "quarantine_extend";
        require_text("reason", reason)?;
        if by <= chrono::Duration::zero() {
            return Err(RegistryError::Invalid {
                field: "by",
                reason: "must be greater than zero".into(),
            });
        }
        let mut change = self.change(OP).await?;
        let rec = require_candidate(&mut change.tx, candidate_id, OP).await?;
        if !matches!(rec.state, State::Quarantined | State::RestoreVerified) {
            return Err(RegistryError::Invalid {
                field: "candidate",
                reason: format!(
                    "{candidate_id} is {}; only a QUARANTINED or RESTORE_VERIFIED candidate can be extended",
                    rec.state
                ),
            });
        }
        let current = read_not_before(&mut change.tx, candidate_id).await.map_err(query(OP))?;
        // Checked: extensions add up, and a time past chrono's range would panic in `+`.
        let Some(not_before) = current.map_or(now, |c| c.max(now)).checked_add_signed(by) else {
            return Err(RegistryError::Invalid {
                field: "by",
                reason: format!(
                    "{candidate_id}: extended by {by} its quarantine would end past the last time there is"
                ),
            });
        };
        if ends.is_some_and(|e| not_before > e) {
            return Ok(Err(not_before));
        }
        sqlx::query(
            "INSERT INTO quarantine_extensions (generation, candidate_id, not_before, reason, extended_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(change.generation)
        .bind(candidate_id)
        .bind(fmt_time(not_before))
        .bind(reason)
        .bind(fmt_time(now))
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        let ext = QuarantineExtension {
            generation: change.generation,
            candidate_id: candidate_id.to_owned(),
            not_before,
            reason: reason.to_owned(),
            extended_at: now,
        };
        let table = rec.table_uuid.clone();
        change
            .commit(now, EventKind::QuarantineExtended, Some(&table), &ext)
            .await?;
        Ok(Ok(ext))
    }

    /// Releases a candidate (`quarantine release`): in one write transaction, checks that it may move to
    /// `RELEASED` (from `QUARANTINED`, `RESTORE_VERIFIED` or `PROTECTED`) and that none of its objects is
    /// approved for deletion, deleted or uncertain, then moves it and all its objects to `RELEASED`, keeps
    /// `release` (the operator's reason, the time, the tags the caller removed) under the candidate's
    /// quarantine details and records the change as an event. `Ok(Err(why))` is a refusal naming the state.
    ///
    /// It does not touch the catalog: the caller removes the tags first.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Invalid`] for an empty reason; [`RegistryError::Query`].
    pub async fn candidate_release(
        &self,
        candidate_id: &str,
        reason: &str,
        release: &serde_json::Value,
        now: DateTime<Utc>,
    ) -> Result<Result<CandidateRecord, String>, RegistryError> {
        let change = self.change("candidate_release").await?;
        if let Err(why) = release_candidate(change, candidate_id, reason, release, now).await? {
            return Ok(Err(why));
        }
        self.candidate(candidate_id).await.map(Ok)
    }

    /// The latest "no purge before" of a candidate's extensions, if it was ever extended.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn quarantine_not_before(&self, candidate_id: &str) -> Result<Option<DateTime<Utc>>, RegistryError> {
        self.read("quarantine_not_before", async |conn| {
            read_not_before(conn, candidate_id).await
        })
        .await
    }
}

/// What refuses an acceptance whatever the world stamp says: the candidate's state, a stopped deleter, a
/// report-only stage, a quarantine extension not yet passed, and unreconciled unknowns beyond the policy's limit.
async fn standing_refusals(
    tx: &mut AnyConnection,
    rec: &CandidateRecord,
    max_unknowns: u32,
    now: DateTime<Utc>,
) -> Result<Vec<String>, RegistryError> {
    const OP: &str = "candidate_accept";
    let candidate_id = rec.candidate_id.as_str();
    let mut reasons = Vec::new();
    if !matches!(rec.state, State::Quarantined | State::RestoreVerified) {
        reasons.push(format!(
            "candidate is {}, not QUARANTINED or RESTORE_VERIFIED",
            rec.state
        ));
    }
    if rec.quarantine.as_ref().is_some_and(|q| q["taking_out"] == true) {
        reasons.push(
            "its orphan quarantine did not finish taking the files out of the table (the run died in it, or whether \
             a file left could not be told): which files are held is not recorded; `lakedrill quarantine release` \
             puts every file back, then plan again"
                .to_owned(),
        );
    }
    let switch = read_deleter_switch(&mut *tx).await.map_err(query(OP))?;
    if switch.stopped {
        reasons.push(format!("the deleter is stopped ({})", switch.reason));
    }
    // Read in the acceptance transaction, so that a stage change or an extension racing the purge wins.
    let stage = rollout::read_stage(&mut *tx, &rec.table_uuid)
        .await
        .map_err(query(OP))?;
    if stage.stage == RolloutStage::ReportOnly {
        reasons.push(format!(
            "the table is in rollout stage report-only ({}); `lakedrill rollout set` moves it to a stage that deletes",
            if stage.changed_at.is_some() {
                stage.reason.as_str()
            } else {
                "the default for every table"
            }
        ));
    }
    if let Some(not_before) = read_not_before(&mut *tx, candidate_id).await.map_err(query(OP))?
        && now < not_before
    {
        reasons.push(format!(
            "the quarantine was extended: no purge before {}",
            not_before.to_rfc3339_opts(SecondsFormat::Secs, true)
        ));
    }
    let unknowns = super::base::read_table_unknowns(&mut *tx, &rec.table_uuid)
        .await
        .map_err(query(OP))?;
    if unknowns > i64::from(max_unknowns) {
        reasons.push(format!(
            "gate unknowns_reconciled FAIL: {unknowns} DELETE_UNKNOWN objects of this table await reconciliation \
             (the policy's maxUnreconciledUnknowns is {max_unknowns})"
        ));
    }
    Ok(reasons)
}

/// The write of [`Registry::candidate_release`] inside `change` (committed here; a refusal rolls it back): the
/// caller may have checked something else in it first ([`Registry::candidate_release_claimed`] checks the run's
/// claim). `Ok(Err(why))` is a refusal naming the state.
pub(super) async fn release_candidate(
    mut change: Change,
    candidate_id: &str,
    reason: &str,
    release: &serde_json::Value,
    now: DateTime<Utc>,
) -> Result<Result<(), String>, RegistryError> {
    const OP: &str = "candidate_release";
    require_text("reason", reason)?;
    let current = require_candidate(&mut change.tx, candidate_id, OP).await?;
    if let Some(why) = current.state.release_refusal(candidate_id) {
        return Ok(Err(why));
    }
    let past: Vec<(String, i64)> = sqlx::query(
        "SELECT state, COUNT(*) AS n FROM object_states WHERE candidate_id = $1 \
         AND state IN ('DELETE_APPROVED', 'DELETED', 'VERIFIED', 'DELETE_UNKNOWN') GROUP BY state ORDER BY state",
    )
    .bind(candidate_id)
    .fetch_all(&mut *change.tx)
    .await
    .map_err(query(OP))?
    .iter()
    .map(|r| Ok((r.try_get::<String, _>("state")?, r.try_get::<i64, _>("n")?)))
    .collect::<Result<_, sqlx::Error>>()
    .map_err(query(OP))?;
    if !past.is_empty() {
        let counts: Vec<String> = past.iter().map(|(s, n)| format!("{n} {s}")).collect();
        return Ok(Err(format!(
            "{candidate_id} is {} but {} of its objects went through the deleter: it cannot be released",
            current.state,
            counts.join(", ")
        )));
    }
    let mut quarantine = current.quarantine.clone().unwrap_or_else(|| serde_json::json!({}));
    if let Some(q) = quarantine.as_object_mut() {
        q.insert("release".into(), release.clone());
    }
    sqlx::query(
        "UPDATE candidates SET state = $1, reason = $2, updated_at = $3, quarantine_json = $4 WHERE candidate_id = $5",
    )
    .bind(State::Released.as_str())
    .bind(reason)
    .bind(fmt_time(now))
    .bind(quarantine.to_string())
    .bind(candidate_id)
    .execute(&mut *change.tx)
    .await
    .map_err(query(OP))?;
    sqlx::query("UPDATE object_states SET state = $1, updated_at = $2 WHERE candidate_id = $3")
        .bind(State::Released.as_str())
        .bind(fmt_time(now))
        .bind(candidate_id)
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
    let detail = serde_json::json!({
        "candidate_id": candidate_id, "from": current.state, "to": State::Released, "reason": reason,
        "release": release,
    });
    let table = current.table_uuid.clone();
    change
        .commit(now, EventKind::CandidateState, Some(&table), &detail)
        .await?;
    Ok(Ok(()))
}

/// The body of [`Registry::candidate_move`] in the write transaction `change` (begun by the caller, which may
/// have checked something else in it first: [`Registry::candidate_move_claimed`] checks the run's claim).
pub(super) async fn move_candidate(
    mut change: Change,
    candidate_id: &str,
    to: State,
    reason: &str,
    quarantine: Option<&serde_json::Value>,
    stamp: Option<&WorldStamp>,
    now: DateTime<Utc>,
) -> Result<(), RegistryError> {
    let op = change.op;
    let row: Option<(String, String)> =
        sqlx::query_as("SELECT state, table_uuid FROM candidates WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_optional(&mut *change.tx)
            .await
            .map_err(query(op))?;
    let Some((state, table)) = row else {
        return Err(RegistryError::NotFound {
            what: "candidate",
            id: candidate_id.to_owned(),
        });
    };
    let current_state = State::parse(&state).ok_or_else(|| RegistryError::Invalid {
        field: "state",
        reason: format!("candidate {candidate_id} has an unknown state {state:?}"),
    })?;
    if current_state == State::Protected && to == State::Protected {
        // Dropping the change rolls it back, the generation bump included.
        return Ok(());
    }
    if !current_state.can_move_to(to) {
        return Err(RegistryError::Invalid {
            field: "state",
            reason: format!("candidate {candidate_id} cannot move from {current_state} to {to}"),
        });
    }
    sqlx::query(
        "UPDATE candidates SET state = $1, reason = $2, updated_at = $3, \
         quarantine_json = COALESCE($4, quarantine_json), stamp_json = COALESCE($5, stamp_json) WHERE candidate_id = $6",
    )
    .bind(to.as_str())
    .bind(reason)
    .bind(fmt_time(now))
    .bind(quarantine.map(ToString::to_string))
    .bind(stamp.map(|s| serde_json::to_string(s).unwrap_or_default()))
    .bind(candidate_id)
    .execute(&mut *change.tx)
    .await
    .map_err(query(op))?;
    // An approved candidate sent back (to PROTECTED, or to QUARANTINED for re-planning) may have deletes in
    // flight: an object whose delete intent has no answer recorded is DELETE_UNKNOWN, never kept as if
    // untouched (`reconcile` re-checks it).
    let in_flight = if current_state == State::DeleteApproved && matches!(to, State::Protected | State::Quarantined) {
        in_flight_deletes(&mut change.tx, candidate_id)
            .await
            .map_err(query(op))?
    } else {
        Vec::new()
    };
    move_objects(
        &mut change.tx,
        candidate_id,
        &in_flight,
        &[State::DeleteApproved],
        State::DeleteUnknown,
        now,
    )
    .await
    .map_err(query(op))?;
    // Objects follow the candidate through the pre-deletion states. Not out of VERIFIED (`undelete`): an object
    // is deleted until the undelete brought it back and verified it, which moves it on its own; one still gone
    // stays VERIFIED under a PROTECTED candidate.
    if current_state != State::Verified
        && matches!(
            to,
            State::Quarantined | State::RestoreVerified | State::DeleteApproved | State::Protected
        )
    {
        sqlx::query("UPDATE object_states SET state = $1, updated_at = $2 WHERE candidate_id = $3 AND state = $4")
            .bind(to.as_str())
            .bind(fmt_time(now))
            .bind(candidate_id)
            .bind(current_state.as_str())
            .execute(&mut *change.tx)
            .await
            .map_err(query(op))?;
    }
    let mut detail =
        serde_json::json!({"candidate_id": candidate_id, "from": current_state, "to": to, "reason": reason});
    if !in_flight.is_empty() {
        detail["in_flight_to_delete_unknown"] = serde_json::json!(in_flight);
    }
    change
        .commit(now, EventKind::CandidateState, Some(&table), &detail)
        .await
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::registry::HoldScope;
    use crate::registry::PurgeRun;
    use crate::registry::tests::{Backend, fresh_on, loc, on_both_backends, stamp, t};

    on_both_backends!(
        the_state_machine_refuses_illegal_moves_and_acceptance_checks_the_world,
        a_quarantine_extension_refuses_acceptance_until_it_passes,
        a_release_frees_the_candidate_and_its_objects_only_before_acceptance,
        protecting_a_protected_candidate_again_is_a_no_op,
        a_candidate_over_the_part_size_is_stored_in_parts_and_read_back_whole,
        acceptance_relates_new_checkpoints_and_writers_to_the_candidate,
        an_unanswered_delete_intent_is_unknown_when_the_candidate_is_sent_back,
        an_approved_candidate_is_rebased_only_by_the_run_holding_its_claim,
        accepted_evidence_is_appended_once_each_to_the_quarantine_record,
    );

    /// Each report a purge accepted is appended to the candidate's quarantine record once (by URI and SHA-256),
    /// after what the record held; an entry without both is refused, and an unknown candidate is not found.
    async fn accepted_evidence_is_appended_once_each_to_the_quarantine_record(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = t(0);
        let table = "7f31a2b4-09c1-4d5e-9f00-00000000000a";
        reg.candidate_record(table, "c-e", &serde_json::json!({}), &stamp(), &["a".into()], now)
            .await
            .unwrap();
        let q = serde_json::json!({"bundles": [{"uri": "file:///b/1"}]});
        reg.candidate_transition("c-e", State::Quarantined, "sealed", Some(&q), None, now)
            .await
            .unwrap();
        let first = serde_json::json!({"uri": "file:///r/1.dsse.json", "sha256": "11", "on": "acceptance"});
        let resumed = serde_json::json!({"uri": "file:///r/2.dsse.json", "sha256": "22", "on": "resume"});
        assert!(reg.candidate_evidence_accepted("c-e", &first, now).await.unwrap());
        let generation = reg.generation().await.unwrap();
        assert!(!reg.candidate_evidence_accepted("c-e", &first, now).await.unwrap());
        assert_eq!(
            reg.generation().await.unwrap(),
            generation,
            "the same report again writes nothing"
        );
        assert!(reg.candidate_evidence_accepted("c-e", &resumed, now).await.unwrap());
        let rec = reg.candidate("c-e").await.unwrap();
        let q = rec.quarantine.unwrap();
        assert_eq!(q["accepted_evidence"], serde_json::json!([first, resumed]), "{q}");
        assert_eq!(
            q["bundles"][0]["uri"], "file:///b/1",
            "the rest of the record stays: {q}"
        );
        let r = reg
            .candidate_evidence_accepted("c-e", &serde_json::json!({"uri": "x"}), now)
            .await;
        assert!(matches!(r, Err(RegistryError::Invalid { .. })), "{r:?}");
        let r = reg.candidate_evidence_accepted("c-none", &first, now).await;
        assert!(matches!(r, Err(RegistryError::NotFound { .. })), "{r:?}");
    }

    /// A purge that read the candidate while it was quarantined, and rebases it after another run's acceptance, must
    /// not rewrite the inventory and stamp of the candidate that run executes: nothing is written and `false` comes
    /// back. The run holding the claim (its catalog commit lost a race) still rebases it.
    async fn an_approved_candidate_is_rebased_only_by_the_run_holding_its_claim(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = t(0);
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000009";
        let objects: Vec<String> = ["a", "b"].iter().map(|s| (*s).to_owned()).collect();
        reg.candidate_record(table, "c-r", &serde_json::json!({}), &stamp(), &objects, now)
            .await
            .unwrap();
        for to in [State::Quarantined, State::DeleteApproved] {
            reg.candidate_transition("c-r", to, "", None, None, now).await.unwrap();
        }
        let holder = PurgeRun {
            run_id: "run-a".into(),
            host: "h".into(),
            pid: 1,
            started_at: now,
            heartbeat_at: now,
        };
        reg.purge_claim("c-r", &holder, None).await.unwrap().unwrap();
        let mut later = stamp();
        later.lease_watermark = 7;
        let before = reg.candidate("c-r").await.unwrap();
        for caller in [None, Some("run-b")] {
            let r = reg
                .candidate_rebase(
                    "c-r",
                    &stamp(),
                    &later,
                    &serde_json::json!({}),
                    &["a".to_owned()],
                    &serde_json::json!({}),
                    caller,
                    now,
                )
                .await
                .unwrap();
            assert!(!r, "{caller:?} does not hold the claim");
            assert_eq!(reg.candidate("c-r").await.unwrap(), before, "{caller:?}");
        }
        let r = reg
            .candidate_rebase(
                "c-r",
                &stamp(),
                &later,
                &serde_json::json!({}),
                &["a".to_owned()],
                &serde_json::json!({}),
                Some("run-a"),
                now,
            )
            .await
            .unwrap();
        assert!(r, "the holder rebases it");
        assert_eq!(reg.candidate("c-r").await.unwrap().stamp, later);
    }

    /// An approved candidate protected while one object's delete intent has no answer: that object is
    /// DELETE_UNKNOWN, one whose intent was answered ("not deleted") and one never sent are PROTECTED, and no
    /// rebase is allowed while such an intent is open.
    async fn an_unanswered_delete_intent_is_unknown_when_the_candidate_is_sent_back(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = t(0);
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000009";
        let objects: Vec<String> = ["a", "b", "c"].iter().map(|s| (*s).to_owned()).collect();
        reg.candidate_record(table, "c-i", &serde_json::json!({}), &stamp(), &objects, now)
            .await
            .unwrap();
        for to in [State::Quarantined, State::DeleteApproved] {
            reg.candidate_transition("c-i", to, "", None, None, now).await.unwrap();
        }
        reg.receipt_add("c-i", "a", &serde_json::json!({"phase": "requested"}), now)
            .await
            .unwrap();
        reg.receipt_add("c-i", "b", &serde_json::json!({"phase": "requested"}), now)
            .await
            .unwrap();
        reg.receipt_add(
            "c-i",
            "b",
            &serde_json::json!({"phase": "confirmed", "provider_result": "not deleted"}),
            now,
        )
        .await
        .unwrap();
        assert_eq!(reg.in_flight_deletes("c-i").await.unwrap(), vec!["a".to_owned()]);
        let r = reg
            .candidate_rebase(
                "c-i",
                &stamp(),
                &stamp(),
                &serde_json::json!({}),
                &[],
                &serde_json::json!({}),
                None,
                now,
            )
            .await;
        assert!(matches!(r, Err(RegistryError::Invalid { .. })), "{r:?}");
        reg.candidate_transition("c-i", State::Protected, "hold h-1 covers it", None, None, now)
            .await
            .unwrap();
        let states: Vec<(String, State)> = reg
            .object_states("c-i")
            .await
            .unwrap()
            .into_iter()
            .map(|o| (o.path, o.state))
            .collect();
        assert_eq!(
            states,
            vec![
                ("a".to_owned(), State::DeleteUnknown),
                ("b".to_owned(), State::Protected),
                ("c".to_owned(), State::Protected),
            ]
        );
        assert!(reg.in_flight_deletes("c-i").await.unwrap().is_empty());
    }

    async fn acceptance_relates_new_checkpoints_and_writers_to_the_candidate(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000004";
        let now = t(0);
        let candidate = serde_json::json!({
            "kind": "expired-snapshots",
            "snapshot_ids": [7],
            "objects": [{"path": "data/a.parquet", "layer": "data", "size": 1}],
        });
        reg.candidate_record(table, "c-w", &candidate, &stamp(), &["data/a.parquet".into()], now)
            .await
            .unwrap();
        reg.candidate_transition("c-w", State::Quarantined, "sealed", None, None, now)
            .await
            .unwrap();
        reg.rollout_set(table, "db.t", &RolloutStage::Enabled, "test", "me", None, None, now)
            .await
            .unwrap()
            .unwrap();
        let accept = async |reg: &Registry| match reg
            .candidate_accept("c-w", &stamp(), &loc(), 0, vec![], true, now)
            .await
            .unwrap()
        {
            Acceptance::Approved => Ok(()),
            Acceptance::Refused(why) | Acceptance::Moved(why) => Err(why.join("; ")),
        };
        // A writer elsewhere (as a URI under the table), an ended writer over the candidate's file and a checkpoint
        // on another snapshot move the protection generation past the stamp's but cover nothing of the candidate.
        reg.writer_begin(table, "s3://b/t/data/staging/job-1", now)
            .await
            .unwrap();
        let w = reg.writer_begin(table, "data", now).await.unwrap();
        reg.writer_end(&w.writer_id, now).await.unwrap();
        reg.checkpoint_add(table, 8, now, now).await.unwrap();
        assert!(reg.protection_generation(table).await.unwrap() > stamp().protection_generation);
        accept(&reg).await.unwrap();
        // An open writer over it (as a URI) refuses, naming it; so does a checkpoint on its snapshot.
        let w = reg.writer_begin(table, "s3://b/t/data/", now).await.unwrap();
        let why = accept(&reg).await.unwrap_err();
        assert!(
            why.contains(&w.writer_id) && why.contains("covers the candidate"),
            "{why}"
        );
        reg.writer_end(&w.writer_id, now).await.unwrap();
        accept(&reg).await.unwrap();
        let c = reg.checkpoint_add(table, 7, now, now).await.unwrap();
        let why = accept(&reg).await.unwrap_err();
        assert!(why.contains(&c.checkpoint_id) && why.contains("snapshot 7"), "{why}");
    }

    async fn a_candidate_over_the_part_size_is_stored_in_parts_and_read_back_whole(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000002";
        // Two-byte characters throughout, so that the part boundaries fall inside characters and are moved.
        let long = |c: &str, n: usize| format!("data/{}", c.repeat(n));
        let objects = vec![
            serde_json::json!({"path": long("é", 1_500_001), "layer": "data", "size": 1}),
            serde_json::json!({"path": long("ж", 1_700_003), "layer": "data", "size": 2}),
        ];
        let candidate = serde_json::json!({"kind": "expired-snapshots", "objects": objects, "snapshot_ids": [7]});
        assert!(candidate.to_string().len() > CANDIDATE_PART_BYTES);
        let rec = reg
            .candidate_record(table, "c-big", &candidate, &stamp(), &["p".into()], t(0))
            .await
            .unwrap();
        assert_eq!(rec.candidate_json(), candidate);
        let mut conn = reg.pool.acquire().await.unwrap();
        let inline: String = sqlx::query_scalar("SELECT candidate_json FROM candidates WHERE candidate_id = 'c-big'")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        let parts: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM candidate_parts WHERE candidate_id = 'c-big'")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert!(inline.is_empty(), "the row holds none of it");
        assert_eq!(
            parts,
            2,
            "{} bytes in parts of {CANDIDATE_PART_BYTES}",
            candidate.to_string().len()
        );
        // Read again, alone and in the table's list: the same candidate.
        assert_eq!(reg.candidate("c-big").await.unwrap().objects, rec.objects);
        let listed = reg.candidates(table).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].candidate_json(), candidate);
        // Recorded again: the first record stands, its parts untouched.
        reg.candidate_record(table, "c-big", &serde_json::json!({}), &stamp(), &[], t(1))
            .await
            .unwrap();
        assert_eq!(reg.candidate("c-big").await.unwrap().candidate_json(), candidate);
        // Stored again short (a rebase that released most of it): inline, and the parts are gone.
        let inline = store_candidate_text(&mut conn, "c-big", "{}".into()).await.unwrap();
        assert_eq!(inline, "{}");
        let parts: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM candidate_parts WHERE candidate_id = 'c-big'")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(parts, 0);
        // An empty row without parts is an error naming the candidate, not an empty candidate.
        let err = candidate_text(&mut conn, "c-big", String::new()).await.unwrap_err();
        assert!(err.to_string().contains("c-big"), "{err}");
    }

    #[test]
    fn a_stored_candidate_reads_its_inventory_typed_and_writes_back_the_same_bytes() {
        let stored = serde_json::json!({
            "bytes": 30, "candidate_id": "c-1", "inventory_root": "ab", "kind": "expired-snapshots",
            "objects": [
                {"path": "data/a.parquet", "layer": "data", "size": 10},
                {"layer": "manifest", "path": "metadata/m.avro", "size": 20},
            ],
            "snapshot_ids": [1, 2],
        });
        let text = serde_json::to_string(&stored).unwrap();
        let parsed: StoredCandidate = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed.objects.len(), 2);
        assert_eq!(parsed.objects[1].path, "metadata/m.avro");
        assert!(
            parsed.rest.get("objects").is_none(),
            "the inventory is not kept as a value"
        );
        let rec = CandidateRecord {
            candidate_id: "c-1".into(),
            table_uuid: "u".into(),
            state: State::Quarantined,
            candidate: parsed.rest,
            objects: parsed.objects,
            stamp: stamp(),
            quarantine: None,
            reason: String::new(),
            created_at: t(0),
            updated_at: t(0),
        };
        // What the archive hashes: byte for byte the stored candidate as a JSON value writes it.
        assert_eq!(
            serde_json::to_string(&rec.full_candidate()).unwrap(),
            stored.to_string()
        );
        assert_eq!(rec.candidate_json(), stored);
        // `status` shows the record with its inventory in place.
        assert_eq!(serde_json::to_value(&rec).unwrap()["candidate"], stored);
        // No inventory at all (a key after "objects" only, and none before) still places it.
        let empty: StoredCandidate = serde_json::from_str(r#"{"snapshot_ids":[]}"#).unwrap();
        let rec = CandidateRecord {
            candidate: empty.rest,
            objects: empty.objects,
            ..rec
        };
        assert_eq!(
            serde_json::to_string(&rec.full_candidate()).unwrap(),
            r#"{"objects":[],"snapshot_ids":[]}"#
        );
    }

    #[test]
    fn released_is_reachable_only_before_the_acceptance_point_and_is_terminal() {
        for from in [State::Quarantined, State::RestoreVerified, State::Protected] {
            assert!(from.can_move_to(State::Released), "{from}");
            assert!(from.release_refusal("c-x").is_none(), "{from}");
        }
        for from in [
            State::Discovered,
            State::UnreferencedEligible,
            State::DeleteApproved,
            State::Deleted,
            State::Verified,
            State::DeleteUnknown,
            State::Released,
        ] {
            assert!(!from.can_move_to(State::Released), "{from}");
            let why = from.release_refusal("c-x").unwrap();
            assert!(why.contains(from.as_str()), "{why}");
        }
        assert_eq!(State::parse("RELEASED"), Some(State::Released));
        assert_eq!(
            serde_json::to_value(State::Released).unwrap(),
            serde_json::json!("RELEASED")
        );
        for to in [
            State::Quarantined,
            State::Protected,
            State::DeleteApproved,
            State::UnreferencedEligible,
        ] {
            assert!(!State::Released.can_move_to(to), "RELEASED → {to}");
        }
    }

    async fn the_state_machine_refuses_illegal_moves_and_acceptance_checks_the_world(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = t(0);
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000001";
        reg.rollout_set(table, "t", &RolloutStage::Test, "unit test", "tests", None, None, now)
            .await
            .unwrap()
            .unwrap();
        let a = reg
            .candidate_record(
                table,
                "c-a",
                &serde_json::json!({}),
                &stamp(),
                &["x".into(), "y".into()],
                now,
            )
            .await
            .unwrap();
        assert_eq!(a.state, State::UnreferencedEligible);
        // Not quarantined yet: no jump to DELETE_APPROVED, and acceptance refuses.
        assert!(
            reg.candidate_transition("c-a", State::DeleteApproved, "", None, None, now)
                .await
                .is_err()
        );
        let refused = reg
            .candidate_accept("c-a", &stamp(), &loc(), 0, vec![], false, now)
            .await
            .unwrap();
        assert!(
            matches!(refused, Acceptance::Refused(ref r) if r[0].contains("not QUARANTINED")),
            "{refused:?}"
        );
        reg.candidate_transition("c-a", State::Quarantined, "sealed", None, None, now)
            .await
            .unwrap();
        // A changed world is refused, reason by reason; a dry run writes nothing.
        let mut moved = stamp();
        moved.metadata_blake3 = "b2".into();
        moved.protected_ref_root = "r2".into();
        let r = reg
            .candidate_accept("c-a", &moved, &loc(), 0, vec![], false, now)
            .await
            .unwrap();
        assert!(matches!(r, Acceptance::Moved(ref v) if v.len() == 2), "{r:?}");
        reg.hold_set(table, HoldScope::Prefix("data/x".into()), "late", now)
            .await
            .unwrap();
        let r = reg
            .candidate_accept("c-a", &stamp(), &loc(), 0, vec![], false, now)
            .await
            .unwrap();
        assert!(
            matches!(r, Acceptance::Moved(ref v) if v.iter().any(|x| x.contains("holds changed"))),
            "{r:?}"
        );
        let mut held = stamp();
        held.hold_generation = 1;
        reg.candidate_transition("c-a", State::Quarantined, "re-stamped", None, Some(&held), now)
            .await
            .unwrap_err();
        // Unreconciled unknowns on another candidate of the table block new work beyond the limit.
        reg.candidate_record(table, "c-b", &serde_json::json!({}), &held, &["z".into()], now)
            .await
            .unwrap();
        reg.candidate_transition("c-b", State::Quarantined, "", None, None, now)
            .await
            .unwrap();
        assert_eq!(
            reg.candidate_accept("c-b", &held, &loc(), 0, vec![], true, now)
                .await
                .unwrap(),
            Acceptance::Approved
        );
        assert_eq!(
            reg.candidate("c-b").await.unwrap().state,
            State::Quarantined,
            "a dry run changes nothing"
        );
        assert_eq!(
            reg.candidate_accept("c-b", &held, &loc(), 0, vec![], false, now)
                .await
                .unwrap(),
            Acceptance::Approved
        );
        reg.object_transition("c-b", "z", State::DeleteUnknown, now)
            .await
            .unwrap();
        reg.candidate_record(table, "c-c", &serde_json::json!({}), &held, &["w".into()], now)
            .await
            .unwrap();
        reg.candidate_transition("c-c", State::Quarantined, "", None, None, now)
            .await
            .unwrap();
        let r = reg
            .candidate_accept("c-c", &held, &loc(), 0, vec![], false, now)
            .await
            .unwrap();
        assert!(
            matches!(r, Acceptance::Refused(ref v) if v.iter().any(|x| x.contains("DELETE_UNKNOWN"))),
            "{r:?}"
        );
        assert_eq!(
            reg.candidate_accept("c-c", &held, &loc(), 1, vec![], false, now)
                .await
                .unwrap(),
            Acceptance::Approved
        );
        // Receipts are write-once rows, numbered per object.
        assert_eq!(
            reg.receipt_add("c-b", "z", &serde_json::json!({"phase": "requested"}), now)
                .await
                .unwrap(),
            1
        );
        assert_eq!(
            reg.receipt_add("c-b", "z", &serde_json::json!({"phase": "confirmed"}), now)
                .await
                .unwrap(),
            2
        );
        assert_eq!(reg.receipts("c-b").await.unwrap().len(), 2);
        // Refusals are recorded as events.
        assert!(
            reg.events(table)
                .await
                .unwrap()
                .iter()
                .any(|e| e.kind == EventKind::PurgeRefused)
        );
    }

    async fn a_quarantine_extension_refuses_acceptance_until_it_passes(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = t(0);
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000004";
        reg.rollout_set(
            table,
            "t",
            &RolloutStage::Enabled,
            "unit test",
            "tests",
            None,
            None,
            now,
        )
        .await
        .unwrap()
        .unwrap();
        reg.candidate_record(table, "c-e", &serde_json::json!({}), &stamp(), &["x".into()], now)
            .await
            .unwrap();
        assert!(
            reg.quarantine_extend("c-e", chrono::Duration::hours(1), "early", now, None)
                .await
                .is_err()
        );
        reg.candidate_transition("c-e", State::Quarantined, "sealed", None, None, now)
            .await
            .unwrap();
        let e1 = reg
            .quarantine_extend("c-e", chrono::Duration::hours(1), "look", now, None)
            .await
            .unwrap()
            .unwrap();
        let e2 = reg
            .quarantine_extend("c-e", chrono::Duration::hours(2), "look more", now, None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(e2.not_before, e1.not_before + chrono::Duration::hours(2));
        // Bounded by when the hold ends: checked against the extension in force in the write transaction, so an
        // extension that fit the bound read before another one landed is not written.
        let ends = e2.not_before + chrono::Duration::hours(2);
        let past = reg
            .quarantine_extend("c-e", chrono::Duration::hours(3), "past the end", now, Some(ends))
            .await
            .unwrap();
        assert_eq!(past.unwrap_err(), e2.not_before + chrono::Duration::hours(3));
        assert_eq!(
            reg.quarantine_not_before("c-e").await.unwrap(),
            Some(e2.not_before),
            "nothing was written"
        );
        let within = reg
            .quarantine_extend("c-e", chrono::Duration::hours(2), "up to the end", now, Some(ends))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(within.not_before, ends);
        let r = reg
            .candidate_accept(
                "c-e",
                &stamp(),
                &loc(),
                0,
                vec![],
                true,
                now + chrono::Duration::hours(2),
            )
            .await
            .unwrap();
        assert!(
            matches!(r, Acceptance::Refused(ref v) if v[0].contains("extended")),
            "{r:?}"
        );
        assert_eq!(
            reg.candidate_accept("c-e", &stamp(), &loc(), 0, vec![], true, within.not_before)
                .await
                .unwrap(),
            Acceptance::Approved
        );
    }

    async fn a_release_frees_the_candidate_and_its_objects_only_before_acceptance(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = t(0);
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000005";
        reg.rollout_set(table, "t", &RolloutStage::Test, "unit test", "tests", None, None, now)
            .await
            .unwrap()
            .unwrap();
        reg.candidate_record(
            table,
            "c-r",
            &serde_json::json!({}),
            &stamp(),
            &["x".into(), "y".into()],
            now,
        )
        .await
        .unwrap();
        // Not quarantined: nothing to release.
        let r = reg
            .candidate_release("c-r", "why", &serde_json::json!({}), now)
            .await
            .unwrap();
        assert!(matches!(r, Err(ref w) if w.contains("UNREFERENCED_ELIGIBLE")), "{r:?}");
        assert!(
            reg.candidate_release("c-r", " ", &serde_json::json!({}), now)
                .await
                .is_err()
        );
        let q = serde_json::json!({"mode": "tag"});
        reg.candidate_transition("c-r", State::Quarantined, "sealed", Some(&q), None, now)
            .await
            .unwrap();
        let detail = serde_json::json!({"reason": "keep it", "tags_removed": ["quarantine/c-r"]});
        let rec = reg
            .candidate_release("c-r", "keep it", &detail, t(5))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(rec.state, State::Released);
        assert_eq!(rec.reason, "keep it");
        let kept = rec.quarantine.unwrap();
        assert_eq!(kept["mode"], "tag");
        assert_eq!(kept["release"], detail);
        assert!(
            reg.object_states("c-r")
                .await
                .unwrap()
                .iter()
                .all(|o| o.state == State::Released)
        );
        let ev = reg.events(table).await.unwrap();
        let last = ev.iter().rev().find(|e| e.kind == EventKind::CandidateState).unwrap();
        assert_eq!(last.detail["to"], "RELEASED");
        assert_eq!(last.detail["reason"], "keep it");
        // Released is terminal: no second release, no acceptance.
        let again = reg
            .candidate_release("c-r", "again", &serde_json::json!({}), now)
            .await
            .unwrap();
        assert!(matches!(again, Err(ref w) if w.contains("RELEASED")), "{again:?}");
        assert!(matches!(
            reg.candidate_accept("c-r", &stamp(), &loc(), 0, vec![], true, now)
                .await
                .unwrap(),
            Acceptance::Refused(_)
        ));
        // After acceptance, or with an object through the deleter, a release is refused.
        reg.candidate_record(table, "c-s", &serde_json::json!({}), &stamp(), &["z".into()], now)
            .await
            .unwrap();
        reg.candidate_transition("c-s", State::Quarantined, "sealed", None, None, now)
            .await
            .unwrap();
        assert_eq!(
            reg.candidate_accept("c-s", &stamp(), &loc(), 0, vec![], false, now)
                .await
                .unwrap(),
            Acceptance::Approved
        );
        let r = reg
            .candidate_release("c-s", "late", &serde_json::json!({}), now)
            .await
            .unwrap();
        assert!(matches!(r, Err(ref w) if w.contains("DELETE_APPROVED")), "{r:?}");
        reg.object_transition("c-s", "z", State::DeleteUnknown, now)
            .await
            .unwrap();
        reg.candidate_transition("c-s", State::Protected, "hold", None, None, now)
            .await
            .unwrap();
        let r = reg
            .candidate_release("c-s", "late", &serde_json::json!({}), now)
            .await
            .unwrap();
        assert!(matches!(r, Err(ref w) if w.contains("1 DELETE_UNKNOWN")), "{r:?}");
        assert_eq!(reg.candidate("c-s").await.unwrap().state, State::Protected);
    }

    /// Two actors protecting one candidate at once (a `lease add` that covers it while its purge finds a ref on
    /// it, the churn soak's seed 1796389416): the second move is a no-op, not an error, and writes nothing.
    async fn protecting_a_protected_candidate_again_is_a_no_op(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = t(0);
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000006";
        reg.candidate_record(table, "c-p", &serde_json::json!({}), &stamp(), &["a".into()], now)
            .await
            .unwrap();
        reg.candidate_transition("c-p", State::Quarantined, "sealed", None, None, now)
            .await
            .unwrap();
        reg.candidate_transition("c-p", State::Protected, "lease l-1 covers it", None, None, now)
            .await
            .unwrap();
        let generation = reg.generation().await.unwrap();
        let again = reg
            .candidate_transition("c-p", State::Protected, "ref main points at it", None, None, now)
            .await
            .unwrap();
        assert_eq!(again.state, State::Protected);
        assert_eq!(again.reason, "lease l-1 covers it", "the first reason stays");
        assert_eq!(reg.generation().await.unwrap(), generation, "nothing was written");
        // Every other move from a state to itself is still refused.
        let r = reg
            .candidate_transition("c-p", State::Released, "x", None, None, now)
            .await;
        assert!(r.is_ok(), "{r:?}");
        let r = reg
            .candidate_transition("c-p", State::Released, "x", None, None, now)
            .await;
        assert!(
            matches!(r, Err(RegistryError::Invalid { ref reason, .. }) if reason.contains("RELEASED to RELEASED")),
            "{r:?}"
        );
    }
}
