//! The scheduling examples under `drills/deploy/`: they parse, and every lakedrill command line in them is
//! one the binary accepts.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use serde_json::Value;

use crate::util::tmpdir;

fn deploy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("drills/deploy")
}

/// Parses a lakedrill command line (argv without the program) as the binary would.
#[track_caller]
fn accepts(argv: &[String], origin: &str) {
    let mut full = vec!["lakedrill".to_owned()];
    full.extend(argv.iter().cloned());
    if let Err(e) = lakedrill::cli::Cli::try_parse_from(&full) {
        panic!("{origin}: lakedrill refuses {argv:?}:\n{e}");
    }
}

/// The lakedrill command inside a shell line: from `/usr/local/bin/lakedrill` to the first shell operator,
/// with the shell's variables replaced by example values and quotes removed.
fn lakedrill_in_shell(line: &str) -> Option<Vec<String>> {
    let start = line.find("/usr/local/bin/lakedrill ")?;
    let rest = &line[start + "/usr/local/bin/lakedrill ".len()..];
    let end = [";", "&&", "||", ">>", " >", "|"]
        .iter()
        .filter_map(|op| rest.find(op))
        .min()
        .unwrap_or(rest.len());
    let cmd = rest[..end]
        .replace("$JOB_COMPLETION_INDEX", "3")
        .replace("$RUN_ID", "0b7c3c1e-uid")
        .replace("$(cat /run/lakedrill/run-id)", "0b7c3c1e-uid")
        .replace('"', "");
    Some(cmd.split_whitespace().map(str::to_owned).collect())
}

#[test]
fn cron_lines_have_five_time_fields_a_user_and_a_command_lakedrill_accepts() {
    let text = std::fs::read_to_string(deploy().join("cron/lakedrill.cron")).unwrap();
    let mut commands = 0;
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.split('=').next().is_some_and(|k| !k.contains(' ')) {
            continue;
        }
        assert!(!t.contains('%'), "cron turns % into a newline: {t}");
        let fields: Vec<&str> = t.split_whitespace().collect();
        assert!(fields.len() > 6, "{t}");
        let ranges = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)];
        for (f, (lo, hi)) in fields[..5].iter().zip(ranges) {
            if *f == "*" {
                continue;
            }
            for part in f.split(',') {
                let (range, _step) = part.split_once('/').unwrap_or((part, "1"));
                for n in range.split('-') {
                    let n: u32 = n.parse().unwrap_or_else(|_| panic!("field {f:?} in {t}"));
                    assert!((lo..=hi).contains(&n), "field {f:?} out of range in {t}");
                }
            }
        }
        assert_eq!(fields[5], "lakedrill", "the user field: {t}");
        let argv = lakedrill_in_shell(t).unwrap_or_else(|| panic!("no lakedrill command in {t}"));
        accepts(&argv, "cron");
        assert!(t.contains("|| logger"), "a non-zero exit is reported: {t}");
        commands += 1;
    }
    assert!(commands >= 2);
}

#[test]
fn systemd_units_verify_with_systemd_analyze() {
    // systemd-analyze is part of Debian's systemd package, present on this machine kind; scripts/test.sh
    // installs it when missing.
    let tmp = tmpdir();
    let bin = env!("CARGO_BIN_EXE_lakedrill");
    let mut units = Vec::new();
    for e in std::fs::read_dir(deploy().join("systemd")).unwrap() {
        let p = e.unwrap().path();
        let name = p
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace("@.", "@weekly-quarantine.");
        let text = std::fs::read_to_string(&p).unwrap();
        let exec = text.lines().find(|l| l.starts_with("ExecStart=")).unwrap_or_default();
        if exec.contains("/usr/local/bin/lakedrill") {
            let argv = lakedrill_in_shell(&exec.replace("%i", "weekly-quarantine")).unwrap();
            accepts(&argv, &name);
        }
        // The binary must exist for verify: the example's path is replaced by the one just built.
        std::fs::write(tmp.path().join(&name), text.replace("/usr/local/bin/lakedrill", bin)).unwrap();
        units.push(tmp.path().join(name));
    }
    assert_eq!(units.len(), 3, "{units:?}");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(&units)
        .output()
        .expect("systemd-analyze (Debian package systemd) is needed: run scripts/test.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for d in &docs {
        for k in ["apiVersion", "kind"] {
            assert!(d[k].is_string(), "{}: {k} in {d}", path.display());
        }
        assert!(d["metadata"]["name"].is_string(), "{}: {d}", path.display());
    }
    docs
}

/// The pod spec of a Job or CronJob.
fn pod_spec(d: &Value) -> &Value {
    match d["kind"].as_str().unwrap() {
        "CronJob" => &d["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        _ => &d["spec"]["template"]["spec"],
    }
}

fn job_spec(d: &Value) -> &Value {
    match d["kind"].as_str().unwrap() {
        "CronJob" => &d["spec"]["jobTemplate"]["spec"],
        _ => &d["spec"],
    }
}

#[test]
fn kubernetes_manifests_parse_and_their_lakedrill_commands_are_valid() {
    let dir = deploy().join("kubernetes");
    let config = yaml_docs(&dir.join("config.yaml"));
    let cm = config
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "lakedrill-config")
        .unwrap();
    // The configuration and the plan in the ConfigMap load as lakedrill loads them.
    let tmp = tmpdir();
    let toml = tmp.path().join("lakedrill.toml");
    std::fs::write(&toml, cm["data"]["lakedrill.toml"].as_str().unwrap()).unwrap();
    lakedrill::config::Config::load(&toml, true).unwrap();
    let plan = tmp.path().join("weekly-quarantine.toml");
    std::fs::write(&plan, cm["data"]["weekly-quarantine.toml"].as_str().unwrap()).unwrap();
    lakedrill::ops::drill::load_plan(&plan).unwrap();

    let mut jobs = yaml_docs(&dir.join("cronjob.yaml"));
    jobs.extend(yaml_docs(&dir.join("sharded-drill.yaml")));
    jobs.extend(yaml_docs(&dir.join("sharded-snapshot.yaml")));
    let mut checked = 0;
    for d in jobs.iter().filter(|d| d["kind"] == "CronJob" || d["kind"] == "Job") {
        let name = d["metadata"]["name"].as_str().unwrap();
        assert!(d["apiVersion"] == "batch/v1", "{name}");
        if d["kind"] == "CronJob" {
            let fields: Vec<&str> = d["spec"]["schedule"].as_str().unwrap().split_whitespace().collect();
            assert_eq!(fields.len(), 5, "{name}");
            assert_eq!(d["spec"]["concurrencyPolicy"], "Forbid", "{name}");
        }
        let pod = pod_spec(d);
        let job = job_spec(d);
        // podFailurePolicy needs restartPolicy Never and must name a real container.
        assert_eq!(pod["restartPolicy"], "Never", "{name}");
        let names: Vec<&str> = pod["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        if let Some(rules) = job["podFailurePolicy"]["rules"].as_array() {
            for r in rules {
                let c = r["onExitCodes"]["containerName"].as_str().unwrap();
                assert!(names.contains(&c), "{name}: {c} not in {names:?}");
                assert_eq!(r["onExitCodes"]["values"], serde_json::json!([1]), "{name}");
            }
        }
        for c in pod["containers"].as_array().unwrap() {
            let mut argv: Vec<String> = c["command"]
                .as_array()
                .unwrap()
                .iter()
                .chain(c["args"].as_array().unwrap())
                .map(|v| v.as_str().unwrap().to_owned())
                .collect();
            let argv = if argv[0] == "/usr/local/bin/lakedrill" {
                argv.remove(0);
                argv
            } else {
                assert_eq!(argv[..2], ["/bin/sh", "-c"], "{name}");
                lakedrill_in_shell(&argv[2]).unwrap_or_else(|| panic!("{name}: {argv:?}"))
            };
            accepts(&argv, name);
            if job["completionMode"] == "Indexed" {
                let n = job["completions"].as_u64().unwrap();
                assert_eq!(job["parallelism"].as_u64(), Some(n), "{name}");
                let shard = argv.iter().position(|a| a == "--shard").unwrap();
                assert_eq!(
                    argv[shard + 1],
                    format!("3/{n}"),
                    "{name}: the shard count is the completions"
                );
                assert!(argv.contains(&"--run-id".to_owned()), "{name}");
                // The snapshot Job splits every bundle's objects; the other its sample's items.
                let split = argv.iter().position(|a| a == "--split").map(|i| argv[i + 1].as_str());
                assert_eq!(split, name.contains("snapshot").then_some("objects"), "{name}: --split");
            }
            for m in c["volumeMounts"].as_array().unwrap() {
                let v = m["name"].as_str().unwrap();
                assert!(
                    pod["volumes"].as_array().unwrap().iter().any(|x| x["name"] == v),
                    "{name}: volume {v} is mounted but not declared"
                );
            }
            checked += 1;
        }
    }
    assert_eq!(
        checked, 5,
        "the CronJob, the shards Job and its merge Job, the snapshot shards Job and its merge Job"
    );
}
