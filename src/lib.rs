//! lakedrill governs when Apache Iceberg table files may really be deleted, and proves that a
//! snapshot can be restored before anything is.
//!
//! The pipeline, one module per stage:
//!
//! ```text
//! table (metadata at one generation) ── location: path safety ── store: every byte
//!   └─ tree: manifest list → manifests → live data/delete files
//!        └─ inspect / resolve: the metadata tables and time travel
//! ```
//!
//! Errors ([`Error`]) mean "could not decide" and exit with 2; anything but exit 0 means
//! "do not delete".

pub mod audit;
pub mod backup;
pub mod bundle;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod closure;
pub mod commands;
pub mod config;
pub mod config_check;
pub mod containment;
mod db;
pub mod decision;
pub mod deleter;
pub mod demo;
pub mod drill;
pub mod error;
pub mod evidence;
pub mod fault_store;
pub mod faults;
pub mod findings;
pub mod gates;
pub mod governance;
pub mod iceberg_io;
pub mod inspect;
pub mod keys;
pub mod location;
pub mod materialize;
pub mod metrics;
pub mod output;
pub mod policy;
pub mod recover;
pub mod registry;
pub mod report_html;
pub mod report_merge;
pub mod resolve;
pub mod rollout;
pub mod runbook;
pub mod runtime;
pub mod scan;
pub mod store;
pub mod table;
pub mod tree;

pub use error::{Error, ErrorKind, Result};
pub use output::{Outcome, Verdict};
