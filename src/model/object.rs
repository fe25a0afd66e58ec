//! The objects a snapshot reaches, as every wing names them: the [`Layer`] of an object, an
//! [`ObjectRef`] (path relative to the table location, layer, size), the per-snapshot
//! [`SnapshotObjects`] whose manifest chunks are shared between snapshots, listed objects, and the
//! scope of a legal hold.

use foldhash::HashSet;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Which layer of the snapshot an object belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The table metadata JSON.
    Metadata,
    /// The snapshot's manifest list.
    ManifestList,
    /// A manifest.
    Manifest,
    /// A data file.
    Data,
    /// A position delete file.
    PositionDeletes,
    /// An equality delete file.
    EqualityDeletes,
}

impl Layer {
    /// Whether the bundle carries a byte copy of objects of this layer.
    #[must_use]
    pub fn is_metadata(self) -> bool {
        matches!(self, Layer::Metadata | Layer::ManifestList | Layer::Manifest)
    }
}

/// An object named by metadata, by its path relative to the table location.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    /// Path relative to the table location.
    pub path: String,
    /// Its layer.
    pub layer: Layer,
    /// Size in bytes (declared by metadata, or listed for orphans).
    pub size: u64,
}

/// The objects of one manifest (the manifest file and its live entries), shared by every snapshot
/// whose list names it: a table with N snapshots of M manifests holds each manifest's objects once,
/// not N times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestObjects {
    /// The manifest's path as written (with its length: a rewritten manifest is another chunk).
    pub key: String,
    /// The manifest itself and its live data and delete files.
    pub objects: Vec<ObjectRef>,
}

/// Everything one snapshot reaches: its own objects (the manifest list) and its manifests' chunks.
/// Iterating it may yield an object twice (a file listed in two manifests); consumers collect into sets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SnapshotObjects {
    /// Objects of this snapshot alone (its manifest list).
    pub own: Vec<ObjectRef>,
    /// Its manifests' objects, shared.
    pub manifests: Vec<Arc<ManifestObjects>>,
}

impl SnapshotObjects {
    /// How many objects [`SnapshotObjects::iter`] yields.
    #[must_use]
    pub fn len(&self) -> usize {
        self.own.len() + self.manifests.iter().map(|m| m.objects.len()).sum::<usize>()
    }

    /// Whether it yields no object.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every object (own first, then manifest by manifest).
    pub fn iter(&self) -> impl Iterator<Item = &ObjectRef> {
        self.own
            .iter()
            .chain(self.manifests.iter().flat_map(|m| m.objects.iter()))
    }
}

impl<'a> IntoIterator for &'a SnapshotObjects {
    type Item = &'a ObjectRef;
    type IntoIter = Box<dyn Iterator<Item = &'a ObjectRef> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl FromIterator<ObjectRef> for SnapshotObjects {
    fn from_iter<I: IntoIterator<Item = ObjectRef>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl From<Vec<ObjectRef>> for SnapshotObjects {
    fn from(own: Vec<ObjectRef>) -> Self {
        Self {
            own,
            manifests: Vec::new(),
        }
    }
}

/// Every object of the given snapshots, visiting each shared manifest chunk once: linear in the
/// number of distinct manifests' entries, not in snapshots × entries.
pub fn distinct_objects<'a>(snapshots: impl IntoIterator<Item = &'a SnapshotObjects>) -> Vec<&'a ObjectRef> {
    let mut seen: HashSet<*const ManifestObjects> = HashSet::default();
    let mut out = Vec::new();
    for s in snapshots {
        out.extend(s.own.iter());
        for m in &s.manifests {
            if seen.insert(Arc::as_ptr(m)) {
                out.extend(m.objects.iter());
            }
        }
    }
    out
}

/// The paths of `objects` as a set sized for at most `distinct_hint` paths. Collected straight from a history's
/// entries it is sized for every entry: a Spark-written history repeats each of its 100k files in six merged
/// manifests on average, and a set sized for 644,500 paths holding 102k is 17 MB spread over the cache instead of
/// 2 MB.
#[must_use]
pub fn path_set<'a>(objects: &[&'a ObjectRef], distinct_hint: usize) -> HashSet<&'a str> {
    let mut set = HashSet::with_capacity_and_hasher(objects.len().min(distinct_hint), Default::default());
    // Inserted one by one: `extend` reserves room for every entry first, which is the size this avoids.
    for o in objects {
        set.insert(o.path.as_str());
    }
    set
}

/// A listed object under the table location (for orphans).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    /// Path relative to the table location.
    pub path: String,
    /// Size (0 where the time was not read).
    pub size: u64,
    /// Last modification, epoch ms; [`ListedObject::TIME_NOT_READ`] where the listing did not stat it.
    pub last_modified_ms: i64,
}

impl ListedObject {
    /// The modification time of a listed object whose stat was not read because the planner does not ask for
    /// it (`crate::govern::closure::listing_time_needed`): the far future, so that any rule that did read it
    /// would find the object too new to remove.
    pub const TIME_NOT_READ: i64 = i64::MAX;
}

/// What a legal hold protects.
///
/// Written and parsed as `table`, `snapshot:ID` or `prefix:PATH`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum HoldScope {
    /// Every snapshot and object of the table.
    Table,
    /// One snapshot.
    Snapshot(i64),
    /// Every object under a path prefix: as the caller wrote it in the registry, relative to the table
    /// location in the planner's input.
    Prefix(String),
}

impl fmt::Display for HoldScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HoldScope::Table => f.write_str("table"),
            HoldScope::Snapshot(id) => write!(f, "snapshot:{id}"),
            HoldScope::Prefix(path) => write!(f, "prefix:{path}"),
        }
    }
}

impl FromStr for HoldScope {
    type Err = HoldScopeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = HoldScopeError;
        if s == "table" {
            return Ok(HoldScope::Table);
        }
        if let Some(id) = s.strip_prefix("snapshot:") {
            return id
                .parse::<i64>()
                .map(HoldScope::Snapshot)
                .map_err(|e| invalid(format!("{s:?}: snapshot id {id:?} is not an integer ({e})")));
        }
        if let Some(path) = s.strip_prefix("prefix:") {
            if path.trim().is_empty() {
                return Err(invalid(format!("{s:?}: the prefix is empty")));
            }
            return Ok(HoldScope::Prefix(path.to_owned()));
        }
        Err(invalid(format!(
            "{s:?}: expected `table`, `snapshot:ID` or `prefix:PATH`"
        )))
    }
}

impl From<HoldScope> for String {
    fn from(scope: HoldScope) -> Self {
        scope.to_string()
    }
}

impl TryFrom<String> for HoldScope {
    type Error = HoldScopeError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// A hold scope that cannot be parsed: what was given and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid scope: {0}")]
pub struct HoldScopeError(pub String);

impl From<HoldScopeError> for crate::Error {
    /// A scope that cannot be parsed is bad input.
    fn from(e: HoldScopeError) -> Self {
        crate::Error::module(crate::ErrorKind::BadInput, e)
    }
}
