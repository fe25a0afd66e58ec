//! `gates --trust`: the six safety gates of DESIGN §7, recomputed from the registry, the table and
//! the signed drill reports.

use serde_json::Value;

use crate::governance::{Gov, with_failpoints};
use crate::util::Run;

pub(crate) fn gates(g: &Gov) -> Run {
    g.on_table(&[
        "--json",
        "gates",
        "--policy",
        g.policy.to_str().unwrap(),
        "--trust",
        "keys",
        "--reports",
        "reports",
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
    g.on_table(&["--json", "backup", "--key", "keys/gov-TEST-ONLY.key", "--to", "backups"])
        .expect_code(0);
    let plan = g.dir.join("quarterly.toml");
    std::fs::write(
        &plan,
        "name = \"quarterly\"\nkind = \"cold-backup\"\nbackups = \"backups\"\ntarget = \"scratch\"\ntrust = \"keys\"\n\
         key = \"keys/gov-TEST-ONLY.key\"\nreports = \"reports\"\n",
    )
    .unwrap();
    g.run(&["--json", "drill", "run", plan.to_str().unwrap()])
        .expect_code(0);
}

#[test]
fn gates_report_all_six_with_their_figures() {
    let g = Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let n = c["objects"].as_array().unwrap().len() as u64;

    // Without --trust the safety gates are not evaluated (and say so).
    let plain = g
        .on_table(&["--json", "gates", "--policy", g.policy.to_str().unwrap()])
        .expect_code(0)
        .json();
    assert_eq!(plain["safety_gates"], Value::Null);

    // A purge whose every second delete response is lost: DELETE_UNKNOWN, and no cold-backup drill yet.
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
    assert_eq!(
        gate(&v, "quarterly_recovery")["status"],
        "FAIL",
        "no cold-backup report yet: {v}"
    );
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
    ])
    .expect_code(0);
    quarterly_recovery(&g);

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
    assert_eq!(q["figures"]["tables"], 1);
    assert_eq!(q["figures"]["recovered_equals_declared"], true);
    assert!(q["figures"]["max_rto_seconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(gate(&v, "unknowns_reconciled")["figures"]["unreconciled"], 0);
}
