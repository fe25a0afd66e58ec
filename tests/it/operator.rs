//! Operator and auditor experience: `--json` on every command, metrics files, HTML/Markdown reports,
//! `config check`, sharded drills and `report merge`, the deployment examples.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::governance::{Gov, T};
use crate::util::{Run, lakedrill_in, tmpdir};

/// Every stdout must be exactly one JSON document: one value, nothing but whitespace after it.
#[track_caller]
fn one_json_document(r: &Run, what: &str) -> Value {
    let mut it = serde_json::Deserializer::from_str(&r.stdout).into_iter::<Value>();
    let first = match it.next() {
        Some(Ok(v)) => v,
        other => panic!(
            "{what}: stdout is not one JSON document ({other:?}):\n{}\nstderr:\n{}",
            r.stdout, r.stderr
        ),
    };
    assert!(
        it.next().is_none(),
        "{what}: more than one JSON document on stdout:\n{}",
        r.stdout
    );
    first
}

/// Runs commands with `--json` in the fixture's folder and records which subcommands ran.
struct JsonRuns<'a> {
    g: &'a Gov,
    covered: BTreeSet<String>,
}

impl JsonRuns<'_> {
    /// `lakedrill --json ARGS` (with the table arguments when `on_table`); asserts one JSON document and one
    /// of `codes`; returns the document.
    #[track_caller]
    fn run(&mut self, path: &str, args: &[&str], on_table: bool, codes: &[i32]) -> Value {
        let mut a = vec!["--json"];
        a.extend(path.split(' '));
        a.extend(args);
        if on_table {
            a.extend(T);
        }
        let r = lakedrill_in(&self.g.dir, &a);
        assert!(
            codes.contains(&r.code),
            "{path}: exit {} not in {codes:?}\nstdout:\n{}\nstderr:\n{}",
            r.code,
            r.stdout,
            r.stderr
        );
        let v = one_json_document(&r, path);
        assert!(v.is_object(), "{path}: {v}");
        if r.code == 2 {
            assert_eq!(v["exit_code"], 2, "{path}: {v}");
            assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{path}: {v}");
        }
        self.covered.insert(path.to_owned());
        v
    }
}

/// With `--json`, a command line clap refuses puts its whole first message in `error` — the missing arguments
/// too, not only "the following required arguments were not provided:" — and every error document is
/// pretty-printed like the other documents (they were compact one-liners).
#[test]
fn json_error_documents_name_the_missing_arguments_and_are_pretty_printed() {
    let tmp = tmpdir();
    let r = lakedrill_in(tmp.path(), &["--json", "rollback", "--metadata", "x"]);
    r.expect_code(2);
    let v = one_json_document(&r, "rollback without --to");
    let error = v["error"].as_str().unwrap();
    assert!(
        error.starts_with("the following required arguments were not provided: "),
        "{v}"
    );
    assert!(error.contains("--to <TO>"), "{v}");
    assert!(v["usage"].as_str().unwrap().contains("Usage:"), "{v}");
    // A run that could not decide, and a usage error: both documents as `--json` prints every other one.
    let missing = tmp.path().join("v1.metadata.json");
    let run_error = lakedrill_in(
        tmp.path(),
        &[
            "--json",
            "resolve",
            "--metadata",
            missing.to_str().unwrap(),
            "--snapshot-id",
            "1",
        ],
    );
    run_error.expect_code(2);
    assert!(
        one_json_document(&run_error, "run error")["error"]
            .as_str()
            .unwrap()
            .contains("v1.metadata.json")
    );
    for (what, r) in [("usage error", &r), ("run error", &run_error)] {
        let doc = one_json_document(r, what);
        assert_eq!(
            r.stdout,
            format!("{}\n", serde_json::to_string_pretty(&doc).unwrap()),
            "{what}"
        );
    }
}

/// Every leaf subcommand of the command-line definition, as typed (`lease add`, `drill run`, …).
fn all_subcommands() -> BTreeSet<String> {
    use clap::CommandFactory;
    fn walk(c: &clap::Command, prefix: &str, out: &mut BTreeSet<String>) {
        for s in c.get_subcommands() {
            let name = if prefix.is_empty() {
                s.get_name().to_owned()
            } else {
                format!("{prefix} {}", s.get_name())
            };
            if s.get_subcommands().next().is_none() {
                out.insert(name);
            } else {
                walk(s, &name, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&lakedrill::cli::Cli::command(), "", &mut out);
    out.remove("help");
    out
}

fn drill_plan(g: &Gov, name: &str, extra: &str) -> PathBuf {
    let plan = g.dir.join(format!("{name}.toml"));
    std::fs::write(
        &plan,
        format!(
            "name = \"{name}\"\nkind = \"quarantine\"\nbundles = \"bundles\"\ntrust = \"keys/trust\"\nkey = \"keys/gov-TEST-ONLY.key\"\nreports = \"reports\"\n{extra}"
        ),
    )
    .unwrap();
    plan
}

#[test]
fn every_command_prints_exactly_one_json_document() {
    let g = Gov::new("");
    let mut j = JsonRuns {
        g: &g,
        covered: BTreeSet::new(),
    };
    let policy = g.policy.to_str().unwrap().to_owned();
    let key = "keys/gov-TEST-ONLY.key";

    j.run(
        "keygen",
        &["--name", "json-TEST-ONLY", "--dir", "keys-json"],
        false,
        &[0],
    );
    let cfg = j.run("config check", &[], false, &[0]);
    assert_eq!(cfg["status"], "VALID", "{cfg}");
    j.run("policy check", &[&policy], false, &[0]);
    for what in ["snapshots", "refs", "history", "files", "manifests"] {
        j.run("inspect", &[what], true, &[0]);
    }
    let current = j.run("resolve", &["--ref", "main"], true, &[0])["snapshot_id"]
        .as_i64()
        .unwrap()
        .to_string();

    let lease = j.run(
        "lease add",
        &[
            "--policy",
            &policy,
            "--snapshot-id",
            &current,
            "--purpose",
            "json",
            "--owner",
            "test",
            "--expires-in",
            "1d",
        ],
        true,
        &[0],
    );
    j.run("lease list", &[], true, &[0]);
    j.run("lease release", &[lease["lease_id"].as_str().unwrap()], false, &[0]);
    let hold = j.run(
        "hold set",
        &["--scope", "prefix:data/nothing-here", "--reason", "json"],
        true,
        &[0],
    );
    j.run("hold list", &[], true, &[0]);
    j.run("hold clear", &[hold["hold_id"].as_str().unwrap()], false, &[0]);
    let writer = j.run("writer begin", &["--prefix", "data/_staging/json"], true, &[0]);
    j.run("writer list", &[], true, &[0]);
    let writer_id = writer["writer_id"]
        .as_str()
        .or_else(|| writer["id"].as_str())
        .unwrap_or_else(|| panic!("writer id in {writer}"))
        .to_owned();
    j.run("writer end", &[&writer_id], false, &[0]);
    j.run("checkpoint add", &["--snapshot-id", &current], true, &[0]);
    j.run("checkpoint list", &[], true, &[0]);

    let plan = j.run("plan", &["--policy", &policy], true, &[0]);
    let candidate = plan["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "expired-snapshots")
        .unwrap()["candidate_id"]
        .as_str()
        .unwrap()
        .to_owned();
    j.run(
        "quarantine",
        &[&candidate, "--policy", &policy, "--key", key, "--bundles", "bundles"],
        true,
        &[0],
    );
    j.run("status", &[&candidate], false, &[0]);

    let sealed = j.run(
        "seal",
        &["--snapshot-id", &current, "--key", key, "--out", "sealed"],
        true,
        &[0],
    );
    let bundle = sealed["uri"].as_str().unwrap().to_owned();
    let restored = j.run("restore", &[&bundle, "--trust", "keys"], false, &[0]);
    assert_eq!(restored["status"], "RESTORE_VERIFIED");
    let backup = j.run(
        "backup",
        &["--snapshot-id", &current, "--key", key, "--to", "backups"],
        true,
        &[0],
    );
    let recovered = j.run(
        "recover",
        &[
            "--from",
            backup["bundle_uri"].as_str().unwrap(),
            "--trust",
            "keys",
            "--into",
            g.dir.join("recovered").to_str().unwrap(),
        ],
        false,
        &[0],
    );
    assert_eq!(recovered["status"], "RESTORE_VERIFIED", "{recovered}");
    // Spark and DuckDB read the recovered table with the rows lakedrill's own scan found.
    crate::util::assert_engines_read(
        recovered["metadata_location"].as_str().unwrap(),
        current.parse().unwrap(),
        recovered["rows_scanned"].as_u64().unwrap(),
    );

    // A sharded drill and its merge; the merged report is the evidence the purge accepts.
    let p = drill_plan(&g, "json-drill", "seed = 11\n");
    let p = p.to_str().unwrap();
    let s0 = j.run("drill run", &[p, "--shard", "0/1"], false, &[0]);
    let merged = j.run(
        "report merge",
        &[s0["report"].as_str().unwrap(), "--key", key, "--trust", "keys"],
        false,
        &[0],
    );
    let evidence = merged["report"].as_str().unwrap().to_owned();
    let ran = j.run("drill run", &[p], false, &[0]);
    // One scenario of the fault matrix: it passes, but a partial matrix never passes the gate (exit 1).
    let faults = j.run("drill faults", &["--scenario", "hold-races-cas"], false, &[1]);
    assert_eq!(faults["scenarios"][0]["pass"], true, "{faults}");
    assert!(ran["html_report"].as_str().unwrap().ends_with(".html"), "{ran}");
    j.run("audit verify", &[&evidence, "--trust", "keys", "--chain"], false, &[0]);

    let purge = [
        candidate.as_str(),
        "--policy",
        &policy,
        "--trust",
        "keys",
        "--key",
        crate::governance::DELETER_KEY,
        "--evidence",
        &evidence,
    ];
    let mut dry = purge.to_vec();
    dry.push("--dry-run");
    assert_eq!(j.run("purge", &dry, true, &[0])["status"], "DRY_RUN");
    assert_eq!(j.run("purge", &purge, true, &[0])["status"], "VERIFIED");
    j.run(
        "reconcile",
        &[&candidate, "--policy", &policy, "--key", key],
        true,
        &[0],
    );
    // Local storage has no delete markers: undelete decides nothing or refuses, and still prints JSON.
    j.run("undelete", &[&candidate, "--trust", "keys"], true, &[0, 1, 2]);
    // Rollout, decisions, gates, version and quarantine extension.
    j.run("version", &[], false, &[0]);
    let table_arg = ["db.retention", "--catalog", "rt"];
    j.run("rollout show", &table_arg, false, &[0]);
    j.run(
        "rollout set",
        &[
            "db.retention",
            "test",
            "--catalog",
            "rt",
            "--reason",
            "json",
            "--policy",
            &policy,
        ],
        false,
        &[0, 1],
    );
    j.run(
        "rollout report",
        &["db.retention", "--catalog", "rt", "--policy", &policy],
        false,
        &[0],
    );
    // Without --trust the gates cannot decide (exit 2), and still print their one document.
    let gates = j.run("gates", &["--policy", &policy], true, &[2]);
    let doc = serde_json::json!({
        "schema": "lakedrillGovernanceDecision.v1",
        "version": 1,
        "issuer": "governance@example.test",
        "issued_at": "2026-11-29T10:00:00Z",
        "table_uuid": gates["table_uuid"],
        "legal_holds": [],
        "deletion_rights": [],
    });
    let doc_path = g.dir.join("decision.json");
    std::fs::write(&doc_path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let signed = g.dir.join("decision.dsse.json");
    j.run(
        "decision sign",
        &[
            doc_path.to_str().unwrap(),
            "--key",
            key,
            "--out",
            signed.to_str().unwrap(),
        ],
        false,
        &[0],
    );
    j.run(
        "decision apply",
        &[signed.to_str().unwrap(), "--trust", "keys"],
        true,
        &[0],
    );
    j.run(
        "quarantine extend",
        &[&candidate, "--by", "1h", "--reason", "json"],
        false,
        &[0, 1, 2],
    );
    j.run(
        "quarantine release",
        &[&candidate, "--reason", "json"],
        true,
        &[0, 1, 2],
    );
    j.run("deleter stop", &["--reason", "json"], false, &[0]);
    j.run("deleter start", &["--reason", "json"], false, &[0]);

    let snaps = j.run("inspect", &["history"], true, &[0]);
    let ancestor = snaps["history"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|h| h["is_current_ancestor"] == true && h["snapshot_id"].as_i64().unwrap().to_string() != current)
        .map(|h| h["snapshot_id"].as_i64().unwrap().to_string());
    // The ancestor may have been purged with its candidate: a refusal (1) or an error (2) is still one document.
    j.run(
        "rollback",
        &["--to", ancestor.as_deref().unwrap_or(&current)],
        true,
        &[0, 1, 2],
    );
    j.run("set-current", &["--snapshot-id", &current], true, &[0]);
    j.run(
        "restore",
        &[
            &bundle,
            "--trust",
            "keys",
            "--into",
            g.dir.join("restored").to_str().unwrap(),
            "--catalog",
            "rt",
            "--table",
            "db.restored",
        ],
        false,
        &[0],
    );
    j.run("demo", &["--dir", g.dir.join("demo").to_str().unwrap()], false, &[0]);

    // A command line clap refuses is still one JSON document with --json (exit 2).
    j.run("inspect", &["--snapshot-id", "not-a-number"], true, &[2]);

    let missing: Vec<String> = all_subcommands().difference(&j.covered).cloned().collect();
    assert!(missing.is_empty(), "subcommands not run with --json here: {missing:?}");
}

/// One parsed sample of a metrics file.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// A strict reader of the Prometheus text exposition format 0.0.4 as the textfile collector accepts it:
/// every family has one `# HELP` and one `# TYPE` line before its samples, samples of a family are
/// contiguous, names and label names are valid, label values are quoted with only `\\`, `\"`, `\n`
/// escapes, values are floats (`+Inf`, `-Inf`, `NaN` allowed), the file ends with a newline.
fn parse_prometheus(text: &str) -> Vec<Sample> {
    fn valid_name(s: &str) -> bool {
        let mut c = s.chars();
        c.next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
            && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
    }
    assert!(text.ends_with('\n'), "no final newline");
    let mut helped = BTreeSet::new();
    let mut typed = BTreeSet::new();
    let mut finished = BTreeSet::new();
    let mut current: Option<String> = None;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(valid_name(name), "line {n}: bad name {name:?}");
            assert!(helped.insert(name.to_owned()), "line {n}: second HELP for {name}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut p = rest.split(' ');
            let (name, kind) = (p.next().unwrap(), p.next().unwrap_or(""));
            assert!(p.next().is_none(), "line {n}: {line}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "line {n}: type {kind:?}"
            );
            assert!(typed.insert(name.to_owned()), "line {n}: second TYPE for {name}");
            continue;
        }
        assert!(!line.starts_with('#'), "line {n}: unknown comment {line:?}");
        assert!(!line.trim().is_empty(), "line {n}: empty line");
        let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("line {n}: {line:?}"));
        let name = &line[..name_end];
        assert!(valid_name(name), "line {n}: bad metric name {name:?}");
        assert!(
            typed.contains(name) && helped.contains(name),
            "line {n}: {name} before its HELP/TYPE"
        );
        if current.as_deref() != Some(name) {
            if let Some(c) = current.take() {
                finished.insert(c);
            }
            assert!(
                !finished.contains(name),
                "line {n}: samples of {name} are not contiguous"
            );
            current = Some(name.to_owned());
        }
        let mut rest = &line[name_end..];
        let mut labels = Vec::new();
        if let Some(r) = rest.strip_prefix('{') {
            let mut chars = r.char_indices().peekable();
            loop {
                let start = chars.peek().map(|(i, _)| *i).unwrap();
                if r[start..].starts_with('}') {
                    rest = &r[start + 1..];
                    break;
                }
                let eq = r[start..]
                    .find('=')
                    .unwrap_or_else(|| panic!("line {n}: label without ="));
                let lname = &r[start..start + eq];
                assert!(
                    valid_name(lname) && !lname.contains(':'),
                    "line {n}: label name {lname:?}"
                );
                assert_eq!(
                    &r[start + eq + 1..start + eq + 2],
                    "\"",
                    "line {n}: unquoted label value"
                );
                let mut value = String::new();
                let mut i = start + eq + 2;
                let bytes: Vec<char> = r[i..].chars().collect();
                let mut k = 0;
                loop {
                    let c = *bytes
                        .get(k)
                        .unwrap_or_else(|| panic!("line {n}: unterminated label value"));
                    match c {
                        '\\' => {
                            let e = bytes[k + 1];
                            value.push(match e {
                                '\\' => '\\',
                                '"' => '"',
                                'n' => '\n',
                                _ => panic!("line {n}: bad escape \\{e}"),
                            });
                            k += 2;
                        }
                        '"' => {
                            k += 1;
                            break;
                        }
                        c => {
                            value.push(c);
                            k += 1;
                        }
                    }
                }
                i += bytes[..k].iter().map(|c| c.len_utf8()).sum::<usize>();
                labels.push((lname.to_owned(), value));
                while chars.peek().is_some_and(|(j, _)| *j < i) {
                    chars.next();
                }
                if r[i..].starts_with(',') {
                    chars.next();
                }
            }
        }
        let mut parts = rest.trim_start_matches(' ').split(' ');
        let v = parts.next().unwrap();
        assert!(rest.starts_with(' '), "line {n}: no space before the value");
        let value = match v {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v.parse().unwrap_or_else(|_| panic!("line {n}: value {v:?}")),
        };
        if let Some(ts) = parts.next() {
            ts.parse::<i64>()
                .unwrap_or_else(|_| panic!("line {n}: timestamp {ts:?}"));
        }
        assert!(parts.next().is_none(), "line {n}: trailing fields");
        out.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    out
}

fn metric(samples: &[Sample], name: &str) -> f64 {
    let s: Vec<&Sample> = samples.iter().filter(|s| s.name == name).collect();
    assert_eq!(s.len(), 1, "{name}: {s:?}");
    s[0].value
}

#[test]
fn metrics_files_parse_as_prometheus_text_and_carry_the_series() {
    let g = Gov::new("");
    let (c, _) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let plan = drill_plan(&g, "metrics", "");
    let prom = g.dir.join("textfile/lakedrill-drill.prom");
    std::fs::create_dir_all(prom.parent().unwrap()).unwrap();
    let r = g
        .run(&[
            "--json",
            "drill",
            "run",
            plan.to_str().unwrap(),
            "--metrics-file",
            prom.to_str().unwrap(),
        ])
        .expect_code(0)
        .json();
    let text = std::fs::read_to_string(&prom).unwrap();
    let s = parse_prometheus(&text);
    assert!(s.iter().all(|x| x.name.starts_with("lakedrill_")), "{text}");
    assert!(
        s.iter()
            .all(|x| x.labels == vec![("plan".to_owned(), "metrics".to_owned())]),
        "{text}"
    );
    let p = &r["predicate"];
    let now = chrono::Utc::now().timestamp() as f64;
    let last_run = metric(&s, "lakedrill_drill_last_run_timestamp_seconds");
    assert!(last_run > now - 3600.0 && last_run <= now + 1.0, "{text}");
    let finished = chrono::DateTime::parse_from_rfc3339(p["finished_at"].as_str().unwrap()).unwrap();
    assert_eq!(
        metric(&s, "lakedrill_drill_last_success_timestamp_seconds"),
        finished.timestamp_millis() as f64 / 1000.0
    );
    assert_eq!(metric(&s, "lakedrill_drill_gate_pass"), 1.0);
    assert_eq!(metric(&s, "lakedrill_drill_last_exit_code"), 0.0);
    assert_eq!(
        metric(&s, "lakedrill_drill_items_passed"),
        p["summary"]["passed"].as_f64().unwrap()
    );
    assert_eq!(metric(&s, "lakedrill_drill_items_failed"), 0.0);
    let results = p["results"].as_array().unwrap();
    let bytes: f64 = results.iter().map(|r| r["bytes_verified"].as_f64().unwrap()).sum();
    assert!(bytes > 0.0);
    assert_eq!(metric(&s, "lakedrill_drill_bytes_verified"), bytes);
    let rto = results
        .iter()
        .map(|r| r["rto_seconds"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(metric(&s, "lakedrill_drill_rto_seconds_max"), rto);
    assert_eq!(metric(&s, "lakedrill_drill_rpo_seconds_max"), 0.0);
    for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
        assert!(line.ends_with(" gauge"), "{line}");
    }
    // Written atomically: nothing but the target in the collector's folder.
    let names: Vec<String> = std::fs::read_dir(prom.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["lakedrill-drill.prom".to_owned()]);

    // A run that cannot decide (no bundle at all) still updates the file: exit code 2, gate 0, and the
    // last success stays that of the chain's last PASS report.
    let empty = drill_plan(&g, "metrics", "");
    std::fs::write(
        &empty,
        std::fs::read_to_string(&empty)
            .unwrap()
            .replace("bundles = \"bundles\"", "bundles = \"no-bundles\""),
    )
    .unwrap();
    std::fs::create_dir_all(g.dir.join("no-bundles")).unwrap();
    g.run(&[
        "drill",
        "run",
        empty.to_str().unwrap(),
        "--metrics-file",
        prom.to_str().unwrap(),
    ])
    .expect_code(2);
    let s2 = parse_prometheus(&std::fs::read_to_string(&prom).unwrap());
    assert_eq!(metric(&s2, "lakedrill_drill_last_exit_code"), 2.0);
    assert_eq!(metric(&s2, "lakedrill_drill_gate_pass"), 0.0);
    assert_eq!(
        metric(&s2, "lakedrill_drill_last_success_timestamp_seconds"),
        metric(&s, "lakedrill_drill_last_success_timestamp_seconds")
    );
    assert!(metric(&s2, "lakedrill_drill_last_run_timestamp_seconds") >= last_run);

    // The deleter's file: purge with the report as evidence, then reconcile.
    let del = g.dir.join("textfile/lakedrill-purge.prom");
    let ev = r["report"].as_str().unwrap().to_owned();
    let out = g
        .purge(id, Some(Path::new(&ev)), &["--metrics-file", del.to_str().unwrap()])
        .expect_code(0)
        .json();
    let s = parse_prometheus(&std::fs::read_to_string(&del).unwrap());
    let deleted = out["objects"]["VERIFIED"].as_array().unwrap().len() as f64;
    assert!(deleted > 0.0);
    assert_eq!(metric(&s, "lakedrill_deleter_objects_verified"), deleted);
    assert_eq!(metric(&s, "lakedrill_unreconciled_unknowns"), 0.0);
    assert_eq!(metric(&s, "lakedrill_deleter_gate_accepted"), 1.0);
    assert_eq!(metric(&s, "lakedrill_deleter_last_exit_code"), 0.0);
    assert!(metric(&s, "lakedrill_deleter_last_success_timestamp_seconds") > 0.0);
    let verified_status: Vec<&Sample> = s
        .iter()
        .filter(|x| x.name == "lakedrill_deleter_status" && x.value == 1.0)
        .collect();
    assert_eq!(verified_status.len(), 1);
    assert!(
        verified_status[0]
            .labels
            .contains(&("status".into(), "VERIFIED".into()))
    );
    assert!(verified_status[0].labels.contains(&("candidate".into(), id.into())));
    // A metrics file that cannot be written: exit 2, and the run's own document is still printed (it was lost
    // behind the metrics error before the review of 2026-12-07).
    let nowhere = g.dir.join("no-such-folder/lakedrill-purge.prom");
    let r = g.purge(id, Some(Path::new(&ev)), &["--metrics-file", nowhere.to_str().unwrap()]);
    let doc = r.expect_code(2).json();
    assert_eq!(doc["status"], "REFUSED", "{doc}");
    assert_eq!(doc["exit_code"], 2, "{doc}");
    assert!(doc["error"].as_str().unwrap().contains("no-such-folder"), "{doc}");
    // A refused second purge keeps the last success and says REFUSED.
    g.purge(id, Some(Path::new(&ev)), &["--metrics-file", del.to_str().unwrap()])
        .expect_code(1);
    let s3 = parse_prometheus(&std::fs::read_to_string(&del).unwrap());
    assert_eq!(metric(&s3, "lakedrill_deleter_last_exit_code"), 1.0);
    assert_eq!(metric(&s3, "lakedrill_deleter_gate_accepted"), 0.0);
    assert_eq!(
        metric(&s3, "lakedrill_deleter_last_success_timestamp_seconds"),
        metric(&s, "lakedrill_deleter_last_success_timestamp_seconds")
    );
}

/// An unsigned file in a plan's report folder, named after the year 9999 and claiming a PASS, neither sets the
/// drill-staleness metric nor becomes the report the next one links to: the metric reads only reports that verify
/// under the plan's drill keys, and the next drill refuses (exit 2, naming the file, nothing written) while the
/// chain's newest file does not verify.
#[test]
fn an_unsigned_report_from_the_year_9999_neither_sets_the_last_success_nor_joins_the_chain() {
    let g = Gov::new("");
    g.quarantined();
    let plan = drill_plan(&g, "forged", "");
    let prom = g.dir.join("textfile/lakedrill-drill.prom");
    std::fs::create_dir_all(prom.parent().unwrap()).unwrap();
    let drill = |plan: &Path| {
        g.run(&[
            "--json",
            "drill",
            "run",
            plan.to_str().unwrap(),
            "--metrics-file",
            prom.to_str().unwrap(),
        ])
    };
    let r = drill(&plan).expect_code(0).json();
    let first = std::fs::read(r["report"].as_str().unwrap().trim_start_matches("file://")).unwrap();
    let last_success = |what: &str| {
        let s = parse_prometheus(&std::fs::read_to_string(&prom).unwrap());
        let v = metric(&s, "lakedrill_drill_last_success_timestamp_seconds");
        assert!(v < 4.0e9, "{what}: the last success is {v}");
        v
    };
    let real = last_success("after the real drill");

    // The real report's statement, dated 9999, in an envelope without a signature.
    let mut st = lakedrill::evidence::peek_unverified(&first).unwrap();
    st["predicate"]["finished_at"] = Value::String("9999-12-31T00:00:00.000Z".into());
    let signed = lakedrill::evidence::sign(
        lakedrill::evidence::PAYLOAD_TYPE,
        st.to_string().as_bytes(),
        &lakedrill::evidence::keys::SigningKey::generate(),
    )
    .to_json_bytes();
    let mut env: Value = serde_json::from_slice(&signed).unwrap();
    env["signatures"] = Value::Array(Vec::new());
    let folder = g.dir.join("reports/forged");
    let forged = folder.join("99991231T000000.000Z.dsse.json");
    std::fs::write(&forged, env.to_string()).unwrap();

    // A run that cannot decide (no bundle at all) reads the last success from the chain: not from the forged file.
    let empty = drill_plan(&g, "forged", "");
    std::fs::write(
        &empty,
        std::fs::read_to_string(&empty)
            .unwrap()
            .replace("bundles = \"bundles\"", "bundles = \"no-bundles\""),
    )
    .unwrap();
    std::fs::create_dir_all(g.dir.join("no-bundles")).unwrap();
    drill(&empty).expect_code(2);
    assert_eq!(last_success("after a run that could not decide"), real);

    // The next real drill does not link to the forged file: it refuses, naming it, and writes no report.
    std::fs::write(
        &plan,
        std::fs::read_to_string(&empty)
            .unwrap()
            .replace("no-bundles", "bundles"),
    )
    .unwrap();
    let reports_before = std::fs::read_dir(&folder).unwrap().count();
    let refused = drill(&plan);
    refused.expect_code(2);
    assert!(
        refused.stderr.contains("99991231T000000.000Z.dsse.json") && refused.stderr.contains("does not verify"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        std::fs::read_dir(&folder).unwrap().count(),
        reports_before,
        "nothing written"
    );
    assert_eq!(last_success("after the refused drill"), real);

    // Moved away, the chain goes on from the last real report.
    std::fs::remove_file(&forged).unwrap();
    let r = drill(&plan).expect_code(0).json();
    assert_eq!(
        r["predicate"]["previous_report"].as_str(),
        Some(lakedrill::evidence::sha256_hex(&first).as_str()),
        "{r}"
    );
    assert!(last_success("after the next real drill") > real);

    // A drill-key rotation: a new key gets the drill role, the old one stays in the folder without it. The chain's
    // newest report, signed by the old key, still links (refusing it would leave no way on but removing a real
    // report from the anchored chain); the new report is signed by the new key.
    let newest = std::fs::read(r["report"].as_str().unwrap().trim_start_matches("file://")).unwrap();
    g.run(&["keygen", "--name", "drill-2-TEST-ONLY", "--dir", "keys"])
        .expect_code(0);
    std::fs::copy(
        g.dir.join("keys/drill-2-TEST-ONLY.pub"),
        g.dir.join("keys/trust/drill-2-TEST-ONLY.pub"),
    )
    .unwrap();
    std::fs::write(
        g.dir.join("keys/trust/roles.toml"),
        "seal = [\"gov-TEST-ONLY\"]\ndrill = [\"drill-2-TEST-ONLY\"]\ndeleter = [\"deleter-TEST-ONLY\"]\n",
    )
    .unwrap();
    std::fs::write(
        &plan,
        std::fs::read_to_string(&plan)
            .unwrap()
            .replace("keys/gov-TEST-ONLY.key", "keys/drill-2-TEST-ONLY.key"),
    )
    .unwrap();
    let rotated = drill(&plan);
    rotated.expect_code(0);
    assert_eq!(
        rotated.json()["predicate"]["previous_report"].as_str(),
        Some(lakedrill::evidence::sha256_hex(&newest).as_str()),
        "{}",
        rotated.stdout
    );
}

#[test]
fn the_prometheus_reader_of_these_tests_rejects_malformed_files() {
    // The reader above is what the metrics test relies on; it must not accept what Prometheus refuses.
    for bad in [
        "lakedrill_x 1\n",                                                         // no HELP/TYPE
        "# HELP lakedrill_x h\n# TYPE lakedrill_x gauge\nlakedrill_x{a=b} 1\n",    // unquoted
        "# HELP lakedrill_x h\n# TYPE lakedrill_x gauge\nlakedrill_x one\n",       // not a number
        "# HELP lakedrill_x h\n# TYPE lakedrill_x gauge\nlakedrill_x 1",           // no final newline
        "# HELP x h\n# TYPE x gauge\nx 1\n# HELP y h\n# TYPE y gauge\ny 1\nx 2\n", // not contiguous
        "# HELP 1x h\n# TYPE 1x gauge\n1x 1\n",                                    // bad name
    ] {
        assert!(
            std::panic::catch_unwind(|| parse_prometheus(bad)).is_err(),
            "accepted {bad:?}"
        );
    }
    let ok = parse_prometheus(
        "# HELP lakedrill_x h\n# TYPE lakedrill_x gauge\nlakedrill_x{a=\"q\\\"\\\\\\n\",b=\"\"} +Inf\n",
    );
    assert_eq!(ok[0].labels[0].1, "q\"\\\n");
    assert_eq!(ok[0].labels.len(), 2);
}

fn chromium() -> PathBuf {
    let p = std::env::var("LAKEDRILL_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let p = PathBuf::from(p);
    assert!(
        p.exists(),
        "{} is missing: scripts/test.sh installs Debian's chromium",
        p.display()
    );
    p
}

#[test]
fn drill_html_report_renders_in_headless_chromium_with_trend_charts() {
    let g = Gov::new("");
    g.quarantined(); // one drill of plan weekly-bundles already ran
    let plan = drill_plan(&g, "weekly-bundles", "");
    let r = g
        .run(&["--json", "drill", "run", plan.to_str().unwrap()])
        .expect_code(0)
        .json();
    let html = PathBuf::from(r["html_report"].as_str().unwrap().trim_start_matches("file://"));
    let md = PathBuf::from(r["markdown_report"].as_str().unwrap().trim_start_matches("file://"));
    assert_eq!(
        html.parent(),
        Path::new(r["report"].as_str().unwrap().trim_start_matches("file://")).parent()
    );
    let page = std::fs::read_to_string(&html).unwrap();
    // Self-contained: nothing to fetch.
    for needle in ["src=", "href=", "url(", "@import", "<script", "<link"] {
        assert!(!page.contains(needle), "the page references {needle}");
    }
    let results = r["predicate"]["results"].as_array().unwrap();
    let profile = tmpdir();
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--proxy-server=http://127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(dom.contains("id=\"verdict\""), "{dom}");
    assert!(
        dom.contains(&format!(
            "Gate PASS: {n} of {n} sampled items restored and verified, 0 failed.",
            n = results.len()
        )),
        "{dom}"
    );
    let verdict_at = dom.find("id=\"verdict\"").unwrap();
    assert!(verdict_at < dom.find("id=\"items\"").unwrap(), "verdict first");
    assert_eq!(dom.matches("<tr class=\"verified\">").count(), results.len(), "{dom}");
    for res in results {
        assert!(dom.contains(res["bundle_id"].as_str().unwrap()), "{dom}");
        assert!(dom.contains(&res["snapshot_id"].as_i64().unwrap().to_string()));
    }
    assert!(
        dom.contains("<svg id=\"rto-chart\"") && dom.contains("<svg id=\"rpo-chart\""),
        "{dom}"
    );
    // Two reports in the chain: each chart has two points and a line between them.
    let rto = &dom[dom.find("<svg id=\"rto-chart\"").unwrap()..];
    let rto = &rto[..rto.find("</svg>").unwrap()];
    assert_eq!(rto.matches("<circle").count(), 2, "{rto}");
    assert!(rto.contains("<polyline"), "{rto}");
    // The Markdown summary for tickets.
    let m = std::fs::read_to_string(&md).unwrap();
    assert!(m.starts_with("## Restore drill `weekly-bundles`: gate **PASS**"), "{m}");
    assert!(m.contains(&format!("{} of {} sampled items", results.len(), results.len())));
}

#[test]
fn config_check_validates_refuses_secrets_and_applies_defaults() {
    let g = Gov::new("");
    let cfg_path = g.dir.join("lakedrill.toml");
    let base = std::fs::read_to_string(&cfg_path).unwrap();
    let v = g.run(&["--json", "config", "check"]).expect_code(0).json();
    assert_eq!(v["status"], "VALID", "{v}");
    assert!(v["catalogs"]["rt"].is_object(), "{v}");

    // A secret in the file: config check names it (exit 1); every other command refuses to run (exit 2).
    std::fs::write(
        &cfg_path,
        format!("{base}[storage.s3]\nregion = \"us-east-1\"\nsecret_access_key = \"abc\"\n"),
    )
    .unwrap();
    let v = g.run(&["--json", "config", "check"]).expect_code(1).json();
    assert_eq!(v["status"], "INVALID");
    assert_eq!(v["problems"][0]["field"], "storage.s3.secret_access_key", "{v}");
    assert!(
        v["problems"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("AWS_SECRET_ACCESS_KEY"),
        "{v}"
    );
    let r = g.run(&["--json", "policy", "check", g.policy.to_str().unwrap()]);
    r.expect_code(2);
    assert!(r.stderr.contains("secret_access_key"), "{}", r.stderr);
    assert!(
        !r.stdout.contains("abc") && !r.stderr.contains("abc"),
        "the secret is never echoed"
    );

    // Broken references are named.
    std::fs::write(
        &cfg_path,
        format!(
            "{base}[catalog.gone]\ntype = \"sql\"\nuri = \"sqlite:/nonexistent/catalog.db\"\n[keys]\ntrust = \"no-such-dir\"\n\
             [defaults.purge]\ndry_run = true\n[defaults.\"drill walk\"]\nx = \"1\"\n"
        ),
    )
    .unwrap();
    let v = g.run(&["--json", "config", "check"]).expect_code(1).json();
    let fields: Vec<&str> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["field"].as_str().unwrap())
        .collect();
    for f in [
        "catalog.gone.uri",
        "keys.trust",
        "defaults.\"purge\".dry_run",
        "defaults.\"drill walk\"",
    ] {
        assert!(fields.contains(&f), "want {f} in {fields:?}");
    }

    // Defaults in force: [keys] trust and a per-command metrics file.
    std::fs::write(
        &cfg_path,
        format!("{base}[keys]\ntrust = \"keys\"\n[defaults.\"drill run\"]\nmetrics_file = \"drill.prom\"\n"),
    )
    .unwrap();
    g.run(&["--json", "config", "check"]).expect_code(0);
    let (c, _) = g.quarantined();
    assert!(c["candidate_id"].is_string());
    assert!(
        g.dir.join("drill.prom").exists(),
        "the configured metrics file was written"
    );
    let report = std::fs::read_dir(g.dir.join("reports/weekly-bundles"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".dsse.json"))
        .unwrap();
    // `audit verify` without --trust: the configured trust store is used.
    let a = g
        .run(&["--json", "audit", "verify", report.to_str().unwrap()])
        .expect_code(0)
        .json();
    assert_eq!(a["status"], "VERIFIED");
}

#[test]
fn two_shards_and_a_merge_equal_one_unsharded_run_and_verify() {
    let g = Gov::new("");
    let (c, _) = g.quarantined();
    let n = c["snapshot_ids"].as_array().unwrap().len();
    assert!(n >= 2, "the fixture has {n} expirable snapshots; sharding needs two");
    let sharded = drill_plan(&g, "sharded", "seed = 424242\n");
    let shard = |spec: &str| {
        g.run(&["--json", "drill", "run", sharded.to_str().unwrap(), "--shard", spec])
            .expect_code(0)
            .json()
    };
    let s0 = shard("0/2");
    let s1 = shard("1/2");
    for (s, i) in [(&s0, 0), (&s1, 1)] {
        assert_eq!(s["predicate"]["shard"]["index"], i);
        assert_eq!(s["predicate"]["previous_report"], Value::Null);
        assert!(s["report"].as_str().unwrap().contains("/sharded/shards/"), "{s}");
        assert!(s["html_report"].is_null());
    }
    let ids = |v: &Value| -> Vec<String> {
        v["predicate"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["bundle_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (a, b) = (ids(&s0), ids(&s1));
    assert!(!a.is_empty() && !b.is_empty());
    assert!(a.iter().all(|x| !b.contains(x)), "shards overlap: {a:?} {b:?}");

    // Only one shard: refused, nothing written.
    let key = "keys/gov-TEST-ONLY.key";
    let r0 = s0["report"].as_str().unwrap();
    let r1 = s1["report"].as_str().unwrap();
    let refused = g
        .run(&["--json", "report", "merge", r0, "--key", key, "--trust", "keys"])
        .expect_code(1)
        .json();
    assert!(refused["reasons"].to_string().contains("missing"), "{refused}");
    // A shard report edited after signing: refused with the audit check that failed.
    let edited = g.dir.join("edited-shard-1.dsse.json");
    let mut b = std::fs::read(r1.trim_start_matches("file://")).unwrap();
    b.extend_from_slice(b" ");
    std::fs::write(&edited, b).unwrap();
    let bad = g
        .run(&[
            "--json",
            "report",
            "merge",
            r0,
            edited.to_str().unwrap(),
            "--key",
            key,
            "--trust",
            "keys",
        ])
        .expect_code(1)
        .json();
    assert!(bad["reasons"].to_string().contains("ENVELOPE_NOT_CANONICAL"), "{bad}");
    // The same shard twice: refused.
    g.run(&["--json", "report", "merge", r0, r0, "--key", key, "--trust", "keys"])
        .expect_code(1);
    assert!(
        !std::fs::read_dir(g.dir.join("reports/sharded")).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".dsse.json")),
        "a refused merge writes nothing"
    );

    // An unsharded run of a plan with the same seed, and the merge of both shards.
    let whole = drill_plan(&g, "whole", "seed = 424242\n");
    let w = g
        .run(&["--json", "drill", "run", whole.to_str().unwrap()])
        .expect_code(0)
        .json();
    let m = g
        .run(&["--json", "report", "merge", r1, r0, "--key", key, "--trust", "keys"])
        .expect_code(0)
        .json();
    let project = |v: &Value| -> BTreeSet<String> {
        v["predicate"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {} {} {}",
                    r["bundle_id"],
                    r["snapshot_id"],
                    r["bundle_root"],
                    r["status"],
                    r["objects_verified"],
                    r["bytes_verified"]
                )
            })
            .collect()
    };
    assert_eq!(project(&m), project(&w), "merged vs unsharded results");
    assert_eq!(m["predicate"]["sample"], w["predicate"]["sample"]);
    assert_eq!(m["predicate"]["summary"], w["predicate"]["summary"]);
    let shards = m["predicate"]["merged_from"].as_array().unwrap();
    assert_eq!(shards.len(), 2);
    for (s, r) in shards.iter().zip([r0, r1]) {
        let bytes = std::fs::read(r.trim_start_matches("file://")).unwrap();
        assert_eq!(s["sha256"].as_str().unwrap(), lakedrill::evidence::sha256_hex(&bytes));
    }
    let merged = m["report"].as_str().unwrap();
    assert!(m["html_report"].as_str().unwrap().ends_with(".html"));
    let a = g
        .run(&["--json", "audit", "verify", merged, "--trust", "keys", "--chain"])
        .expect_code(0)
        .json();
    assert_eq!(a["status"], "VERIFIED", "{a}");
    assert_eq!(a["gate"], "PASS");
    // A shard report verifies on its own too (its share of the sample).
    g.run(&["--json", "audit", "verify", r0, "--trust", "keys"])
        .expect_code(0);
    // With a run id (a Kubernetes Job name), the shards land in one folder and the merge takes the folder.
    for spec in ["1/2", "0/2"] {
        let r = g
            .run(&[
                "--json",
                "drill",
                "run",
                sharded.to_str().unwrap(),
                "--shard",
                spec,
                "--run-id",
                "job-48",
            ])
            .expect_code(0)
            .json();
        assert_eq!(r["predicate"]["shard"]["run_id"], "job-48");
        assert!(
            r["report"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/sharded/shards/job-48/shard-{}-of-2.dsse.json", &spec[..1]))
        );
    }
    let m2 = g
        .run(&[
            "--json",
            "report",
            "merge",
            "reports/sharded/shards/job-48",
            "--key",
            key,
            "--trust",
            "keys",
        ])
        .expect_code(0)
        .json();
    assert_eq!(project(&m2), project(&w));
    assert_eq!(m2["predicate"]["previous_report"].as_str().unwrap(), {
        let b = std::fs::read(merged.trim_start_matches("file://")).unwrap();
        lakedrill::evidence::sha256_hex(&b)
    });
    // Shards of different runs are not merged.
    let mixed = g
        .run(&[
            "--json",
            "report",
            "merge",
            r0,
            "reports/sharded/shards/job-48/shard-1-of-2.dsse.json",
            "--key",
            key,
            "--trust",
            "keys",
        ])
        .expect_code(1)
        .json();
    assert!(mixed["reasons"].to_string().contains("run id"), "{mixed}");
    g.run(&[
        "--json",
        "audit",
        "verify",
        m2["report"].as_str().unwrap(),
        "--trust",
        "keys",
        "--chain",
    ])
    .expect_code(0);
    // The plan's folder with --chain (as the cron example does): the whole chain, the newest gate.
    let chain = g
        .run(&[
            "--json",
            "audit",
            "verify",
            "reports/sharded",
            "--trust",
            "keys",
            "--chain",
        ])
        .expect_code(0)
        .json();
    assert_eq!(chain["reports_checked"], 2, "{chain}");
    g.run(&["--json", "audit", "verify", "reports/sharded", "--trust", "keys"])
        .expect_code(2);
    // A shard index beyond the sample is refused before anything runs.
    g.run(&[
        "--json",
        "drill",
        "run",
        sharded.to_str().unwrap(),
        "--shard",
        &format!("{n}/{}", n + 1),
    ])
    .expect_code(2);
}

#[test]
fn progress_goes_to_stderr_as_lines_or_bars_and_is_silent_with_q() {
    let g = Gov::new("");
    let (c, _) = g.quarantined();
    let n = c["snapshot_ids"].as_array().unwrap().len();
    let plan = drill_plan(&g, "progress", "");
    let plan = plan.to_str().unwrap();
    // Not a terminal (captured): plain lines, one per drilled bundle, and the per-object lines.
    let r = g.run(&["--json", "drill", "run", plan]);
    let v = one_json_document(r.expect_code(0), "drill run");
    let items: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("drill: ") && l.contains("RESTORE_VERIFIED"))
        .collect();
    assert_eq!(items.len(), n, "{}", r.stderr);
    assert!(items[0].starts_with(&format!("drill: 1/{n} ")), "{}", r.stderr);
    for res in v["predicate"]["results"].as_array().unwrap() {
        assert!(r.stderr.contains(res["bundle_id"].as_str().unwrap()), "{}", r.stderr);
    }
    assert!(
        r.stderr
            .lines()
            .any(|l| l.starts_with("verify: ") && l.contains(" objects, ")),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains('\u{1b}'), "no terminal escapes in a log");
    // -q: nothing at all on stderr.
    let q = g.run(&["-q", "--json", "drill", "run", plan]);
    one_json_document(q.expect_code(0), "drill run -q");
    assert_eq!(q.stderr, "", "-q prints nothing on stderr");
    // A terminal (script(1) gives the command a pseudo-terminal): indicatif bars with the plan's bundles.
    let cmd = format!("{} drill run {plan}", env!("CARGO_BIN_EXE_lakedrill"));
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(&g.dir)
        .output()
        .expect("script(1) from util-linux");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tty = String::from_utf8_lossy(&out.stdout);
    // indicatif limits how often it redraws, so which fill levels appear is not fixed; the bars' frames are.
    assert!(
        tty.contains("   drill [") && tty.contains(&format!("/{n} ")),
        "the drill's bar: {tty}"
    );
    assert!(
        tty.contains("  verify [") && tty.contains(" objects, "),
        "a bundle's bar: {tty}"
    );
    assert!(tty.contains("gate PASS"), "{tty}");
    assert!(tty.contains('\u{1b}'), "drawn with terminal control sequences: {tty}");
}

/// One snapshot verified by four machines (#24 point 4): `drill run --shard I/4 --split objects` has every
/// shard drill every sampled bundle, each hashing its share of the objects; `report merge` signs one report
/// equal to the unsharded run, which the deleter takes as evidence. `restore --shard` shows the same shares.
#[test]
fn four_object_shards_merge_into_the_unsharded_verdict_and_the_deleter_takes_it() {
    use lakedrill::bundle::{InventoryEntry, ObjectShard};

    let g = Gov::new("");
    let (c, _) = g.quarantined();
    let key = "keys/gov-TEST-ONLY.key";
    let whole = drill_plan(&g, "whole-objects", "seed = 77\n");
    let w = g
        .run(&["--json", "drill", "run", whole.to_str().unwrap()])
        .expect_code(0)
        .json();
    let sharded = drill_plan(&g, "split-objects", "seed = 77\n");
    let run_shard = |i: usize, run: &str, code: i32| -> Value {
        g.run(&[
            "--json",
            "drill",
            "run",
            sharded.to_str().unwrap(),
            "--shard",
            &format!("{i}/4"),
            "--split",
            "objects",
            "--run-id",
            run,
        ])
        .expect_code(code)
        .json()
    };
    let shards: Vec<Value> = (0..4).map(|i| run_shard(i, "objects-1", 0)).collect();
    let selected = w["predicate"]["sample"]["selected"].as_array().unwrap().clone();
    assert!(!selected.is_empty(), "{w}");
    for (i, s) in shards.iter().enumerate() {
        assert_eq!(s["predicate"]["shard"]["split"], "objects", "{s}");
        // Every shard drilled every sampled bundle, each its own share of the objects.
        let results = s["predicate"]["results"].as_array().unwrap();
        assert_eq!(results.len(), selected.len(), "{s}");
        for r in results {
            assert_eq!(r["object_shard"]["index"], i, "{r}");
            assert_eq!(r["object_shard"]["count"], 4, "{r}");
        }
    }
    // Per bundle, the shares together hold the inventory once, and their counts add up to the whole run's.
    for (pos, whole_result) in w["predicate"]["results"].as_array().unwrap().iter().enumerate() {
        let parts: Vec<&Value> = shards.iter().map(|s| &s["predicate"]["results"][pos]).collect();
        let held: u64 = parts
            .iter()
            .map(|p| p["object_shard"]["objects"].as_u64().unwrap())
            .sum();
        assert_eq!(Some(held), parts[0]["object_shard"]["inventory_objects"].as_u64());
        let verified: u64 = parts.iter().map(|p| p["objects_verified"].as_u64().unwrap()).sum();
        assert_eq!(
            Some(verified),
            whole_result["objects_verified"].as_u64(),
            "{whole_result}"
        );
        // Share roots differ from the bundle root unless one share holds everything.
        for p in &parts {
            let whole = p["object_shard"]["objects"] == p["object_shard"]["inventory_objects"];
            assert_eq!(p["object_shard"]["root"] == p["bundle_root"], whole, "{p}");
        }
    }
    let project = |v: &Value| -> Vec<String> {
        v["predicate"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {} {} {} {}",
                    r["bundle_id"],
                    r["snapshot_id"],
                    r["bundle_root"],
                    r["status"],
                    r["objects_verified"],
                    r["bytes_verified"],
                    r["findings"]
                )
            })
            .collect()
    };
    let report = |s: &Value| s["report"].as_str().unwrap().to_owned();
    let merge = |reports: &[String], code: i32| -> Value {
        let mut args = vec!["--json", "report", "merge"];
        args.extend(reports.iter().map(String::as_str));
        args.extend(["--key", key, "--trust", "keys"]);
        g.run(&args).expect_code(code).json()
    };
    let all: Vec<String> = shards.iter().map(report).collect();
    // A missing share, or one share twice: refused, naming why.
    let missing = merge(&all[..3], 1);
    assert!(missing["reasons"].to_string().contains("missing"), "{missing}");
    let twice = merge(&[all[0].clone(), all[1].clone(), all[2].clone(), all[2].clone()], 1);
    assert!(twice["reasons"].to_string().contains("twice"), "{twice}");
    // A share of another bundle root (re-signed by the trusted key, so only the merge can tell): refused.
    let other = g.dir.join("other-root-shard-3.dsse.json");
    let real_root = {
        let bytes = std::fs::read(all[3].trim_start_matches("file://")).unwrap();
        let mut st = lakedrill::evidence::peek_unverified(&bytes).unwrap();
        let fake = "f".repeat(64);
        let bundle = st["predicate"]["results"][0]["bundle_id"].clone();
        let real = st["predicate"]["results"][0]["bundle_root"].clone();
        st["predicate"]["results"][0]["bundle_root"] = Value::from(fake.clone());
        // Consistent in itself (subject and population roots too): `audit verify` of the shard alone passes; the
        // merge tells by the population roots, which differ from the other shards' (review M3).
        let at = st["predicate"]["sample"]["population_ids"]
            .as_array()
            .unwrap()
            .iter()
            .position(|x| *x == bundle)
            .unwrap();
        st["predicate"]["sample"]["population_roots"][at] = Value::from(fake.clone());
        for s in st["subject"].as_array_mut().unwrap() {
            if s["digest"]["blake3"] == real {
                s["digest"]["blake3"] = Value::from(fake.clone());
            }
        }
        let statement = lakedrill::evidence::Statement {
            subject: serde_json::from_value(st["subject"].clone()).unwrap(),
            predicate_type: st["predicateType"].as_str().unwrap().to_owned(),
            predicate: st["predicate"].clone(),
        };
        let k = lakedrill::evidence::keys::load_signing_key(&g.dir.join(key)).unwrap();
        std::fs::write(
            &other,
            lakedrill::evidence::sign_statement(&statement, &k).to_json_bytes(),
        )
        .unwrap();
        real.as_str().unwrap().to_owned()
    };
    let foreign = merge(
        &[
            all[0].clone(),
            all[1].clone(),
            all[2].clone(),
            other.display().to_string(),
        ],
        1,
    );
    let why = foreign["reasons"].to_string();
    let fake = "f".repeat(64);
    assert!(
        why.contains("other-root-shard-3.dsse.json: population root")
            && why.contains(&fake)
            && why.contains("shard-0-of-4.dsse.json")
            && why.contains(&real_root),
        "{foreign}"
    );
    // Shard 3 re-signed by the trusted key with an edit `audit verify` of the shard alone does not judge (review
    // M4, M6): a start that is not a time, and an `objects_verified` whose sum with the other shares' overflows.
    // Neither can be decided on: exit 2 naming the shard, nothing written (before, the first was signed into the
    // merged report and the second panicked in a debug build and wrapped in a release one).
    let resigned = |name: &str, edit: &dyn Fn(&mut Value)| -> String {
        let bytes = std::fs::read(all[3].trim_start_matches("file://")).unwrap();
        let mut st = lakedrill::evidence::peek_unverified(&bytes).unwrap();
        edit(&mut st["predicate"]);
        let statement = lakedrill::evidence::Statement {
            subject: serde_json::from_value(st["subject"].clone()).unwrap(),
            predicate_type: st["predicateType"].as_str().unwrap().to_owned(),
            predicate: st["predicate"].clone(),
        };
        let k = lakedrill::evidence::keys::load_signing_key(&g.dir.join(key)).unwrap();
        let to = g.dir.join(name);
        std::fs::write(&to, lakedrill::evidence::sign_statement(&statement, &k).to_json_bytes()).unwrap();
        to.display().to_string()
    };
    for (name, edit, why) in [
        (
            "untimed-shard-3.dsse.json",
            &(|p: &mut Value| p["started_at"] = Value::from("yesterday")) as &dyn Fn(&mut Value),
            "started_at",
        ),
        (
            "overflowing-shard-3.dsse.json",
            &(|p: &mut Value| p["results"][0]["objects_verified"] = Value::from(u64::MAX)) as &dyn Fn(&mut Value),
            "overflow",
        ),
    ] {
        let forged = resigned(name, edit);
        let r = g.run(&[
            "--json", "report", "merge", &all[0], &all[1], &all[2], &forged, "--key", key, "--trust", "keys",
        ]);
        let out = format!("{}{}", r.stdout, r.stderr);
        r.expect_code(2);
        assert!(out.contains(name) && out.contains(why), "{out}");
    }
    assert!(
        !std::fs::read_dir(g.dir.join("reports/split-objects"))
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".dsse.json")),
        "a refused merge writes nothing"
    );

    // The complete set: the same verdict, counts, roots and findings as the unsharded run.
    let m = merge(&["reports/split-objects/shards/objects-1".to_owned()], 0);
    assert_eq!(project(&m), project(&w), "merged vs unsharded results");
    assert_eq!(m["predicate"]["summary"], w["predicate"]["summary"]);
    assert_eq!(m["predicate"]["merged_from"].as_array().unwrap().len(), 4);
    assert!(m["predicate"]["results"][0]["object_shard"].is_null(), "{m}");
    let merged = m["report"].as_str().unwrap().trim_start_matches("file://").to_owned();
    let a = g
        .run(&["--json", "audit", "verify", &merged, "--trust", "keys", "--chain"])
        .expect_code(0)
        .json();
    assert_eq!(a["status"], "VERIFIED", "{a}");

    // `restore --shard I/4` of the candidate's bundle: the same shares, adding up to the whole restore.
    let bundle_id = selected[0].as_str().unwrap();
    let bundle = g.dir.join("bundles").join(bundle_id);
    let b = bundle.to_str().unwrap();
    let whole_restore = g
        .run(&["--json", "restore", b, "--trust", "keys"])
        .expect_code(0)
        .json();
    let mut verified = 0;
    for (i, shard) in shards.iter().enumerate() {
        let r = g
            .run(&["--json", "restore", b, "--trust", "keys", "--shard", &format!("{i}/4")])
            .expect_code(0)
            .json();
        assert_eq!(r["bundle_root"], whole_restore["bundle_root"]);
        assert_eq!(r["shard"], shard["predicate"]["results"][0]["object_shard"], "{r}");
        verified += r["objects_verified"].as_u64().unwrap();
    }
    assert_eq!(Some(verified), whole_restore["objects_verified"].as_u64());
    // `restore --shard I/4 --key`: each machine signs its share; the merge of all four is the whole restore.
    let sign_share = |i: usize, run: &str, code: i32| -> Value {
        g.run(&[
            "--json",
            "restore",
            b,
            "--trust",
            "keys",
            "--shard",
            &format!("{i}/4"),
            "--key",
            key,
            "--run-id",
            run,
        ])
        .expect_code(code)
        .json()
    };
    let signed: Vec<Value> = (0..4).map(|i| sign_share(i, "restore-1", 0)).collect();
    let chain = format!("reports/restore-{bundle_id}");
    for (i, s) in signed.iter().enumerate() {
        let r = &s["predicate"]["results"][0];
        assert_eq!(s["predicate"]["results"].as_array().unwrap().len(), 1, "{s}");
        assert_eq!(s["predicate"]["shard"]["split"], "objects", "{s}");
        assert_eq!(s["predicate"]["shard"]["run_id"], "restore-1", "{s}");
        assert_eq!(r["bundle_root"], whole_restore["bundle_root"], "{r}");
        assert_eq!(
            r["object_shard"], shards[i]["predicate"]["results"][0]["object_shard"],
            "{r}"
        );
        assert!(
            s["report"]
                .as_str()
                .unwrap()
                .contains(&format!("{chain}/shards/restore-1/shard-{i}-of-4.dsse.json")),
            "{s}"
        );
    }
    let signed_reports: Vec<String> = signed.iter().map(report).collect();
    let short = merge(&signed_reports[1..], 1);
    assert!(short["reasons"].to_string().contains("missing"), "{short}");
    let whole_signed = merge(&[format!("{chain}/shards/restore-1")], 0);
    let r = &whole_signed["predicate"]["results"][0];
    assert_eq!(r["status"], "RESTORE_VERIFIED", "{whole_signed}");
    assert_eq!(r["bundle_root"], whole_restore["bundle_root"]);
    assert_eq!(r["objects_verified"], whole_restore["objects_verified"]);
    assert_eq!(r["bytes_verified"], whole_restore["bytes_verified"]);
    assert_eq!(
        whole_signed["predicate"]["drill"]["plan"],
        format!("restore-{bundle_id}")
    );
    let signed_merge = whole_signed["report"]
        .as_str()
        .unwrap()
        .trim_start_matches("file://")
        .to_owned();
    let a = g
        .run(&["--json", "audit", "verify", &signed_merge, "--trust", "keys"])
        .expect_code(0)
        .json();
    assert_eq!(a["status"], "VERIFIED", "{a}");
    // Bad input: a share that is not I/N, a key that is not one, a run id that is not a folder name.
    for (args, needle) in [
        (vec!["--shard", "4/4", "--key", key], "--shard"),
        (vec!["--shard", "0/4", "--key", "keys/trust"], "keys/trust"),
        (vec!["--shard", "0/4", "--key", key, "--run-id", "../x"], "--run-id"),
    ] {
        let mut a = vec!["--json", "restore", b, "--trust", "keys"];
        a.extend(args);
        let out = g.run(&a);
        out.expect_code(2);
        assert!(out.stderr.contains(needle), "{needle}: {}", out.stderr);
    }
    let bad = g.run(&["--json", "restore", b, "--trust", "keys", "--shard", "4/4"]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("--shard"), "{}", bad.stderr);
    // A cold-backup drill recovers whole tables: its objects are not split, before anything is read.
    let cold = g.dir.join("cold-split.toml");
    std::fs::write(
        &cold,
        "name = \"cold-split\"\nkind = \"cold-backup\"\nbackups = \"backups\"\ntarget = \"scratch\"\n\
         trust = \"keys/trust\"\nkey = \"keys/gov-TEST-ONLY.key\"\nreports = \"reports\"\n",
    )
    .unwrap();
    let cold_plan = cold.to_str().unwrap();
    let refused = g.run(&[
        "--json", "drill", "run", cold_plan, "--shard", "0/2", "--split", "objects",
    ]);
    refused.expect_code(2);
    assert!(
        refused.stderr.contains("--split") && refused.stderr.contains("cold-backup"),
        "{}",
        refused.stderr
    );

    // A tampered object fails the share that owns it, and the merged result.
    let inventory: Vec<InventoryEntry> = crate::util::bundle_inventory(&bundle)
        .into_iter()
        .map(|e| serde_json::from_value(e).unwrap())
        .collect();
    // The victim may be one of the files the purge at the end deletes (when the sampled bundle is the
    // candidate's own), so it is put back exactly as it was sealed below.
    let victim: &InventoryEntry = inventory.iter().find(|e| !e.layer.is_metadata()).unwrap();
    let owner = (0..4)
        .find(|i| ObjectShard { index: *i, count: 4 }.owns(victim))
        .unwrap();
    let file = PathBuf::from(victim.uri.trim_start_matches("file://"));
    let original = std::fs::read(&file).unwrap();
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    let mut flipped = original.clone();
    flipped[0] ^= 0x01;
    std::fs::write(&file, &flipped).unwrap();
    let tampered: Vec<Value> = (0..4)
        .map(|i| run_shard(i, "objects-2", if i == owner { 1 } else { 0 }))
        .collect();
    let failed = merge(&["reports/split-objects/shards/objects-2".to_owned()], 1);
    // The signed restore share that owns the object fails too, and so does the merge of its run.
    let bad_restore: Vec<Value> = (0..4)
        .map(|i| sign_share(i, "restore-2", if i == owner { 1 } else { 0 }))
        .collect();
    assert_eq!(bad_restore[owner]["predicate"]["results"][0]["status"], "FAILED");
    let bad_merge = merge(&[format!("{chain}/shards/restore-2")], 1);
    assert_eq!(bad_merge["predicate"]["results"][0]["status"], "FAILED", "{bad_merge}");
    // Put the object back as it was, modification time included: the local store's ETag carries the mtime,
    // and the deleter rightly refuses to delete an object whose ETag changed since it was sealed (the victim
    // may be one of the candidate's own files, which the purge below deletes).
    std::fs::write(&file, &original).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    let storage = lakedrill::io::store::Storage::new(lakedrill::io::store::StorageOptions::default());
    let now = crate::util::block_on(storage.head(&victim.uri)).unwrap().unwrap();
    assert_eq!(now.e_tag, victim.e_tag, "{} is not the object sealed", victim.uri);
    let r0 = &failed["predicate"]["results"][0];
    assert_eq!(r0["status"], "FAILED", "{failed}");
    assert!(
        r0["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "DIGEST_MISMATCH" && f["path"] == victim.path.as_str()),
        "{r0}"
    );
    assert_eq!(
        tampered[owner]["predicate"]["results"][0]["status"], "FAILED",
        "the owning share found it"
    );

    // The deleter takes the complete merge as evidence (after the failed merge, the newer failure of that
    // chain is a reason to refuse: a fresh complete run is merged first).
    for i in 0..4 {
        run_shard(i, "objects-3", 0);
    }
    let m3 = merge(&["reports/split-objects/shards/objects-3".to_owned()], 0);
    let evidence = PathBuf::from(m3["report"].as_str().unwrap().trim_start_matches("file://"));
    let id = c["candidate_id"].as_str().unwrap();
    let p = g.purge(id, Some(&evidence), &[]).expect_code(0).json();
    assert_eq!(p["status"], "VERIFIED", "{p}");
}

/// `report merge` of a folder that does not exist said it "holds no shard report" and
/// exited 1 (refused) although nothing could be looked at: exit 2, naming the path. An existing empty folder is
/// still refused (exit 1).
#[test]
fn report_merge_of_a_missing_folder_could_not_decide() {
    let tmp = crate::util::tmpdir();
    crate::util::lakedrill_in(tmp.path(), &["keygen", "--name", "merge-TEST-ONLY", "--dir", "keys"]).expect_code(0);
    let merge = |folder: &str| {
        crate::util::lakedrill_in(
            tmp.path(),
            &[
                "--json",
                "report",
                "merge",
                folder,
                "--key",
                "keys/merge-TEST-ONLY.key",
                "--trust",
                "keys",
                "--reports",
                "merged",
            ],
        )
    };
    let missing = tmp.path().join("no/such/shards");
    let r = merge(missing.to_str().unwrap());
    r.expect_code(2);
    assert!(
        r.stdout.contains(missing.to_str().unwrap()),
        "names the path: {}",
        r.stdout
    );
    assert!(!r.stdout.contains("holds no shard report"), "{}", r.stdout);
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    let r = merge("empty");
    let v = r.expect_code(1).json();
    assert_eq!(v["status"], "REFUSED", "{v}");
    assert!(v["reasons"].to_string().contains("holds no shard report"), "{v}");
    assert!(!tmp.path().join("merged").exists(), "nothing written");
}

/// `config check` with a `--config FILE` that does not exist exits 2 naming it, as every other command does (it
/// printed `INVALID (no file: built-in defaults)`, which contradicts itself); without `--config` and without a
/// `./lakedrill.toml` the built-in defaults are `VALID`.
#[test]
fn config_check_of_a_missing_config_file_exits_2_naming_it() {
    let tmp = crate::util::tmpdir();
    let missing = tmp.path().join("nowhere/lakedrill.toml");
    for json in [false, true] {
        let mut args = vec!["--config", missing.to_str().unwrap(), "config", "check"];
        if json {
            args.insert(0, "--json");
        }
        let r = crate::util::lakedrill_in(tmp.path(), &args);
        r.expect_code(2);
        assert!(r.stderr.contains(missing.to_str().unwrap()), "{}", r.stderr);
        assert!(
            !r.stdout.contains("VALID") && !r.stdout.contains("built-in defaults"),
            "{}",
            r.stdout
        );
    }
    let r = crate::util::lakedrill_in(tmp.path(), &["--json", "config", "check"]);
    let v = r.expect_code(0).json();
    assert_eq!(v["status"], "VALID", "{v}");
    assert_eq!(v["exists"], false, "{v}");
}
