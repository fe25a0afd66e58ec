//! lakedrill governs when Apache Iceberg table files may really be deleted, and proves that a
//! snapshot can be restored before anything is.
//!
//! The crate is built in wings; a wing uses only the wings below it (the architecture test in
//! `tests/it/architecture.rs` enforces it):
//!
//! ```text
//! cli        command line: clap structs, one call per subcommand into ops
//! lab        the scratch lakehouse: demo, fault matrix
//! ops        operations over a Context: plan, protect, quarantine, drill, purge, audit, ...
//! bundle     sealed bundles: format, seal, verify
//! report ·  registry ·  table     rendering · the shared database · reading Iceberg
//! govern ·  evidence ·  io        pure rules · pure signed formats · bytes and rows
//! model      shared nouns: locations, findings, objects
//! ground     error, clock, config, safety switches
//! ```
//!
//! Errors ([`Error`]) mean "could not decide" and exit with 2; anything but exit 0 means
//! "do not delete".

pub mod bundle;
pub mod cli;
pub mod clock;
pub mod config;
pub mod error;
pub mod evidence;
pub mod govern;
pub mod io;
pub mod lab;
pub mod model;
pub mod ops;
pub mod registry;
pub mod report;
pub mod safety;
pub mod table;

pub use error::{Error, ErrorKind, Result};
pub use report::output::{Outcome, Verdict};
