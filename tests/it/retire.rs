//! Bundles after purge (issue 18, point 3), through the CLI on a fresh PyIceberg table whose candidate holds
//! real Parquet data files: the purge writes a signed retirement record beside each bundle, the next drill over
//! the same bundles folder passes with them counted as retired, the gates pass, and a tampered or copied record
//! is a finding naming it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::deleter_safety::add_bulk_files;
use crate::gates::{gate, gates, quarterly_recovery};
use crate::governance::Gov;

fn local(uri: &str) -> PathBuf {
    PathBuf::from(uri.trim_start_matches("file://"))
}

/// `drill run` of the plan `g.drill("bundles")` wrote, with its exit code checked.
fn drill_again(g: &Gov, code: i32) -> Value {
    let plan = g.dir.join("drill-bundles.toml");
    g.run(&["--json", "drill", "run", plan.to_str().unwrap()])
        .expect_code(code)
        .json()
}

/// The findings of a drill output, as `(bundle id, kind, path)`.
fn findings(d: &Value) -> Vec<(String, String, String)> {
    d["predicate"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            r["findings"].as_array().unwrap().iter().map(move |f| {
                (
                    r["bundle_id"].as_str().unwrap().to_owned(),
                    f["kind"].as_str().unwrap().to_owned(),
                    f["path"].as_str().unwrap().to_owned(),
                )
            })
        })
        .collect()
}

/// `seal` of the table's current snapshot into the fixture's `bundles` folder (its JSON output).
fn seal_current(g: &Gov) -> Value {
    let current = g.py("print(t.current_snapshot().snapshot_id)");
    g.on_table(&[
        "--json",
        "seal",
        "--snapshot-id",
        &current,
        "--key",
        "keys/gov-TEST-ONLY.key",
        "--out",
        "bundles",
    ])
    .expect_code(0)
    .json()
}

/// Changes one character of the envelope's base64 payload (to another base64 character).
fn change_a_payload_byte(path: &Path) {
    let mut b = std::fs::read(path).unwrap();
    let at = b.windows(12).position(|w| w == b"\"payload\": \"").unwrap() + 12 + 40;
    b[at] = if b[at] == b'A' { b'B' } else { b'A' };
    std::fs::write(path, b).unwrap();
}

#[test]
fn a_purge_that_deleted_data_files_retires_its_bundles_and_the_next_drill_passes() {
    let g = Gov::new("");
    add_bulk_files(&g, 3);
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let data: Vec<String> = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["layer"] == "data")
        .map(|o| o["path"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        data.iter().filter(|p| p.contains("data/bulk/")).count() == 3,
        "the candidate owns the bulk data files: {c}"
    );
    let q = g.quarantine(&id, "tag").expect_code(0).json();
    let bundles: Vec<Value> = q["bundles"].as_array().unwrap().clone();
    assert!(!bundles.is_empty(), "{q}");
    // A bundle of the current snapshot in the same folder: it stays in the drill population after the purge.
    let sealed = seal_current(&g);
    let live = local(sealed["uri"].as_str().unwrap());
    let ev = g.drill("bundles");
    let p = g.purge(&id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(p["status"], "VERIFIED", "{p}");
    for path in &data {
        assert!(!g.table_root().join(path).exists(), "{path} was deleted");
    }

    // One signed retirement record beside each bundle of the candidate, naming its root and the summary.
    let summary_uri = p["summary"].as_str().unwrap();
    let summary_sha = lakedrill::evidence::sha256_hex(&std::fs::read(local(summary_uri)).unwrap());
    let trust = lakedrill::evidence::keys::TrustStore::load_dir(&g.dir.join("keys/trust")).unwrap();
    for b in &bundles {
        let dir = local(b["uri"].as_str().unwrap());
        let bytes = std::fs::read(dir.join("retired.dsse.json")).unwrap();
        let v = lakedrill::evidence::verify(&bytes, &trust).unwrap();
        assert_eq!(v.predicate_type(), lakedrill::evidence::retirement::PREDICATE_TYPE);
        let pr = v.predicate();
        assert_eq!(pr["bundle_root"], b["bundle_root"], "{pr}");
        assert_eq!(pr["bundle_id"], b["bundle_id"], "{pr}");
        assert_eq!(pr["candidate_id"], id.as_str(), "{pr}");
        assert_eq!(pr["purge_summary"], summary_uri, "{pr}");
        assert_eq!(pr["purge_summary_sha256"], summary_sha.as_str(), "{pr}");
        assert_eq!(v.subjects()[0].digest["blake3"], b["bundle_root"].as_str().unwrap());
    }
    assert!(
        !live.join("retired.dsse.json").exists(),
        "the live bundle is not retired"
    );

    // The next weekly drill over the same folder passes: the purged bundles are counted as retired.
    let d = drill_again(&g, 0);
    let sample = &d["predicate"]["sample"];
    assert_eq!(d["predicate"]["summary"]["gate"], "PASS", "{d}");
    assert_eq!(sample["retired"], bundles.len(), "{sample}");
    assert_eq!(sample["population"], 1, "{sample}");
    assert_eq!(sample["selected"], serde_json::json!([sealed["bundle_id"]]), "{sample}");
    let text = std::fs::read_to_string(local(d["human_report"].as_str().unwrap())).unwrap();
    assert!(text.contains(&format!("retired: {} bundles", bundles.len())), "{text}");
    // `audit verify` accepts the report with its new field.
    g.run(&[
        "--json",
        "audit",
        "verify",
        d["report"].as_str().unwrap(),
        "--trust",
        "keys",
    ])
    .expect_code(0);

    // gates --trust passes (a quarterly recovery drill too, as the gate wants one).
    quarterly_recovery(&g);
    let v = gates(&g).expect_code(0).json();
    assert_eq!(v["gate"], "PASS", "{v}");
    let weekly = gate(&v, "weekly_restores");
    assert_eq!(weekly["status"], "PASS", "{weekly}");
    assert_eq!(weekly["figures"]["retired"], bundles.len(), "{weekly}");

    // A changed byte in a record: the bundle stays in the population, and the drill fails naming the record.
    let first = local(bundles[0]["uri"].as_str().unwrap());
    let record = first.join("retired.dsse.json");
    let good = std::fs::read(&record).unwrap();
    change_a_payload_byte(&record);
    let d = drill_again(&g, 1);
    assert_eq!(d["predicate"]["summary"]["gate"], "FAIL", "{d}");
    // (`retired` is absent from the report when it is 0.)
    let retired = d["predicate"]["sample"]["retired"].as_u64().unwrap_or(0);
    assert_eq!(retired, bundles.len() as u64 - 1, "{d}");
    let f = findings(&d);
    let bundle_id = bundles[0]["bundle_id"].as_str().unwrap();
    assert!(
        f.iter().any(|(b, kind, path)| b == bundle_id
            && kind == "BUNDLE_SIGNATURE"
            && path.ends_with(&format!("{bundle_id}/retired.dsse.json"))),
        "a finding on the bundle names its record: {f:?}"
    );
    std::fs::write(&record, &good).unwrap();
    drill_again(&g, 0);

    // A record copied from a retired bundle beside the live one names another bundle: a finding on it.
    std::fs::copy(&record, live.join("retired.dsse.json")).unwrap();
    let d = drill_again(&g, 1);
    let live_id = sealed["bundle_id"].as_str().unwrap();
    let f = findings(&d);
    assert!(
        f.iter().any(|(b, kind, path)| b == live_id
            && kind == "SUBJECT_MISMATCH"
            && path.ends_with(&format!("{live_id}/retired.dsse.json"))),
        "the copied record is a finding on the live bundle: {f:?}"
    );
    std::fs::remove_file(live.join("retired.dsse.json")).unwrap();

    // A missing record (a purge that died after its last delete) is written by `reconcile`. The other records,
    // there already, are checked before they are anchored (review V5): with another key than the purge's and no
    // trust folder, all but their signature, with a warning.
    std::fs::remove_file(&record).unwrap();
    let reconcile = |extra: &[&str]| {
        let mut a = vec![
            "--json",
            "reconcile",
            &id,
            "--policy",
            g.policy.to_str().unwrap(),
            "--key",
            "keys/gov-TEST-ONLY.key",
            "--receipts",
            "receipts",
        ];
        a.extend(extra);
        g.on_table(&a)
    };
    let r = reconcile(&[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("its signature was not checked"), "{}", r.stderr);
    std::fs::remove_file(&record).unwrap();
    reconcile(&["--trust", "keys"]).expect_code(0);
    assert!(record.exists(), "reconcile wrote the missing record");
    let d = drill_again(&g, 0);
    assert_eq!(d["predicate"]["sample"]["retired"], bundles.len(), "{d}");
}

/// A purge whose rebase released one of its snapshots (a tag landed on it after the quarantine) retires only the
/// bundles of the snapshots it deleted: the released snapshot's bundle gets no retirement record and stays in the
/// next drill's population. Before, every bundle the quarantine recorded was retired, so a drill no longer
/// restored the bundle of a snapshot the table keeps.
#[test]
fn a_purge_retires_only_the_bundles_of_the_snapshots_it_deleted() {
    let g = Gov::new("");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let ids = c["snapshot_ids"].as_array().unwrap().clone();
    assert!(
        ids.len() >= 2,
        "the fixture's candidate holds two snapshots or more: {c}"
    );
    let q = g.quarantine(&id, "tag").expect_code(0).json();
    let bundles = q["bundles"].as_array().unwrap().clone();
    assert_eq!(bundles.len(), ids.len(), "{q}");
    let ev = g.drill("bundles");
    let kept = ids[0].as_i64().unwrap();
    g.py(&format!(
        "t.manage_snapshots().create_tag({kept}, 'keep-this').commit()"
    ));
    let p = g.purge(&id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(p["status"], "VERIFIED", "{p}");
    for b in &bundles {
        let record = local(b["uri"].as_str().unwrap()).join("retired.dsse.json");
        if b["snapshot_id"].as_i64() == Some(kept) {
            assert!(
                !record.exists(),
                "the kept snapshot {kept}'s bundle is not retired: {}",
                record.display()
            );
        } else {
            assert!(record.exists(), "{} is retired", record.display());
        }
    }
    // The next drill restores the kept snapshot's bundle and counts the others as retired.
    let d = drill_again(&g, 0);
    let results = d["predicate"]["results"].as_array().unwrap();
    assert!(
        results
            .iter()
            .any(|r| r["snapshot_id"].as_i64() == Some(kept) && r["status"] == "RESTORE_VERIFIED"),
        "{d}"
    );
}

#[test]
fn a_folder_of_retired_bundles_only_is_named_as_such() {
    let g = Gov::new("");
    add_bulk_files(&g, 1);
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    g.purge(id, Some(&ev), &[]).expect_code(0);
    let plan = g.dir.join("drill-bundles.toml");
    let r = g.run(&["--json", "drill", "run", plan.to_str().unwrap()]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("are retired") || r.stdout.contains("are retired"),
        "{} {}",
        r.stdout,
        r.stderr
    );
}

#[test]
fn bundles_of_a_released_candidate_retire_with_the_purge_of_their_snapshots() {
    // A candidate is quarantined and released; the next plan proposes the same snapshots, and that candidate is
    // quarantined into the same folder and purged (its data files with it). The released candidate's bundles
    // are of purged snapshots too: the purge retires them, and the next drill passes.
    let g = Gov::new("");
    add_bulk_files(&g, 2);
    let first = g.candidate();
    let first_id = first["candidate_id"].as_str().unwrap().to_owned();
    let q = g.quarantine(&first_id, "tag").expect_code(0).json();
    let released: Vec<PathBuf> = q["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| local(b["uri"].as_str().unwrap()))
        .collect();
    g.on_table(&[
        "--json",
        "quarantine",
        "release",
        &first_id,
        "--reason",
        "re-plan after a schema fix",
    ])
    .expect_code(0);
    let again = g.candidate();
    let id = again["candidate_id"].as_str().unwrap().to_owned();
    assert_ne!(id, first_id);
    assert_eq!(again["snapshot_ids"], first["snapshot_ids"], "{again}");
    let q = g.quarantine(&id, "tag").expect_code(0).json();
    let own = q["bundles"].as_array().unwrap().len();
    // A bundle of the current snapshot in the same folder keeps the population from being only retired bundles.
    seal_current(&g);
    let ev = g.drill("bundles");
    let p = g.purge(&id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(p["status"], "VERIFIED", "{p}");
    assert!(
        again["objects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["layer"] == "data" && !g.table_root().join(o["path"].as_str().unwrap()).exists()),
        "the purge deleted data files: {again}"
    );
    for dir in &released {
        assert!(dir.join("retired.dsse.json").exists(), "{} is retired", dir.display());
    }
    let d = drill_again(&g, 0);
    assert_eq!(d["predicate"]["summary"]["failed"], 0, "{d}");
    assert_eq!(
        d["predicate"]["sample"]["retired"].as_u64(),
        Some((own + released.len()) as u64),
        "{d}"
    );
}

// Found by the churn soak: a released candidate's bundle that the operator had removed made the next purge of its
// snapshots exit 2 after its deletes ("retirement record could not be written: bundle.dsse.json does not exist").
// A removed bundle is in no drill's population: there is nothing to retire, and no record is written for it.
#[test]
fn a_released_candidates_removed_bundle_is_not_retired_and_the_purge_finishes() {
    let g = Gov::new("");
    let first = g.candidate();
    let first_id = first["candidate_id"].as_str().unwrap().to_owned();
    let q = g.quarantine(&first_id, "tag").expect_code(0).json();
    let released: Vec<PathBuf> = q["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| local(b["uri"].as_str().unwrap()))
        .collect();
    g.on_table(&[
        "--json",
        "quarantine",
        "release",
        &first_id,
        "--reason",
        "operator cleanup",
    ])
    .expect_code(0);
    std::fs::remove_dir_all(&released[0]).unwrap();
    let again = g.candidate();
    let id = again["candidate_id"].as_str().unwrap().to_owned();
    g.quarantine(&id, "tag").expect_code(0);
    seal_current(&g);
    let ev = g.drill("bundles");
    let p = g.purge(&id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(p["status"], "VERIFIED", "{p}");
    assert!(
        !released[0].exists(),
        "no record written into the removed bundle's folder"
    );
    for dir in &released[1..] {
        assert!(dir.join("retired.dsse.json").exists(), "{} is retired", dir.display());
    }
}

// Review V2: `recover --catalog` registers a copy of the table under the original UUID, with the original snapshot
// ids. A purge on the copy retired every bundle of the same UUID and snapshot id: the original table's released
// candidate's bundle of a snapshot the copy purged got a retirement record, and drills stopped checking it while
// that snapshot still lives in the original (a protected bundle-mode candidate's bundle is the original's only way
// back). Another candidate's bundle is now retired only when sealed at the purged candidate's table location.
#[test]
fn a_purge_of_a_recovered_copy_does_not_retire_the_original_tables_bundles() {
    let g = Gov::new("");
    let first = g.candidate();
    let first_id = first["candidate_id"].as_str().unwrap().to_owned();
    let q = g.quarantine(&first_id, "tag").expect_code(0).json();
    let original = q["bundles"][0].clone();
    let s = original["snapshot_id"].as_i64().unwrap();
    let original_dir = local(original["uri"].as_str().unwrap());
    g.on_table(&[
        "--json",
        "quarantine",
        "release",
        &first_id,
        "--reason",
        "kept after all",
    ])
    .expect_code(0);
    // The copy: snapshot `s` recovered beside the table and registered, then two commits on it expire `s` there.
    let into = g.dir.join("copy");
    let r = g
        .run(&[
            "--json",
            "recover",
            "--from",
            original["uri"].as_str().unwrap(),
            "--trust",
            "keys/trust",
            "--into",
            into.to_str().unwrap(),
            "--catalog",
            "rt",
            "--table",
            "db.copy",
        ])
        .expect_code(0)
        .json();
    assert_eq!(r["snapshot_id"].as_i64(), Some(s), "{r}");
    g.py("r = c.load_table('db.copy')\nrows = r.scan().to_arrow()\nr.append(rows)\nr = c.load_table('db.copy')\nr.append(rows)");
    std::thread::sleep(std::time::Duration::from_millis(1100)); // past minSnapshotAge
    let policy = std::fs::read_to_string(&g.policy).unwrap();
    let uuid = r["table_uuid"].as_str().unwrap();
    std::fs::write(&g.policy, crate::util::rebind_policy(&policy, &format!("copy/{uuid}"))).unwrap();
    // The rollout stage and its bound policy are kept by UUID: the copy's policy is bound for its purge.
    g.run(&[
        "--json",
        "rollout",
        "set",
        "db.copy",
        "test",
        "--catalog",
        "rt",
        "--reason",
        "the recovered copy's own policy",
        "--by",
        "it-tests",
        "--policy",
        g.policy.to_str().unwrap(),
        "--force",
    ])
    .expect_code(0);
    let on_copy = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend(["--catalog", "rt", "--table", "db.copy"]);
        g.run(&a)
    };
    let plan = on_copy(&["--json", "plan", "--policy", g.policy.to_str().unwrap()])
        .expect_code(0)
        .json();
    let c = plan["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "expired-snapshots")
        .cloned()
        .unwrap_or_else(|| panic!("a candidate of the copy: {plan}"));
    assert!(
        c["snapshot_ids"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x.as_i64() == Some(s)),
        "the copy's candidate holds snapshot {s}: {c}"
    );
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    on_copy(&g.quarantine_args(&id, "tag")).expect_code(0);
    let ev = g.drill("bundles");
    let p = on_copy(&g.purge_args(&id, Some(&ev))).expect_code(0).json();
    assert_eq!(p["status"], "VERIFIED", "{p}");
    assert!(
        !original_dir.join("retired.dsse.json").exists(),
        "the original table's bundle {} of snapshot {s} was retired by the copy's purge",
        original_dir.display()
    );
    // The original still has snapshot `s`, and its bundle still verifies in the drills.
    std::fs::write(&g.policy, policy).unwrap();
    g.set_stage("test", "back to the original's policy").expect_code(0);
    let snapshots = g.on_table(&["--json", "inspect", "snapshots"]).expect_code(0).json();
    assert!(
        snapshots["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["snapshot_id"].as_i64() == Some(s)),
        "{snapshots}"
    );
    drill_again(&g, 0);
}

/// The quarantine of a fresh candidate (its id and the quarantine's JSON output) and a passing drill of its bundles.
fn quarantined_with_bundles(g: &Gov) -> (String, Value, PathBuf) {
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let q = g.quarantine(&id, "tag").expect_code(0).json();
    assert!(!q["bundles"].as_array().unwrap().is_empty(), "{q}");
    let ev = g.drill("bundles");
    (id, q, ev)
}

/// How many registry anchors name `uri`.
fn anchors_of(g: &Gov, uri: &str) -> String {
    crate::util::sql_text(
        &crate::deleter_safety::registry_uri(g),
        &format!("SELECT CAST(COUNT(*) AS TEXT) FROM chain_heads WHERE folder = '{uri}'"),
    )
    .unwrap()
}

// See: review V5 — a file already at `<bundle>/retired.dsse.json` when the purge finished was kept unread, read back
// whole and its SHA-256 anchored in the registry as the bundle's retirement record. It is now read within the
// metadata limit and checked against the bundle as a drill checks it: junk stops the purge's last step (exit 2,
// naming the record and why) and nothing is anchored for it.
#[test]
fn a_file_planted_where_a_retirement_record_goes_is_refused_and_never_anchored() {
    let g = Gov::new("");
    let (id, q, ev) = quarantined_with_bundles(&g);
    let bundle = q["bundles"][0]["uri"].as_str().unwrap().to_owned();
    let record = format!("{bundle}/retired.dsse.json");
    let purge = crate::deleter_safety::Paused::start(
        &g,
        "purge-finish-delay-ms=120000",
        &g.dir.join("go"),
        &g.purge_args(&id, Some(&ev)),
    );
    let mut purge = purge;
    purge.wait_until_paused();
    std::fs::write(local(&record), b"{\"not\": \"a retirement record\"}").unwrap();
    let (code, out, stderr) = purge.finish();
    assert_eq!(code, Some(2), "{out}\n{stderr}");
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains(&record), "names the record: {out}");
    assert!(
        error.contains("does not retire bundle") && error.contains("does not verify"),
        "says why: {out}"
    );
    assert_eq!(anchors_of(&g, &record), "0", "nothing anchored for the planted file");
    assert_eq!(
        std::fs::read(local(&record)).unwrap(),
        b"{\"not\": \"a retirement record\"}",
        "the file is left as it was"
    );
}

// See: review V6 — a missing envelope of one of the candidate's OWN bundles failed `finish` (reading it to sign the
// record), so a VERIFIED purge exited 2 and every `reconcile` after it did the same. It is now nothing to retire,
// with a warning naming the bundle.
#[test]
fn a_removed_own_bundle_is_not_retired_and_reconcile_finishes_the_interrupted_purge() {
    let g = Gov::new("");
    let (id, q, ev) = quarantined_with_bundles(&g);
    let bundles: Vec<String> = q["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["uri"].as_str().unwrap().to_owned())
        .collect();
    let mut purge = crate::deleter_safety::Paused::start(
        &g,
        "purge-finish-delay-ms=120000",
        &g.dir.join("go"),
        &g.purge_args(&id, Some(&ev)),
    );
    purge.wait_until_paused();
    // Every delete went out; the process dies before it settles the candidate and writes the records.
    purge.kill();
    std::fs::remove_dir_all(local(&bundles[0])).unwrap();
    crate::deleter_safety::age_claim(&g, &id);
    let r = g.reconcile(&id);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["status"], "VERIFIED", "{v}");
    assert!(
        r.stderr.contains(&bundles[0]) && r.stderr.contains("no envelope"),
        "the warning names the removed bundle: {}",
        r.stderr
    );
    assert!(
        !local(&bundles[0]).exists(),
        "no record written into the removed bundle's folder"
    );
    for b in &bundles[1..] {
        assert!(local(b).join("retired.dsse.json").exists(), "{b} is retired");
    }
}
