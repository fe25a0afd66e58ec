//! Shared nouns every wing speaks: storage locations and path safety, findings, the objects a
//! snapshot reaches.
//!
//! Pure and synchronous: no storage, no registry, no async. May use only the ground files
//! (`error`, `clock`, `config`, `safety`).

pub mod findings;
pub mod location;
pub mod object;
