//! `gates --trust`: the six safety gates of DESIGN §7, recomputed from the registry, the table and
//! the signed drill reports.

use serde_json::Value;

use crate::governance::{Gov, with_failpoints};
use crate::util::Run;

pub(crate) fn gates(g: &Gov) -> Run {
    gates_reading(g, "reports")
}

/// `gates` with `reports` as the folder the gates read.
pub(crate) fn gates_reading(g: &Gov, reports: &str) -> Run {
    g.on_table(&[
        "--json",
        "gates",
        "--policy",
        g.policy.to_str().unwrap(),
        "--trust",
        "keys",
        "--reports",
        reports,
    ])
}

pub(crate) fn gate<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["safety_gates"]
        .as_array()
        .unwrap_or_else(|| panic!("no safety gates: {v}"))
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no gate {name}: {v}"))
}

/// A quarterly exercise: back up the table and recover it in a cold-backup drill (the quarterly gate wants one).
pub(crate) fn quarterly_recovery(g: &Gov) {
    backup(g, &[]);
    cold_drill(g);
}

#[test]
fn gates_report_all_six_with_their_figures() {
    // A critical table: the quarterly recovery gate applies to it.
    let g = Gov::new("critical: true\n");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let n = c["objects"].as_array().unwrap().len() as u64;

    // Without --trust the safety gates are not evaluated: the command cannot decide (exit 2) and says so.
    let plain = g
        .on_table(&["--json", "gates", "--policy", g.policy.to_str().unwrap()])
        .expect_code(2)
        .json();
    assert_eq!(plain["safety_gates"], Value::Null);
    assert_eq!(plain["gate"], "UNDECIDED", "{plain}");

    // No cold-backup drill yet: the quarterly gate fails, and holds the deleter.
    let v = gates(&g).expect_code(1).json();
    let q = gate(&v, "quarterly_recovery");
    assert_eq!(q["status"], "FAIL", "no cold-backup report yet: {v}");
    assert!(
        q["detail"]
            .as_str()
            .unwrap()
            .contains("no verified cold-backup drill report recovered table"),
        "{q}"
    );
    crate::governance::refused_with(&g.purge(id, Some(&ev), &[]), "gate quarterly_recovery FAIL");
    quarterly_recovery(&g);

    // A purge whose every second delete response is lost: DELETE_UNKNOWN.
    assert_eq!(
        with_failpoints(&g, "lose-every=2", &g.purge_args(id, Some(&ev))),
        Some(1)
    );
    let v = gates(&g).expect_code(1).json();
    assert_eq!(v["safety_gates"].as_array().unwrap().len(), 6, "{v}");
    assert_eq!(v["gate"], "FAIL");
    assert_eq!(gate(&v, "protected_objects_deleted")["status"], "PASS", "{v}");
    assert_eq!(gate(&v, "protected_objects_deleted")["figures"]["protected_deleted"], 0);
    assert_eq!(gate(&v, "inventory_difference")["status"], "PASS", "{v}");
    let weekly = gate(&v, "weekly_restores");
    assert_eq!(weekly["status"], "PASS", "{v}");
    assert_eq!(weekly["figures"]["failed"], 0);
    assert_eq!(weekly["figures"]["sampled"], weekly["figures"]["population"]);
    assert_eq!(gate(&v, "quarterly_recovery")["status"], "PASS", "{v}");
    assert_eq!(gate(&v, "acceptances_after_hold")["status"], "PASS", "{v}");
    assert_eq!(gate(&v, "acceptances_after_hold")["figures"]["acceptances"], 1);
    let unknowns = gate(&v, "unknowns_reconciled");
    assert_eq!(unknowns["status"], "FAIL");
    assert_eq!(unknowns["figures"]["unreconciled"].as_u64(), Some(n / 2), "{v}");

    // reconcile settles the unknowns.
    g.on_table(&[
        "--json",
        "reconcile",
        id,
        "--policy",
        g.policy.to_str().unwrap(),
        "--key",
        "keys/gov-TEST-ONLY.key",
        "--receipts",
        "receipts",
        "--trust",
        "keys",
    ])
    .expect_code(0);

    let v = gates(&g).expect_code(0).json();
    assert_eq!(v["gate"], "PASS", "{v}");
    for x in v["safety_gates"].as_array().unwrap() {
        assert_eq!(x["status"], "PASS", "{x}");
    }
    assert_eq!(
        gate(&v, "protected_objects_deleted")["figures"]["deleted"].as_u64(),
        Some(n)
    );
    assert_eq!(gate(&v, "inventory_difference")["figures"]["finished_candidates"], 1);
    let q = gate(&v, "quarterly_recovery");
    assert_eq!(q["figures"]["backups"], 1);
    assert_eq!(q["figures"]["recovered_equals_declared"], true);
    assert_eq!(q["figures"]["rto_limit_seconds"].as_f64(), Some(4.0 * 3600.0));
    assert!(q["figures"]["max_rto_seconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(gate(&v, "unknowns_reconciled")["figures"]["unreconciled"], 0);
}

/// A copy of the signed report at `from`, changed by `edit` and re-signed with the fixture's (trusted) key,
/// written as `<dir>/<plan>/<name>` under the fixture folder so that it lies in its plan's folder.
fn resigned(
    g: &Gov,
    from: &std::path::Path,
    dir: &str,
    name: &str,
    edit: impl FnOnce(&mut Value),
) -> std::path::PathBuf {
    let mut st = lakedrill::evidence::peek_unverified(&std::fs::read(from).unwrap()).unwrap();
    edit(&mut st);
    let plan = st["predicate"]["drill"]["plan"].as_str().unwrap().to_owned();
    let key = lakedrill::evidence::keys::load_signing_key(&g.dir.join("keys/gov-TEST-ONLY.key")).unwrap();
    let folder = g.dir.join(dir).join(plan);
    std::fs::create_dir_all(&folder).unwrap();
    let out = folder.join(name);
    std::fs::write(
        &out,
        lakedrill::evidence::sign(lakedrill::evidence::PAYLOAD_TYPE, st.to_string().as_bytes(), &key).to_json_bytes(),
    )
    .unwrap();
    out
}

/// The purge of `id` with `ev` as evidence and `reports` as the folder the gates read.
fn purge_reading(g: &Gov, id: &str, ev: &std::path::Path, reports: &str) -> crate::util::Run {
    let mut a = g.purge_args(id, Some(ev));
    a.extend(["--reports", reports]);
    g.on_table(&a)
}

#[test]
fn the_weekly_gate_holds_the_deleter_naming_its_figure() {
    let g = Gov::new("evidenceMaxAge: 1d\n");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let refused = |reports: &str, needle: &str| {
        let v = purge_reading(&g, id, &ev, reports).expect_code(1).json();
        assert_eq!(v["status"], "REFUSED", "{v}");
        let reasons = v["reasons"].to_string();
        assert!(reasons.contains("gate weekly_restores FAIL"), "{reasons}");
        assert!(reasons.contains(needle), "want {needle:?}: {reasons}");
        let w = v["gates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "weekly_restores")
            .unwrap()
            .clone();
        assert_eq!(w["status"], "FAIL", "{v}");
        w
    };

    // Missing: a reports folder without any weekly report.
    std::fs::create_dir_all(g.dir.join("no-reports")).unwrap();
    refused("no-reports", "no verified weekly (quarantine) drill report under");

    // Older than the evidence age.
    resigned(&g, &ev, "old-reports", "old.dsse.json", |st| {
        st["predicate"]["finished_at"] = Value::String("2020-01-01T00:00:00.000Z".into());
    });
    let w = refused("old-reports", "older than the evidence age of 24 h");
    assert_eq!(w["figures"]["max_age_seconds"], 86_400, "{w}");

    // From a plan whose population does not hold the table's bundles (another bundles folder).
    resigned(&g, &ev, "other-reports", "other.dsse.json", |st| {
        st["predicate"]["sample"]["source"] = Value::String("file:///elsewhere/bundles".into());
    });
    refused("other-reports", "no weekly drill report covers the table's");

    // Smaller than min(30, population): a population of 40 of which fewer than 30 were sampled.
    resigned(&g, &ev, "small-reports", "small.dsse.json", |st| {
        let sample = &mut st["predicate"]["sample"];
        // Each id with the root it claims (none for the made-up ones), kept in id order.
        let mut ids: Vec<(String, Value)> = sample["population_ids"]
            .as_array()
            .unwrap()
            .iter()
            .zip(sample["population_roots"].as_array().unwrap())
            .map(|(x, root)| (x.as_str().unwrap().to_owned(), root.clone()))
            .collect();
        for i in 0..40 - ids.len() {
            ids.push((format!("zz-unsampled-{i:02}"), Value::Null));
        }
        ids.sort_by(|a, b| a.0.cmp(&b.0));
        sample["population"] = Value::from(ids.len());
        sample["population_ids"] = ids.iter().map(|(id, _)| Value::from(id.as_str())).collect();
        sample["population_roots"] = ids.into_iter().map(|(_, root)| root).collect();
        // A selection that still recomputes (every pick from a coverage rule): only the size is short.
        sample["coverage_weeks"] = Value::from(2);
        sample["coverage"] = sample["selected"].clone();
    });
    let w = refused("small-reports", "wanted min(30, 40) = 30");
    assert_eq!(w["figures"]["wanted"], 30, "{w}");

    // A failure among the sampled bundles.
    resigned(&g, &ev, "failed-reports", "failed.dsse.json", |st| {
        let p = &mut st["predicate"];
        p["results"][0]["status"] = Value::String("FAILED".into());
        p["results"][0]["findings"] =
            serde_json::json!([{"kind": "OBJECT_MISSING", "path": "x", "expected": null, "actual": null}]);
        let passed = p["summary"]["passed"].as_u64().unwrap();
        p["summary"]["passed"] = Value::from(passed - 1);
        p["summary"]["failed"] = Value::from(p["summary"]["failed"].as_u64().unwrap() + 1);
        p["summary"]["gate"] = Value::String("FAIL".into());
    });
    refused("failed-reports", "sampled bundles failed");

    // Nothing was deleted by any refused purge.
    g.assert_all_present(&c);

    // With the real reports folder and no --evidence, purge takes the covering weekly report as its evidence.
    let mut a = g.purge_args(id, None);
    a.extend(["--reports", "reports"]);
    let v = g.on_table(&a).expect_code(0).json();
    assert_eq!(v["status"], "VERIFIED", "{v}");
}

#[test]
fn a_report_finished_in_the_future_is_refused_and_hides_no_newer_failure() {
    let g = Gov::new("");
    let (_, ev) = g.quarantined();
    // The real weekly report; a drill of another plan (it does not cover the table) that failed one of the
    // table's bundles a moment ago, after the real report started; and a passing copy dated in 2099.
    resigned(&g, &ev, "future-reports", "a-real.dsse.json", |_| {});
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    resigned(&g, &ev, "future-reports", "b-failed.dsse.json", |st| {
        let p = &mut st["predicate"];
        p["sample"]["source"] = Value::String("file:///elsewhere/bundles".into());
        p["results"][0]["status"] = Value::String("FAILED".into());
        p["results"][0]["findings"] =
            serde_json::json!([{"kind": "OBJECT_MISSING", "path": "x", "expected": null, "actual": null}]);
        let passed = p["summary"]["passed"].as_u64().unwrap();
        p["summary"]["passed"] = Value::from(passed - 1);
        p["summary"]["failed"] = Value::from(p["summary"]["failed"].as_u64().unwrap() + 1);
        p["summary"]["gate"] = Value::String("FAIL".into());
        p["finished_at"] = Value::String(now.clone());
    });
    let future = resigned(&g, &ev, "future-reports", "c-future.dsse.json", |st| {
        st["predicate"]["started_at"] = Value::String("2099-01-01T00:00:00.000Z".into());
        st["predicate"]["finished_at"] = Value::String("2099-01-01T00:00:00.000Z".into());
    });
    let v = gates_reading(&g, "future-reports").expect_code(1).json();
    let w = gate(&v, "weekly_restores");
    assert_eq!(w["status"], "FAIL", "{v}");
    let detail = w["detail"].as_str().unwrap();
    // The future report is named and not counted: the gate reads the real one, and the failure after it.
    assert!(
        detail.contains("c-future.dsse.json") && detail.contains("more than 5 minutes after now"),
        "{detail}"
    );
    assert_eq!(
        w["figures"]["future_reports"][0]["finished_at"], "2099-01-01T00:00:00.000Z",
        "{w}"
    );
    assert!(
        w["figures"]["covering_report"]
            .as_str()
            .unwrap()
            .ends_with("a-real.dsse.json"),
        "{w}"
    );
    assert!(
        detail.contains("b-failed.dsse.json") && detail.contains("FAILED a bundle it covers"),
        "{detail}"
    );
    // Without the failed report the real one passes, and the future one still fails the gate by itself.
    std::fs::remove_file(future.with_file_name("b-failed.dsse.json")).unwrap();
    let v = gates_reading(&g, "future-reports").expect_code(1).json();
    let w = gate(&v, "weekly_restores");
    assert_eq!(w["status"], "FAIL", "{v}");
    assert!(w["detail"].as_str().unwrap().starts_with("the drill report "), "{w}");
    std::fs::remove_file(&future).unwrap();
    let v = gates_reading(&g, "future-reports").json();
    assert_eq!(gate(&v, "weekly_restores")["status"], "PASS", "{v}");
    // A report from the future about another table (another drill host's clock) holds only that table.
    resigned(&g, &ev, "future-reports", "d-other-table.dsse.json", |st| {
        let p = &mut st["predicate"];
        p["sample"]["source"] = Value::String("file:///elsewhere/bundles".into());
        for r in p["results"].as_array_mut().unwrap() {
            r["table_uuid"] = Value::String("00000000-0000-4000-8000-000000000000".into());
        }
        p["started_at"] = Value::String("2099-01-01T00:00:00.000Z".into());
        p["finished_at"] = Value::String("2099-01-01T00:00:00.000Z".into());
    });
    let v = gates_reading(&g, "future-reports").json();
    assert_eq!(gate(&v, "weekly_restores")["status"], "PASS", "{v}");
}

#[test]
fn the_quarterly_gate_holds_the_deleter_of_a_critical_table_over_its_rto() {
    let g = Gov::new("critical: true\nrecoveryRtoLimit: 2h\n");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    quarterly_recovery(&g);
    // The newest cold-backup report, re-signed with a 3-hour recovery, is the only one the gates see.
    let cold = std::fs::read_dir(g.dir.join("reports/quarterly"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".dsse.json"))
        .unwrap();
    resigned(&g, &cold, "slow-reports", "slow.dsse.json", |st| {
        for r in st["predicate"]["results"].as_array_mut().unwrap() {
            r["rto_seconds"] = Value::from(3.0 * 3600.0);
        }
    });
    let weekly = resigned(&g, &ev, "slow-reports", "weekly.dsse.json", |_| {});
    let v = purge_reading(&g, id, &weekly, "slow-reports").expect_code(1).json();
    let reasons = v["reasons"].to_string();
    assert!(reasons.contains("gate quarterly_recovery FAIL"), "{v}");
    assert!(reasons.contains("over the limit of 7200s"), "{v}");
    assert!(!reasons.contains("gate weekly_restores"), "{v}");
    // The real recovery is within the limit: the purge goes through.
    let v = purge_reading(&g, id, &ev, "reports").expect_code(0).json();
    assert_eq!(v["status"], "VERIFIED", "{v}");
}

/// A commit of one row to the fixture's table (a new head).
const APPEND: &str = "import pyarrow as pa\nt.append(pa.table({'id': pa.array([999], pa.int64()), \
                      'category': pa.array(['z']), 'value': pa.array([1.0])}))";

/// Each snapshot's commit time (epoch ms) and the current snapshot of the fixture's table.
pub(crate) fn commit_times(g: &Gov) -> (std::collections::BTreeMap<i64, i64>, i64) {
    crate::util::commit_times_of(&g.on_table(&["--json", "inspect", "snapshots"]).expect_code(0).json())
}

fn backup(g: &Gov, extra: &[&str]) -> Value {
    let mut a = vec!["--json", "backup", "--key", "keys/gov-TEST-ONLY.key", "--to", "backups"];
    a.extend(extra);
    g.on_table(&a).expect_code(0).json()
}

/// Runs the quarterly cold-backup drill over every backup under `backups` (exit 0: every recovery verified).
fn cold_drill(g: &Gov) -> Value {
    cold_drill_signed(g, "keys/gov-TEST-ONLY.key")
}

/// [`cold_drill`] with its report signed by `key`.
fn cold_drill_signed(g: &Gov, key: &str) -> Value {
    let plan = g.dir.join("quarterly.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"quarterly\"\nkind = \"cold-backup\"\nbackups = \"backups\"\ntarget = \"scratch\"\n\
             trust = \"keys\"\nkey = \"{key}\"\nreports = \"reports\"\n"
        ),
    )
    .unwrap();
    g.run(&["--json", "drill", "run", plan.to_str().unwrap()])
        .expect_code(0)
        .json()
}

/// #23 point 2: RPO that can fail. A backup of a snapshot older than the checkpoint it declares (the table
/// moved on before the backup was declared) recovers and verifies, but its RPO — declared checkpoint time
/// minus the recovered snapshot's commit time — fails the quarterly gate and holds the deleter, naming the
/// figure and the target; an `rpoTarget` that allows the lag lets the same report pass.
#[test]
fn a_backup_older_than_its_checkpoint_fails_the_quarterly_gate_with_its_rpo() {
    let g = Gov::new("critical: true\n");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let (_, old) = commit_times(&g);
    g.py(APPEND);
    let (commits, head) = commit_times(&g);
    assert_ne!(head, old);
    let rpo = (commits[&head] - commits[&old]) as f64 / 1000.0;
    assert!(rpo > 0.0, "{commits:?}");
    // Declared now: the table's state at declaration is the new head, the backup holds the old snapshot.
    let b = backup(&g, &["--snapshot-id", &old.to_string()]);
    assert_eq!(b["snapshot_id"].as_i64(), Some(old), "{b}");
    assert_eq!(b["rpo_seconds"].as_f64(), Some(rpo), "{b}");
    let d = cold_drill(&g);
    let r = &d["predicate"]["results"][0];
    assert_eq!(r["status"], "RESTORE_VERIFIED", "{r}");
    assert_eq!(r["snapshot_id"].as_i64(), Some(old), "{r}");
    assert_eq!(r["declared_snapshot_id"].as_i64(), Some(old), "{r}");
    assert_eq!(r["checkpoint_id"], b["checkpoint_id"], "{r}");
    assert_eq!(r["rpo_seconds"].as_f64(), Some(rpo), "{r}");

    let v = gates(&g).expect_code(1).json();
    let q = gate(&v, "quarterly_recovery");
    assert_eq!(q["status"], "FAIL", "{q}");
    let detail = q["detail"].as_str().unwrap();
    assert!(detail.contains(&format!("RPO {rpo:.3}s")), "{detail}");
    assert!(detail.contains("over the target of 0s (no rpoTarget"), "{detail}");
    assert!(detail.contains(b["checkpoint_id"].as_str().unwrap()), "{detail}");
    assert_eq!(q["figures"]["max_rpo_seconds"].as_f64(), Some(rpo), "{q}");
    assert_eq!(q["figures"]["rpo_target_seconds"], Value::Null, "{q}");
    assert_eq!(q["figures"]["recovered_equals_declared"], true, "{q}");
    // The deleter evaluates the same gate before it accepts a delete of a critical table.
    let refused = g.purge(id, Some(&ev), &[]);
    crate::governance::refused_with(&refused, "gate quarterly_recovery FAIL");
    crate::governance::refused_with(&refused, &format!("RPO {rpo:.3}s"));

    // A policy that accepts a day of lag: the same report passes, saying what it was measured against.
    let relaxed = g.dir.join("policy-rpo.yaml");
    std::fs::write(
        &relaxed,
        format!("{}rpoTarget: 1d\n", std::fs::read_to_string(&g.policy).unwrap()),
    )
    .unwrap();
    let run = g.on_table(&[
        "--json",
        "gates",
        "--policy",
        relaxed.to_str().unwrap(),
        "--trust",
        "keys",
        "--reports",
        "reports",
    ]);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    let v = run.json();
    let q = gate(&v, "quarterly_recovery");
    assert_eq!(q["status"], "PASS", "{q}");
    assert_eq!(q["figures"]["rpo_target_seconds"].as_f64(), Some(86_400.0), "{q}");
    assert!(
        q["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("max RPO {rpo:.3}s (within the rpoTarget of 86400.000s)")),
        "{q}"
    );
}

/// #23 point 2: a backup of the table as it is passes the quarterly gate with RPO 0, the recovered snapshot
/// being the declared one; a newer DR checkpoint that no backup recovered fails it, naming the checkpoint,
/// until a backup of it is drilled.
#[test]
fn a_normal_backup_passes_with_rpo_0_and_a_checkpoint_without_a_backup_fails_naming_it() {
    let g = Gov::new("critical: true\n");
    let (_, current) = commit_times(&g);
    let b = backup(&g, &[]);
    assert_eq!(b["snapshot_id"].as_i64(), Some(current), "{b}");
    assert_eq!(b["rpo_seconds"].as_f64(), Some(0.0), "{b}");
    let d = cold_drill(&g);
    let r = &d["predicate"]["results"][0];
    assert_eq!(r["status"], "RESTORE_VERIFIED", "{r}");
    assert_eq!(r["snapshot_id"].as_i64(), Some(current), "{r}");
    assert_eq!(r["declared_snapshot_id"].as_i64(), Some(current), "{r}");
    assert_eq!(r["rpo_seconds"].as_f64(), Some(0.0), "{r}");
    let first_checkpoint = b["checkpoint_id"].as_str().unwrap().to_owned();
    assert_eq!(r["checkpoint_id"], first_checkpoint.as_str(), "{r}");

    let v = gates(&g).json();
    let q = gate(&v, "quarterly_recovery");
    assert_eq!(q["status"], "PASS", "{q}");
    assert_eq!(q["figures"]["max_rpo_seconds"].as_f64(), Some(0.0), "{q}");
    assert_eq!(q["figures"]["recovered_equals_declared"], true, "{q}");
    assert_eq!(
        q["figures"]["newest_checkpoint"]["checkpoint_id"],
        first_checkpoint.as_str(),
        "{q}"
    );
    let report = d["report"].as_str().unwrap();
    assert_eq!(q["figures"]["newest_checkpoint_recovered_in"], report, "{q}");
    assert!(q["detail"].as_str().unwrap().contains("max RPO 0.000s"), "{q}");

    // The table moves on and a checkpoint is declared on its new head; no backup recovers it yet.
    g.py(APPEND);
    let (_, head) = commit_times(&g);
    let cp = g
        .on_table(&["--json", "checkpoint", "add", "--snapshot-id", &head.to_string()])
        .expect_code(0)
        .json();
    let cp_id = cp["checkpoint_id"].as_str().unwrap();
    let v = gates(&g).expect_code(1).json();
    let q = gate(&v, "quarterly_recovery");
    assert_eq!(q["status"], "FAIL", "{q}");
    let detail = q["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("the newest DR checkpoint {cp_id} (snapshot {head}, at "))
            && detail.contains("has no verified backup recovery"),
        "{detail}"
    );
    assert_eq!(q["figures"]["newest_checkpoint"]["checkpoint_id"], cp_id, "{q}");
    assert_eq!(q["figures"]["newest_checkpoint_recovered_in"], Value::Null, "{q}");

    // A backup of that checkpoint, drilled: the gate passes again.
    let b2 = backup(&g, &["--checkpoint", cp_id]);
    assert_eq!(b2["checkpoint_id"], cp_id, "{b2}");
    assert_eq!(b2["rpo_seconds"].as_f64(), Some(0.0), "{b2}");
    let d2 = cold_drill(&g);
    assert_eq!(d2["predicate"]["summary"]["passed"], 2, "{d2}");
    let v = gates(&g).json();
    let q = gate(&v, "quarterly_recovery");
    assert_eq!(q["status"], "PASS", "{q}");
    assert_eq!(
        q["figures"]["newest_checkpoint_recovered_in"],
        d2["report"].as_str().unwrap(),
        "{q}"
    );
}

/// A weekly drill whose plan names the tables' policies records each table's policy digest; once the policy
/// changes, that report is no evidence for the new rules: `gates` and the deleter refuse it, naming both digests,
/// until a drill under the policy in force (#23 point 5).
#[test]
fn a_drill_names_each_tables_policy_digest_and_a_changed_policy_voids_it_for_the_weekly_gate() {
    let g = Gov::new("");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    g.quarantine(id, "tag").expect_code(0);
    let plan = g.dir.join("weekly-policies.toml");
    std::fs::write(
        &plan,
        "name = \"weekly-policies\"\nkind = \"quarantine\"\nbundles = \"bundles\"\npolicies = \"policy.yaml\"\n\
         trust = \"keys\"\nkey = \"keys/gov-TEST-ONLY.key\"\nreports = \"reports\"\n",
    )
    .unwrap();
    let drill = || {
        let r = g
            .run(&["--json", "drill", "run", plan.to_str().unwrap()])
            .expect_code(0)
            .json();
        let path = std::path::PathBuf::from(r["report"].as_str().unwrap().trim_start_matches("file://"));
        let st = lakedrill::evidence::peek_unverified(&std::fs::read(&path).unwrap()).unwrap();
        (path, st["predicate"].clone())
    };
    let digest = || {
        g.run(&["--json", "policy", "check", g.policy.to_str().unwrap()])
            .expect_code(0)
            .json()["digest"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let before = digest();
    let (ev, p) = drill();
    // The fixture's policy binds `retention/<the table's UUID>`.
    let text = std::fs::read_to_string(&g.policy).unwrap();
    let uuid = text
        .lines()
        .find_map(|l| l.strip_prefix("table: retention/"))
        .unwrap()
        .to_owned();
    let results = p["results"].as_array().unwrap();
    assert!(!results.is_empty(), "{p}");
    for r in results {
        assert_eq!(r["table_uuid"], uuid.as_str(), "{r}");
        assert_eq!(r["policy_digest"], before.as_str(), "{r}");
    }
    assert_eq!(p["drill"]["policy_digest"], before.as_str(), "{p}");
    let w = gate(&gates(&g).json(), "weekly_restores").clone();
    assert_eq!(w["status"], "PASS", "{w}");
    assert_eq!(w["figures"]["report_policy_digest"], before.as_str(), "{w}");

    // The rules change: the report drilled under the old policy no longer counts, for gates and the deleter.
    g.write_policy(&format!("{text}maxUnreconciledUnknowns: 0\n"));
    let after = digest();
    assert_ne!(before, after);
    let w = gate(&gates(&g).expect_code(1).json(), "weekly_restores").clone();
    assert_eq!(w["status"], "FAIL", "{w}");
    let detail = w["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("under policy sha256 {before}"))
            && detail.contains(&format!("the policy in force has sha256 {after}")),
        "{detail}"
    );
    let v = purge_reading(&g, id, &ev, "reports").expect_code(1).json();
    assert_eq!(v["status"], "REFUSED", "{v}");
    assert!(v["reasons"].to_string().contains("gate weekly_restores FAIL"), "{v}");
    g.assert_all_present(&c);

    // A drill under the policy in force is evidence again.
    let (ev, p) = drill();
    assert_eq!(p["drill"]["policy_digest"], after.as_str(), "{p}");
    let v = purge_reading(&g, id, &ev, "reports").expect_code(0).json();
    assert_eq!(v["status"], "VERIFIED", "{v}");
}

/// A file of any size can be written into a reports folder: the gates, the drill's coverage and chain reads,
/// `audit verify --chain` and the purge's evidence read each report whole, so a planted multi-GB `x.dsse.json`
/// ended in an out-of-memory abort. Each read is now bounded as table metadata is (`max_metadata_bytes`): a
/// larger file is refused as soon as its size is known, naming it and the limit, and is never held: `audit` and
/// the purge's evidence exit 2; the gates count it as a report that does not verify.
#[test]
fn a_planted_report_larger_than_the_metadata_limit_is_refused_naming_it_not_read() {
    let g = Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let folder = std::path::Path::new(&ev).parent().unwrap().to_path_buf();
    let junk = folder.join("zz-junk.dsse.json");
    // Sparse: 600 MiB that take no disk, over the default limit of 512 MiB.
    std::fs::File::create(&junk).unwrap().set_len(600 << 20).unwrap();
    let over = |r: &crate::util::Run| {
        assert!(
            r.stderr.contains("zz-junk.dsse.json") && r.stderr.contains("over the limit"),
            "{}",
            r.stderr
        );
    };
    // The gates count it as a report that does not verify, named with the reason, and go on: one junk file in the
    // reports folder made every table's gates exit 2 (review of gates.rs, point 6). The covering report passes.
    let v = gates(&g).expect_code(0).json();
    let w = gate(&v, "weekly_restores");
    assert_eq!(w["status"], "PASS", "{v}");
    let named = w["figures"]["unverified_reports"].to_string();
    assert!(
        named.contains("zz-junk.dsse.json") && named.contains("could not be read") && named.contains("over the limit"),
        "{w}"
    );
    // The passing gate's detail (what the human output prints) names it too.
    let detail = w["detail"].as_str().unwrap();
    assert!(
        detail.contains("1 report file in the folder does not verify and was not counted")
            && detail.contains("zz-junk.dsse.json"),
        "{w}"
    );
    // Alone in a folder, it is the reason no weekly report verifies.
    let alone = g.dir.join("junk-reports");
    std::fs::create_dir_all(&alone).unwrap();
    std::fs::rename(&junk, alone.join("zz-junk.dsse.json")).unwrap();
    let v = gates_reading(&g, "junk-reports").expect_code(1).json();
    let w = gate(&v, "weekly_restores");
    assert!(
        w["detail"]
            .as_str()
            .unwrap()
            .contains("1 report(s) there do not verify")
            && w["detail"].as_str().unwrap().contains("zz-junk.dsse.json"),
        "{w}"
    );
    std::fs::rename(alone.join("zz-junk.dsse.json"), &junk).unwrap();
    let r = g.run(&[
        "--json",
        "audit",
        "verify",
        folder.to_str().unwrap(),
        "--chain",
        "--trust",
        "keys",
    ]);
    r.expect_code(2);
    over(&r);
    // The evidence itself.
    let r = g.purge(id, Some(&junk), &[]);
    r.expect_code(2);
    over(&r);
}

/// Under a policy with `evidenceSigners` the weekly gate (of `gates` and of `purge`) counts only a report signed by
/// a listed key: a covering report by another drill key of the trust folder fails it, naming the report, its key
/// and the field; a drill by the listed key passes it; a newer merge signed by the listed key of a shard the other
/// key signed is named, not counted. Before, every report a drill key of the caller's folder signed counted.
#[test]
fn the_weekly_gate_counts_only_reports_signed_by_a_key_the_policys_evidence_signers_list() {
    use crate::deleter_safety::{drill_with, policy_with, report_path, second_drill_key};
    let g = Gov::new("");
    let (_, ev) = g.quarantined();
    let (k2, gov) = second_drill_key(&g);
    let v = gates(&g).json();
    assert_eq!(gate(&v, "weekly_restores")["status"], "PASS", "{v}");

    policy_with(&g, &format!("evidenceSigners: [{k2}]\n"));
    let v = gates(&g).expect_code(1).json();
    let w = gate(&v, "weekly_restores");
    assert_eq!(w["status"], "FAIL", "{w}");
    let detail = w["detail"].as_str().unwrap();
    assert!(
        detail.contains(ev.file_name().unwrap().to_str().unwrap())
            && detail.contains(&format!("is signed by key {gov}"))
            && detail.contains(&format!("evidenceSigners does not list ({k2})")),
        "{w}"
    );
    assert_eq!(
        w["figures"]["unlisted_signer_reports"].as_array().unwrap().len(),
        1,
        "{w}"
    );

    let ev2 = report_path(&drill_with(&g, "listed", "keys/drill2-TEST-ONLY.key", "", None));
    let name2 = ev2.file_name().unwrap().to_str().unwrap().to_owned();
    let v = gates(&g).expect_code(0).json();
    let w = gate(&v, "weekly_restores");
    assert_eq!(w["status"], "PASS", "{w}");
    assert!(
        w["figures"]["covering_report"].as_str().unwrap().ends_with(&name2),
        "{w}"
    );

    // A newer merge, signed by the listed key, of a shard the unlisted key signed.
    let shard = drill_with(&g, "unlisted-shard", "keys/gov-TEST-ONLY.key", "", Some("0/1"));
    let merged = g
        .run(&[
            "--json",
            "report",
            "merge",
            shard["report"].as_str().unwrap(),
            "--key",
            "keys/drill2-TEST-ONLY.key",
            "--trust",
            "keys",
            "--reports",
            "reports",
        ])
        .expect_code(0)
        .json();
    let merged_name = report_path(&merged).file_name().unwrap().to_str().unwrap().to_owned();
    let v = gates(&g).expect_code(0).json();
    let w = gate(&v, "weekly_restores");
    assert!(
        w["figures"]["covering_report"].as_str().unwrap().ends_with(&name2),
        "{w}"
    );
    let unlisted = w["figures"]["unlisted_signer_reports"].to_string();
    assert!(
        unlisted.contains(&merged_name) && unlisted.contains("was merged from shard report") && unlisted.contains(&gov),
        "{w}"
    );
}

/// Under a policy with `evidenceSigners` the quarterly recovery gate (of `gates` and of `purge`, for a critical
/// table) holds cold-backup reports to the list as the weekly gate does: a table whose only recovery was drilled by
/// an unlisted drill key fails it, naming the report, its key and the field (the report is in
/// `unlisted_signer_reports`), and the deleter is refused on that gate; a recovery drilled by the listed key passes
/// it and the purge deletes. Before, any drill key of the trust folder counted for the quarterly gate.
#[test]
fn the_quarterly_gate_counts_only_cold_backup_reports_signed_by_a_key_the_policys_evidence_signers_list() {
    use crate::deleter_safety::{drill_with, policy_with, report_path, second_drill_key};
    let g = Gov::new("critical: true\n");
    let (c, _) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    backup(&g, &[]);
    let unlisted = cold_drill(&g);
    let unlisted_name = report_path(&unlisted).file_name().unwrap().to_str().unwrap().to_owned();
    let (k2, gov) = second_drill_key(&g);
    policy_with(&g, &format!("evidenceSigners: [{k2}]\n"));
    // The weekly evidence is drilled by the listed key: only the quarterly gate is left to judge.
    let ev = report_path(&drill_with(&g, "listed", "keys/drill2-TEST-ONLY.key", "", None));

    let v = gates(&g).expect_code(1).json();
    assert_eq!(gate(&v, "weekly_restores")["status"], "PASS", "{v}");
    let q = gate(&v, "quarterly_recovery");
    assert_eq!(q["status"], "FAIL", "{q}");
    let detail = q["detail"].as_str().unwrap();
    assert!(
        detail.contains(&unlisted_name)
            && detail.contains(&format!("is signed by key {gov}"))
            && detail.contains(&format!("evidenceSigners does not list ({k2})")),
        "{q}"
    );
    assert_eq!(
        q["figures"]["unlisted_signer_reports"].as_array().unwrap().len(),
        1,
        "{q}"
    );
    let before = crate::deleter_safety::walk(&g.table_root());
    let refused = g.purge(id, Some(&ev), &[]);
    crate::governance::refused_with(&refused, "gate quarterly_recovery FAIL");
    crate::governance::refused_with(&refused, &format!("evidenceSigners does not list ({k2})"));
    assert_eq!(
        crate::deleter_safety::walk(&g.table_root()),
        before,
        "nothing was deleted"
    );

    // The same recovery drilled by the listed key counts.
    let listed = cold_drill_signed(&g, "keys/drill2-TEST-ONLY.key");
    let v = gates(&g).expect_code(0).json();
    let q = gate(&v, "quarterly_recovery");
    assert_eq!(q["status"], "PASS", "{q}");
    assert_eq!(q["figures"]["report"], listed["report"], "{q}");
    assert_eq!(q["figures"]["report_keyids"], serde_json::json!([k2]), "{q}");
    let p = g.purge(id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(p["status"], "VERIFIED", "{p}");
    assert_eq!(g.present(&c), 0);
}

/// Gate 1 must fail when a kept snapshot's files cannot be read. A deleter that wrongly deleted a manifest of the
/// current snapshot (recorded `DELETED` in the registry, as it records its deletes) left that snapshot unreadable:
/// the gate left the snapshot out of what the protected closure reaches and passed. It now fails naming the
/// snapshot and the missing manifest.
#[test]
fn a_deleted_manifest_of_a_kept_snapshot_fails_gate_1_naming_it() {
    let g = Gov::new("");
    let (c, _) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let out =
        g.py("s = t.current_snapshot()\nprint(s.snapshot_id)\nfor m in s.manifests(t.io):\n    print(m.manifest_path)");
    let mut lines = out.lines();
    let snapshot = lines.next().unwrap().to_owned();
    let manifest = lines.next().unwrap();
    let rel = format!("metadata/{}", manifest.rsplit_once("/metadata/").unwrap().1);
    let v = gates(&g).json();
    assert_eq!(gate(&v, "protected_objects_deleted")["status"], "PASS", "{v}");
    std::fs::remove_file(g.table_root().join(&rel)).unwrap();
    crate::util::sql_exec(
        &format!("sqlite:{}", g.dir.join("registry.db").display()),
        "INSERT INTO object_states (candidate_id, path, state, updated_at) VALUES ($1, $2, 'DELETED', '2026-01-01T00:00:00Z')",
        &[id, &rel],
    );
    let v = gates(&g).expect_code(1).json();
    let g1 = gate(&v, "protected_objects_deleted");
    assert_eq!(g1["status"], "FAIL", "{v}");
    let detail = g1["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("retained snapshot {snapshot} ("))
            && detail.contains(&rel)
            && detail.contains("does not exist"),
        "{detail}"
    );
    assert!(
        g1["figures"]["unreadable_kept_snapshots"]
            .as_array()
            .is_some_and(|a| !a.is_empty()),
        "{g1}"
    );
}

/// A drill report statement edited so that its first result FAILED (OBJECT_MISSING), its summary agreeing, finished
/// at `now`.
fn first_result_failed(st: &mut Value, now: &str) {
    let p = &mut st["predicate"];
    p["results"][0]["status"] = Value::String("FAILED".into());
    p["results"][0]["findings"] =
        serde_json::json!([{"kind": "OBJECT_MISSING", "path": "x", "expected": null, "actual": null}]);
    let passed = p["summary"]["passed"].as_u64().unwrap();
    p["summary"]["passed"] = Value::from(passed - 1);
    p["summary"]["failed"] = Value::from(p["summary"]["failed"].as_u64().unwrap() + 1);
    p["summary"]["gate"] = Value::String("FAIL".into());
    p["finished_at"] = Value::String(now.to_owned());
}

/// Review E6: the weekly gate read a newer failure only from a report that verified without any audit finding, and
/// matched it by bundle id: a re-serialised FAIL report (`ENVELOPE_NOT_CANONICAL`, its signature intact) or a
/// failure recorded under another bundle id of the same root left the gate PASS on the older PASS, while the
/// deleter's `newer_failures` counted both. Both now fail the gate naming the report.
#[test]
fn a_newer_failure_in_a_report_with_findings_or_under_another_id_of_the_root_fails_the_weekly_gate() {
    let g = Gov::new("");
    let (_, ev) = g.quarantined();
    resigned(&g, &ev, "flawed-reports", "a-real.dsse.json", |_| {});
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let failed = |st: &mut Value| first_result_failed(st, &now);
    // 1. The FAIL re-serialised: its signature still verifies, its bytes are not the envelope as written.
    let fail = resigned(&g, &ev, "flawed-reports", "b-fail.dsse.json", failed);
    let env: Value = serde_json::from_slice(&std::fs::read(&fail).unwrap()).unwrap();
    std::fs::write(&fail, serde_json::to_vec_pretty(&env).unwrap()).unwrap();
    let v = gates_reading(&g, "flawed-reports").expect_code(1).json();
    let w = gate(&v, "weekly_restores");
    assert_eq!(w["status"], "FAIL", "{v}");
    let detail = w["detail"].as_str().unwrap();
    assert!(
        detail.contains("b-fail.dsse.json") && detail.contains("FAILED a bundle it covers"),
        "{detail}"
    );
    assert!(
        w["figures"]["unverified_reports"]
            .to_string()
            .contains("b-fail.dsse.json"),
        "{w}"
    );
    // 2. The failure recorded under another bundle id of the same root (canonical this time).
    std::fs::remove_file(&fail).unwrap();
    resigned(&g, &ev, "flawed-reports", "c-fail.dsse.json", |st| {
        failed(st);
        st["predicate"]["results"][0]["bundle_id"] = Value::String("a-copy-of-the-bundle".into());
    });
    let v = gates_reading(&g, "flawed-reports").expect_code(1).json();
    let w = gate(&v, "weekly_restores");
    assert_eq!(w["status"], "FAIL", "{v}");
    assert!(w["detail"].as_str().unwrap().contains("c-fail.dsse.json"), "{w}");
}

/// A shard's partial report is never the report a gate counts, but its failures count against older evidence
/// (DESIGN, "Shard reports are not evidence"), as the deleter counts them: a failed shard report that finished
/// after the covering report started fails the weekly gate. The gates dropped shard reports before looking.
#[test]
fn a_failed_shard_report_after_the_covering_report_started_fails_the_weekly_gate() {
    let g = Gov::new("");
    let (_, ev) = g.quarantined();
    resigned(&g, &ev, "shard-reports", "a-real.dsse.json", |_| {});
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let shard = resigned(&g, &ev, "shard-reports", "b-shard.dsse.json", |st| {
        st["predicate"]["shard"] = serde_json::json!({"index": 0, "count": 1, "run_id": "r-1"});
        first_result_failed(st, &now);
    });
    let v = gates_reading(&g, "shard-reports").expect_code(1).json();
    let w = gate(&v, "weekly_restores");
    assert_eq!(w["status"], "FAIL", "{v}");
    let detail = w["detail"].as_str().unwrap();
    assert!(
        detail.contains("b-shard.dsse.json") && detail.contains("FAILED a bundle it covers"),
        "{detail}"
    );
    assert!(
        w["figures"]["covering_report"]
            .as_str()
            .unwrap()
            .ends_with("a-real.dsse.json"),
        "{w}"
    );
    // A passing shard report is never the covering report: alone, no weekly report covers the table.
    std::fs::remove_file(&shard).unwrap();
    std::fs::remove_file(shard.with_file_name("a-real.dsse.json")).unwrap();
    resigned(&g, &ev, "shard-reports", "c-shard.dsse.json", |st| {
        st["predicate"]["shard"] = serde_json::json!({"index": 0, "count": 1, "run_id": "r-2"});
    });
    let v = gates_reading(&g, "shard-reports").expect_code(1).json();
    let w = gate(&v, "weekly_restores");
    assert_eq!(w["status"], "FAIL", "{v}");
    assert_eq!(w["figures"]["covering_report"], Value::Null, "{w}");
    assert_eq!(
        w["figures"]["unverified_reports"],
        serde_json::json!([]),
        "it verified: {w}"
    );
}

/// See: the review of 2026-12-07 (Q5). `gates --since` overrode the weekly gate's window whatever the policy's
/// `evidenceMaxAge`: `--since 400d` let year-old drill evidence pass a gate the deleter holds to a week. A
/// `--since` longer than the policy's bound is refused now (exit 2) naming both values; one within it still runs.
#[test]
fn gates_since_longer_than_the_policy_evidence_max_age_is_refused() {
    let g = Gov::new("");
    let run = |since: &str| {
        g.on_table(&[
            "--json",
            "gates",
            "--policy",
            g.policy.to_str().unwrap(),
            "--trust",
            "keys",
            "--reports",
            "reports",
            "--since",
            since,
        ])
    };
    let r = run("400d");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("--since 400d is longer than the policy's evidenceMaxAge of 7d"),
        "{}",
        r.stderr
    );
    let r = run("7d");
    assert!(r.code == 0 || r.code == 1, "{r:?}");
    assert!(r.json()["safety_gates"].is_array(), "{}", r.stdout);
}
