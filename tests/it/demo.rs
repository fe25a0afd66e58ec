//! `lakedrill demo` builds a real lakehouse that other engines read.

use std::process::Command;

use crate::util::lakedrill_in;

#[test]
fn demo_builds_a_lakehouse_pyiceberg_can_read() {
    let tmp = crate::util::tmpdir();
    let dir = tmp.path().join("lake");
    let run = lakedrill_in(tmp.path(), &["--json", "demo", "--dir", dir.to_str().unwrap()]);
    let doc = run.expect_code(0).json();
    assert!(run.stderr.contains("purge deleted "), "{}", run.stderr);
    // The demo's drills recorded their verdicts in its registry: the purge has nothing to warn about.
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    let snaps = doc["snapshots"]["snapshots"].as_array().unwrap();
    assert!(snaps.len() >= 6, "{doc}");
    let ops: Vec<&str> = snaps.iter().map(|s| s["operation"].as_str().unwrap()).collect();
    for op in ["append", "overwrite", "delete"] {
        assert!(ops.contains(&op), "{ops:?}");
    }
    let refs = doc["refs"]["refs"].as_array().unwrap();
    assert!(refs.iter().any(|r| r["type"] == "tag"), "{refs:?}");
    assert!(
        refs.iter().any(|r| r["type"] == "branch" && r["name"] != "main"),
        "{refs:?}"
    );

    // The demo planned under a policy, quarantined the candidate (sealing its snapshots), drilled the
    // bundles, audited the signed report and purged with it.
    let candidate = &doc["plan"]["candidates"][0];
    assert_eq!(
        doc["bundles"].as_array().unwrap().len(),
        candidate["snapshot_ids"].as_array().unwrap().len(),
        "{doc}"
    );
    assert!(!doc["bundles"].as_array().unwrap().is_empty());
    // Every table starts in rollout stage report-only: the demo's dry-run purge there was refused, then
    // the table moved to `test` (its policy declares regulatedData: false) with a recorded reason.
    assert_eq!(doc["purge_in_report_only"]["status"], "REFUSED", "{doc}");
    assert!(
        doc["purge_in_report_only"]["reasons"]
            .to_string()
            .contains("report-only"),
        "{doc}"
    );
    assert_eq!(doc["rollout"]["change"]["from"], "report-only", "{doc}");
    assert_eq!(doc["rollout"]["change"]["to"], "test", "{doc}");
    assert_eq!(doc["purge"]["status"], "VERIFIED", "{doc}");
    for o in candidate["objects"].as_array().unwrap() {
        let p = dir.join("warehouse/sales/orders").join(o["path"].as_str().unwrap());
        assert!(!p.exists(), "{} was in the inventory and must be gone", p.display());
    }
    // See: issue 18 point 5 — the purge deleted data files, not only metadata, and says how many.
    let data = candidate["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["layer"] == "data")
        .count() as u64;
    assert!(data >= 1, "the candidate holds a data file: {candidate}");
    assert_eq!(doc["purge"]["candidate_data_files"], data, "{doc}");
    assert_eq!(doc["purge"]["data_files_deleted"], data, "{doc}");
    assert_eq!(doc["purge"]["candidate_delete_files"], 0, "{doc}");
    assert_eq!(doc["purge"]["delete_files_deleted"], 0, "{doc}");
    let verified = doc["purge"]["objects"]["VERIFIED"].to_string();
    for o in candidate["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["layer"] == "data")
    {
        assert!(
            verified.contains(o["path"].as_str().unwrap()),
            "{o} deleted and verified"
        );
    }
    assert_eq!(doc["drill"]["gate"], "PASS", "{doc}");
    // The quarterly exercise and the six safety gates over what the demo recorded.
    assert_eq!(doc["backup"]["status"], "BACKED_UP", "{doc}");
    assert_eq!(doc["cold_backup_drill"]["gate"], "PASS", "{doc}");
    // As `drill run` does, both drill reports get their `.txt`, `.html` and
    // `.md` beside the signed `.dsse.json` (the cold-backup one had only the first two).
    for drill in ["drill", "cold_backup_drill"] {
        let report = doc[drill]["report"].as_str().unwrap().trim_start_matches("file://");
        let stem = report.strip_suffix(".dsse.json").expect("a signed report");
        for ext in ["dsse.json", "txt", "html", "md"] {
            let page = std::path::PathBuf::from(format!("{stem}.{ext}"));
            assert!(page.is_file(), "{drill}: {} missing", page.display());
        }
    }
    assert!(
        doc["cold_backup_drill"]["html_report"]
            .as_str()
            .is_some_and(|h| h.ends_with(".html")),
        "{doc}"
    );
    let gates = doc["gates"]["safety_gates"].to_string();
    for g in [
        "protected_objects_deleted",
        "inventory_difference",
        "weekly_restores",
        "quarterly_recovery",
        "acceptances_after_hold",
        "unknowns_reconciled",
    ] {
        assert!(gates.contains(g), "{g} missing: {gates}");
    }
    assert!(!gates.contains("FAIL"), "{gates}");
    assert_eq!(doc["audit"]["status"], "VERIFIED", "{doc}");
    let report = doc["drill"]["report"].as_str().unwrap();
    assert!(report.starts_with(dir.to_str().unwrap()), "{report}");
    // See: issue 16 point 10 — auditors verify with a folder of public keys only; the private key is not in it.
    let trust = dir.join("keys/trust");
    assert_eq!(doc["drill"]["trust"], trust.to_str().unwrap(), "{doc}");
    let mut in_trust: Vec<_> = std::fs::read_dir(&trust)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    in_trust.sort();
    assert_eq!(in_trust, ["demo-deleter.pub", "demo-drill.pub", "roles.toml"]);
    assert!(dir.join("keys/demo-drill.key").exists());
    assert!(dir.join("keys/demo-deleter.key").exists());
    let verified = lakedrill_in(
        tmp.path(),
        &["audit", "verify", report, "--trust", trust.to_str().unwrap(), "--chain"],
    );
    verified.expect_code(0);
    assert!(!verified.stderr.contains("private key"), "{}", verified.stderr);
    // As `drill run` does with a `[registry]`, the demo anchored each drill chain's head there (read with the
    // demo's lakedrill.toml).
    for chain in ["reports/weekly-quarantine", "reports/quarterly-cold-backup"] {
        let r = lakedrill_in(
            &dir,
            &["audit", "verify", chain, "--trust", trust.to_str().unwrap(), "--chain"],
        );
        r.expect_code(0);
        assert!(
            r.stdout.contains("checked against the registry"),
            "{chain}: {}",
            r.stdout
        );
    }

    // Everything stays under DIR.
    let mut leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    leftovers.sort();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("lake")]);

    // After the purge, PyIceberg reads the demo catalog and sees every row the demo wrote:
    // 4 appends (7800 rows) − emea (2600) + corrected emea (1500) − apac (2600) + 700 = 4800.
    let py = std::env::var("LAKEDRILL_TEST_PYTHON")
        .unwrap_or_else(|_| panic!("LAKEDRILL_TEST_PYTHON is not set: run scripts/test.sh"));
    let script = format!(
        "from pyiceberg.catalog.sql import SqlCatalog\n\
         c = SqlCatalog('demo', uri='sqlite:///{db}', warehouse='file://{wh}')\n\
         t = c.load_table('sales.orders')\n\
         print(t.scan().to_arrow().num_rows, len(t.metadata.snapshots), sorted(t.metadata.refs))\n\
         for r in ['audit-q2', 'what-if']: t.scan(snapshot_id=t.metadata.refs[r].snapshot_id).to_arrow()\n",
        db = dir.join("catalog.db").display(),
        wh = dir.join("warehouse").display()
    );
    let out = Command::new(py).arg("-c").arg(script).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("4800 "), "{stdout}");
    assert!(
        stdout.contains("'audit-q2'") && stdout.contains("'what-if'"),
        "{stdout}"
    );

    // Running it again over its own folder rebuilds; a foreign folder is refused. The commands it prints for
    // auditors name the public-only folder, and nothing it runs warns about a private key in a trust folder.
    let again = lakedrill_in(tmp.path(), &["demo", "--dir", dir.to_str().unwrap()]);
    again.expect_code(0);
    let printed = format!(" --trust {} --chain\n", trust.display());
    assert!(
        again
            .stdout
            .lines()
            .any(|l| l.trim_start().starts_with("lakedrill audit verify ") && format!("{l}\n").ends_with(&printed)),
        "{}",
        again.stdout
    );
    assert!(
        again
            .stdout
            .contains(&format!("== gates --trust {}\n", trust.display())),
        "{}",
        again.stdout
    );
    assert!(
        !again
            .stdout
            .contains(&format!("--trust {} ", dir.join("keys").display())),
        "{}",
        again.stdout
    );
    assert!(!again.stderr.contains("holds a private key"), "{}", again.stderr);
    let foreign = tmp.path().join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("precious.txt"), b"keep me").unwrap();
    let r = lakedrill_in(tmp.path(), &["demo", "--dir", foreign.to_str().unwrap()]);
    r.expect_code(2);
    assert!(foreign.join("precious.txt").exists());
}

/// `audit verify <copied reports folder> --chain` in a lakehouse whose configuration has a `[registry]` says what
/// is true: the registry holds no anchor for that chain (it said no `[registry]` was configured).
/// The standard-tools command the demo prints works where the user ran the demo, outside the repository (it
/// printed `python3 scripts/verify_report.py …`, a path only the repository has).
#[test]
fn the_printed_verify_report_command_runs_where_the_demo_ran() {
    let tmp = crate::util::tmpdir();
    let dir = tmp.path().join("lake");
    let run = lakedrill_in(tmp.path(), &["demo", "--dir", dir.to_str().unwrap()]);
    let line = run
        .expect_code(0)
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("python3 "))
        .unwrap_or_else(|| panic!("no python3 command in {}", run.stdout))
        .to_owned();
    let args: Vec<&str> = line.split_whitespace().skip(1).collect();
    assert_eq!(args.len(), 3, "{line}");
    assert!(std::path::Path::new(args[0]).is_absolute(), "{line}");
    let py = std::env::var("LAKEDRILL_TEST_PYTHON").expect("LAKEDRILL_TEST_PYTHON: run scripts/test.sh");
    let out = Command::new(py).args(&args).current_dir(tmp.path()).output().unwrap();
    assert!(
        out.status.success(),
        "{line}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("OK keyid="), "{out:?}");
}

#[test]
fn a_copied_chain_is_not_anchored_by_the_configured_registry_and_says_so() {
    let tmp = crate::util::tmpdir();
    let dir = tmp.path().join("lake");
    lakedrill_in(tmp.path(), &["--json", "demo", "--dir", dir.to_str().unwrap()]).expect_code(0);
    assert!(
        std::fs::read_to_string(dir.join("lakedrill.toml"))
            .unwrap()
            .contains("[registry]")
    );
    let copy = dir.join("copied-reports");
    crate::util::copy_tree(&dir.join("reports/weekly-quarantine"), &copy);
    let trust = dir.join("keys/trust");
    let anchored = lakedrill_in(
        &dir,
        &[
            "audit",
            "verify",
            "reports/weekly-quarantine",
            "--trust",
            trust.to_str().unwrap(),
            "--chain",
        ],
    );
    anchored.expect_code(0);
    assert!(
        anchored.stdout.contains("checked against the registry"),
        "{}",
        anchored.stdout
    );
    let r = lakedrill_in(
        &dir,
        &[
            "audit",
            "verify",
            copy.to_str().unwrap(),
            "--trust",
            trust.to_str().unwrap(),
            "--chain",
        ],
    );
    r.expect_code(0);
    assert!(
        r.stdout
            .contains("not anchored (the configured registry holds no anchor for the chain")
            && r.stdout.contains("copied-reports")
            && !r.stdout.contains("no [registry] configured"),
        "{}",
        r.stdout
    );
}
