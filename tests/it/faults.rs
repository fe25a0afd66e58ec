//! `drill faults`: the fourteen scenarios of DESIGN §6 as a signed drill, verified like any report.

use std::path::PathBuf;

use serde_json::Value;

use crate::util::{lakedrill_in, lakedrill_in_env, tmpdir, verify_with_standard_tools};

/// The whole matrix on the local filesystem passes, loses nothing, and its signed report verifies with
/// lakedrill, Python `cryptography` and OpenSSL; an edited report does not.
#[test]
fn the_fault_matrix_passes_on_the_filesystem_and_its_report_verifies() {
    let tmp = tmpdir();
    let dir = tmp.path();
    lakedrill_in(dir, &["keygen", "--name", "faults-TEST-ONLY", "--dir", "keys"]).expect_code(0);
    let v = lakedrill_in(
        dir,
        &[
            "--json",
            "drill",
            "faults",
            "--key",
            "keys/faults-TEST-ONLY.key",
            "--reports",
            "reports",
            "--scratch",
            "scratch",
        ],
    )
    .expect_code(0)
    .json();
    assert_eq!(v["summary"]["gate"], "PASS", "{v:#}");
    assert_eq!(v["summary"]["objects_lost"], 0);
    let scenarios = v["scenarios"].as_array().unwrap();
    let ids: Vec<&str> = scenarios.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, lakedrill::evidence::fault_matrix::SCENARIOS.to_vec());
    for s in scenarios {
        assert_eq!(s["pass"], true, "{s:#}");
        assert_eq!(s["objects_lost"], 0, "{s:#}");
        let observed = s["observed"].as_array().unwrap();
        assert!(
            observed.iter().any(|l| l.as_str().unwrap().starts_with("ok: ")),
            "{s:#}"
        );
        assert!(
            !observed.iter().any(|l| l.as_str().unwrap().starts_with("NOT OBSERVED")),
            "{s:#}"
        );
    }
    let by = |id: &str| scenarios.iter().find(|s| s["id"] == id).unwrap();
    assert_data_files_in_every_path(scenarios);
    // The fault layer really injected what the scenarios claim.
    assert!(
        by("lagging-listing")["injected"]["hidden_from_listing"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(by("lagging-replica")["injected"]["stale_read"].as_u64().unwrap() > 0);
    assert!(
        by("lost-delete-receipts")["injected"]["lost_delete_response"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(by("lost-delete-receipts")["injected"]["delete_503"].as_u64().unwrap() > 0);
    // The reader that never took a lease is visible.
    let readers = by("late-model-reader")["unprotected_readers"].as_array().unwrap();
    assert_eq!(readers.len(), 1);
    assert_eq!(readers[0]["lease"], Value::Null);
    // Its bundle restores the snapshot, or names exactly the purged data files it reached as missing (a purge
    // of data files on a filesystem is final); the scenario's own expectation checks there is nothing else.
    let missing = readers[0]["purged_data_missing"].as_array().unwrap();
    assert!(
        readers[0]["bundle_restores"] == true || !missing.is_empty(),
        "{readers:#?}"
    );
    assert!(
        missing.iter().all(|p| p.as_str().unwrap().ends_with(".parquet")),
        "{readers:#?}"
    );
    // The scratch lakehouses are gone without --keep: the run's own folder is removed, the named one kept.
    assert_eq!(std::fs::read_dir(dir.join("scratch")).unwrap().count(), 0);

    let report = PathBuf::from(v["report"].as_str().unwrap().trim_start_matches("file://"));
    let a = lakedrill_in(
        dir,
        &["--json", "audit", "verify", report.to_str().unwrap(), "--trust", "keys"],
    )
    .expect_code(0)
    .json();
    assert_eq!(a["status"], "VERIFIED", "{a:#}");
    assert_eq!(a["gate"], "PASS");
    verify_with_standard_tools(&report, &dir.join("keys/faults-TEST-ONLY.pub"), dir);

    // A fault report is not drill evidence, and an edited one does not verify.
    let text = std::fs::read_to_string(&report).unwrap();
    let edited = dir.join("edited.dsse.json");
    std::fs::write(&edited, text.replacen("\"payload\": \"", "\"payload\": \"e", 1)).unwrap();
    let bad = lakedrill_in(dir, &["audit", "verify", edited.to_str().unwrap(), "--trust", "keys"]);
    assert_ne!(bad.code, 0, "{}", bad.stdout);
}

/// Scenarios whose purge runs to the end (after reconcile where it ends `DELETE_UNKNOWN`).
const PURGE_COMPLETES: [&str; 7] = [
    "orphan-referenced-after-quarantine",
    "ref-case-collision",
    "lagging-listing",
    "late-model-reader",
    "lagging-replica",
    "lost-delete-receipts",
    "delete-marker-recovery",
];

/// See: issue 18 point 5 — every scenario's candidate holds data files, every completed purge deleted at
/// least one, a refused one none, and no count exceeds the candidate's.
fn assert_data_files_in_every_path(scenarios: &[Value]) {
    for s in scenarios {
        let c = &s["content_files"];
        let id = s["id"].as_str().unwrap();
        let n = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("{id}: no {k}: {s:#}"));
        assert!(
            n("candidate_data_files") >= 1,
            "{id}: the candidate holds a data file: {s:#}"
        );
        assert!(n("data_files_deleted") <= n("candidate_data_files"), "{s:#}");
        assert!(n("delete_files_deleted") <= n("candidate_delete_files"), "{s:#}");
        if PURGE_COMPLETES.contains(&id) {
            assert!(
                n("data_files_deleted") >= 1,
                "{id}: the purge deleted a data file: {s:#}"
            );
        }
        if [
            "hold-races-cas",
            "bundle-missing-layer",
            "stale-pass-after-fail",
            "planner-bug",
        ]
        .contains(&id)
        {
            assert_eq!(n("data_files_deleted"), 0, "{id}: refused, nothing deleted: {s:#}");
        }
    }
}

/// A partial matrix never passes the gate, and an unknown scenario is named.
#[test]
fn a_partial_matrix_fails_the_gate_and_unknown_scenarios_are_named() {
    let tmp = tmpdir();
    let v = lakedrill_in(
        tmp.path(),
        &["--json", "drill", "faults", "--scenario", "hold-races-cas"],
    )
    .expect_code(1)
    .json();
    assert_eq!(v["scenarios"].as_array().unwrap().len(), 1);
    assert_eq!(v["scenarios"][0]["pass"], true, "{v:#}");
    assert_eq!(v["summary"]["gate"], "FAIL");
    let r = lakedrill_in(tmp.path(), &["drill", "faults", "--scenario", "no-such-fault"]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("no-such-fault") && r.stderr.contains("hold-races-cas"),
        "{}",
        r.stderr
    );
}

/// See: review V1 — `--scratch DIR` names where the run makes its own new folder; the run removes that folder
/// and nothing else: a file already in DIR survives, and so does DIR.
#[test]
fn the_fault_matrix_removes_only_its_own_folder_inside_scratch() {
    let tmp = tmpdir();
    let dir = tmp.path();
    let existing = dir.join("existing");
    std::fs::create_dir_all(existing.join("keys")).unwrap();
    std::fs::write(existing.join("sentinel.txt"), b"keep me").unwrap();
    std::fs::write(existing.join("keys/real.key"), b"not a scratch file").unwrap();
    let v = lakedrill_in(
        dir,
        &[
            "--json",
            "drill",
            "faults",
            "--scenario",
            "hold-races-cas",
            "--scratch",
            "existing",
        ],
    )
    .expect_code(1)
    .json();
    assert_eq!(v["scenarios"][0]["pass"], true, "{v:#}");
    assert_eq!(std::fs::read(existing.join("sentinel.txt")).unwrap(), b"keep me");
    assert_eq!(
        std::fs::read(existing.join("keys/real.key")).unwrap(),
        b"not a scratch file"
    );
    let used = PathBuf::from(v["matrix"]["scratch"].as_str().unwrap());
    let id = v["matrix"]["id"].as_str().unwrap();
    assert_eq!(
        used.file_name().unwrap().to_str().unwrap(),
        format!("lakedrill-faults-{id}")
    );
    assert_eq!(used.parent().unwrap(), existing.canonicalize().unwrap());
    assert!(!used.exists(), "the run's own folder is removed");
    let mut left: Vec<String> = std::fs::read_dir(&existing)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["keys", "sentinel.txt"]);
}

/// See: review V8 — a scenario that could not run (here: its store is a closed loopback port) counted as a failed
/// scenario, so the run exited 1 and signed a FAIL report, which reads as a safety regression. With no scenario
/// failing, it now cannot decide: exit 2 naming the scenario and why, and no report is signed.
#[test]
fn a_scenario_that_could_not_run_makes_the_run_undecided_and_signs_nothing() {
    let tmp = tmpdir();
    let dir = tmp.path();
    lakedrill_in(dir, &["keygen", "--name", "faults-TEST-ONLY", "--dir", "keys"]).expect_code(0);
    // Port 9 on loopback: nothing listens, every request is refused at once (no network beyond this machine).
    let unreachable = [
        ("AWS_ENDPOINT", "http://127.0.0.1:9"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "TEST-ONLY"),
        ("AWS_SECRET_ACCESS_KEY", "TEST-ONLY"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ];
    let r = lakedrill_in_env(
        dir,
        &[
            "--json",
            "drill",
            "faults",
            "--scenario",
            "hold-races-cas",
            "--store",
            "s3://lakedrill-unreachable/faults",
            "--key",
            "keys/faults-TEST-ONLY.key",
            "--reports",
            "reports",
            "--scratch",
            "scratch",
        ],
        &unreachable,
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["not_run"][0]["id"], "hold-races-cas", "{v:#}");
    assert!(
        v["not_run"][0]["error"]
            .as_str()
            .unwrap()
            .contains("lakedrill-unreachable"),
        "says why: {v:#}"
    );
    assert_eq!(v["report"], Value::Null, "{v:#}");
    assert!(!dir.join("reports").exists(), "no report signed");
}

/// The same matrix with the tables, bundles, receipts and the signed report on the versioned S3 bucket of
/// the test server: every scenario passes (delete-marker recovery through `undelete`), and the report
/// verifies where it lies.
#[test]
fn the_fault_matrix_passes_on_the_s3_server() {
    let bucket = std::env::var("LAKEDRILL_TEST_S3_BUCKET").expect("LAKEDRILL_TEST_S3_BUCKET: run scripts/test.sh");
    let prefix = format!("s3://{bucket}/faults-{}", uuid::Uuid::new_v4());
    let tmp = tmpdir();
    let dir = tmp.path();
    lakedrill_in(dir, &["keygen", "--name", "faults-TEST-ONLY", "--dir", "keys"]).expect_code(0);
    let reports = format!("{prefix}/reports");
    let v = lakedrill_in(
        dir,
        &[
            "--json",
            "drill",
            "faults",
            "--store",
            &prefix,
            "--key",
            "keys/faults-TEST-ONLY.key",
            "--reports",
            &reports,
        ],
    )
    .expect_code(0)
    .json();
    assert_eq!(v["summary"]["gate"], "PASS", "{v:#}");
    assert_eq!(v["summary"]["objects_lost"], 0);
    assert_data_files_in_every_path(v["scenarios"].as_array().unwrap());
    assert!(v["matrix"]["store"].as_str().unwrap().starts_with(&prefix), "{v:#}");
    let recovery = v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "delete-marker-recovery")
        .unwrap();
    assert!(
        recovery["observed"].to_string().contains("behind a delete marker"),
        "{recovery:#}"
    );
    let report = v["report"].as_str().unwrap();
    assert!(report.starts_with(&reports), "{report}");
    let a = lakedrill_in(dir, &["--json", "audit", "verify", report, "--trust", "keys"])
        .expect_code(0)
        .json();
    assert_eq!(a["status"], "VERIFIED", "{a:#}");
    assert_eq!(a["gate"], "PASS");
}
