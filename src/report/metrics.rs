//! Prometheus metrics for node_exporter's textfile collector (`--metrics-file PATH`).
//!
//! A command run with `--metrics-file` writes one small file in the Prometheus text exposition format
//! (version 0.0.4): a `# HELP` and a `# TYPE` line per family, names prefixed `lakedrill_`, labels that
//! say which plan or candidate the numbers belong to. The file is written to a temporary file in the
//! same folder and renamed over the target, so the collector never reads half a file. Every run writes
//! the file, also a run that could not decide (exit 2): then `lakedrill_*_last_exit_code` is 2 and the
//! last-success timestamp keeps its previous value, so both "it failed" and "it stopped running" can be
//! alerted on.
//!
//! What it does not do: serve HTTP, push to a gateway, or merge files of several commands — give each
//! command (and each plan) its own file in the collector's folder.
//!
//! See: <https://prometheus.io/docs/instrumenting/exposition_formats/>,
//! <https://github.com/prometheus/node_exporter#textfile-collector>.

use std::fmt::Write as _;
use std::path::Path;

use crate::error::{Error, Result};
use crate::evidence::predicate::DrillPredicate;

/// One metric family: a name, its help text and its samples (all gauges).
#[derive(Debug, Clone)]
struct Family {
    name: String,
    help: String,
    samples: Vec<(Vec<(String, String)>, f64)>,
}

/// A set of gauge families, rendered in the Prometheus text format.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    families: Vec<Family>,
}

impl Metrics {
    /// An empty set.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one gauge sample; families keep the order of their first sample.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: f64) {
        let labels: Vec<(String, String)> = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        if let Some(f) = self.families.iter_mut().find(|f| f.name == name) {
            f.samples.push((labels, value));
        } else {
            self.families.push(Family {
                name: name.to_owned(),
                help: help.to_owned(),
                samples: vec![(labels, value)],
            });
        }
    }

    /// The value of the first sample of `name`, if any.
    #[must_use]
    pub fn value(&self, name: &str) -> Option<f64> {
        self.families
            .iter()
            .find(|f| f.name == name)
            .and_then(|f| f.samples.first())
            .map(|s| s.1)
    }

    /// The text exposition format, newline-terminated.
    #[must_use]
    pub fn render(&self) -> String {
        let mut s = String::new();
        for f in &self.families {
            let _ = writeln!(s, "# HELP {} {}", f.name, escape_help(&f.help));
            let _ = writeln!(s, "# TYPE {} gauge", f.name);
            for (labels, v) in &f.samples {
                s.push_str(&f.name);
                if !labels.is_empty() {
                    s.push('{');
                    for (i, (k, val)) in labels.iter().enumerate() {
                        if i > 0 {
                            s.push(',');
                        }
                        let _ = write!(s, "{k}=\"{}\"", escape_label(val));
                    }
                    s.push('}');
                }
                let _ = writeln!(s, " {}", number(*v));
            }
        }
        s
    }

    /// Writes the file atomically: a temporary file in the same folder, flushed, then renamed over `path`.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file when the folder is missing or not writable.
    pub fn write_atomic(&self, path: &Path) -> Result<()> {
        write_atomic(path, self.render().as_bytes())
    }
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
///
/// # Errors
/// [`Error::Io`] naming the file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(path.display().to_string(), "names no file"))?;
    // The textfile collector reads only `*.prom`; a temporary name ending differently is never read.
    let tmp = dir.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io("write metrics file", path, e)
    })
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        format!("{v}")
    }
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[allow(clippy::cast_precision_loss)]
fn seconds(t: chrono::DateTime<chrono::Utc>) -> f64 {
    t.timestamp_millis() as f64 / 1000.0
}

fn rfc3339_seconds(s: &str) -> Option<f64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| seconds(t.with_timezone(&chrono::Utc)))
}

/// The drill metrics of one run of a plan; `labels` name it (`plan`, and `shard` for a shard run).
///
/// `predicate` is the signed report's predicate when the drill ran to a report (exit 0 or 1) and `None`
/// when it could not decide (exit 2); `last_success` is the finish time of the newest `PASS` report of the
/// plan (from its report chain).
#[must_use]
#[allow(clippy::cast_precision_loss)]
pub fn drill(
    labels: &[(&str, &str)],
    now: chrono::DateTime<chrono::Utc>,
    predicate: Option<&DrillPredicate>,
    exit_code: u8,
    last_success: Option<chrono::DateTime<chrono::Utc>>,
) -> Metrics {
    let l = labels.to_vec();
    let mut m = Metrics::new();
    m.gauge(
        "lakedrill_drill_last_run_timestamp_seconds",
        "When the last drill run of the plan ended (Unix time).",
        &l,
        seconds(now),
    );
    m.gauge(
        "lakedrill_drill_last_exit_code",
        "Exit code of the last drill run: 0 verified, 1 findings, 2 could not decide.",
        &l,
        f64::from(exit_code),
    );
    m.gauge(
        "lakedrill_drill_last_success_timestamp_seconds",
        "Finish time of the newest report of the plan whose gate is PASS (Unix time; 0 if none).",
        &l,
        last_success.map_or(0.0, seconds),
    );
    let gate = predicate.is_some_and(|p| p.summary.gate == "PASS");
    m.gauge(
        "lakedrill_drill_gate_pass",
        "1 when the last run's gate is PASS, 0 when it is FAIL or the run could not decide.",
        &l,
        if gate { 1.0 } else { 0.0 },
    );
    if let Some(p) = predicate {
        m.gauge(
            "lakedrill_drill_items_passed",
            "Sampled items RESTORE_VERIFIED in the last run.",
            &l,
            p.summary.passed as f64,
        );
        m.gauge(
            "lakedrill_drill_items_failed",
            "Sampled items FAILED in the last run.",
            &l,
            p.summary.failed as f64,
        );
        m.gauge(
            "lakedrill_drill_sample_population",
            "Items eligible for sampling in the last run.",
            &l,
            p.sample.population as f64,
        );
        m.gauge(
            "lakedrill_drill_rto_seconds_max",
            "Largest per-item recovery time (restore start to verified) in the last run.",
            &l,
            p.results.iter().map(|r| r.rto_seconds).fold(0.0, f64::max),
        );
        m.gauge(
            "lakedrill_drill_rpo_seconds_max",
            "Largest per-item recovery point gap in the last run: declared checkpoint time minus recovered commit \
             time (cold backups; failed items and quarantine items have none).",
            &l,
            p.results.iter().filter_map(|r| r.rpo_seconds).fold(0.0, f64::max),
        );
        // Quarantine drills: how much history the bundles preserve. Absent when no item's was measured (0 would
        // claim every bundle holds the live head).
        if let Some(age) = p.results.iter().filter_map(|r| r.history_age_seconds).reduce(f64::max) {
            m.gauge(
                "lakedrill_drill_history_age_seconds_max",
                "Largest per-item history age in the last run: the live table head's commit time minus the \
                 bundle snapshot's (quarantine drills).",
                &l,
                age,
            );
        }
        m.gauge(
            "lakedrill_drill_bytes_verified",
            "Bytes hashed and verified in the last run.",
            &l,
            p.results.iter().map(|r| r.bytes_verified as f64).sum(),
        );
        m.gauge(
            "lakedrill_drill_objects_verified",
            "Objects verified in the last run.",
            &l,
            p.results.iter().map(|r| r.objects_verified as f64).sum(),
        );
        if let Some(t) = rfc3339_seconds(&p.started_at).zip(rfc3339_seconds(&p.finished_at)) {
            m.gauge(
                "lakedrill_drill_duration_seconds",
                "Wall time of the last run, from the report's started_at to finished_at.",
                &l,
                t.1 - t.0,
            );
        }
    }
    m
}

/// The deleter metrics of one run of `purge` or `reconcile` (`command`) on `candidate`.
///
/// `outcome` is the command's JSON document when it decided (exit 0 or 1), `None` when it could not (2).
/// `previous` is the metrics file as it was before this run; the last-success time is carried over from it
/// unless this run succeeded.
#[must_use]
#[allow(clippy::cast_precision_loss)]
pub fn deleter(
    command: &str,
    candidate: &str,
    now: chrono::DateTime<chrono::Utc>,
    outcome: Option<&serde_json::Value>,
    exit_code: u8,
    previous: Option<&str>,
) -> Metrics {
    let l = [("command", command), ("candidate", candidate)];
    let mut m = Metrics::new();
    let status = outcome
        .and_then(|o| o.get("status"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("ERROR");
    let count = |state: &str| {
        outcome
            .and_then(|o| o.get("objects"))
            .and_then(|o| o.get(state))
            .and_then(serde_json::Value::as_array)
            .map_or(0.0, |a| a.len() as f64)
    };
    let success = exit_code == 0 && status == "VERIFIED";
    let last_success = if success {
        seconds(now)
    } else {
        previous
            .and_then(|p| previous_value(p, "lakedrill_deleter_last_success_timestamp_seconds"))
            .unwrap_or(0.0)
    };
    m.gauge(
        "lakedrill_deleter_last_run_timestamp_seconds",
        "When the last purge or reconcile run ended (Unix time).",
        &l,
        seconds(now),
    );
    m.gauge(
        "lakedrill_deleter_last_exit_code",
        "Exit code of the last run: 0 accepted and verified, 1 refused/halted/unknown, 2 could not decide.",
        &l,
        f64::from(exit_code),
    );
    m.gauge(
        "lakedrill_deleter_last_success_timestamp_seconds",
        "When a run last ended with every object of the candidate deleted and verified (Unix time; 0 if never).",
        &l,
        last_success,
    );
    for s in ["DRY_RUN", "REFUSED", "HALTED", "VERIFIED", "DELETE_UNKNOWN", "ERROR"] {
        let labels = [("command", command), ("candidate", candidate), ("status", s)];
        m.gauge(
            "lakedrill_deleter_status",
            "1 for the status the last run ended in, 0 for the others.",
            &labels,
            if s == status { 1.0 } else { 0.0 },
        );
    }
    m.gauge(
        "lakedrill_deleter_gate_accepted",
        "1 when the last run passed the evidence and compare-and-set gate (or settled objects), else 0.",
        &l,
        if matches!(status, "DRY_RUN" | "VERIFIED" | "DELETE_UNKNOWN") {
            1.0
        } else {
            0.0
        },
    );
    m.gauge(
        "lakedrill_deleter_objects_verified",
        "Objects of the candidate deleted and verified gone.",
        &l,
        count("VERIFIED"),
    );
    m.gauge(
        "lakedrill_unreconciled_unknowns",
        "Objects of the candidate in DELETE_UNKNOWN after the last run (must reach 0 through reconcile).",
        &l,
        count("DELETE_UNKNOWN"),
    );
    m
}

/// The value of the first sample of `name` in a metrics file written before.
#[must_use]
pub fn previous_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_help_type_and_escaped_labels() {
        let mut m = Metrics::new();
        m.gauge("lakedrill_x", "A \\ help\nline.", &[("plan", "a\"b\\c\nd")], 1.5);
        m.gauge("lakedrill_x", "ignored", &[("plan", "e")], f64::INFINITY);
        let t = m.render();
        assert_eq!(
            t,
            "# HELP lakedrill_x A \\\\ help\\nline.\n# TYPE lakedrill_x gauge\n\
             lakedrill_x{plan=\"a\\\"b\\\\c\\nd\"} 1.5\nlakedrill_x{plan=\"e\"} +Inf\n"
        );
    }

    #[test]
    fn deleter_carries_the_last_success_over_from_the_previous_file() {
        let t0 = chrono::DateTime::from_timestamp(1_000, 0).unwrap_or_default();
        let ok = serde_json::json!({"status": "VERIFIED", "objects": {"VERIFIED": ["a", "b"]}});
        let first = deleter("purge", "c-1", t0, Some(&ok), 0, None).render();
        let t1 = chrono::DateTime::from_timestamp(2_000, 0).unwrap_or_default();
        let second = deleter("purge", "c-1", t1, None, 2, Some(&first));
        assert_eq!(
            second.value("lakedrill_deleter_last_success_timestamp_seconds"),
            Some(1000.0)
        );
        assert_eq!(
            second.value("lakedrill_deleter_last_run_timestamp_seconds"),
            Some(2000.0)
        );
        assert_eq!(second.value("lakedrill_deleter_last_exit_code"), Some(2.0));
    }
}
