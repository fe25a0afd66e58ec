//! Sealed bundles: a signed, self-sufficient description of one snapshot.
//!
//! A bundle is a folder `<out>/<bundle_id>/` holding
//! * `inventory.jsonl`, the inventory of every object the snapshot reaches (metadata JSON, manifest
//!   list, manifests, data files, delete files: path as written, storage URI read, layer, size,
//!   BLAKE3, ETag, version ID), one JSON object per line in canonical order;
//! * `bundle.dsse.json`, a DSSE envelope of an in-toto Statement whose predicate names that member
//!   by size, line count, SHA-256 and BLAKE3 and carries the **bundle root**, a BLAKE3 over the
//!   canonical inventory (bundles sealed before #24 carry the inventory inline instead, and still
//!   verify: [`load_inventory`] reads either);
//! * `copies/<blake3>`, byte copies of the metadata JSON, the manifest list and every manifest,
//!   named by their digest.
//!
//! [`seal()`] reads and hashes every object once, in parallel, and refuses (with findings) a
//! snapshot whose objects are missing or disagree with their manifests; it never modifies the
//! table. [`verify()`] checks a bundle from the bundle alone — never from the live table's
//! metadata, which may be expired — and then checks every data and delete object in storage
//! (DESIGN §5). Both are findings-based: a mismatch is a finding, an unreadable store is an error.
//!
//! The wing: `bundle/format.rs` holds the format — the folder and file names, how inventory URIs are
//! bound to their paths ([`UriBinding`]), the [`RestoreReport`], and the signed reads of a bundle that
//! do not check its data ([`verified_predicate`], [`verified_metadata_copy`], [`list_bundles`]); the
//! inventory itself and its root are pure data in [`crate::evidence::inventory`]. `bundle/seal.rs`
//! writes bundles, `bundle/verify.rs` checks them. This face only re-exports, so every path stays
//! `crate::bundle::…`. It may use `report`,
//! `registry`, `table`, `govern`, `evidence`, `io`, `model` and the ground files, never `ops` or
//! anything above.

mod format;
mod objects;
mod orphans;
mod seal;
mod verify;

pub use format::*;
pub use orphans::{HeldFile, check_held, held};
pub use seal::{SealReport, seal, seal_for, snapshot_predicate, write_bundle};
pub use verify::{VerifyOptions, verify};
