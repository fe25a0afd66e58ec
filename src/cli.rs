//! Command-line arguments (clap). No logic lives here.
//!
//! The wing: the clap structs (this file), the one dispatch place ([`run`]: one arm per subcommand, one call
//! into `ops` or the lab), `config check` and the applied configuration defaults ([`config_check`]), and the
//! hand-built async runtime with its shutdown deadline ([`runtime`]). It may use every wing.

pub mod config_check;
pub mod run;
pub mod runtime;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::ops::commands::InspectWhat;
use crate::table::TableSource;
use crate::table::resolve::Selector;

/// lakedrill: safe deletion of Iceberg table history, proven by signed restore drills.
///
/// Exit codes: 0 verified/accepted, 1 findings/refused, 2 could not decide.
/// Anything but 0 means: do not delete.
#[derive(Debug, Parser)]
#[command(name = "lakedrill", version, about, long_about = None)]
pub struct Cli {
    /// Configuration file (default: ./lakedrill.toml if it exists).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Print one JSON document on stdout instead of human output.
    #[arg(long, global = true)]
    pub json: bool,
    /// Less output on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// More output on stderr.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// Use a signing key that group or others may read (mode bits 0o077), with a warning, instead of refusing
    /// it. For platforms that cannot mount a key 0600 or 0400, such as a Kubernetes Secret with `fsGroup`.
    #[arg(long, global = true)]
    pub allow_readable_key: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// How a table is addressed.
#[derive(Debug, Clone, Args)]
pub struct TableArgs {
    /// A metadata JSON file, or a Hadoop table folder (with metadata/version-hint.text).
    #[arg(long, conflicts_with_all = ["catalog", "table"])]
    pub metadata: Option<String>,
    /// A catalog declared in the configuration file.
    #[arg(long, requires = "table")]
    pub catalog: Option<String>,
    /// NAMESPACE.TABLE in the catalog.
    #[arg(long, requires = "catalog")]
    pub table: Option<String>,
    /// Where the table's files really are, when copied or restored elsewhere: every path written
    /// in the metadata is rebased from the written table location onto this root.
    #[arg(long)]
    pub table_root: Option<String>,
}

/// The plain maintenance job lakedrill is compared with (`plan`, `rollout report`): Iceberg's own
/// `expire_snapshots` and `remove_orphan_files` with these parameters. Unset options come from the
/// configuration's `[baseline."<table>"]`, then from the policy.
#[derive(Debug, Clone, Default, Args)]
pub struct BaselineArgs {
    /// `expire_snapshots(older_than)`: a duration before now (`7d`) or an RFC 3339 time (default: the policy's
    /// minSnapshotAge).
    #[arg(long, value_name = "DUR|TIME")]
    pub baseline_older_than: Option<String>,
    /// `expire_snapshots(retain_last)` (default: the table's history.expire.min-snapshots-to-keep).
    #[arg(long, value_name = "N")]
    pub baseline_retain_last: Option<i64>,
    /// `remove_orphan_files(older_than)`: a duration before now or an RFC 3339 time (default: the policy's
    /// orphanSafetyInterval).
    #[arg(long, value_name = "DUR|TIME", alias = "orphan-older-than")]
    pub baseline_orphans_older_than: Option<String>,
}

impl BaselineArgs {
    /// As the operation's options.
    #[must_use]
    pub fn options(&self) -> crate::ops::plan::BaselineOptions {
        crate::ops::plan::BaselineOptions {
            older_than: self.baseline_older_than.clone(),
            retain_last: self.baseline_retain_last,
            orphans_older_than: self.baseline_orphans_older_than.clone(),
        }
    }
}

impl TableArgs {
    /// The table source, or an error message.
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] when neither `--metadata` nor `--catalog/--table` is given.
    pub fn source(&self) -> crate::Result<TableSource> {
        match (&self.metadata, &self.catalog, &self.table) {
            (Some(m), _, _) => Ok(TableSource::Metadata {
                uri: m.clone(),
                table_root: self.table_root.clone(),
            }),
            (None, Some(c), Some(t)) => Ok(TableSource::Catalog {
                catalog: c.clone(),
                table: t.clone(),
                table_root: self.table_root.clone(),
            }),
            _ => Err(crate::Error::invalid(
                "table",
                "address the table with --metadata URI or with --catalog NAME --table NS.TABLE",
            )),
        }
    }
}

/// How a snapshot is selected (at most one).
#[derive(Debug, Clone, Args)]
pub struct SelectArgs {
    /// A snapshot id.
    #[arg(long, conflicts_with_all = ["ref_name", "as_of"])]
    pub snapshot_id: Option<i64>,
    /// A branch or tag (exact, case-sensitive).
    #[arg(long = "ref", conflicts_with = "as_of")]
    pub ref_name: Option<String>,
    /// The snapshot current at this instant: RFC 3339 with offset, or epoch milliseconds.
    #[arg(long)]
    pub as_of: Option<String>,
}

impl SelectArgs {
    /// The selector; `Current` when nothing was given.
    #[must_use]
    pub fn selector(&self) -> Selector {
        if let Some(id) = self.snapshot_id {
            Selector::SnapshotId(id)
        } else if let Some(r) = &self.ref_name {
            Selector::Ref(r.clone())
        } else if let Some(t) = &self.as_of {
            Selector::AsOf(t.clone())
        } else {
            Selector::Current
        }
    }
}

/// `inspect` targets.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum InspectArg {
    /// All snapshots in the metadata.
    Snapshots,
    /// Branches and tags.
    Refs,
    /// The snapshot log.
    History,
    /// Live data and delete files of one snapshot.
    Files,
    /// Manifests of one snapshot.
    Manifests,
}

impl From<InspectArg> for InspectWhat {
    fn from(a: InspectArg) -> Self {
        match a {
            InspectArg::Snapshots => InspectWhat::Snapshots,
            InspectArg::Refs => InspectWhat::Refs,
            InspectArg::History => InspectWhat::History,
            InspectArg::Files => InspectWhat::Files,
            InspectArg::Manifests => InspectWhat::Manifests,
        }
    }
}

/// The subcommands.
// Flattened argument groups and nested subcommands are documented on their own types; a doc
// comment on the field would become clap help text where clap allows none.
#[allow(missing_docs)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build a real local lakehouse (SQL catalog on SQLite, Parquet data) and run the pipeline on it.
    Demo {
        /// Where to build it; everything the demo writes stays under this folder.
        #[arg(long, default_value = "demo-lakehouse")]
        dir: PathBuf,
    },
    /// Show an Iceberg metadata table.
    Inspect {
        /// Which table.
        what: InspectArg,
        #[command(flatten)]
        table: TableArgs,
        #[command(flatten)]
        select: SelectArgs,
    },
    /// Print the snapshot id a selector names.
    #[command(group(clap::ArgGroup::new("selector").required(true).args(["snapshot_id", "ref_name", "as_of"])))]
    Resolve {
        #[command(flatten)]
        table: TableArgs,
        #[command(flatten)]
        select: SelectArgs,
    },
    /// Generate an ed25519 key pair: NAME.key (PKCS#8 PEM, 0600, never overwritten) and NAME.pub.
    Keygen {
        /// Key name (file stem).
        #[arg(long)]
        name: String,
        /// Folder for the key files.
        #[arg(long, default_value = "keys")]
        dir: PathBuf,
    },
    /// Seal one snapshot into a signed bundle.
    Seal {
        #[command(flatten)]
        table: TableArgs,
        #[command(flatten)]
        select: SelectArgs,
        /// Signing key (PKCS#8 PEM).
        #[arg(long)]
        key: PathBuf,
        /// Folder or prefix URI for bundles; the bundle goes to `OUT/<bundle id>/`.
        #[arg(long)]
        out: String,
    },
    /// Verify a bundle recursively from the bundle alone, and the data it names in storage.
    Restore {
        /// Bundle folder (or its bundle.dsse.json).
        bundle: String,
        /// Trust store: a folder of .pub keys.
        #[arg(long)]
        trust: PathBuf,
        /// Also read Parquet footers and compare row counts with the manifests.
        #[arg(long)]
        deep: bool,
        /// Read data from a relocated copy of the table rooted here.
        #[arg(long)]
        table_root: Option<String>,
        /// After a deep verification, materialize the snapshot as a new table at this empty location — a local
        /// folder or an `s3://`, `az://` or `gs://` prefix — with paths rebased, and register it.
        #[arg(long, requires_all = ["catalog", "table"], conflicts_with = "table_root")]
        into: Option<String>,
        /// With --into: the catalog to register the restored table in.
        #[arg(long)]
        catalog: Option<String>,
        /// With --into: NS.TABLE to register it as.
        #[arg(long)]
        table: Option<String>,
        /// An orphan bundle: put every held file back where it was (remove its delete marker, or copy it back;
        /// never over another file), verify it, and take its candidate out of reclamation (`RELEASED`).
        #[arg(long, conflicts_with_all = ["into", "deep", "table_root"])]
        put_back: bool,
        /// Verify only share I of N of the snapshot's objects (0-based, e.g. 0/4): data and delete objects by
        /// the hash of their path, the metadata layers in share 0. The result names the share, its object
        /// count and its root; with --key it is signed as a partial result for `report merge`.
        #[arg(long, value_name = "I/N", conflicts_with_all = ["into", "put_back"])]
        shard: Option<String>,
        /// With --shard: sign the share (a partial drill report of this one bundle, deep checks on) with this
        /// key, into `<reports>/restore-<bundle id>/shards/<run id>/`; `report merge` of all N shares signs the
        /// whole result, which the deleter takes like any drill report.
        #[arg(long, requires = "shard", conflicts_with = "table_root")]
        key: Option<PathBuf>,
        /// With --key: the reports folder (default `reports`).
        #[arg(long, requires = "key", default_value = "reports")]
        reports: String,
        /// With --key: the run the shares belong to (all N name the same id; `report merge` takes its folder).
        #[arg(long, requires = "key")]
        run_id: Option<String>,
    },
    /// Cold backup: copy every object of a checkpoint snapshot to another store or prefix, sign a
    /// bundle describing it, and declare the DR checkpoint in the registry.
    Backup {
        #[command(flatten)]
        table: TableArgs,
        /// A snapshot id (default: the current snapshot).
        #[arg(long, conflicts_with_all = ["ref_name", "checkpoint"])]
        snapshot_id: Option<i64>,
        /// A branch or tag (exact, case-sensitive).
        #[arg(long = "ref", conflicts_with = "checkpoint")]
        ref_name: Option<String>,
        /// An existing checkpoint of the registry (its snapshot and recovery point).
        #[arg(long)]
        checkpoint: Option<String>,
        /// The declared recovery point of a new checkpoint (RFC 3339 or epoch ms, not before the snapshot's
        /// commit; default: the commit time of the table's current snapshot, so an older snapshot shows its gap
        /// as RPO).
        #[arg(long, conflicts_with = "checkpoint")]
        at: Option<String>,
        /// Signing key (PKCS#8 PEM).
        #[arg(long)]
        key: PathBuf,
        /// The backup store or prefix: objects go to `TO/objects/`, bundles to `TO/bundles/`.
        #[arg(long)]
        to: String,
    },
    /// Full recovery of a bundle's snapshot into a new (empty) folder or object-store prefix: copy, rewrite
    /// every path, verify against the bundle, scan, register.
    Recover {
        /// The bundle (a backup bundle, or any sealed bundle).
        #[arg(long = "from")]
        from: String,
        /// Trust store: a folder of .pub keys.
        #[arg(long)]
        trust: PathBuf,
        /// The new location (must be empty).
        #[arg(long)]
        into: String,
        /// Register the recovered table in this catalog.
        #[arg(long, requires = "table")]
        catalog: Option<String>,
        /// NS.TABLE to register it as.
        #[arg(long, requires = "catalog")]
        table: Option<String>,
    },
    /// Move main back to an ancestor of the current snapshot (catalog commit).
    Rollback {
        #[command(flatten)]
        table: TableArgs,
        /// The ancestor snapshot id.
        #[arg(long)]
        to: i64,
    },
    /// Point main at any snapshot, at a ref's head, or at a snapshot brought back from a verified bundle.
    #[command(group(
        clap::ArgGroup::new("target").required(true).args(["snapshot_id", "ref_name", "as_of", "from_bundle"])
    ))]
    SetCurrent {
        #[command(flatten)]
        table: TableArgs,
        #[command(flatten)]
        select: SelectArgs,
        /// Bring the snapshot back from this bundle (bundle-mode quarantine).
        #[arg(long, conflicts_with_all = ["snapshot_id", "ref_name", "as_of"])]
        from_bundle: Option<String>,
        /// Trust store for --from-bundle (needed with it; `[keys] trust` gives a default).
        #[arg(long)]
        trust: Option<PathBuf>,
    },
    /// Validate a lakehouseRetentionPolicy.v1 document and print its digest.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Reader leases on snapshots.
    Lease {
        #[command(subcommand)]
        command: LeaseCommand,
    },
    /// Legal holds.
    Hold {
        #[command(subcommand)]
        command: HoldCommand,
    },
    /// In-flight writers' staging prefixes.
    Writer {
        #[command(subcommand)]
        command: WriterCommand,
    },
    /// Disaster-recovery checkpoints.
    Checkpoint {
        #[command(subcommand)]
        command: CheckpointCommand,
    },
    /// Report-only: protected snapshots, candidates, and what plain expire_snapshots and remove_orphan_files
    /// would remove.
    Plan {
        #[command(flatten)]
        table: TableArgs,
        /// The retention policy.
        #[arg(long)]
        policy: PathBuf,
        #[command(flatten)]
        baseline: BaselineArgs,
        /// Trust store (a folder of .pub keys; `[keys] trust` gives a default): a lease, checkpoint or snapshot hold
        /// on a snapshot that left the table keeps orphan detection on only when the bundle sealed for that snapshot
        /// verifies under it (its files are then kept by name); without it such a protection turns orphan detection
        /// off for the table.
        #[arg(long)]
        trust: Option<PathBuf>,
    },
    /// Candidate and object states, the table's rollout stage and the deleter switch.
    Status {
        /// A candidate id (else: every candidate of the addressed table).
        candidate: Option<String>,
        #[command(flatten)]
        table: TableArgs,
        /// The retention policy: also report its implementation-digest binding and deletion-right requests.
        #[arg(long)]
        policy: Option<PathBuf>,
    },
    /// Seal a candidate's snapshots and pin (tag mode) or remove (bundle mode) them in one catalog commit;
    /// `quarantine extend` postpones a quarantined candidate's purge, `quarantine release` gives it up.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Quarantine {
        #[command(subcommand)]
        action: Option<QuarantineCommand>,
        /// The candidate id from `plan`.
        #[arg(required = true)]
        candidate: Option<String>,
        #[command(flatten)]
        table: TableArgs,
        /// The retention policy.
        #[arg(long, required = true)]
        policy: Option<PathBuf>,
        /// Signing key for the bundles.
        #[arg(long, required = true)]
        key: Option<PathBuf>,
        /// Where bundles go.
        #[arg(long, required = true)]
        bundles: Option<String>,
        /// `tag` (default) or `bundle`.
        #[arg(long, value_enum, default_value_t = QuarantineModeArg::Tag)]
        mode: QuarantineModeArg,
        /// Trust store (a folder of .pub keys; `[keys] trust` gives a default), as `plan --trust`: the quarantine
        /// judges the candidate again with the plan's rules, and a lease, checkpoint or snapshot hold on a
        /// snapshot that left the table keeps orphan detection on only when that snapshot's bundle verifies
        /// under it.
        #[arg(long)]
        trust: Option<PathBuf>,
    },
    /// Print the version and the implementation digest (SHA-256 of this binary).
    Version,
    /// Rollout stages per table (report-only, test, cohort:NAME, enabled) and the comparison with plain
    /// Iceberg maintenance.
    Rollout {
        #[command(subcommand)]
        command: RolloutCommand,
    },
    /// Signed, versioned governance decisions (legal holds, deletion rights).
    Decision {
        #[command(subcommand)]
        command: DecisionCommand,
    },
    /// The table's rollout stage, deleter switch, implementation-digest binding and deletion-right requests;
    /// with --trust also the six safety gates (DESIGN §7).
    ///
    /// The safety gates are recomputed from the registry, the table and the signed drill reports under
    /// --reports. Exit 0 when everything passes, 1 when a deletion right is past its deadline or a safety gate
    /// fails, 2 without --trust (the report-based gates cannot be decided) unless a right is overdue.
    Gates {
        #[command(flatten)]
        table: TableArgs,
        /// The retention policy.
        #[arg(long)]
        policy: PathBuf,
        /// Also compute the six safety gates (DESIGN §7): drill reports must be signed by a key in this folder.
        #[arg(long)]
        trust: Option<PathBuf>,
        /// With --trust: the reports folder holding the drill plans' reports.
        #[arg(long, default_value = "reports")]
        reports: String,
        /// With --trust: how far back a drill report counts (default 7d for the weekly gate, 92d for the quarterly one).
        #[arg(long)]
        since: Option<String>,
    },
    /// Delete a quarantined candidate's exact inventory, only with fresh verified evidence and an unchanged world.
    Purge {
        /// The candidate id.
        candidate: String,
        #[command(flatten)]
        table: TableArgs,
        /// The signed drill report covering the candidate's bundles. Without it, the newest weekly report
        /// under --reports whose population covers the table's quarantined bundles.
        #[arg(long)]
        evidence: Option<String>,
        /// The reports folder the gates read (each plan's reports in `<reports>/<plan>/`). Default: two
        /// levels above --evidence.
        #[arg(long)]
        reports: Option<String>,
        /// Trust store for the evidence.
        #[arg(long)]
        trust: PathBuf,
        /// The retention policy.
        #[arg(long)]
        policy: PathBuf,
        /// Signing key for the inventory archive and the receipts summary.
        #[arg(long)]
        key: PathBuf,
        /// Where receipts go (`<receipts>/<candidate>/`).
        #[arg(long, default_value = "receipts")]
        receipts: String,
        /// Print every check and what would be deleted; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Write Prometheus metrics here (node_exporter textfile collector; written atomically).
        #[arg(long)]
        metrics_file: Option<PathBuf>,
    },
    /// Settle DELETE_UNKNOWN objects: re-check, retry, or report for a human.
    Reconcile {
        /// The candidate id.
        candidate: String,
        #[command(flatten)]
        table: TableArgs,
        /// Trust store for the candidate's bundles: an orphan candidate's retries go where its verified bundle
        /// says each file is held, so one needs it.
        #[arg(long)]
        trust: Option<PathBuf>,
        /// The retention policy.
        #[arg(long)]
        policy: PathBuf,
        /// Signing key for the receipts summary.
        #[arg(long)]
        key: PathBuf,
        /// Where receipts go.
        #[arg(long, default_value = "receipts")]
        receipts: String,
        /// Write Prometheus metrics here (node_exporter textfile collector; written atomically).
        #[arg(long)]
        metrics_file: Option<PathBuf>,
    },
    /// Bring back a purged candidate's objects from their delete markers (versioned S3) and verify them.
    Undelete {
        /// The candidate id.
        candidate: String,
        #[command(flatten)]
        table: TableArgs,
        /// Trust store for the candidate's bundles.
        #[arg(long)]
        trust: PathBuf,
        /// Signing key (the purge's): the undelete's receipts are sealed as the next batch of the candidate's
        /// signed receipts chain. Without it they are recorded in the registry only, and `audit verify` of the
        /// purge summary reports them as unsealed.
        #[arg(long)]
        key: Option<PathBuf>,
        /// Where the purge wrote its receipts (`<receipts>/<candidate>/`).
        #[arg(long, default_value = "receipts")]
        receipts: String,
    },
    /// The deleter's stop switch (stored in the registry).
    Deleter {
        #[command(subcommand)]
        command: DeleterCommand,
    },
    /// Restore drills.
    Drill {
        #[command(subcommand)]
        command: DrillCommand,
    },
    /// Offline verification of signed reports.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Signed reports: merge the reports of a sharded drill into one.
    Report {
        #[command(subcommand)]
        command: ReportCommand,
    },
    /// The configuration file (lakedrill.toml).
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

/// `report` subcommands.
#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Verify the shard reports of one sharded drill run and sign one merged report into the plan's chain.
    Merge {
        /// The shard reports (.dsse.json), one per shard 0..N, in any order; a folder stands for the
        /// reports directly in it (`<reports>/<plan>/shards/<run id>/`).
        #[arg(required = true, num_args = 1..)]
        shard_reports: Vec<String>,
        /// Signing key for the merged report.
        #[arg(long)]
        key: PathBuf,
        /// Trust store the shard reports must verify against.
        #[arg(long)]
        trust: PathBuf,
        /// Reports folder: the merged report goes to `<reports>/<plan>/` (default `reports`).
        #[arg(long, default_value = "reports")]
        reports: String,
        /// Also write Prometheus metrics for the merged run (node_exporter textfile collector).
        #[arg(long)]
        metrics_file: Option<PathBuf>,
    },
}

/// `config` subcommands.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration file and what it points to (catalogs, registry, keys, trust, defaults).
    Check,
}

/// `drill` subcommands.
#[derive(Debug, Subcommand)]
pub enum DrillCommand {
    /// Run a drill plan (drills/*.toml): sample, restore, verify, sign.
    Run {
        /// The plan file.
        plan: PathBuf,
        /// Run only shard I of N (`I/N`, 0-based): a deterministic share of the sample; merge the shard
        /// reports with `report merge`.
        #[arg(long, value_parser = parse_shard)]
        shard: Option<crate::ops::drill::Shard>,
        /// With --shard: the run these shards belong to (e.g. the Kubernetes Job name); shard reports go to
        /// `<reports>/<plan>/shards/<run id>/` and `report merge` takes that folder.
        #[arg(long, requires = "shard")]
        run_id: Option<String>,
        /// With --shard, what is split: `items` (each shard drills its share of the sampled bundles) or
        /// `objects` (each shard drills every sampled bundle, verifying its share of the objects: one snapshot
        /// too large for one machine's window, verified by N machines; quarantine drills only).
        #[arg(long, requires = "shard", default_value = "items", value_parser = parse_split)]
        split: crate::evidence::predicate::ShardSplit,
        /// Write Prometheus metrics here (node_exporter textfile collector; written atomically).
        #[arg(long)]
        metrics_file: Option<PathBuf>,
        /// Cold-backup drills: keep the scratch recoveries instead of removing them.
        #[arg(long)]
        keep: bool,
    },
    /// Run the fault matrix (DESIGN §6): fourteen races and half-truths against scratch lakehouses; exit 0
    /// only if every one ends in delayed reclamation or an explicit DELETE_UNKNOWN, with 0 objects lost.
    Faults {
        /// Sign the report with this key (PKCS#8 PEM) and write it under `<reports>/fault-matrix/`.
        #[arg(long)]
        key: Option<PathBuf>,
        /// With --key: the trust folder the report will be verified under. When it has a roles.toml, --key must
        /// hold the `drill` role there (refused before any scenario runs, exit 2).
        #[arg(long, requires = "key")]
        trust: Option<PathBuf>,
        /// Where signed reports go (with --key).
        #[arg(long, default_value = "reports", requires = "key")]
        reports: String,
        /// Build the scratch lakehouses in a new folder `lakedrill-faults-<run id>` made inside DIR (created if
        /// missing; default: the system's temporary directory). Only that new folder is removed at the end;
        /// nothing else in DIR is touched, and DIR itself is kept.
        #[arg(long, value_name = "DIR")]
        scratch: Option<PathBuf>,
        /// Keep the run's scratch folder (`lakedrill-faults-<run id>`).
        #[arg(long)]
        keep: bool,
        /// Run only this scenario (repeatable); a partial matrix never passes the gate.
        #[arg(long = "scenario")]
        scenarios: Vec<String>,
        /// Put the scratch tables, bundles, reports and receipts on this versioned S3 bucket prefix
        /// (`s3://bucket/prefix`; credentials and endpoint from the environment) instead of the filesystem.
        #[arg(long)]
        store: Option<String>,
    },
}

/// `audit` subcommands.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Verify a signed file offline: a drill report (with --chain, its plan's whole chain), a bundle, a
    /// retirement record, a purge's inventory or summary, a decision or a fault-matrix report.
    Verify {
        /// The signed file (.dsse.json), or with --chain the plan's reports folder.
        report: String,
        /// Trust store: a folder of .pub keys.
        #[arg(long)]
        trust: PathBuf,
        /// Verify every report of the plan's folder as a hash chain (REPORT may then be the folder itself).
        #[arg(long)]
        chain: bool,
        /// With --chain: the SHA-256 the newest report must have (an anchor kept elsewhere); without it the
        /// configured registry's anchor is used, if any.
        #[arg(long)]
        expect_head: Option<String>,
    },
}

/// `policy` subcommands.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Validate strictly and print the digest.
    Check {
        /// The policy file (YAML).
        file: PathBuf,
    },
}

/// `lease` subcommands.
#[allow(missing_docs)]
#[derive(Debug, Subcommand)]
pub enum LeaseCommand {
    /// Pin a snapshot for a reader (refused beyond the policy's maxReaderLease).
    Add {
        #[command(flatten)]
        table: TableArgs,
        /// The retention policy (for maxReaderLease).
        #[arg(long)]
        policy: PathBuf,
        /// The snapshot.
        #[arg(long)]
        snapshot_id: i64,
        /// Why.
        #[arg(long)]
        purpose: String,
        /// Who.
        #[arg(long)]
        owner: String,
        /// For how long (`14d`, `6h`, …).
        #[arg(long)]
        expires_in: String,
    },
    /// List the table's leases.
    List {
        #[command(flatten)]
        table: TableArgs,
    },
    /// Release a lease.
    Release {
        /// Lease id.
        id: String,
    },
}

/// `hold` subcommands.
#[allow(missing_docs)]
#[derive(Debug, Subcommand)]
pub enum HoldCommand {
    /// Set a legal hold (bumps the hold generation).
    Set {
        #[command(flatten)]
        table: TableArgs,
        /// `table`, `snapshot:ID` or `prefix:PATH`.
        #[arg(long)]
        scope: String,
        /// Why.
        #[arg(long)]
        reason: String,
    },
    /// Clear a hold (bumps the hold generation).
    Clear {
        /// Hold id.
        id: String,
    },
    /// List the table's holds.
    List {
        #[command(flatten)]
        table: TableArgs,
    },
}

/// `writer` subcommands.
#[allow(missing_docs)]
#[derive(Debug, Subcommand)]
pub enum WriterCommand {
    /// Register an in-flight writer's staging prefix.
    Begin {
        #[command(flatten)]
        table: TableArgs,
        /// Staging prefix (relative to the table, or absolute under it).
        #[arg(long)]
        prefix: String,
    },
    /// End a writer.
    End {
        /// Writer id.
        id: String,
    },
    /// List the table's writers.
    List {
        #[command(flatten)]
        table: TableArgs,
    },
}

/// `checkpoint` subcommands.
#[allow(missing_docs)]
#[derive(Debug, Subcommand)]
pub enum CheckpointCommand {
    /// Declare a DR checkpoint on a snapshot.
    Add {
        #[command(flatten)]
        table: TableArgs,
        /// The snapshot.
        #[arg(long)]
        snapshot_id: i64,
        /// The declared recovery point (RFC 3339 with offset or epoch ms; default: the snapshot's commit time).
        #[arg(long)]
        at: Option<String>,
    },
    /// List the table's checkpoints.
    List {
        #[command(flatten)]
        table: TableArgs,
    },
}

/// `deleter` subcommands.
#[derive(Debug, Subcommand)]
pub enum DeleterCommand {
    /// Halt every purge before its next batch.
    Stop {
        /// Why.
        #[arg(long, default_value = "stopped by an operator")]
        reason: String,
    },
    /// Allow purges again.
    Start {
        /// Why.
        #[arg(long, default_value = "started by an operator")]
        reason: String,
    },
}

/// `quarantine` subcommands.
#[allow(missing_docs)]
#[derive(Debug, Subcommand)]
pub enum QuarantineCommand {
    /// Postpone a quarantined candidate's purge: no purge before max(now, the current extension) + DUR.
    Extend {
        /// The candidate id.
        candidate: String,
        /// How much longer (`7d`, `12h`, …).
        #[arg(long)]
        by: String,
        /// Why.
        #[arg(long, default_value = "extended by an operator")]
        reason: String,
    },
    /// Give a quarantined (or protected) candidate up before any delete: remove its `quarantine/<candidate>…`
    /// tags in one catalog commit and record the release; the next `plan` proposes its snapshots again.
    Release {
        /// The candidate id.
        candidate: String,
        #[command(flatten)]
        table: TableArgs,
        /// Why (kept in the registry with the time).
        #[arg(long, required = true)]
        reason: String,
    },
}

/// A table addressed by a positional name: `NS.TABLE` with `--catalog NAME`, else a metadata URI or table folder.
#[derive(Debug, Clone, Args)]
pub struct NamedTable {
    /// `NS.TABLE` (with --catalog) or a metadata file / Hadoop table folder.
    pub table: String,
    /// The catalog holding TABLE.
    #[arg(long)]
    pub catalog: Option<String>,
    /// Where the table's files really are (see `--table-root` elsewhere).
    #[arg(long)]
    pub table_root: Option<String>,
}

impl NamedTable {
    /// The table source.
    #[must_use]
    pub fn source(&self) -> TableSource {
        match &self.catalog {
            Some(c) => TableSource::Catalog {
                catalog: c.clone(),
                table: self.table.clone(),
                table_root: self.table_root.clone(),
            },
            None => TableSource::Metadata {
                uri: self.table.clone(),
                table_root: self.table_root.clone(),
            },
        }
    }
}

/// `rollout` subcommands.
#[allow(missing_docs)]
#[derive(Debug, Subcommand)]
pub enum RolloutCommand {
    /// Set a table's rollout stage: report-only, test (policy must say regulatedData: false), cohort:NAME, enabled.
    Set {
        #[command(flatten)]
        table: NamedTable,
        /// report-only, test, cohort:NAME or enabled.
        stage: String,
        /// Why (recorded).
        #[arg(long)]
        reason: String,
        /// Who (recorded; default: $USER).
        #[arg(long)]
        by: Option<String>,
        /// The table's policy (required for every stage that deletes).
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Make the change although it breaks the rollout rules (a skipped step, too few report-only days,
        /// another table in test, no clean test period); recorded as forced with what it overrode, and shown
        /// by `gates`.
        #[arg(long)]
        force: bool,
    },
    /// The table's stage and every change with its reason.
    Show {
        #[command(flatten)]
        table: NamedTable,
    },
    /// Compare lakedrill's candidates with plain expire_snapshots / remove_orphan_files over a period.
    Report {
        #[command(flatten)]
        table: NamedTable,
        /// The retention policy.
        #[arg(long)]
        policy: PathBuf,
        /// The period (observations recorded by earlier reports within it are aggregated).
        #[arg(long, default_value = "14d")]
        since: String,
        #[command(flatten)]
        baseline: BaselineArgs,
    },
}

/// `decision` subcommands.
#[allow(missing_docs)]
#[derive(Debug, Subcommand)]
pub enum DecisionCommand {
    /// Verify and apply a signed decision (DSSE) to the addressed table; older or equal versions are refused.
    Apply {
        /// The signed decision (.dsse.json).
        file: PathBuf,
        #[command(flatten)]
        table: TableArgs,
        /// Trust store: a folder of .pub keys of the governance layer (with a roles.toml, only keys it gives the
        /// `governance` role count).
        #[arg(long)]
        trust: PathBuf,
    },
    /// Sign a decision document (JSON) into a DSSE envelope.
    Sign {
        /// The decision document (JSON, lakedrillGovernanceDecision.v1).
        file: PathBuf,
        /// Signing key.
        #[arg(long)]
        key: PathBuf,
        /// The trust folder the decision will be applied under. When it has a roles.toml, --key must hold the
        /// `governance` role there (refused before anything is written, exit 2).
        #[arg(long)]
        trust: Option<PathBuf>,
        /// Where the envelope goes (never overwritten).
        #[arg(long)]
        out: PathBuf,
    },
}

/// `quarantine --mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QuarantineModeArg {
    /// Pin the snapshots under `quarantine/<candidate>` tags; the deleter removes the tags at purge.
    Tag,
    /// Remove the snapshots from the metadata; the bundles are the only way back.
    Bundle,
}

impl From<QuarantineModeArg> for crate::ops::quarantine::QuarantineMode {
    fn from(m: QuarantineModeArg) -> Self {
        match m {
            QuarantineModeArg::Tag => Self::Tag,
            QuarantineModeArg::Bundle => Self::Bundle,
        }
    }
}

/// `--split items|objects`, checked by clap.
fn parse_split(s: &str) -> Result<crate::evidence::predicate::ShardSplit, String> {
    crate::evidence::predicate::ShardSplit::parse(s).map_err(|e| e.to_string())
}

/// `--shard I/N`, checked by clap (0-based, `I < N`).
fn parse_shard(s: &str) -> Result<crate::ops::drill::Shard, String> {
    crate::ops::drill::Shard::parse(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use clap::CommandFactory;

    /// The long help of `path` (subcommand names), as `--help` prints it.
    fn help(path: &[&str]) -> String {
        let mut c = super::Cli::command();
        c.build();
        let mut c = &mut c;
        for p in path {
            c = c.find_subcommand_mut(p).unwrap();
        }
        c.render_long_help().to_string()
    }

    // See: new-user review, finding 3: help texts said less than the commands accept (a local `--into` only, one
    // drill report for `audit verify`, no safety gates in `gates`).
    #[test]
    fn help_names_what_the_commands_accept() {
        let restore = help(&["restore"]);
        assert!(
            restore.contains("s3://") && restore.contains("az://") && restore.contains("gs://"),
            "{restore}"
        );
        let verify = help(&["audit", "verify"]);
        assert!(verify.contains("with --chain the plan's reports folder"), "{verify}");
        assert!(verify.contains("a bundle") && verify.contains("a decision"), "{verify}");
        let gates = help(&["gates"]);
        assert!(gates.contains("with --trust also the six safety gates"), "{gates}");
        assert!(gates.contains("2 without --trust"), "{gates}");
        assert!(help(&["set-current"]).contains("--as-of"));
        assert!(help(&["backup"]).contains("default: the current snapshot"));
    }
}
