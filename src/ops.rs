//! The operations: each subcommand is one function here, run over a [`context::Context`]
//! (configuration, storage, hooks, clock). Plan, protect, quarantine, seal, restore, drill,
//! purge, gates, rollout, audit, recover, backup, runbooks.
//!
//! May use every wing below it (`bundle`, `report`, `registry`, `table`, `govern`, `evidence`,
//! `io`, `model`, the ground). Nothing below `ops` sees the context.

pub mod audit;
pub mod backup;
pub mod binding;
pub mod commands;
pub mod containment;
pub mod context;
pub mod decision;
pub mod deleter;
pub mod drill;
pub mod evidence_lock;
pub mod gates;
pub mod hooks;
pub mod materialize;
pub mod orphans;
pub mod plan;
pub mod protect;
pub mod quarantine;
pub mod receipts;
pub mod recover;
pub mod report_merge;
pub mod retire;
pub mod rollout;
pub mod runbook;
