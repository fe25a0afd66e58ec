//! The `lakedrill` binary: parse arguments, call the library, print, exit 0/1/2.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::ErrorKind as ClapErrorKind;
use clap::{CommandFactory, FromArgMatches};
use lakedrill::Outcome;
use lakedrill::cli::{
    AuditCommand, CheckpointCommand, Cli, Command, ConfigCommand, DecisionCommand, DeleterCommand, DrillCommand,
    HoldCommand, LeaseCommand, PolicyCommand, QuarantineCommand, ReportCommand, RolloutCommand, WriterCommand,
};
use lakedrill::config::Config;
use lakedrill::ops::commands;
use lakedrill::ops::context::Context;
use lakedrill::ops::{plan, protect, quarantine};

async fn run(cli: &Cli, loaded: lakedrill::Result<Config>) -> lakedrill::Result<Outcome> {
    let (config_path, explicit) = match &cli.config {
        Some(p) => (p.clone(), true),
        None => (PathBuf::from("lakedrill.toml"), false),
    };
    if let Command::Config {
        command: ConfigCommand::Check,
    } = &cli.command
    {
        return lakedrill::cli::config_check::check(&config_path, explicit, &Cli::command());
    }
    let mut config = loaded?;
    config.progress = !cli.quiet;
    let ctx = Context::new(config);
    // The pools the command opened are closed before the runtime ends, whether it succeeded or not (sqlx#3645).
    let r = dispatch(cli, &ctx).await;
    ctx.close().await;
    r
}

/// Runs the command of `cli` in `ctx`.
// The arms pass `&ctx` as they did when the context was a local of `run`; kept so, to keep them unchanged.
#[allow(clippy::needless_borrow)]
async fn dispatch(cli: &Cli, ctx: &Context) -> lakedrill::Result<Outcome> {
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
        } => commands::report_merge(&ctx, shard_reports, key, trust, reports, metrics_file.as_deref()).await,
        Command::Demo { dir } => lakedrill::lab::demo::run(&ctx, dir, cli.quiet).await,
        Command::Inspect { what, table, select } => {
            commands::inspect(&ctx, &table.source()?, (*what).into(), &select.selector()).await
        }
        Command::Resolve { table, select } => {
            let sel = select.selector();
            if sel == lakedrill::table::resolve::Selector::Current {
                return Err(lakedrill::Error::invalid(
                    "resolve",
                    "give one of --snapshot-id, --ref or --as-of",
                ));
            }
            commands::resolve(&ctx, &table.source()?, &sel).await
        }
        Command::Keygen { name, dir } => commands::keygen(name, dir),
        Command::Seal {
            table,
            select,
            key,
            out,
        } => commands::seal(&ctx, &table.source()?, &select.selector(), key, out).await,
        Command::Restore {
            bundle,
            trust,
            deep,
            table_root,
            into,
            catalog,
            table,
        } => match (into, catalog, table) {
            (Some(into), Some(catalog), Some(table)) => {
                lakedrill::ops::materialize::restore_into(&ctx, bundle, trust, into, catalog, table).await
            }
            _ => commands::restore(&ctx, bundle, trust, *deep, table_root.clone()).await,
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
            let point = match (checkpoint, snapshot_id, ref_name) {
                (Some(c), _, _) => lakedrill::ops::backup::BackupPoint::Checkpoint(c.clone()),
                (None, Some(id), _) => {
                    lakedrill::ops::backup::BackupPoint::Select(lakedrill::table::resolve::Selector::SnapshotId(*id))
                }
                (None, None, Some(r)) => {
                    lakedrill::ops::backup::BackupPoint::Select(lakedrill::table::resolve::Selector::Ref(r.clone()))
                }
                (None, None, None) => {
                    lakedrill::ops::backup::BackupPoint::Select(lakedrill::table::resolve::Selector::Current)
                }
            };
            lakedrill::ops::backup::backup(&ctx, &table.source()?, &point, at.as_deref(), key, to).await
        }
        Command::Recover {
            from,
            trust,
            into,
            catalog,
            table,
        } => commands::recover(&ctx, from, trust, into, catalog.as_deref(), table.as_deref()).await,
        Command::Rollback { table, to } => lakedrill::ops::runbook::rollback(&ctx, &table.source()?, *to).await,
        Command::SetCurrent {
            table,
            select,
            from_bundle,
            trust,
        } => match (from_bundle, trust) {
            (Some(b), Some(t)) => lakedrill::ops::runbook::set_current_from_bundle(&ctx, &table.source()?, b, t).await,
            _ => {
                let sel = select.selector();
                if sel == lakedrill::table::resolve::Selector::Current {
                    return Err(lakedrill::Error::invalid(
                        "set-current",
                        "give one of --snapshot-id, --ref or --from-bundle",
                    ));
                }
                lakedrill::ops::runbook::set_current(&ctx, &table.source()?, &sel).await
            }
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
            } => protect::lease_add(&ctx, &table.source()?, policy, *snapshot_id, purpose, owner, expires_in).await,
            LeaseCommand::List { table } => protect::list(&ctx, &table.source()?, "leases").await,
            LeaseCommand::Release { id } => protect::end(&ctx, "lease", id).await,
        },
        Command::Hold { command } => match command {
            HoldCommand::Set { table, scope, reason } => protect::hold_set(&ctx, &table.source()?, scope, reason).await,
            HoldCommand::Clear { id } => protect::end(&ctx, "hold", id).await,
            HoldCommand::List { table } => protect::list(&ctx, &table.source()?, "holds").await,
        },
        Command::Writer { command } => match command {
            WriterCommand::Begin { table, prefix } => protect::writer_begin(&ctx, &table.source()?, prefix).await,
            WriterCommand::End { id } => protect::end(&ctx, "writer", id).await,
            WriterCommand::List { table } => protect::list(&ctx, &table.source()?, "writers").await,
        },
        Command::Checkpoint { command } => match command {
            CheckpointCommand::Add { table, snapshot_id, at } => {
                protect::checkpoint_add(&ctx, &table.source()?, *snapshot_id, at.as_deref()).await
            }
            CheckpointCommand::List { table } => protect::list(&ctx, &table.source()?, "checkpoints").await,
        },
        Command::Plan { table, policy } => plan::plan(&ctx, &table.source()?, policy).await,
        Command::Status {
            candidate,
            table,
            policy,
        } => {
            let src = table.source().ok();
            plan::status(&ctx, src.as_ref(), candidate.as_deref(), policy.as_deref()).await
        }
        Command::Quarantine {
            action: Some(QuarantineCommand::Extend { candidate, by, reason }),
            ..
        } => lakedrill::ops::rollout::extend(&ctx, candidate, by, reason).await,
        Command::Quarantine {
            action: None,
            candidate,
            table,
            policy,
            key,
            bundles,
            mode,
        } => {
            let (Some(candidate), Some(policy), Some(key), Some(bundles)) = (candidate, policy, key, bundles) else {
                return Err(lakedrill::Error::invalid(
                    "quarantine",
                    "give CANDIDATE, --policy, --key and --bundles",
                ));
            };
            let mode = match mode.as_str() {
                "tag" => quarantine::QuarantineMode::Tag,
                "bundle" => quarantine::QuarantineMode::Bundle,
                m => {
                    return Err(lakedrill::Error::invalid(
                        "--mode",
                        format!("{m:?}: expected tag or bundle"),
                    ));
                }
            };
            quarantine::quarantine(&ctx, &table.source()?, candidate, policy, key, bundles, mode).await
        }
        Command::Purge {
            candidate,
            table,
            evidence,
            trust,
            policy,
            key,
            receipts,
            dry_run,
            metrics_file,
        } => {
            let opts = lakedrill::ops::deleter::PurgeOptions {
                candidate_id: candidate.clone(),
                evidence: evidence.clone(),
                trust: trust.clone(),
                policy: policy.clone(),
                key: key.clone(),
                receipts: receipts.clone(),
                dry_run: *dry_run,
            };
            let r = lakedrill::ops::deleter::purge(&ctx, &table.source()?, &opts).await;
            commands::deleter_metrics(&ctx, metrics_file.as_deref(), "purge", candidate, r)
        }
        Command::Reconcile {
            candidate,
            table,
            policy,
            key,
            receipts,
            metrics_file,
        } => {
            let r = lakedrill::ops::deleter::reconcile(&ctx, &table.source()?, candidate, key, receipts, policy).await;
            commands::deleter_metrics(&ctx, metrics_file.as_deref(), "reconcile", candidate, r)
        }
        Command::Undelete {
            candidate,
            table,
            trust,
        } => lakedrill::ops::deleter::undelete(&ctx, &table.source()?, candidate, trust).await,
        Command::Deleter { command } => match command {
            DeleterCommand::Stop { reason } => lakedrill::ops::deleter::switch(&ctx, true, reason).await,
            DeleterCommand::Start { reason } => lakedrill::ops::deleter::switch(&ctx, false, reason).await,
        },
        Command::Version => lakedrill::ops::rollout::version(),
        Command::Rollout { command } => match command {
            RolloutCommand::Set {
                table,
                stage,
                reason,
                by,
                policy,
            } => {
                let by = by
                    .clone()
                    .or_else(|| std::env::var("USER").ok())
                    .or_else(|| std::env::var("LOGNAME").ok())
                    .unwrap_or_else(|| "unknown".to_owned());
                lakedrill::ops::rollout::set(&ctx, &table.source(), stage, reason, &by, policy.as_deref()).await
            }
            RolloutCommand::Show { table } => lakedrill::ops::rollout::show(&ctx, &table.source()).await,
            RolloutCommand::Report {
                table,
                policy,
                since,
                orphan_older_than,
            } => lakedrill::ops::rollout::report(&ctx, &table.source(), policy, since, orphan_older_than).await,
        },
        Command::Decision { command } => match command {
            DecisionCommand::Apply { file, table, trust } => {
                lakedrill::ops::decision::apply(&ctx, &table.source()?, file, trust).await
            }
            DecisionCommand::Sign { file, key, out } => lakedrill::ops::decision::sign(file, key, out),
        },
        Command::Gates {
            table,
            policy,
            trust,
            reports,
            since,
        } => {
            let safety = trust.as_ref().map(|t| lakedrill::ops::rollout::SafetyOptions {
                trust: t.clone(),
                reports: reports.clone(),
                since: since.clone(),
            });
            lakedrill::ops::rollout::gates(&ctx, &table.source()?, policy, safety.as_ref()).await
        }
        Command::Drill {
            command:
                DrillCommand::Run {
                    plan,
                    shard,
                    run_id,
                    metrics_file,
                    keep,
                },
        } => {
            let opts = commands::DrillRunOptions {
                shard: shard.clone(),
                run_id: run_id.clone(),
                metrics_file: metrics_file.clone(),
                quiet: cli.quiet,
                keep: *keep,
            };
            commands::drill_run(&ctx, plan, &opts).await
        }
        Command::Drill {
            command:
                DrillCommand::Faults {
                    key,
                    reports,
                    scratch,
                    keep,
                    scenarios,
                    store,
                },
        } => {
            let opts = lakedrill::lab::faults::MatrixOptions {
                scratch: scratch.clone(),
                keep: *keep,
                only: scenarios.clone(),
                store: store.clone(),
            };
            lakedrill::lab::faults::command(&ctx, &opts, key.as_deref(), Some(reports)).await
        }
        Command::Audit {
            command: AuditCommand::Verify { report, trust, chain },
        } => commands::audit_verify(&ctx, report, trust, *chain).await,
    }
}

/// `config check` is answered before the configuration is needed.
fn unreachable_config() -> lakedrill::Result<Outcome> {
    Err(lakedrill::Error::Internal("config subcommand dispatched twice".into()))
}

/// The configuration file named on the command line (`--config FILE` / `--config=FILE`), before clap runs:
/// its `[keys]` and `[defaults.*]` change clap's defaults.
fn config_from_args() -> (PathBuf, bool) {
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        if a == "--" {
            break;
        }
        if a == "--config" {
            if let Some(v) = args.next() {
                return (PathBuf::from(v), true);
            }
        } else if let Some(v) = a.to_str().and_then(|s| s.strip_prefix("--config=")) {
            return (PathBuf::from(v), true);
        }
    }
    (PathBuf::from("lakedrill.toml"), false)
}

fn main() -> ExitCode {
    lakedrill::table::bound_avro_allocations();
    let (config_path, explicit) = config_from_args();
    let mut definition = Cli::command();
    let loaded = match Config::load(&config_path, explicit) {
        Ok(cfg) => {
            let (d, problems) = lakedrill::cli::config_check::apply_defaults(definition, &cfg);
            definition = d;
            if problems.is_empty() {
                Ok(cfg)
            } else {
                Err(lakedrill::Error::Config {
                    file: config_path.display().to_string(),
                    reason: problems.join("; "),
                })
            }
        }
        Err(e) => Err(e),
    };
    let cli = match definition.try_get_matches().and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) => {
            // A broken configuration explains a missing required option better than clap can.
            if let Err(cfg_err) = &loaded
                && !matches!(e.kind(), ClapErrorKind::DisplayHelp | ClapErrorKind::DisplayVersion)
            {
                eprintln!("lakedrill: configuration: {cfg_err}");
            }
            return usage_error(&e);
        }
    };
    lakedrill::evidence::keys::allow_readable_keys(cli.allow_readable_key);
    // Built by hand and shut down with a deadline: a stuck task cannot keep the process alive (sqlx#3645).
    let (result, shutdown) =
        match lakedrill::cli::runtime::block_on(run(&cli, loaded), lakedrill::cli::runtime::SHUTDOWN_GRACE) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("lakedrill: error: cannot start the async runtime: {e}");
                return ExitCode::from(2);
            }
        };
    if shutdown == lakedrill::cli::runtime::Shutdown::TimedOut {
        lakedrill::report::output::warn(format!(
            "a background task was still running {}s after the command finished; exiting without it",
            lakedrill::cli::runtime::SHUTDOWN_GRACE.as_secs()
        ));
    }
    let warnings = lakedrill::report::output::take_warnings();
    match result {
        Ok(mut outcome) => {
            lakedrill::report::output::add_warnings(&mut outcome.json, warnings);
            let mut out = std::io::stdout().lock();
            let res = if cli.json {
                serde_json::to_writer_pretty(&mut out, &outcome.json)
                    .map_err(std::io::Error::other)
                    .and_then(|()| writeln!(out))
            } else {
                write!(out, "{}", outcome.human)
            };
            if let Err(e) = res
                && e.kind() != std::io::ErrorKind::BrokenPipe
            {
                eprintln!("lakedrill: error: cannot write output: {e}");
                return ExitCode::from(2);
            }
            ExitCode::from(outcome.verdict.exit_code())
        }
        Err(e) => {
            let msg = format!("{:#}", anyhow::Error::from(e));
            eprintln!("lakedrill: error: {msg}");
            if cli.json {
                let mut doc = serde_json::json!({"error": msg, "exit_code": 2});
                lakedrill::report::output::add_warnings(&mut doc, warnings);
                println!("{doc}");
            }
            ExitCode::from(2)
        }
    }
}

/// A command line clap could not parse: `--help` and `--version` print as usual (exit 0); anything else
/// is "could not decide" (exit 2), and with `--json` anywhere on the line stdout still carries one JSON
/// document, so that scripts never have to parse clap's text.
fn usage_error(e: &clap::Error) -> ExitCode {
    if matches!(e.kind(), ClapErrorKind::DisplayHelp | ClapErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let _ = e.print();
    if std::env::args_os().any(|a| a == "--json") {
        let text = e.render().to_string();
        let first = text.lines().next().unwrap_or("invalid command line");
        let msg = first.strip_prefix("error: ").unwrap_or(first);
        println!("{}", serde_json::json!({"error": msg, "exit_code": 2, "usage": text}));
    }
    ExitCode::from(2)
}
