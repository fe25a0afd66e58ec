//! The `lakedrill` binary: parse arguments, run [`lakedrill::cli::run::run`], print the outcome, exit 0/1/2.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::ErrorKind as ClapErrorKind;
use clap::{CommandFactory, FromArgMatches};
use lakedrill::cli::Cli;
use lakedrill::config::Config;

/// The allocator of the binary (Cargo.toml says why: RSS at a million objects).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
    let (result, shutdown) = match lakedrill::cli::runtime::block_on(
        lakedrill::cli::run::run(&cli, loaded),
        lakedrill::cli::runtime::SHUTDOWN_GRACE,
    ) {
        // A panic is a bug of lakedrill's: "could not decide" (exit 2) with its message, never Rust's 101.
        Ok((r, how)) => (
            r.unwrap_or_else(|panic| {
                Err(lakedrill::Error::Internal(format!(
                    "lakedrill stopped on an internal error (a bug; please report it): {panic}"
                )))
            }),
            how,
        ),
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
            // Buffered: stdout flushes at every newline, and a purge's document lists a million paths.
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            let res = if cli.json {
                write_json(&mut out, &outcome)
            } else {
                write!(out, "{}", outcome.human)
            }
            .and_then(|()| out.flush());
            if let Err(e) = res
                && e.kind() != std::io::ErrorKind::BrokenPipe
            {
                eprintln!("lakedrill: error: cannot write output: {e}");
                return ExitCode::from(2);
            }
            let code = ExitCode::from(outcome.verdict.exit_code());
            // The process ends here: its memory goes with it, and freeing a document of 100k entries piece by
            // piece took 10 ms of `plan` on a Spark-written table.
            std::mem::forget(outcome);
            code
        }
        Err(e) => {
            let msg = error_message(&anyhow::Error::from(e));
            eprintln!("lakedrill: error: {msg}");
            if cli.json {
                let mut doc = serde_json::json!({"error": msg, "exit_code": 2});
                lakedrill::report::output::add_warnings(&mut doc, warnings);
                print_error_document(&doc);
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
        print_error_document(&serde_json::json!({"error": usage_message(&text), "exit_code": 2, "usage": text}));
    }
    ExitCode::from(2)
}

/// The first paragraph of clap's message on one line, without its `error: ` tag: the sentence and what it
/// lists (`the following required arguments were not provided: --to <TO>`). The first line alone ended at the
/// colon and left the missing arguments to `usage`.
fn usage_message(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).take_while(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let listed: Vec<&str> = lines.collect();
    match (first.is_empty(), listed.is_empty()) {
        (true, _) => "invalid command line".to_owned(),
        (false, true) => first.to_owned(),
        (false, false) => format!("{first} {}", listed.join(", ")),
    }
}

/// An error document on stdout, pretty-printed and newline-terminated like every other document of `--json`.
fn print_error_document(doc: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(doc).unwrap_or_else(|_| doc.to_string())
    );
}

/// The JSON document and a newline. An error writing it keeps its I/O kind: a reader that stopped reading (`| head`)
/// is a broken pipe, not a failure of the command (serde_json wraps it, and wrapping it again as "other" lost it).
fn write_json(out: &mut impl Write, outcome: &lakedrill::report::output::Outcome) -> std::io::Result<()> {
    lakedrill::report::output::write_document(&mut *out, &outcome.json, &outcome.deferred)?;
    writeln!(out)
}

/// An error and its causes as one line for the terminal and the JSON `error`: a cause whose text its error already
/// shows is not repeated (object_store's errors print their sources themselves), and control characters other
/// than line breaks and tabs, which an object's name can hold, are shown escaped (`\u{1b}`) instead of reaching
/// the terminal.
fn error_message(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::error_message;

    /// A usage error's `error` holds the whole first message, the missing arguments included (it stopped at
    /// "were not provided:").
    #[test]
    fn a_usage_error_names_what_is_missing() {
        let text = "error: the following required arguments were not provided:\n  --to <TO>\n  --reason <REASON>\n\n\
                    Usage: lakedrill rollback --to <TO>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            super::usage_message(text),
            "the following required arguments were not provided: --to <TO>, --reason <REASON>"
        );
        let text = "error: unexpected argument '--foo' found\n\n  tip: to pass '--foo' as a value, use '-- --foo'\n";
        assert_eq!(super::usage_message(text), "unexpected argument '--foo' found");
        assert_eq!(super::usage_message(""), "invalid command line");
    }

    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot list t/: {}", self.0)
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// A reader that went away while the document was written: the error is still a broken pipe.
    #[test]
    fn a_closed_reader_is_a_broken_pipe_for_the_json_document() {
        struct Closed;
        impl std::io::Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let outcome = lakedrill::report::output::Outcome {
            verdict: lakedrill::report::output::Verdict::Ok,
            json: serde_json::json!({"candidates": ["a", "b"]}),
            human: String::new(),
            deferred: vec![("kept".into(), std::sync::Arc::new(vec!["c"]))],
        };
        let e = super::write_json(&mut Closed, &outcome).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
        let mut ok = Vec::new();
        super::write_json(&mut ok, &outcome).unwrap();
        assert!(ok.ends_with(b"}\n"));
        let whole: serde_json::Value = serde_json::from_slice(&ok).unwrap();
        assert_eq!(whole, serde_json::json!({"candidates": ["a", "b"], "kept": ["c"]}));
    }

    #[test]
    fn a_cause_already_shown_is_not_repeated_and_control_characters_are_escaped() {
        let inner = std::io::Error::other("bad\u{1}name\u{1b}[31m: illegal");
        let e = anyhow::Error::new(Outer(inner)).context("plan of db.t");
        assert_eq!(
            error_message(&e),
            "plan of db.t: cannot list t/: bad\\u{1}name\\u{1b}[31m: illegal"
        );
        let two = anyhow::anyhow!("line one\n  line two").context("config");
        assert_eq!(error_message(&two), "config: line one\n  line two");
    }
}
