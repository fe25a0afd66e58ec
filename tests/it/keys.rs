//! Signing keys and trust folders on the command line (issue 16 points 9 and 10).

use std::os::unix::fs::PermissionsExt as _;

use crate::governance::Gov;

/// See: issue 16 point 9 — a key with mode 0644, 0640 or 0604 sealed and quarantined with no word.
#[test]
fn r16_quarantine_refuses_a_signing_key_others_can_read() {
    let g = Gov::new("");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    let key = g.dir.join("keys/gov-TEST-ONLY.key");
    for mode in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        let r = g.quarantine(id, "tag");
        r.expect_code(2);
        assert!(r.stderr.contains("keys/gov-TEST-ONLY.key"), "{mode:04o}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("permissions {mode:04o}")),
            "{mode:04o}: {}",
            r.stderr
        );
        assert!(!g.dir.join("bundles").exists(), "{mode:04o}: nothing may be sealed");
        let doc = r.json();
        assert_eq!(doc["exit_code"], 2, "{doc}");
        assert!(doc["error"].as_str().unwrap().contains("too open"), "{doc}");
    }
    // --allow-readable-key: used, with a warning that reaches stderr and the JSON document.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut args = vec!["--allow-readable-key"];
    args.extend([
        "--json",
        "seal",
        "--key",
        "keys/gov-TEST-ONLY.key",
        "--out",
        "sealed-readable",
    ]);
    let r = g.on_table(&args);
    r.expect_code(0);
    assert!(
        r.stderr.contains("lakedrill: warning:") && r.stderr.contains("0640"),
        "{}",
        r.stderr
    );
    let doc = r.json();
    assert!(doc["warnings"].to_string().contains("0640"), "{doc}");
    // 0400 (read-only for the owner) and 0600 are accepted.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
    let r = g.quarantine(id, "tag");
    r.expect_code(0);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    g.on_table(&[
        "--json",
        "seal",
        "--key",
        "keys/gov-TEST-ONLY.key",
        "--out",
        "sealed-0600",
    ])
    .expect_code(0);
}

/// See: issue 16 point 10 — a trust folder holding the private key was used without a word.
#[test]
fn r16_a_trust_folder_with_a_private_key_warns_and_still_verifies() {
    let g = Gov::new("");
    let (_, report) = g.quarantined();
    let report = report.to_str().unwrap();
    // keys/ holds gov-TEST-ONLY.key beside its .pub: verified, with the warning on stderr and in the JSON.
    let r = g.run(&["--json", "audit", "verify", report, "--trust", "keys"]);
    r.expect_code(0);
    assert!(
        r.stderr.contains("holds a private key") && r.stderr.contains("gov-TEST-ONLY.key"),
        "{}",
        r.stderr
    );
    assert!(
        r.json()["warnings"].to_string().contains("gov-TEST-ONLY.key"),
        "{}",
        r.stdout
    );
    // The public-only folder: no warning, no warnings field.
    let r = g.run(&["--json", "audit", "verify", report, "--trust", "keys/trust"]);
    r.expect_code(0);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    assert!(r.json().get("warnings").is_none(), "{}", r.stdout);
}

/// A demo lakehouse (`lakedrill demo`): keys/demo-drill.key (seal and drill roles), keys/demo-deleter.key
/// (deleter role), keys/trust/{both .pub, roles.toml}, signed reports, bundles, backups and receipts.
fn demo_lake() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = crate::util::tmpdir();
    let dir = tmp.path().join("lake");
    crate::util::lakedrill_in(tmp.path(), &["--json", "demo", "--dir", dir.to_str().unwrap()]).expect_code(0);
    (tmp, dir)
}

/// The one `*.dsse.json` directly in `folder`.
fn only_envelope(folder: &std::path::Path) -> std::path::PathBuf {
    let mut found: Vec<_> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(".dsse.json"))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

/// `src`'s exact payload signed again by the key at `key` (another trusted key), written to `dst`.
fn resign(src: &std::path::Path, key: &std::path::Path, dst: &std::path::Path) {
    use base64::Engine as _;
    let env: serde_json::Value = serde_json::from_slice(&std::fs::read(src).unwrap()).unwrap();
    let payload = base64::engine::general_purpose::STANDARD
        .decode(env["payload"].as_str().unwrap())
        .unwrap();
    let key = lakedrill::evidence::keys::load_signing_key(key).unwrap();
    let signed = lakedrill::evidence::sign(env["payloadType"].as_str().unwrap(), &payload, &key);
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    std::fs::write(dst, signed.to_json_bytes()).unwrap();
}

/// `audit verify` took a drill report signed by the deleter's key,
/// and an inventory archive signed by the drills' key, as VERIFIED: each kind now verifies only under the role
/// that signs it, as the deleter reads it.
#[test]
fn audit_verify_checks_each_kind_under_the_role_that_signs_it() {
    let (tmp, lake) = demo_lake();
    let trust = lake.join("keys/trust");
    let trust = trust.to_str().unwrap();
    let (drill_key, deleter_key) = (lake.join("keys/demo-drill.key"), lake.join("keys/demo-deleter.key"));
    let audit = |file: &std::path::Path, chain: bool| {
        let mut args = vec!["--json", "audit", "verify", file.to_str().unwrap(), "--trust", trust];
        if chain {
            args.push("--chain");
        }
        crate::util::lakedrill_in(tmp.path(), &args)
    };
    // As the demo signed them: verified.
    let report = only_envelope(&lake.join("reports/weekly-quarantine"));
    audit(&report, false).expect_code(0);
    audit(&report, true).expect_code(0);
    let receipts = lake.join("receipts");
    let candidate = std::fs::read_dir(&receipts).unwrap().next().unwrap().unwrap().path();
    let inventory = candidate.join("inventory.dsse.json");
    audit(&inventory, false).expect_code(0);

    // The drill report signed by the deleter's key (a trusted key, but not a drill key), alone and as a chain.
    let forged = tmp
        .path()
        .join("forged/weekly-quarantine")
        .join(report.file_name().unwrap());
    resign(&report, &deleter_key, &forged);
    for chain in [false, true] {
        let r = audit(&forged, chain);
        let v = r.expect_code(1).json();
        assert_eq!(v["status"], "FAILED", "{v}");
        assert_eq!(
            v["findings"][0]["report"],
            forged.file_name().unwrap().to_str().unwrap(),
            "{v}"
        );
        // The key is trusted, but not for this kind: the finding says so (finding 4).
        assert_eq!(v["findings"][0]["check"], "ROLE_NOT_GRANTED", "{v}");
        let detail = v["findings"][0]["detail"].as_str().unwrap();
        assert!(
            detail.contains("demo-deleter") && detail.contains("roles.toml does not give it the drill role"),
            "{v}"
        );
    }
    // The inventory archive and the summary signed by the drills' key: not the deleter's.
    let forged_inventory = tmp.path().join("forged/receipts/inventory.dsse.json");
    resign(&inventory, &drill_key, &forged_inventory);
    assert_eq!(
        audit(&forged_inventory, false).expect_code(1).json()["status"],
        "FAILED"
    );
    let summary = std::fs::read_dir(&candidate)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("summary-"))
        .unwrap();
    let forged_summary = candidate.join("summary-999.dsse.json");
    resign(&summary, &drill_key, &forged_summary);
    assert_eq!(audit(&forged_summary, false).expect_code(1).json()["status"], "FAILED");
    // A backup bundle signed by the deleter's key: not a sealer's.
    let backups = lake.join("backups/bundles");
    let backup = std::fs::read_dir(&backups).unwrap().next().unwrap().unwrap().path();
    let forged_backup = tmp.path().join("forged/bundles").join(backup.file_name().unwrap());
    crate::util::copy_tree(&backup, &forged_backup);
    resign(
        &backup.join("bundle.dsse.json"),
        &deleter_key,
        &forged_backup.join("bundle.dsse.json"),
    );
    let v = audit(&forged_backup.join("bundle.dsse.json"), false)
        .expect_code(1)
        .json();
    assert_eq!(v["status"], "FAILED", "{v}");
    assert_eq!(v["keyids"], serde_json::json!([]), "no seal key signed it: {v}");
    // One finding, its kind and the file each said once, naming the key and the role it lacks (finding 4).
    assert_eq!(v["findings"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["findings"][0]["check"], "BUNDLE_SIGNATURE", "{v}");
    let detail = v["findings"][0]["detail"].as_str().unwrap();
    assert!(
        !detail.contains("BUNDLE_SIGNATURE") && !detail.contains("bundle.dsse.json"),
        "{v}"
    );
    assert!(
        detail.contains("demo-deleter") && detail.contains("roles.toml does not give it the seal role"),
        "{v}"
    );
    assert!(!detail.contains("expected a keyid in the trust store"), "{v}");

    // Without a roles.toml every key holds every role: the same files verify.
    std::fs::remove_file(lake.join("keys/trust/roles.toml")).unwrap();
    audit(&forged, false).expect_code(0);
    audit(&forged_inventory, false).expect_code(0);
}

/// `drill run`, `report merge` and `restore --shard --key` signed
/// drill evidence with a key the trust folder's roles.toml does not give the drill role (the deleter's). Each is
/// refused before any work (exit 2), naming the key and roles.toml.
#[test]
fn drill_evidence_is_not_signed_by_a_key_without_the_drill_role() {
    let (tmp, lake) = demo_lake();
    let trust = lake.join("keys/trust");
    let deleter_key = lake.join("keys/demo-deleter.key");
    let refused = |r: &crate::util::Run| {
        r.expect_code(2);
        assert!(
            r.stderr.contains("demo-deleter.key")
                && r.stderr.contains("roles.toml")
                && r.stderr.contains("does not give it the drill role"),
            "{}",
            r.stderr
        );
    };
    let reports_before = std::fs::read_dir(lake.join("reports/quarterly-cold-backup"))
        .unwrap()
        .count();
    // drill run: the plan's key.
    let plan_text = std::fs::read_to_string(lake.join("drills/quarterly-cold-backup.toml"))
        .unwrap()
        .replace("demo-drill.key", "demo-deleter.key");
    let plan = tmp.path().join("deleter-plan.toml");
    std::fs::write(&plan, &plan_text).unwrap();
    refused(&crate::util::lakedrill_in(
        &lake,
        &["drill", "run", plan.to_str().unwrap()],
    ));
    assert_eq!(
        std::fs::read_dir(lake.join("reports/quarterly-cold-backup"))
            .unwrap()
            .count(),
        reports_before,
        "nothing written"
    );
    // report merge: refused before it reads a shard (an empty folder would otherwise be exit 1).
    let empty = tmp.path().join("no-shards");
    std::fs::create_dir(&empty).unwrap();
    refused(&crate::util::lakedrill_in(
        &lake,
        &[
            "report",
            "merge",
            empty.to_str().unwrap(),
            "--key",
            deleter_key.to_str().unwrap(),
            "--trust",
            trust.to_str().unwrap(),
            "--reports",
            tmp.path().join("merged").to_str().unwrap(),
        ],
    ));
    // restore --shard I/N --key.
    let backup = std::fs::read_dir(lake.join("backups/bundles"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let shard_reports = tmp.path().join("shard-reports");
    refused(&crate::util::lakedrill_in(
        &lake,
        &[
            "restore",
            backup.to_str().unwrap(),
            "--trust",
            trust.to_str().unwrap(),
            "--shard",
            "0/2",
            "--key",
            deleter_key.to_str().unwrap(),
            "--reports",
            shard_reports.to_str().unwrap(),
        ],
    ));
    assert!(!shard_reports.exists(), "nothing written");

    // Without a roles.toml every key holds every role: the drill runs and signs as before.
    std::fs::remove_file(trust.join("roles.toml")).unwrap();
    crate::util::lakedrill_in(&lake, &["drill", "run", plan.to_str().unwrap()]).expect_code(0);
}

/// The key id of the public key at `path`.
fn keyid_of(path: &std::path::Path) -> String {
    lakedrill::evidence::keys::load_public_key(path)
        .unwrap()
        .keyid()
        .to_owned()
}

/// Fault-matrix reports verified under any key of the trust folder and `drill faults --key` signed with any key
/// (README "known limits"). They are drill evidence: a key without the `drill` role is refused before any scenario
/// runs (exit 2, nothing written), and `audit verify` reads them only under `drill` keys (`ROLE_NOT_GRANTED`).
#[test]
fn fault_matrix_reports_are_signed_and_verified_under_the_drill_role() {
    let tmp = crate::util::tmpdir();
    let dir = tmp.path();
    let trust = dir.join("keys/trust");
    std::fs::create_dir_all(&trust).unwrap();
    for name in ["drill-TEST-ONLY", "deleter-TEST-ONLY"] {
        crate::util::lakedrill_in(dir, &["keygen", "--name", name, "--dir", "keys"]).expect_code(0);
        std::fs::copy(dir.join(format!("keys/{name}.pub")), trust.join(format!("{name}.pub"))).unwrap();
    }
    std::fs::write(
        trust.join("roles.toml"),
        "drill = [\"drill-TEST-ONLY\"]\ndeleter = [\"deleter-TEST-ONLY\"]\n",
    )
    .unwrap();
    // One scenario is enough: the role is about the report, not the matrix (a partial run signs a FAIL report).
    let faults = |key: &str| {
        crate::util::lakedrill_in(
            dir,
            &[
                "--json",
                "drill",
                "faults",
                "--scenario",
                "hold-races-cas",
                "--key",
                key,
                "--trust",
                "keys/trust",
                "--reports",
                "reports",
                "--scratch",
                "scratch",
            ],
        )
    };
    let r = faults("keys/deleter-TEST-ONLY.key");
    r.expect_code(2);
    assert!(
        r.stderr.contains("keys/deleter-TEST-ONLY.key")
            && r.stderr.contains(&keyid_of(&trust.join("deleter-TEST-ONLY.pub")))
            && r.stderr.contains("may not sign fault-matrix reports")
            && r.stderr.contains("roles.toml does not give it the drill role"),
        "{}",
        r.stderr
    );
    // Refused before any work: no scratch lakehouse was built, no report written.
    assert!(!dir.join("scratch").exists() && !dir.join("reports").exists());

    let v = faults("keys/drill-TEST-ONLY.key").expect_code(1).json();
    assert_eq!(v["summary"]["gate"], "FAIL", "a partial matrix: {v}");
    let report = v["report"].as_str().unwrap().trim_start_matches("file://").to_owned();
    let audit = || crate::util::lakedrill_in(dir, &["--json", "audit", "verify", &report, "--trust", "keys/trust"]);
    let a = audit().expect_code(0).json();
    assert_eq!(a["status"], "VERIFIED", "{a}");
    assert_eq!(
        a["keyids"],
        serde_json::json!([keyid_of(&trust.join("drill-TEST-ONLY.pub"))]),
        "{a}"
    );

    // The same report once roles.toml takes the drill role from its key: a key of the folder, not a drill key.
    std::fs::write(
        trust.join("roles.toml"),
        "seal = [\"drill-TEST-ONLY\"]\ndeleter = [\"deleter-TEST-ONLY\"]\n",
    )
    .unwrap();
    let a = audit().expect_code(1).json();
    assert_eq!(a["status"], "FAILED", "{a}");
    assert_eq!(a["findings"].as_array().unwrap().len(), 1, "{a}");
    assert_eq!(a["findings"][0]["check"], "ROLE_NOT_GRANTED", "{a}");
    let detail = a["findings"][0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("drill-TEST-ONLY") && detail.contains("roles.toml does not give it the drill role"),
        "{a}"
    );
}

/// Governance decisions verified under any key of the trust folder, and `decision sign` signed with any key
/// (README "known limits"). Only a key with the `governance` role counts: `decision apply` refuses a decision
/// under another key of the folder (exit 1, table unchanged), `decision sign --trust` refuses such a key (exit 2,
/// nothing written), and a roles.toml that gives no key the role (one from before it) verifies no decision and
/// says how to fix that.
#[test]
fn governance_decisions_are_signed_and_applied_only_under_the_governance_role() {
    let g = Gov::new("");
    g.run(&["keygen", "--name", "governance-TEST-ONLY", "--dir", "keys"])
        .expect_code(0);
    let trust = g.dir.join("keys/trust");
    std::fs::copy(
        g.dir.join("keys/governance-TEST-ONLY.pub"),
        trust.join("governance-TEST-ONLY.pub"),
    )
    .unwrap();
    let roles = trust.join("roles.toml");
    let pre_governance = "seal = [\"gov-TEST-ONLY\"]\ndrill = [\"gov-TEST-ONLY\"]\ndeleter = [\"deleter-TEST-ONLY\"]\n";
    std::fs::write(
        &roles,
        format!("{pre_governance}governance = [\"governance-TEST-ONLY\"]\n"),
    )
    .unwrap();
    let doc = |version: i64| {
        let path = g.dir.join(format!("v{version}.json"));
        let doc = serde_json::json!({
            "schema": "lakedrillGovernanceDecision.v1",
            "version": version,
            "issuer": "governance@example.test",
            "issued_at": "2026-11-29T10:00:00Z",
            "table_uuid": g.py("print(t.metadata.table_uuid)"),
            "legal_holds": [{"key": "case-1", "state": "on", "scope": "table", "reason": "litigation 1"}],
        });
        std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
        path
    };
    let sign = |doc: &std::path::Path, key: &str, with_trust: bool, out: &str| {
        let mut args = vec!["decision", "sign", doc.to_str().unwrap(), "--key", key, "--out", out];
        if with_trust {
            args.extend(["--trust", "keys/trust"]);
        }
        g.run(&args)
    };
    let apply = |file: &str| g.on_table(&["--json", "decision", "apply", file, "--trust", "keys/trust"]);
    let holds = || {
        g.on_table(&["--json", "hold", "list"]).expect_code(0).json()["holds"]
            .as_array()
            .unwrap()
            .len()
    };
    let v1 = doc(1);

    // Signing with the deleter's key against the folder: refused, nothing written.
    let r = sign(&v1, "keys/deleter-TEST-ONLY.key", true, "deleter.dsse.json");
    r.expect_code(2);
    assert!(
        r.stderr.contains("keys/deleter-TEST-ONLY.key")
            && r.stderr.contains("may not sign governance decisions")
            && r.stderr.contains("roles.toml does not give it the governance role"),
        "{}",
        r.stderr
    );
    assert!(!g.dir.join("deleter.dsse.json").exists());
    // Signed without a trust folder to check against, it is refused where it is applied: the table is unchanged.
    sign(&v1, "keys/deleter-TEST-ONLY.key", false, "deleter.dsse.json").expect_code(0);
    let r = apply("deleter.dsse.json").expect_code(1).json();
    assert_eq!(r["status"], "REFUSED", "{r}");
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.contains("deleter.dsse.json does not verify: ROLE_NOT_GRANTED")
            && reason.contains(&keyid_of(&trust.join("deleter-TEST-ONLY.pub")))
            && reason.contains("does not give it the governance role"),
        "{r}"
    );
    assert_eq!(holds(), 0, "nothing applied");
    let a = g
        .run(&[
            "--json",
            "audit",
            "verify",
            "deleter.dsse.json",
            "--trust",
            "keys/trust",
        ])
        .expect_code(1)
        .json();
    assert_eq!(a["findings"][0]["check"], "ROLE_NOT_GRANTED", "{a}");

    // The governance key: signed, verified, applied.
    sign(&v1, "keys/governance-TEST-ONLY.key", true, "v1.dsse.json").expect_code(0);
    let a = g
        .run(&["--json", "audit", "verify", "v1.dsse.json", "--trust", "keys/trust"])
        .expect_code(0)
        .json();
    assert_eq!(a["status"], "VERIFIED", "{a}");
    // The same envelope as another DSSE tool writes it (compact JSON): audit verify accepts it as decision apply
    // does (a decision is no link of lakedrill's chains, so its bytes need not be lakedrill's layout).
    let ours = std::fs::read(g.dir.join("v1.dsse.json")).unwrap();
    let compact = serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(&ours).unwrap()).unwrap();
    assert_ne!(compact, ours);
    std::fs::write(g.dir.join("v1-compact.dsse.json"), &compact).unwrap();
    let a = g
        .run(&[
            "--json",
            "audit",
            "verify",
            "v1-compact.dsse.json",
            "--trust",
            "keys/trust",
        ])
        .expect_code(0)
        .json();
    assert_eq!(a["status"], "VERIFIED", "{a}");
    let r = apply("v1.dsse.json").expect_code(0).json();
    assert_eq!(r["status"], "APPLIED", "{r}");
    assert_eq!(r["holds"][0]["action"], "set", "{r}");
    assert_eq!(holds(), 1);

    // A roles.toml from before the governance role: no key holds it, so no decision verifies, and both the
    // refusal and the signer say so and how to fix it.
    std::fs::write(&roles, pre_governance).unwrap();
    let fix = "gives no key the governance role, so no governance decision verifies under this trust folder: add \
               governance to the roles of the key that signs them";
    let v2 = doc(2);
    let r = sign(&v2, "keys/governance-TEST-ONLY.key", true, "v2.dsse.json");
    r.expect_code(2);
    assert!(r.stderr.contains(fix), "{}", r.stderr);
    assert!(!g.dir.join("v2.dsse.json").exists());
    sign(&v2, "keys/governance-TEST-ONLY.key", false, "v2.dsse.json").expect_code(0);
    let r = apply("v2.dsse.json").expect_code(1).json();
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.contains("v2.dsse.json does not verify: ROLE_NOT_GRANTED") && reason.contains(fix),
        "{r}"
    );
    let a = g
        .run(&["--json", "audit", "verify", "v2.dsse.json", "--trust", "keys/trust"])
        .expect_code(1)
        .json();
    assert!(a["findings"][0]["detail"].as_str().unwrap().contains(fix), "{a}");
    // Without a roles.toml every key holds every role: the decision applies.
    std::fs::remove_file(&roles).unwrap();
    assert_eq!(apply("v2.dsse.json").expect_code(0).json()["status"], "APPLIED");
}
