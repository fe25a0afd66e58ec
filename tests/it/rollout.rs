//! Rollout safety and governance decisions (issue #10), end to end on fresh PyIceberg tables: rollout stages,
//! the comparison with plain Iceberg maintenance, the implementation-digest binding, signed governance
//! decisions (legal holds and deletion rights), quarantine extension and the anomaly switches.

use serde_json::Value;

use crate::governance::{DELETER_KEY, Gov, refused_with, with_failpoints};
use crate::util::Run;

/// Snapshots of the fixture table as `inspect snapshots` lists them, oldest first.
fn snapshots(g: &Gov) -> Vec<Value> {
    let mut v = g.on_table(&["--json", "inspect", "snapshots"]).expect_code(0).json()["snapshots"]
        .as_array()
        .unwrap()
        .clone();
    v.sort_by_key(|s| s["sequence_number"].as_i64().unwrap());
    v
}

/// The manifest list of a snapshot, relative to the table location.
fn manifest_list(g: &Gov, snapshot_id: i64) -> String {
    let s = snapshots(g)
        .into_iter()
        .find(|s| s["snapshot_id"].as_i64() == Some(snapshot_id))
        .unwrap();
    let abs = s["manifest_list"].as_str().unwrap().to_owned();
    let root = format!("file://{}/", g.table_root().display());
    abs.strip_prefix(&root)
        .or_else(|| abs.strip_prefix(&format!("{}/", g.table_root().display())))
        .unwrap_or_else(|| panic!("{abs} is not under {root}"))
        .to_owned()
}

fn rollout_show(g: &Gov) -> Value {
    g.run(&["--json", "rollout", "show", "db.retention", "--catalog", "rt"])
        .expect_code(0)
        .json()
}

fn write_policy(g: &Gov, name: &str, text: &str) -> String {
    let p = g.dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_owned()
}

#[test]
fn a_report_only_table_is_planned_quarantined_and_drilled_but_never_purged() {
    // The policy says nothing about regulated data; the table was never given a stage.
    let g = Gov::report_only("", None);
    let shown = rollout_show(&g);
    assert_eq!(shown["rollout"]["stage"], "report-only", "{shown}");
    assert!(shown["history"].as_array().unwrap().is_empty(), "{shown}");

    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    refused_with(&g.purge(id, Some(&ev), &["--dry-run"]), "report-only");
    refused_with(&g.purge(id, Some(&ev), &[]), "report-only");
    let status = g.run(&["--json", "status", id]).expect_code(0).json();
    assert_eq!(
        status["candidates"][0]["candidate"]["state"], "RESTORE_VERIFIED",
        "{status}"
    );
    assert_eq!(status["rollout"]["stage"], "report-only", "{status}");

    // `test` needs a policy that declares the table unregulated; a stage that deletes needs a policy at all.
    let r = g.set_stage("test", "first test table");
    assert!(
        r.expect_code(1).json()["reason"]
            .as_str()
            .unwrap()
            .contains("regulatedData"),
        "{}",
        r.stdout
    );
    let base = std::fs::read_to_string(&g.policy).unwrap();
    let regulated = write_policy(&g, "regulated.yaml", &format!("{base}regulatedData: true\n"));
    let r = g.run(&[
        "--json",
        "rollout",
        "set",
        "db.retention",
        "test",
        "--catalog",
        "rt",
        "--reason",
        "x",
        "--policy",
        &regulated,
    ]);
    assert!(
        r.expect_code(1).json()["reason"]
            .as_str()
            .unwrap()
            .contains("regulatedData: true"),
        "{}",
        r.stdout
    );
    let r = g.run(&[
        "--json",
        "rollout",
        "set",
        "db.retention",
        "enabled",
        "--catalog",
        "rt",
        "--reason",
        "x",
    ]);
    assert!(
        r.expect_code(1).json()["reason"].as_str().unwrap().contains("--policy"),
        "{}",
        r.stdout
    );
    g.run(&[
        "rollout",
        "set",
        "db.retention",
        "cohort:",
        "--catalog",
        "rt",
        "--reason",
        "x",
    ])
    .expect_code(2);
    assert!(rollout_show(&g)["history"].as_array().unwrap().is_empty());

    // With an unregulated policy the table may move to `test`, but only after two weeks of report-only
    // observations, and never straight to a later stage; `--force` overrides, recorded as forced.
    let unregulated = write_policy(&g, "unregulated.yaml", &format!("{base}regulatedData: false\n"));
    let set_to = |stage: &str, force: bool| {
        let mut a = vec![
            "--json",
            "rollout",
            "set",
            "db.retention",
            stage,
            "--catalog",
            "rt",
            "--reason",
            "first table without regulated data",
            "--by",
            "alice",
            "--policy",
            &unregulated,
        ];
        if force {
            a.push("--force");
        }
        g.run(&a)
    };
    let r = set_to("test", false);
    assert!(
        r.expect_code(1).json()["reason"]
            .as_str()
            .unwrap()
            .contains("14 days of report-only observations"),
        "{}",
        r.stdout
    );
    let r = set_to("enabled", false);
    let reason = r.expect_code(1).json()["reason"].as_str().unwrap().to_owned();
    // Every rule broken is named: the skip, the observation period and the test period it passes over.
    for rule in [
        "skips a stage",
        "14 days of report-only observations",
        "clean test period",
    ] {
        assert!(reason.contains(rule), "{rule}: {reason}");
    }
    assert!(rollout_show(&g)["history"].as_array().unwrap().is_empty());
    let set = set_to("test", true).expect_code(0).json();
    assert_eq!(set["change"]["from"], "report-only", "{set}");
    assert_eq!(set["change"]["to"], "test", "{set}");
    assert_eq!(set["change"]["forced"], true, "{set}");
    assert!(set["change"]["overrode"].to_string().contains("14 days"), "{set}");
    // The stage is `test` under the unregulated policy; the fixture's policy, which does not declare the table
    // unregulated, is not the one bound at `rollout set`: refused.
    refused_with(&g.purge(id, Some(&ev), &[]), "is not the policy bound to table");
    let mut args = g.purge_args(id, Some(&ev));
    let i = args.iter().position(|a| *a == "--policy").unwrap();
    args[i + 1] = &unregulated;
    let r = g.on_table(&args).expect_code(0).json();
    assert_eq!(r["status"], "VERIFIED", "{r}");

    // Back to report-only (no policy needed to stop deleting); every change is recorded with its reason.
    g.run(&[
        "rollout",
        "set",
        "db.retention",
        "report-only",
        "--catalog",
        "rt",
        "--reason",
        "incident 7",
        "--by",
        "bob",
    ])
    .expect_code(0);
    let shown = rollout_show(&g);
    let history = shown["history"].as_array().unwrap();
    assert_eq!(history.len(), 2, "{shown}");
    assert_eq!(
        (
            history[0]["from"].as_str(),
            history[0]["to"].as_str(),
            history[0]["reason"].as_str(),
            history[0]["changed_by"].as_str()
        ),
        (
            Some("report-only"),
            Some("test"),
            Some("first table without regulated data"),
            Some("alice")
        )
    );
    assert_eq!(
        (
            history[1]["from"].as_str(),
            history[1]["to"].as_str(),
            history[1]["reason"].as_str(),
            history[1]["changed_by"].as_str()
        ),
        (Some("test"), Some("report-only"), Some("incident 7"), Some("bob"))
    );
    assert!(
        history[0]["policy_digest"].as_str().is_some_and(|d| d.len() == 64),
        "{shown}"
    );
    assert!(history[0]["changed_at"].as_str().is_some(), "{shown}");
    assert_eq!(shown["rollout"]["stage"], "report-only");
}

fn items<'a>(report: &'a Value, bucket: &str) -> &'a Vec<Value> {
    report["tables"][0][bucket]["items"].as_array().unwrap()
}

fn item<'a>(report: &'a Value, bucket: &str, path: &str) -> Option<&'a Value> {
    items(report, bucket).iter().find(|i| i["path"] == path)
}

#[test]
fn rollout_report_shows_every_object_lakedrill_kept_from_plain_maintenance_with_the_reason() {
    let g = Gov::new("");
    let policy = g.policy.to_str().unwrap().to_owned();
    let report = |g: &Gov| -> Value {
        g.run(&[
            "--json",
            "rollout",
            "report",
            "db.retention",
            "--catalog",
            "rt",
            "--policy",
            &policy,
            "--since",
            "1h",
            "--baseline-orphans-older-than",
            "1s",
        ])
        .expect_code(0)
        .json()
    };
    let plan = g.plan();
    let plain: Vec<i64> = plan["plain_expire"]["snapshot_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert!(plain.len() >= 4, "{plan}");
    let lists: Vec<String> = plain.iter().map(|id| manifest_list(&g, *id)).collect();

    // First observation, nothing registered: plain expiry and lakedrill agree on every manifest list.
    let first = report(&g);
    for l in &lists {
        assert!(item(&first, "both", l).is_some(), "{l} not in both: {first}");
    }
    assert!(
        items(&first, "only_iceberg")
            .iter()
            .all(|i| i["via"] != "expire_snapshots"),
        "{first}"
    );

    // Then a lease, a hold, a checkpoint and a writer with a staged file, and a fresh stray file.
    let lease = g
        .on_table(&g.lease_add_args(&plain[0].to_string(), "1d"))
        .expect_code(0)
        .json()["lease_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let hold = g
        .on_table(&[
            "--json",
            "hold",
            "set",
            "--scope",
            &format!("snapshot:{}", plain[1]),
            "--reason",
            "case 17",
        ])
        .expect_code(0)
        .json()["hold_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let checkpoint = g
        .on_table(&["--json", "checkpoint", "add", "--snapshot-id", &plain[2].to_string()])
        .expect_code(0)
        .json()["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let writer = g
        .on_table(&["--json", "writer", "begin", "--prefix", "data/staging/job-81"])
        .expect_code(0)
        .json()["writer_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let staging = g.table_root().join("data/staging/job-81");
    std::fs::create_dir_all(&staging).unwrap();
    std::fs::write(staging.join("part-0.parquet"), b"staged, not committed").unwrap();
    std::fs::write(g.table_root().join("data/stray.parquet"), b"written by a crashed job").unwrap();
    // Older than the plain job's 1 s threshold (never compared with wall time in an assertion).
    std::thread::sleep(std::time::Duration::from_millis(1100));

    let second = report(&g);
    let t = &second["tables"][0];
    assert_eq!(t["observations"], 2, "{second}");
    let kept = |path: &str, needle: &str, kind: &str| {
        let i = item(&second, "only_iceberg", path).unwrap_or_else(|| panic!("{path} not in only_iceberg: {second}"));
        assert!(i["reasons"].to_string().contains(needle), "{path}: want {needle}: {i}");
        assert!(
            i["kinds"].as_array().unwrap().iter().any(|k| k == kind),
            "{path}: want {kind}: {i}"
        );
        assert!(i["bytes"].as_u64().unwrap() > 0, "{i}");
        assert!(item(&second, "both", path).is_none());
        i.clone()
    };
    let l = kept(&lists[0], &format!("lease:{lease}"), "lease");
    assert_eq!(l["via"], "expire_snapshots");
    kept(&lists[1], &format!("hold:{hold}"), "hold");
    kept(&lists[2], &format!("checkpoint:{checkpoint}"), "checkpoint");
    let w = kept(
        "data/staging/job-81/part-0.parquet",
        &format!("writer:{writer}"),
        "writer",
    );
    assert_eq!(w["via"], "remove_orphan_files");
    let s = kept("data/stray.parquet", "orphanSafetyInterval", "safety-interval");
    assert_eq!(s["kinds"], serde_json::json!(["safety-interval"]), "{s}");
    // The snapshot nothing protects is still deleted by both.
    assert!(item(&second, "both", &lists[3]).is_some(), "{second}");
    // The totals add up.
    let sum: u64 = items(&second, "only_iceberg")
        .iter()
        .map(|i| i["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(t["only_iceberg"]["bytes"].as_u64().unwrap(), sum);
    assert!(t["only_iceberg"]["by_kind"]["lease"].as_u64().unwrap() >= 1, "{second}");
    // Nothing lakedrill would delete is among what it kept.
    let candidates: Vec<String> = g.plan()["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| {
            c["objects"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["path"].as_str().unwrap().to_owned())
        })
        .collect();
    for i in items(&second, "only_iceberg") {
        assert!(!candidates.contains(&i["path"].as_str().unwrap().to_owned()), "{i}");
    }
}

#[test]
fn quarantine_and_purge_refuse_a_build_the_policy_does_not_pin_while_plan_and_drill_work() {
    let other = "0".repeat(64);
    let g = Gov::new(&format!("reclamationImplementationDigest: {other}\n"));
    let v = g.run(&["--json", "version"]).expect_code(0).json();
    let running = v["implementation_digest"].as_str().unwrap().to_owned();
    let bin = std::fs::read(env!("CARGO_BIN_EXE_lakedrill")).unwrap();
    assert_eq!(running, lakedrill::evidence::sha256_hex(&bin));
    assert_ne!(running, other);

    // plan works; quarantine refuses naming both digests.
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    let q = g.quarantine(id, "tag");
    let reason = q.expect_code(1).json()["reason"].as_str().unwrap().to_owned();
    assert!(reason.contains(&other) && reason.contains(&running), "{reason}");
    let status = g.run(&["--json", "status", id]);
    assert_eq!(
        status.code, 2,
        "nothing was recorded for the refused candidate: {}",
        status.stdout
    );

    // A drill still runs (bundles sealed without quarantine).
    let snapshot = c["snapshot_ids"][0].to_string();
    g.on_table(&[
        "seal",
        "--snapshot-id",
        &snapshot,
        "--key",
        "keys/gov-TEST-ONLY.key",
        "--out",
        "sealed",
    ])
    .expect_code(0);
    let ev = g.drill("sealed");
    assert!(ev.exists());

    // The pinned build quarantines; a policy pinning another build cannot purge (both digests printed).
    let base = std::fs::read_to_string(&g.policy).unwrap();
    let pinned = write_policy(&g, "pinned.yaml", &base.replace(&other, &running));
    g.bind_policy(&pinned).expect_code(0);
    let q = g
        .on_table(&[
            "--json",
            "quarantine",
            id,
            "--policy",
            &pinned,
            "--key",
            "keys/gov-TEST-ONLY.key",
            "--bundles",
            "bundles",
        ])
        .expect_code(0)
        .json();
    assert_eq!(q["status"], "QUARANTINED", "{q}");
    let ev = g.drill("bundles");
    let r = g.purge(id, Some(&ev), &[]);
    refused_with(&r, &other);
    refused_with(&r, &running);
    let status = g
        .on_table(&["--json", "status", "--policy", g.policy.to_str().unwrap()])
        .expect_code(0)
        .json();
    assert_eq!(status["implementation_digest"]["status"], "pinned-mismatch", "{status}");
    // An unpinned policy refuses purge (#23 point 5), naming the field and this build's digest; status and gates
    // say the same.
    let unpinned = write_policy(
        &g,
        "unpinned.yaml",
        &base.replace(&format!("reclamationImplementationDigest: {other}\n"), ""),
    );
    let st = g.on_table(&["status", "--policy", &unpinned]);
    st.expect_code(0);
    assert!(
        st.stdout
            .contains("purge REFUSED: the policy pins no reclamationImplementationDigest"),
        "{}",
        st.stdout
    );
    let gates = g.on_table(&["--json", "gates", "--policy", &unpinned]);
    let gates = gates.expect_code(2).json();
    assert_eq!(gates["implementation_digest"]["status"], "unpinned", "{gates}");
    assert_eq!(gates["implementation_digest"]["allows_purge"], false, "{gates}");
    let with_policy = |policy: &str| {
        let mut args = g.purge_args(id, Some(&ev));
        let i = args.iter().position(|a| *a == "--policy").unwrap();
        args[i + 1] = policy;
        g.on_table(&args)
    };
    let r = with_policy(&unpinned);
    refused_with(&r, "pins no reclamationImplementationDigest");
    refused_with(&r, &format!("reclamationImplementationDigest: {running}"));
    // `any`, written out, accepts every build, and gates say so.
    let any = write_policy(
        &g,
        "any.yaml",
        &base.replace(
            &format!("reclamationImplementationDigest: {other}"),
            "reclamationImplementationDigest: any",
        ),
    );
    let gates = g.on_table(&["--json", "gates", "--policy", &any]).expect_code(2).json();
    assert_eq!(gates["implementation_digest"]["status"], "any", "{gates}");
    assert_eq!(gates["implementation_digest"]["policy"], "any", "{gates}");
    assert_eq!(gates["implementation_digest"]["allows_purge"], true, "{gates}");
    let human = g.on_table(&["gates", "--policy", &any]);
    assert!(
        human
            .stdout
            .contains("note: the policy accepts any build (reclamationImplementationDigest: any)"),
        "{}",
        human.stdout
    );
    // Under `any` (bound to the table) this build is accepted: a dry run passes every check (the purge itself runs
    // under the pin, bound again).
    g.bind_policy(&any).expect_code(0);
    let mut args = g.purge_args(id, Some(&ev));
    args.push("--dry-run");
    let i = args.iter().position(|a| *a == "--policy").unwrap();
    args[i + 1] = &any;
    assert_eq!(g.on_table(&args).expect_code(0).json()["status"], "DRY_RUN");
    refused_with(&with_policy(&pinned), "is not the policy bound to table");
    g.bind_policy(&pinned).expect_code(0);
    assert_eq!(with_policy(&pinned).expect_code(0).json()["status"], "VERIFIED");
}

/// Writes and signs decision `version` with the governance key; returns the envelope path.
pub(crate) fn decision(g: &Gov, version: i64, holds: Value, rights: Value, name: &str) -> String {
    let table_uuid = g.py("print(t.metadata.table_uuid)");
    let doc = serde_json::json!({
        "schema": "lakedrillGovernanceDecision.v1",
        "version": version,
        "issuer": "governance@example.test",
        "issued_at": "2026-11-29T10:00:00Z",
        "table_uuid": table_uuid,
        "legal_holds": holds,
        "deletion_rights": rights,
    });
    let doc_path = g.dir.join(format!("{name}.json"));
    std::fs::write(&doc_path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let out = g.dir.join(format!("{name}.dsse.json"));
    g.run(&[
        "decision",
        "sign",
        doc_path.to_str().unwrap(),
        "--key",
        "gov-keys/governance-TEST-ONLY.key",
        "--out",
        out.to_str().unwrap(),
    ])
    .expect_code(0);
    out.to_str().unwrap().to_owned()
}

pub(crate) fn apply(g: &Gov, file: &str) -> Run {
    g.on_table(&["--json", "decision", "apply", file, "--trust", "gov-keys"])
}

pub(crate) fn gates(g: &Gov) -> Run {
    g.on_table(&["--json", "gates", "--policy", g.policy.to_str().unwrap()])
}

#[test]
fn a_deletion_right_on_a_held_scope_is_a_conflict_until_a_newer_decision_releases_the_hold() {
    let g = Gov::new("");
    // History younger than 30 days is kept: without a deletion right nothing is a candidate.
    let text = std::fs::read_to_string(&g.policy)
        .unwrap()
        .replace("minSnapshotAge: 1s", "minSnapshotAge: 30d");
    // The changed policy is bound to the table again (purge and quarantine refuse any other).
    g.write_policy(&text);
    assert!(g.plan()["candidates"].as_array().unwrap().is_empty());
    g.run(&["keygen", "--name", "governance-TEST-ONLY", "--dir", "gov-keys"])
        .expect_code(0);
    let oldest = snapshots(&g)[0]["snapshot_id"].as_i64().unwrap();
    let scope = format!("snapshot:{oldest}");
    let rights = serde_json::json!([{"id": "dsr-1", "scope": scope, "deadline": "2020-01-01T00:00:00Z", "reason": "erasure request"}]);

    // v1: a legal hold and a deletion right on the same snapshot.
    let v1 = decision(
        &g,
        1,
        serde_json::json!([{"key": "case-17", "state": "on", "scope": scope, "reason": "litigation 17"}]),
        rights.clone(),
        "v1",
    );
    let a = apply(&g, &v1).expect_code(0).json();
    assert_eq!(a["holds"][0]["action"], "set", "{a}");
    let plan = g.plan();
    let right = &plan["deletion_rights"][0];
    assert_eq!(right["status"], "conflict", "{plan}");
    assert!(right["reasons"].to_string().contains("hold:"), "{plan}");
    assert!(plan["candidates"].as_array().unwrap().is_empty(), "{plan}");
    let gt = gates(&g).expect_code(1).json();
    assert_eq!(gt["conflicts"][0]["id"], "dsr-1", "{gt}");
    assert_eq!(gt["overdue"][0]["id"], "dsr-1", "{gt}");
    assert_eq!(gt["gate"], "FAIL");
    let holds = g.on_table(&["--json", "hold", "list"]).expect_code(0).json();
    assert_eq!(holds["holds"][0]["active"], true, "{holds}");
    // One unsigned `hold clear` cannot undo the signed decision's hold (it could, before): refused naming the key.
    let hold_id = holds["holds"][0]["hold_id"].as_str().unwrap();
    let r = g.run(&["--json", "hold", "clear", hold_id]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("case-17") && r.stderr.contains("decision"),
        "{}",
        r.stderr
    );
    let holds = g.on_table(&["--json", "hold", "list"]).expect_code(0).json();
    assert_eq!(holds["holds"][0]["active"], true, "{holds}");

    // v2 releases the hold; the deletion right stands.
    let v2 = decision(
        &g,
        2,
        serde_json::json!([{"key": "case-17", "state": "off"}]),
        rights.clone(),
        "v2",
    );
    let a = apply(&g, &v2).expect_code(0).json();
    assert_eq!(a["holds"][0]["action"], "cleared", "{a}");
    // An older or equal version is refused, and so is a decision signed by a key outside the trust store.
    let r = apply(&g, &v1).expect_code(1).json();
    assert!(r["reason"].as_str().unwrap().contains("not newer"), "{r}");
    let v2b = decision(&g, 2, serde_json::json!([]), serde_json::json!([]), "v2b");
    apply(&g, &v2b).expect_code(1);
    g.run(&["keygen", "--name", "rogue-TEST-ONLY", "--dir", "rogue"])
        .expect_code(0);
    std::fs::write(
        g.dir.join("v9.json"),
        std::fs::read_to_string(g.dir.join("v2b.json"))
            .unwrap()
            .replace("\"version\": 2", "\"version\": 9"),
    )
    .unwrap();
    g.run(&[
        "decision",
        "sign",
        "v9.json",
        "--key",
        "rogue/rogue-TEST-ONLY.key",
        "--out",
        "v9.dsse.json",
    ])
    .expect_code(0);
    let r = apply(&g, "v9.dsse.json").expect_code(1).json();
    assert!(r["reason"].as_str().unwrap().contains("UNTRUSTED_KEY"), "{r}");

    // Released: the snapshot is a candidate regardless of minSnapshotAge, and goes through quarantine,
    // drill evidence and the deleter's gate.
    let plan = g.plan();
    assert_eq!(plan["deletion_rights"][0]["status"], "candidate", "{plan}");
    let c = g.candidate();
    assert_eq!(c["snapshot_ids"], serde_json::json!([oldest]), "{c}");
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    g.quarantine(&id, "tag").expect_code(0);
    refused_with(&g.purge(&id, None, &[]), "no evidence");
    let ev = g.drill("bundles");
    let r = g.purge(&id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(r["status"], "VERIFIED", "{r}");
    for o in c["objects"].as_array().unwrap() {
        assert!(!g.table_root().join(o["path"].as_str().unwrap()).exists(), "{o}");
    }
    // Without --trust the drill-report gates are not evaluated: nothing failed, but it cannot say PASS (exit 2).
    let gt = gates(&g).expect_code(2).json();
    assert_eq!(gt["gate"], "UNDECIDED", "{gt}");
    assert_eq!(gt["deletion_rights"][0]["status"], "fulfilled", "{gt}");
    assert!(gt["overdue"].as_array().unwrap().is_empty(), "{gt}");
    // The registry keeps every applied version, each with its signer and envelope digest.
    let versions: Vec<i64> = gt["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["version"].as_i64().unwrap())
        .collect();
    assert_eq!(versions, vec![1, 2], "{gt}");
    assert!(
        gt["decisions"][0]["envelope_sha256"]
            .as_str()
            .is_some_and(|d| d.len() == 64),
        "{gt}"
    );
}

/// A deletion right is the governance layer's to grant, never the deleter's. A decision signed with the purge's own
/// key applies under a trust folder that holds that key and has no roles file (as `decision apply` allows), and
/// its right makes a snapshot younger than `minSnapshotAge` a candidate; the purge refuses it, naming the decision
/// and the key. The same right from the governance key's decision: purged.
#[test]
fn a_purge_refuses_deletion_rights_its_own_key_granted() {
    let g = Gov::new("");
    let text = std::fs::read_to_string(&g.policy)
        .unwrap()
        .replace("minSnapshotAge: 1s", "minSnapshotAge: 30d");
    g.write_policy(&text);
    let oldest = snapshots(&g)[0]["snapshot_id"].as_i64().unwrap();
    let rights = serde_json::json!([{"id": "dsr-1", "scope": format!("snapshot:{oldest}"), "deadline": "2020-01-01T00:00:00Z", "reason": "erasure request"}]);
    let table_uuid = g.py("print(t.metadata.table_uuid)");
    let doc = serde_json::json!({
        "schema": "lakedrillGovernanceDecision.v1", "version": 1, "issuer": "deleter@example.test",
        "issued_at": "2026-11-29T10:00:00Z", "table_uuid": table_uuid, "legal_holds": [], "deletion_rights": rights,
    });
    std::fs::write(g.dir.join("v1.json"), serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    g.run(&[
        "decision",
        "sign",
        "v1.json",
        "--key",
        DELETER_KEY,
        "--out",
        "v1.dsse.json",
    ])
    .expect_code(0);
    let a = g
        .on_table(&["--json", "decision", "apply", "v1.dsse.json", "--trust", "keys/trust"])
        .expect_code(0)
        .json();
    assert_eq!(a["status"], "APPLIED", "{a}");
    let c = g.candidate();
    assert_eq!(c["snapshot_ids"], serde_json::json!([oldest]), "{c}");
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    g.quarantine(&id, "tag").expect_code(0);
    let ev = g.drill("bundles");
    let r = g.purge(&id, Some(&ev), &[]);
    refused_with(
        &r,
        "governance decision v1 (issuer deleter@example.test), signed by this purge's own key",
    );
    assert!(
        r.stdout.contains("must not grant its own deletion rights"),
        "{}",
        r.stdout
    );
    assert!(g.table_root().join(c["objects"][0]["path"].as_str().unwrap()).exists());

    // The governance key grants the same right: the purge goes through.
    g.run(&["keygen", "--name", "governance-TEST-ONLY", "--dir", "gov-keys"])
        .expect_code(0);
    let v2 = decision(&g, 2, serde_json::json!([]), rights, "v2");
    apply(&g, &v2).expect_code(0);
    let r = g.purge(&id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(r["status"], "VERIFIED", "{r}");
}

#[test]
fn quarantine_extension_min_quarantine_period_and_the_stop_switch_hold_back_a_purge() {
    let g = Gov::new("minQuarantinePeriod: 1h\n");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    refused_with(&g.purge(id, Some(&ev), &[]), "minQuarantinePeriod");
    // Without the minimum period, an operator's extension holds it back.
    let text = std::fs::read_to_string(&g.policy)
        .unwrap()
        .replace("minQuarantinePeriod: 1h\n", "");
    // The changed policy is bound to the table again (purge refuses any other).
    g.write_policy(&text);
    let e = g
        .run(&[
            "--json",
            "quarantine",
            "extend",
            id,
            "--by",
            "2h",
            "--reason",
            "anomaly in the drill report",
        ])
        .expect_code(0)
        .json();
    assert_eq!(e["status"], "EXTENDED", "{e}");
    refused_with(&g.purge(id, Some(&ev), &[]), "the quarantine was extended");
    g.run(&["quarantine", "extend", "c-does-not-exist", "--by", "1h"])
        .expect_code(2);
    let r = g.run(&["quarantine", "extend", id, "--by", "soon"]);
    r.expect_code(2);
    // The flag is named once (it said `--by: field --by: …`).
    assert_eq!(r.stderr.matches("--by").count(), 1, "{}", r.stderr);
    let st = g.on_table(&["--json", "status"]).expect_code(0).json();
    assert!(st["candidates"][0]["not_before"].as_str().is_some(), "{st}");
    // The stop switch shows in every table's status.
    g.run(&["deleter", "stop", "--reason", "incident 99"]).expect_code(0);
    let st = g.on_table(&["--json", "status"]).expect_code(0).json();
    assert_eq!(st["deleter"]["stopped"], true, "{st}");
    assert_eq!(st["deleter"]["reason"], "incident 99", "{st}");
    let human = g.on_table(&["status"]);
    human.expect_code(0);
    assert!(human.stdout.contains("STOPPED (incident 99)"), "{}", human.stdout);
    refused_with(&g.purge(id, Some(&ev), &[]), "incident 99");
}

/// A duration that would take a time out of its range (`--since 100000000000d`, `--by` the same) exits 2 naming
/// the option, with nothing recorded; it panicked in the time arithmetic, `rollout report` after recording its
/// observation.
#[test]
fn a_huge_since_or_by_exits_2_naming_the_option_and_records_nothing() {
    let g = Gov::new("");
    let policy = g.policy.to_str().unwrap().to_owned();
    let report = |since: &str| {
        g.run(&[
            "--json",
            "rollout",
            "report",
            "db.retention",
            "--catalog",
            "rt",
            "--policy",
            &policy,
            "--since",
            since,
        ])
    };
    let huge = "100000000000d";
    let r = report(huge);
    r.expect_code(2);
    assert!(
        r.stderr.contains("--since")
            && r.stderr.contains("is too large: at most 36500d")
            && !r.stderr.contains("panicked"),
        "{}",
        r.stderr
    );
    let v = report("1h").expect_code(0).json();
    assert_eq!(
        v["tables"][0]["observations"], 1,
        "the refused report recorded nothing: {v}"
    );

    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    g.quarantine(id, "tag").expect_code(0);
    let not_before = || g.run(&["--json", "status", id]).expect_code(0).json()["candidates"][0]["not_before"].clone();
    let before = not_before();
    let r = g.run(&["quarantine", "extend", id, "--by", huge, "--reason", "forever"]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("--by") && r.stderr.contains("is too large") && !r.stderr.contains("panicked"),
        "{}",
        r.stderr
    );
    assert_eq!(not_before(), before, "nothing recorded");
}

#[test]
fn reconcile_rechecks_but_retries_no_delete_on_a_table_moved_back_to_report_only() {
    let g = Gov::new("maxUnreconciledUnknowns: 0\n");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    assert_eq!(
        with_failpoints(&g, "error-every=2", &g.purge_args(id, Some(&ev))),
        Some(1)
    );
    let left = g.present(&c);
    assert!(left > 0, "every second delete was refused by the failpoint");
    g.set_stage("report-only", "anomaly: stop deleting").expect_code(0);
    let r = g.reconcile(id);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_ne!(r.json()["status"], "VERIFIED");
    assert_eq!(g.present(&c), left, "no delete was retried in report-only");
    let st = g.run(&["--json", "status", id]).expect_code(0).json();
    assert_eq!(st["candidates"][0]["candidate"]["state"], "DELETE_UNKNOWN", "{st}");
    g.set_stage("test", "anomaly understood").expect_code(0);
    assert_eq!(g.reconcile(id).expect_code(0).json()["status"], "VERIFIED");
    assert_eq!(g.present(&c), 0);
}

/// The rollout rules (#23 point 6): one step at a time, at most one table in `test`, a cohort only after a clean
/// test period (a purge `VERIFIED` since the table entered `test`); `--force` overrides and `gates` shows every
/// forced change.
#[test]
fn rollout_set_enforces_one_step_one_test_table_and_a_clean_test_period_and_gates_show_forced_changes() {
    let g = Gov::new("");
    let policy = g.policy.to_str().unwrap().to_owned();
    let set = |table: &str, stage: &str, policy: &str| {
        g.run(&[
            "--json",
            "rollout",
            "set",
            table,
            stage,
            "--catalog",
            "rt",
            "--reason",
            "wave 1",
            "--policy",
            policy,
        ])
    };
    let reason = |r: &crate::util::Run| r.json()["reason"].as_str().unwrap_or_default().to_owned();
    // The fixture put db.retention in test (forced). A skipped step and a cohort before any purge are refused.
    let r = set("db.retention", "enabled", &policy);
    r.expect_code(1);
    assert!(reason(&r).contains("skips a stage"), "{}", r.stdout);
    let r = set("db.retention", "cohort:wave-1", &policy);
    r.expect_code(1);
    assert!(reason(&r).contains("clean test period"), "{}", r.stdout);
    // A second table may not enter test while the first is there.
    let twin_root = g.dir.join("twin-table");
    crate::orphans::register_twin(
        &g,
        "twin",
        &twin_root,
        &twin_root.join("metadata/00000-twin.metadata.json"),
    );
    let twin_md = twin_root.join("metadata/00000-twin.metadata.json");
    let text = crate::util::rebind_policy(
        &std::fs::read_to_string(&g.policy).unwrap(),
        &crate::util::table_binding("twin", &twin_md.display().to_string()),
    );
    let twin_policy = write_policy(&g, "twin.yaml", &text);
    let r = set("db.twin", "test", &twin_policy);
    r.expect_code(1);
    assert!(
        reason(&r).contains("at most one table is in test at a time: rt.db.retention"),
        "{}",
        r.stdout
    );
    // After a verified purge in test the cohort step is clean, and the next step is enabled.
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    assert_eq!(g.purge(id, Some(&ev), &[]).expect_code(0).json()["status"], "VERIFIED");
    set("db.retention", "cohort:wave-1", &policy).expect_code(0);
    let r = set("db.retention", "enabled", &policy).expect_code(0).json();
    assert_eq!(r["change"]["forced"], false, "{r}");
    // Out of test, the twin may enter it (still forced: it has no report-only observations).
    let mut a = vec![
        "--json",
        "rollout",
        "set",
        "db.twin",
        "test",
        "--catalog",
        "rt",
        "--reason",
        "next",
    ];
    a.extend(["--policy", twin_policy.as_str(), "--force"]);
    g.run(&a).expect_code(0);
    // Back from enabled into test while the twin is there: refused as a step forward would be.
    let r = set("db.retention", "test", &policy);
    r.expect_code(1);
    assert!(
        reason(&r).contains("at most one table is in test at a time: rt.db.twin"),
        "{}",
        r.stdout
    );
    // `gates` shows the forced change of db.retention with what it overrode.
    let gt = gates(&g).json();
    let forced = gt["rollout_forced"].as_array().unwrap();
    assert_eq!(forced.len(), 1, "{gt}");
    assert_eq!(forced[0]["to"], "test", "{gt}");
    assert!(forced[0]["overrode"].to_string().contains("14 days"), "{gt}");
    let human = g.on_table(&["gates", "--policy", &policy]);
    assert!(
        human.stdout.contains("rollout FORCED report-only → test"),
        "{}",
        human.stdout
    );
    // The report-only period may only be made longer.
    let cfg = g.dir.join("lakedrill.toml");
    let base = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{base}[rollout]\nmin_report_only_days = 7\n")).unwrap();
    let r = g.run(&["rollout", "show", "db.retention", "--catalog", "rt"]);
    r.expect_code(2);
    assert!(r.stderr.contains("rollout.min_report_only_days = 7"), "{}", r.stderr);
    std::fs::write(&cfg, format!("{base}[rollout]\nmin_report_only_days = 21\n")).unwrap();
    g.run(&["rollout", "show", "db.retention", "--catalog", "rt"])
        .expect_code(0);
}

/// The fixture's policy with `minSnapshotAge: 30d` (its table is minutes old, so nothing is a candidate without a
/// deletion right), bound again with `rollout set` as an operator changing the policy does.
fn keep_30_days(g: &Gov) {
    let text = std::fs::read_to_string(&g.policy)
        .unwrap()
        .replace("minSnapshotAge: 1s", "minSnapshotAge: 30d");
    g.write_policy(&text);
    g.run(&["keygen", "--name", "governance-TEST-ONLY", "--dir", "gov-keys"])
        .expect_code(0);
}

/// A deletion right makes a young snapshot a candidate; it is quarantined and drilled; a newer decision version
/// withdraws the right. The purge re-plans with the rights in force and deletes nothing. Before, the world stamp
/// carried no decision, applying one moved no counter, so the purge did not rebase, the independent closure check
/// does not judge `minSnapshotAge`, and the snapshot's files were deleted.
#[test]
fn a_deletion_right_withdrawn_after_quarantine_is_judged_again_at_purge_and_nothing_is_deleted() {
    withdrawn_right_keeps_the_candidate("tag");
}

/// [`a_deletion_right_withdrawn_after_quarantine_is_judged_again_at_purge_and_nothing_is_deleted`] in bundle mode:
/// the snapshot is out of the table, so no re-plan can judge it; the purge refuses and deletes nothing.
#[test]
fn a_deletion_right_withdrawn_after_a_bundle_mode_quarantine_refuses_the_purge() {
    withdrawn_right_keeps_the_candidate("bundle");
}

fn withdrawn_right_keeps_the_candidate(mode: &str) {
    let g = Gov::new("");
    keep_30_days(&g);
    assert!(g.plan()["candidates"].as_array().unwrap().is_empty());
    let oldest = snapshots(&g)[0]["snapshot_id"].as_i64().unwrap();
    let rights = serde_json::json!([{"id": "dsr-7", "scope": format!("snapshot:{oldest}"), "deadline": "2030-01-01T00:00:00Z", "reason": "erasure request"}]);
    let v1 = decision(&g, 1, serde_json::json!([]), rights, "v1");
    apply(&g, &v1).expect_code(0);
    let c = g.candidate();
    assert_eq!(c["snapshot_ids"], serde_json::json!([oldest]), "{c}");
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let rows = g.py(&format!("print(t.scan(snapshot_id={oldest}).to_arrow().num_rows)"));
    g.quarantine(&id, mode).expect_code(0);
    let ev = g.drill("bundles");

    // v2 lists no deletion right: dsr-7 is withdrawn (decisions are states).
    let v2 = decision(&g, 2, serde_json::json!([]), serde_json::json!([]), "v2");
    apply(&g, &v2).expect_code(0);
    // A dry run already says it.
    let dry = g.purge(&id, Some(&ev), &["--dry-run"]).expect_code(1).json();
    assert_eq!(dry["status"], "REFUSED", "{dry}");
    let r = g.purge(&id, Some(&ev), &[]).expect_code(1).json();
    assert_eq!(r["status"], "REFUSED", "{r}");
    let why = r["reasons"].to_string();
    assert!(why.contains("deletion rights in force changed"), "{r}");
    assert!(why.contains("governance decision v2"), "{r}");
    assert!(r["objects"].get("VERIFIED").is_none(), "{r}");
    assert_eq!(
        g.present(&c),
        c["objects"].as_array().unwrap().len(),
        "every file is still there: {r}"
    );
    if mode == "tag" {
        assert!(why.contains("min-snapshot-age"), "{r}");
        // PyIceberg still reads the snapshot, every row of it.
        assert_eq!(
            g.py(&format!("print(t.scan(snapshot_id={oldest}).to_arrow().num_rows)")),
            rows
        );
        let st = g.run(&["--json", "status", &id]).expect_code(0).json();
        let state = st["candidates"][0]["candidate"]["state"].as_str().unwrap().to_owned();
        assert!(state == "PROTECTED" || state == "RELEASED", "{st}");
    } else {
        assert!(why.contains("bundle mode"), "{r}");
    }
    // And a later purge does not delete it either.
    g.purge(&id, Some(&ev), &[]).expect_code(1);
    assert_eq!(g.present(&c), c["objects"].as_array().unwrap().len());
}

/// A decision that changes nothing for a candidate (here one planned without any right, and a right granted on
/// another scope) makes the purge judge it again, not refuse it.
#[test]
fn a_decision_that_changes_nothing_for_the_candidate_does_not_refuse_its_purge() {
    let g = Gov::new("");
    g.run(&["keygen", "--name", "governance-TEST-ONLY", "--dir", "gov-keys"])
        .expect_code(0);
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let rights = serde_json::json!([{"id": "dsr-elsewhere", "scope": "prefix:data/nothing-here/", "deadline": "2030-01-01T00:00:00Z", "reason": "erasure request"}]);
    let v1 = decision(&g, 1, serde_json::json!([]), rights, "v1");
    apply(&g, &v1).expect_code(0);
    let r = g.purge(id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(r["status"], "VERIFIED", "{r}");
    assert_eq!(g.present(&c), 0);
}

/// The policy `purge`, `quarantine` and `reconcile` are given must be the one bound to the table at `rollout set`
/// (its digest is in the rollout record). Before, the digest was recorded and never read again, so a caller's
/// `--policy` chose the evidence freshness, the quarterly gate, the unknowns limit, the quarantine period, the
/// regulated-data declaration and the pinned build.
#[test]
fn purge_and_quarantine_refuse_a_policy_other_than_the_one_bound_at_rollout_set() {
    let g = Gov::new("evidenceMaxAge: 1h\n");
    let p1 = g.policy.to_str().unwrap().to_owned();
    let p1_text = std::fs::read_to_string(&g.policy).unwrap();
    let p2 = g.dir.join("policy-relaxed.yaml");
    std::fs::write(&p2, p1_text.replace("evidenceMaxAge: 1h", "evidenceMaxAge: 31d")).unwrap();
    let p2 = p2.to_str().unwrap().to_owned();
    let digest = |p: &str| {
        g.run(&["--json", "policy", "check", p]).expect_code(0).json()["digest"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (d1, d2) = (digest(&p1), digest(&p2));
    assert_ne!(d1, d2);
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let refused_naming_both = |r: &Run, key: &str| {
        let v = r.expect_code(1).json();
        assert_eq!(v["status"], "REFUSED", "{v}");
        let why = v[key].to_string();
        assert!(why.contains(&d1) && why.contains(&d2), "both digests: {v}");
        assert!(why.contains("rollout set"), "{v}");
    };
    // Quarantine under the other policy: refused before anything is recorded or sealed.
    let mut q = g.quarantine_args(&id, "tag");
    q[4] = p2.as_str();
    refused_naming_both(&g.on_table(&q), "reason");
    g.quarantine(&id, "tag").expect_code(0);
    let ev = g.drill("bundles");
    // Purge under the other policy: refused, nothing deleted.
    let mut a = g.purge_args(&id, Some(&ev));
    a[4] = p2.as_str();
    refused_naming_both(&g.on_table(&a), "reasons");
    assert_eq!(g.present(&c), c["objects"].as_array().unwrap().len());
    // `status --policy` says which policy is bound.
    let st = g.on_table(&["--json", "status", "--policy", &p2]).expect_code(0).json();
    assert_eq!(st["policy_binding"]["status"], "bound-mismatch", "{st}");
    assert_eq!(st["policy_binding"]["bound"], d1.as_str(), "{st}");
    // With the bound policy it proceeds.
    let r = g.purge(&id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(r["status"], "VERIFIED", "{r}");
    assert_eq!(g.present(&c), 0);
}

/// A signed decision whose legal hold or deletion right names a prefix outside the table is refused as `hold set`
/// refuses it (exit 2, naming the prefix and the table location), and nothing of it is applied.
#[test]
fn a_decision_with_a_prefix_outside_the_table_is_refused() {
    let g = Gov::new("");
    g.run(&["keygen", "--name", "governance-TEST-ONLY", "--dir", "gov-keys"])
        .expect_code(0);
    let hold = decision(
        &g,
        1,
        serde_json::json!([{"key": "case-9", "state": "on", "scope": "prefix:../other/data", "reason": "litigation 9"}]),
        serde_json::json!([]),
        "outside-hold",
    );
    let r = apply(&g, &hold);
    r.expect_code(2);
    assert!(
        r.stderr.contains("prefix \"../other/data\"") && r.stderr.contains("the table location"),
        "{}",
        r.stderr
    );
    let right = decision(
        &g,
        1,
        serde_json::json!([]),
        serde_json::json!([{"id": "dsr-9", "scope": "prefix:/etc", "deadline": "2030-01-01T00:00:00Z", "reason": "erasure"}]),
        "outside-right",
    );
    let r = apply(&g, &right);
    r.expect_code(2);
    assert!(r.stderr.contains("prefix \"/etc\""), "{}", r.stderr);
    let holds = g.on_table(&["--json", "hold", "list"]).expect_code(0).json();
    assert_eq!(holds["holds"].as_array().map(Vec::len), Some(0), "{holds}");
    // Under the table, the same decision applies.
    let ok = decision(
        &g,
        1,
        serde_json::json!([{"key": "case-9", "state": "on", "scope": "prefix:data", "reason": "litigation 9"}]),
        serde_json::json!([]),
        "inside-hold",
    );
    apply(&g, &ok).expect_code(0);
}
