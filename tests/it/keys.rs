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
