//! The lab: a scratch lakehouse built on the local file system, the demo, and the fault matrix
//! that runs the real operations against a storage with injected faults.
//!
//! Reaches production code only through [`crate::ops`] and the context's hooks; production
//! commands never build anything from here.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::model::object::{Layer, ObjectRef};

pub mod demo;
pub mod faults;

/// The data files and the delete files (position and equality) of an inventory, by path.
///
/// The demo and every fault scenario count them, so that "objects lost = 0" is shown on data, not only
/// on metadata. See: issue 18 point 5.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ContentFiles {
    /// Paths of data files.
    pub(crate) data: BTreeSet<String>,
    /// Paths of position and equality delete files.
    pub(crate) deletes: BTreeSet<String>,
}

impl ContentFiles {
    /// The content files among `objects`, a JSON array of [`ObjectRef`]s as a plan or a candidate record
    /// writes them (`path`, `layer`, `size`). Entries that are not object refs are skipped.
    pub(crate) fn of(objects: &Value) -> ContentFiles {
        let mut out = ContentFiles::default();
        for o in objects.as_array().into_iter().flatten() {
            let Ok(o) = serde_json::from_value::<ObjectRef>(o.clone()) else {
                continue;
            };
            match o.layer {
                Layer::Data => {
                    out.data.insert(o.path);
                }
                Layer::PositionDeletes | Layer::EqualityDeletes => {
                    out.deletes.insert(o.path);
                }
                Layer::Metadata | Layer::ManifestList | Layer::Manifest => {}
            }
        }
        out
    }

    /// Those of them that are among `paths`.
    pub(crate) fn among<'a>(&self, paths: impl IntoIterator<Item = &'a str>) -> ContentFiles {
        let paths: BTreeSet<&str> = paths.into_iter().collect();
        let keep = |set: &BTreeSet<String>| set.iter().filter(|p| paths.contains(p.as_str())).cloned().collect();
        ContentFiles {
            data: keep(&self.data),
            deletes: keep(&self.deletes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_files_sort_data_from_deletes_and_skip_metadata() {
        let objects = serde_json::json!([
            {"path": "metadata/snap-1.avro", "layer": "manifest_list", "size": 10},
            {"path": "metadata/m0.avro", "layer": "manifest", "size": 10},
            {"path": "data/a.parquet", "layer": "data", "size": 10},
            {"path": "data/b.parquet", "layer": "data", "size": 10},
            {"path": "data/d-pos.parquet", "layer": "position_deletes", "size": 10},
            {"path": "data/d-eq.parquet", "layer": "equality_deletes", "size": 10},
            {"not": "an object"},
        ]);
        let c = ContentFiles::of(&objects);
        assert_eq!(
            c.data.iter().map(String::as_str).collect::<Vec<_>>(),
            ["data/a.parquet", "data/b.parquet"]
        );
        assert_eq!(c.deletes.len(), 2);
        let some = c.among(["data/b.parquet", "data/d-eq.parquet", "metadata/m0.avro"]);
        assert_eq!(
            (
                some.data.into_iter().collect::<Vec<_>>(),
                some.deletes.into_iter().collect::<Vec<_>>()
            ),
            (vec!["data/b.parquet".to_owned()], vec!["data/d-eq.parquet".to_owned()])
        );
        assert_eq!(c.among([]), ContentFiles::default());
    }
}
