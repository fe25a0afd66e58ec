//! The one dispatch place: each subcommand arm is one call into [`crate::ops`] (or the lab).
//!
//! The binary parses, calls [`run`], prints the [`Outcome`] and exits; argument checks clap can make are
//! in the clap structs of [`crate::cli`].

use std::path::PathBuf;

use clap::CommandFactory;

use crate::cli::{
    AuditCommand, CheckpointCommand, Cli, Command, ConfigCommand, DecisionCommand, DeleterCommand, DrillCommand,
    HoldCommand, LeaseCommand, PolicyCommand, QuarantineCommand, ReportCommand, RolloutCommand, WriterCommand,
};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::ops::commands;
use crate::ops::context::Context;
use crate::ops::{plan, protect, quarantine};
use crate::report::output::Outcome;

/// Runs the command line: `config check` before the configuration is needed, every other subcommand in a
/// [`Context`] whose pools are closed afterwards, failed or not.
///
/// # Errors
/// The command's error ("could not decide", exit 2).
pub async fn run(cli: &Cli, loaded: Result<Config>) -> Result<Outcome> {
    let (config_path, explicit) = match &cli.config {
        Some(p) => (p.clone(), true),
        None => (PathBuf::from("lakedrill.toml"), false),
    };
    if let Command::Config {
        command: ConfigCommand::Check,
    } = &cli.command
    {
        return crate::cli::config_check::check(&config_path, explicit, &Cli::command());
    }
    let mut config = loaded?;
    config.progress = !cli.quiet;
    // The trust a deleter run is given is the one it judges with everywhere, also where the plan it repeats reads
    // the bundles of protected snapshots that left the table (`[keys] trust` there otherwise): a purge that plan
    // --trust proposed an orphan candidate to must see the same orphans.
    if config.keys.trust.is_none() {
        match &cli.command {
            Command::Purge { trust, .. } => config.keys.trust = Some(trust.clone()),
            Command::Reconcile { trust: Some(t), .. } => config.keys.trust = Some(t.clone()),
            Command::Quarantine {
                action: None,
                trust: Some(t),
                ..
            } => config.keys.trust = Some(t.clone()),
            _ => {}
        }
    }
    let ctx = Context::new(config);
    // The pools the command opened are closed before the runtime ends, whether it succeeded or not (sqlx#3645).
    let r = dispatch(cli, &ctx).await;
    ctx.close().await;
    r
}

/// Runs the command of `cli` in `ctx`.
async fn dispatch(cli: &Cli, ctx: &Context) -> Result<Outcome> {
    match &cli.command {
        Command::Config { .. } => unreachable_config(),
        Command::Report {
            command:
                ReportCommand::Merge {
                    shard_reports,
                    key,
                    trust,
                    reports,
                    metrics_file,
                },
        } => commands::report_merge(ctx, shard_reports, key, trust, reports, metrics_file.as_deref()).await,
        Command::Demo { dir } => crate::lab::demo::run(ctx, dir, cli.quiet).await,
        Command::Inspect { what, table, select } => {
            commands::inspect(ctx, &table.source()?, (*what).into(), &select.selector()).await
        }
        Command::Resolve { table, select } => commands::resolve(ctx, &table.source()?, &select.selector()).await,
        Command::Keygen { name, dir } => commands::keygen(name, dir),
        Command::Seal {
            table,
            select,
            key,
            out,
        } => commands::seal(ctx, &table.source()?, &select.selector(), key, out).await,
        Command::Restore {
            bundle,
            trust,
            deep,
            table_root,
            into,
            catalog,
            table,
            put_back,
            shard,
            key,
            reports,
            run_id,
        } => match (into, catalog, table) {
            _ if *put_back => commands::restore_put_back(ctx, bundle, trust).await,
            (None, None, None) if key.is_some() && shard.is_some() => {
                let share = commands::SignedShare {
                    shard: shard.as_deref().unwrap_or_default(),
                    key: key.as_deref().unwrap_or_else(|| std::path::Path::new("")),
                    reports,
                    run_id: run_id.as_deref(),
                    quiet: cli.quiet,
                };
                commands::restore_share_signed(ctx, bundle, trust, &share).await
            }
            (Some(into), Some(catalog), Some(table)) => {
                crate::ops::recover::restore_into(ctx, bundle, trust, into, catalog, table).await
            }
            _ => {
                let opts = crate::bundle::VerifyOptions {
                    deep: *deep,
                    table_root: table_root.clone(),
                    shard: shard.as_deref().map(crate::bundle::ObjectShard::parse).transpose()?,
                };
                commands::restore(ctx, bundle, trust, &opts).await
            }
        },
        Command::Backup {
            table,
            snapshot_id,
            ref_name,
            checkpoint,
            at,
            key,
            to,
        } => {
            let point =
                crate::ops::backup::BackupPoint::from_flags(checkpoint.as_deref(), *snapshot_id, ref_name.as_deref());
            crate::ops::backup::backup(ctx, &table.source()?, &point, at.as_deref(), key, to).await
        }
        Command::Recover {
            from,
            trust,
            into,
            catalog,
            table,
        } => commands::recover(ctx, from, trust, into, catalog.as_deref(), table.as_deref()).await,
        Command::Rollback { table, to } => crate::ops::runbook::rollback(ctx, &table.source()?, *to).await,
        Command::SetCurrent {
            table,
            select,
            from_bundle,
            trust,
        } => match (from_bundle, trust) {
            (Some(b), Some(t)) => crate::ops::runbook::set_current_from_bundle(ctx, &table.source()?, b, t).await,
            (Some(b), None) => Err(Error::invalid(
                "--trust",
                format!(
                    "--from-bundle {b} needs a trust folder to verify the bundle under: give --trust DIR or set \
                     [keys] trust in the configuration"
                ),
            )),
            (None, _) => crate::ops::runbook::set_current(ctx, &table.source()?, &select.selector()).await,
        },
        Command::Policy {
            command: PolicyCommand::Check { file },
        } => commands::policy_check(file),
        Command::Lease { command } => match command {
            LeaseCommand::Add {
                table,
                policy,
                snapshot_id,
                purpose,
                owner,
                expires_in,
            } => protect::lease_add(ctx, &table.source()?, policy, *snapshot_id, purpose, owner, expires_in).await,
            LeaseCommand::List { table } => protect::list(ctx, &table.source()?, "leases").await,
            LeaseCommand::Release { id } => protect::end(ctx, "lease", id).await,
        },
        Command::Hold { command } => match command {
            HoldCommand::Set { table, scope, reason } => protect::hold_set(ctx, &table.source()?, scope, reason).await,
            HoldCommand::Clear { id } => protect::end(ctx, "hold", id).await,
            HoldCommand::List { table } => protect::list(ctx, &table.source()?, "holds").await,
        },
        Command::Writer { command } => match command {
            WriterCommand::Begin { table, prefix } => protect::writer_begin(ctx, &table.source()?, prefix).await,
            WriterCommand::End { id } => protect::end(ctx, "writer", id).await,
            WriterCommand::List { table } => protect::list(ctx, &table.source()?, "writers").await,
        },
        Command::Checkpoint { command } => match command {
            CheckpointCommand::Add { table, snapshot_id, at } => {
                protect::checkpoint_add(ctx, &table.source()?, *snapshot_id, at.as_deref()).await
            }
            CheckpointCommand::List { table } => protect::list(ctx, &table.source()?, "checkpoints").await,
        },
        Command::Plan {
            table,
            policy,
            baseline,
            trust,
        } => {
            plan::plan_output(
                ctx,
                &table.source()?,
                policy,
                &baseline.options(),
                trust.as_deref(),
                !cli.json,
            )
            .await
        }
        Command::Status {
            candidate,
            table,
            policy,
        } => {
            let src = table.source().ok();
            plan::status(ctx, src.as_ref(), candidate.as_deref(), policy.as_deref()).await
        }
        Command::Quarantine {
            action: Some(QuarantineCommand::Extend { candidate, by, reason }),
            ..
        } => crate::ops::rollout::extend(ctx, candidate, by, reason).await,
        Command::Quarantine {
            action:
                Some(QuarantineCommand::Release {
                    candidate,
                    table,
                    reason,
                }),
            ..
        } => quarantine::release(ctx, &table.source()?, candidate, reason).await,
        Command::Quarantine {
            action: None,
            candidate,
            table,
            policy,
            key,
            bundles,
            mode,
            trust,
        } => {
            let (Some(candidate), Some(policy), Some(key), Some(bundles)) = (candidate, policy, key, bundles) else {
                return Err(Error::invalid(
                    "quarantine",
                    "give CANDIDATE, --policy, --key and --bundles",
                ));
            };
            // As `plan --trust`: a folder named must be one, or a typo passes unnoticed until a protected snapshot
            // leaves the table.
            if let Some(t) = trust
                && !t.is_dir()
            {
                return Err(Error::invalid(
                    "--trust",
                    format!("{}: not a folder (give the folder of trusted *.pub keys)", t.display()),
                ));
            }
            quarantine::quarantine(ctx, &table.source()?, candidate, policy, key, bundles, (*mode).into()).await
        }
        Command::Purge {
            candidate,
            table,
            evidence,
            reports,
            trust,
            policy,
            key,
            receipts,
            dry_run,
            metrics_file,
        } => {
            let opts = crate::ops::deleter::PurgeOptions {
                candidate_id: candidate.clone(),
                evidence: evidence.clone(),
                reports: reports.clone(),
                trust: trust.clone(),
                policy: policy.clone(),
                key: key.clone(),
                receipts: receipts.clone(),
                dry_run: *dry_run,
            };
            let r = crate::ops::deleter::purge(ctx, &table.source()?, &opts).await;
            commands::deleter_metrics(ctx, metrics_file.as_deref(), "purge", candidate, r)
        }
        Command::Reconcile {
            candidate,
            table,
            trust,
            policy,
            key,
            receipts,
            metrics_file,
        } => {
            let r = crate::ops::deleter::reconcile(
                ctx,
                &table.source()?,
                candidate,
                key,
                trust.as_deref(),
                receipts,
                policy,
            )
            .await;
            commands::deleter_metrics(ctx, metrics_file.as_deref(), "reconcile", candidate, r)
        }
        Command::Undelete {
            candidate,
            table,
            trust,
            key,
            receipts,
        } => {
            let seal = key.as_deref().map(|k| (k, receipts.as_str()));
            crate::ops::deleter::undelete(ctx, &table.source()?, candidate, trust, seal).await
        }
        Command::Deleter { command } => match command {
            DeleterCommand::Stop { reason } => crate::ops::deleter::switch(ctx, true, reason).await,
            DeleterCommand::Start { reason } => crate::ops::deleter::switch(ctx, false, reason).await,
        },
        Command::Version => crate::ops::rollout::version(),
        Command::Rollout { command } => match command {
            RolloutCommand::Set {
                table,
                stage,
                reason,
                by,
                policy,
                force,
            } => {
                let by = by
                    .clone()
                    .or_else(|| std::env::var("USER").ok())
                    .or_else(|| std::env::var("LOGNAME").ok())
                    .unwrap_or_else(|| "unknown".to_owned());
                crate::ops::rollout::set(ctx, &table.source(), stage, reason, &by, policy.as_deref(), *force).await
            }
            RolloutCommand::Show { table } => crate::ops::rollout::show(ctx, &table.source()).await,
            RolloutCommand::Report {
                table,
                policy,
                since,
                baseline,
            } => crate::ops::rollout::report(ctx, &table.source(), policy, since, &baseline.options()).await,
        },
        Command::Decision { command } => match command {
            DecisionCommand::Apply { file, table, trust } => {
                crate::ops::decision::apply(ctx, &table.source()?, file, trust).await
            }
            DecisionCommand::Sign { file, key, trust, out } => {
                crate::ops::decision::sign(file, key, trust.as_deref(), out)
            }
        },
        Command::Gates {
            table,
            policy,
            trust,
            reports,
            since,
        } => {
            if let (None, Some(since)) = (trust, since) {
                return Err(Error::invalid(
                    "--since",
                    format!(
                        "--since {since} applies to the drill-report gates, which need a trust folder: give --trust \
                         DIR or set [keys] trust in the configuration"
                    ),
                ));
            }
            let safety = trust.as_ref().map(|t| crate::ops::rollout::SafetyOptions {
                trust: t.clone(),
                reports: reports.clone(),
                since: since.clone(),
            });
            crate::ops::rollout::gates(ctx, &table.source()?, policy, safety.as_ref()).await
        }
        Command::Drill {
            command:
                DrillCommand::Run {
                    plan,
                    shard,
                    run_id,
                    split,
                    metrics_file,
                    keep,
                },
        } => {
            let opts = crate::ops::drill::RunOptions {
                shard: shard.clone().map(|s| crate::ops::drill::Shard { split: *split, ..s }),
                run_id: run_id.clone(),
                metrics_file: metrics_file.clone(),
                quiet: cli.quiet,
                keep: *keep,
            };
            commands::drill_run(ctx, plan, &opts).await
        }
        Command::Drill {
            command:
                DrillCommand::Faults {
                    key,
                    trust,
                    reports,
                    scratch,
                    keep,
                    scenarios,
                    store,
                },
        } => {
            let opts = crate::lab::faults::MatrixOptions {
                scratch: scratch.clone(),
                keep: *keep,
                only: scenarios.clone(),
                store: store.clone(),
            };
            crate::lab::faults::command(ctx, &opts, key.as_deref(), trust.as_deref(), Some(reports)).await
        }
        Command::Audit {
            command:
                AuditCommand::Verify {
                    report,
                    trust,
                    chain,
                    expect_head,
                },
        } => commands::audit_verify(ctx, report, trust, *chain, expect_head.as_deref()).await,
    }
}

/// `config check` is answered before the configuration is needed.
fn unreachable_config() -> Result<Outcome> {
    Err(Error::Internal("config subcommand dispatched twice".into()))
}
