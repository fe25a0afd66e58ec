//! `quarantine release`: a quarantined (or protected) candidate given up before any delete, on fresh
//! PyIceberg tables in their SQL catalog (the `Gov` fixture of `governance.rs`): its tags leave the table in
//! one catalog commit PyIceberg sees, the registry records the release, and the next plan proposes the same
//! snapshots again; a candidate the deleter accepted is refused.
//!
//! It uses the fixture helpers of `governance.rs` and `util.rs` only.

use serde_json::Value;

use crate::governance::{Gov, with_failpoints};

const REASON: &str = "the owner keeps these snapshots for the Q3 audit";

/// `quarantine release ID --reason R` on the fixture's table.
pub(crate) fn release(g: &Gov, id: &str, reason: &str) -> crate::util::Run {
    g.on_table(&["--json", "quarantine", "release", id, "--reason", reason])
}

fn state(g: &Gov, id: &str) -> Value {
    g.run(&["--json", "status", id]).expect_code(0).json()["candidates"][0].clone()
}

fn ids(v: &Value) -> Vec<i64> {
    let mut ids: Vec<i64> = v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
    ids.sort_unstable();
    ids
}

/// The table's refs as PyIceberg reads them through the catalog: `[(name, snapshot id)]`.
fn refs(g: &Gov) -> String {
    g.py("print(sorted((k, v.snapshot_id) for k, v in t.metadata.refs.items()))")
}

#[test]
fn release_removes_the_tags_and_the_next_plan_proposes_the_snapshots_again() {
    let g = Gov::new("");
    let rows = g.py("print(t.scan().to_arrow().num_rows, t.metadata.current_snapshot_id)");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let sids = ids(&c["snapshot_ids"]);
    g.quarantine(&id, "tag").expect_code(0);
    // While quarantined, the tags protect the snapshots from every other plan.
    let plan = g.plan();
    for p in plan["protected"].as_array().unwrap() {
        if sids.contains(&p["snapshot_id"].as_i64().unwrap()) {
            assert!(p["reasons"].to_string().contains("ref:quarantine/"), "{p}");
        }
    }
    assert!(refs(&g).contains("'quarantine/"));

    let r = release(&g, &id, REASON).expect_code(0).json();
    assert_eq!(r["status"], "RELEASED", "{r}");
    assert_eq!(r["candidate_id"], id.as_str());
    assert_eq!(r["from"], "QUARANTINED");
    assert_eq!(r["mode"], "tag");
    let removed = r["tags_removed"].as_array().unwrap();
    assert_eq!(removed.len(), sids.len(), "{r}");
    for t in removed {
        assert!(
            t["name"].as_str().unwrap().starts_with(&format!("quarantine/{id}")),
            "{t}"
        );
        assert!(sids.contains(&t["snapshot_id"].as_i64().unwrap()), "{t}");
    }
    assert!(r["committed_metadata_location"].is_string(), "{r}");

    // PyIceberg sees the commit: no quarantine ref is left, the data is untouched.
    let after = refs(&g);
    assert!(!after.contains("quarantine/"), "{after}");
    assert!(after.contains("'main'"), "{after}");
    assert_eq!(
        g.py("print(t.scan().to_arrow().num_rows, t.metadata.current_snapshot_id)"),
        rows
    );

    // The registry keeps the release: state, reason, time, the tags removed; every object is RELEASED.
    let st = state(&g, &id);
    assert_eq!(st["candidate"]["state"], "RELEASED", "{st}");
    assert_eq!(st["candidate"]["reason"], REASON);
    let kept = &st["candidate"]["quarantine"]["release"];
    assert_eq!(kept["reason"], REASON);
    assert!(kept["released_at"].is_string(), "{kept}");
    assert_eq!(kept["tags_removed"], r["tags_removed"]);
    let counts = st["object_counts"].as_object().unwrap();
    assert_eq!(counts.keys().collect::<Vec<_>>(), vec!["RELEASED"], "{st}");
    assert_eq!(
        counts["RELEASED"].as_u64().unwrap() as usize,
        c["objects"].as_array().unwrap().len()
    );

    // The next plan proposes the same snapshots again, as a plain expired-snapshot candidate of the new
    // generation, no longer protected by a quarantine tag.
    let plan = g.plan();
    assert!(!plan["protected"].to_string().contains("quarantine/"), "{plan}");
    let again = g.candidate();
    assert_eq!(again["kind"], "expired-snapshots");
    assert_eq!(ids(&again["snapshot_ids"]), sids);
    assert_ne!(
        again["candidate_id"],
        id.as_str(),
        "a new generation, a new candidate id"
    );
    let paths = |v: &Value| {
        let mut p: Vec<String> = v["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["path"].as_str().unwrap().to_owned())
            .collect();
        p.sort();
        p
    };
    assert_eq!(paths(&again), paths(&c), "the same objects are back in the plan");

    // A second release is refused (RELEASED is terminal), and the snapshots can be quarantined again.
    let twice = release(&g, &id, REASON).expect_code(1).json();
    assert_eq!(twice["status"], "REFUSED");
    assert!(twice["reason"].as_str().unwrap().contains("RELEASED"), "{twice}");
    let q = g
        .quarantine(again["candidate_id"].as_str().unwrap(), "tag")
        .expect_code(0)
        .json();
    assert_eq!(q["candidate"]["state"], "QUARANTINED", "{q}");
}

#[test]
fn a_protected_candidate_is_released_and_its_leased_snapshot_stays_protected() {
    // A candidate the table keeps whole is PROTECTED: release is its way out.
    let g = Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let leased = c["snapshot_ids"][0].as_i64().unwrap();
    g.on_table(&[
        "lease",
        "add",
        "--policy",
        g.policy.to_str().unwrap(),
        "--snapshot-id",
        &leased.to_string(),
        "--purpose",
        "a reader",
        "--owner",
        "o",
        "--expires-in",
        "1d",
    ])
    .expect_code(0);
    // A lease on one snapshot alone is rebased away by the purge; a table-wide hold covers the candidate whole
    // and sends it to PROTECTED at once.
    g.on_table(&["hold", "set", "--scope", "table", "--reason", "legal review"])
        .expect_code(0);
    g.purge(id, Some(&ev), &[]).expect_code(1);
    assert_eq!(state(&g, id)["candidate"]["state"], "PROTECTED");

    let r = release(&g, id, "the reader needs it; re-plan the rest")
        .expect_code(0)
        .json();
    assert_eq!(r["status"], "RELEASED", "{r}");
    assert_eq!(r["from"], "PROTECTED");
    assert!(!refs(&g).contains("quarantine/"));
    assert_eq!(state(&g, id)["candidate"]["state"], "RELEASED");
    // The leased snapshot is protected by its lease alone, and is in no candidate.
    let plan = g.plan();
    let p = plan["protected"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["snapshot_id"].as_i64() == Some(leased))
        .unwrap_or_else(|| panic!("{leased} is not protected: {plan}"));
    assert!(p["reasons"].to_string().contains("lease:"), "{p}");
    assert!(!p["reasons"].to_string().contains("quarantine/"), "{p}");
    for cand in plan["candidates"].as_array().unwrap() {
        assert!(!ids(&cand["snapshot_ids"]).contains(&leased), "{cand}");
    }
}

#[test]
fn a_bundle_mode_release_records_the_state_and_names_the_bundles() {
    // Bundle mode removed the snapshots from the metadata and left no tag: the release only records the
    // state, and says how each snapshot comes back from its bundle.
    let g = Gov::new("");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    let q = g.quarantine(id, "bundle").expect_code(0).json();
    let bundles: Vec<Value> = q["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["uri"].clone())
        .collect();
    assert!(!bundles.is_empty());
    let before = refs(&g);
    let text = g.on_table(&["quarantine", "release", id, "--reason", REASON]);
    text.expect_code(0);
    assert!(text.stdout.contains("RELEASED"), "{}", text.stdout);
    assert!(text.stdout.contains("set-current --from-bundle"), "{}", text.stdout);
    // What happens to the files if no snapshot is brought back is said, not left to be found out.
    assert!(
        text.stdout.contains("orphan candidate") && text.stdout.contains("lease or legal hold"),
        "{}",
        text.stdout
    );
    for b in &bundles {
        assert!(text.stdout.contains(b.as_str().unwrap()), "{b} in {}", text.stdout);
    }
    assert_eq!(refs(&g), before, "no catalog commit");
    let st = state(&g, id);
    assert_eq!(st["candidate"]["state"], "RELEASED", "{st}");
    let kept = &st["candidate"]["quarantine"]["release"];
    assert_eq!(kept["mode"], "bundle", "{kept}");
    assert_eq!(kept["from"], "QUARANTINED");
    assert_eq!(kept["tags_removed"], serde_json::json!([]));
    assert!(kept["committed_metadata_location"].is_null(), "{kept}");
    assert_eq!(kept["bundles"], Value::Array(bundles));
}

#[test]
fn release_is_refused_once_the_deleter_accepted_the_candidate() {
    // Killed after the acceptance point: DELETE_APPROVED, deletes in flight.
    let g = Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    assert_eq!(with_failpoints(&g, "abort-after=1", &g.purge_args(id, Some(&ev))), None);
    assert_eq!(state(&g, id)["candidate"]["state"], "DELETE_APPROVED");
    let r = release(&g, id, REASON).expect_code(1).json();
    assert_eq!(r["status"], "REFUSED", "{r}");
    let why = r["reason"].as_str().unwrap();
    assert!(why.contains(id) && why.contains("DELETE_APPROVED"), "{why}");
    assert_eq!(
        state(&g, id)["candidate"]["state"],
        "DELETE_APPROVED",
        "nothing changed"
    );
    // The purge resumes as if no release had been asked for; a deleted candidate is refused as well.
    assert_eq!(g.purge(id, Some(&ev), &[]).expect_code(0).json()["status"], "VERIFIED");
    let r = release(&g, id, REASON).expect_code(1).json();
    assert!(r["reason"].as_str().unwrap().contains("VERIFIED"), "{r}");

    // Uncertain deletes: DELETE_UNKNOWN is refused too.
    let g = Gov::new("maxUnreconciledUnknowns: 0\n");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    assert_eq!(
        with_failpoints(&g, "lose-every=2", &g.purge_args(id, Some(&ev))),
        Some(1)
    );
    assert_eq!(state(&g, id)["candidate"]["state"], "DELETE_UNKNOWN");
    let r = release(&g, id, REASON).expect_code(1).json();
    assert!(r["reason"].as_str().unwrap().contains("DELETE_UNKNOWN"), "{r}");
}

#[test]
fn release_needs_a_reason_and_a_known_candidate() {
    let g = Gov::new("");
    // No --reason: clap refuses (exit 2) before anything is read.
    let r = g.on_table(&["quarantine", "release", "c-0000000000000000"]);
    r.expect_code(2);
    assert!(r.stderr.contains("--reason"), "{}", r.stderr);
    // An empty reason is bad input.
    let r = release(&g, "c-0000000000000000", "  ");
    r.expect_code(2);
    assert!(r.stderr.contains("--reason"), "{}", r.stderr);
    // An unknown candidate is named.
    let r = release(&g, "c-00000000deadbeef", REASON);
    r.expect_code(2);
    assert!(r.stderr.contains("c-00000000deadbeef"), "{}", r.stderr);
}

#[test]
fn purge_releases_a_candidate_whose_snapshots_an_engine_tagged_since_quarantine() {
    // An engine tags every snapshot of the quarantined candidate (a ref is no lease or hold: nothing protects the
    // candidate at once). The purge's rebase finds nothing left to delete, makes it PROTECTED and releases it.
    let g = Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let sids = ids(&c["snapshot_ids"]);
    for s in &sids {
        g.py(&format!(
            "t.manage_snapshots().create_tag({s}, 'keep-{s}').commit()\nprint('ok')"
        ));
    }
    let v = g.purge(id, Some(&ev), &[]).expect_code(1).json();
    assert_eq!(v["status"], "REFUSED", "{v}");
    let reasons = v["reasons"].to_string();
    assert!(
        reasons.contains("every snapshot of the candidate is kept by the table now"),
        "{v}"
    );
    assert!(reasons.contains("purge RELEASED it"), "{v}");
    let st = state(&g, id);
    assert_eq!(st["candidate"]["state"], "RELEASED", "{st}");
    // Its quarantine tags are gone; the engine's tags stay; nothing of the candidate was deleted.
    let r = refs(&g);
    assert!(!r.contains("quarantine/"), "{r}");
    for s in &sids {
        assert!(r.contains(&format!("'keep-{s}'")), "{r}");
    }
    g.assert_all_present(&c);
    // The snapshots are the engine tags' now; once those go, the next plan proposes them again.
    let plan = g.plan();
    for cand in plan["candidates"].as_array().unwrap() {
        for s in &sids {
            assert!(!ids(&cand["snapshot_ids"]).contains(s), "{cand}");
        }
    }
    for s in &sids {
        g.py(&format!(
            "t.manage_snapshots().remove_tag('keep-{s}').commit()\nprint('ok')"
        ));
    }
    let again = g.candidate();
    assert_eq!(ids(&again["snapshot_ids"]), sids, "{again}");
}

// See: the review of 2026-12-07 (no test reached it). The release's catalog commit removing its tags is made under
// the registry's lock; a lock that could not be ended after a commit that succeeded returned its error at once: the
// tags were out of the table, the release unrecorded (exit 2, the candidate still QUARANTINED with nothing left to
// protect its snapshots). The commit's own answer comes first now: the lock's error is a warning and the release is
// recorded under the claim (failpoint `release-lock-end-fails`: the lock's transaction is rolled back instead).
#[test]
fn a_release_whose_lock_cannot_be_ended_after_its_catalog_commit_still_records_the_release() {
    let g = Gov::new("");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let sids = ids(&c["snapshot_ids"]);
    g.quarantine(&id, "tag").expect_code(0);
    assert!(refs(&g).contains("'quarantine/"));
    let mut args = vec!["--json", "quarantine", "release", &id, "--reason", REASON];
    args.extend(crate::governance::T);
    let r = crate::util::lakedrill_in_env(&g.dir, &args, &[("LAKEDRILL_FAILPOINTS", "release-lock-end-fails=1")]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let out = r.json();
    assert_eq!(out["status"], "RELEASED", "{out}");
    assert_eq!(out["tags_removed"].as_array().unwrap().len(), sids.len(), "{out}");
    assert!(out["committed_metadata_location"].is_string(), "{out}");
    let warnings = out["warnings"].to_string();
    assert!(
        warnings.contains(&format!(
            "{id}: the registry's lock could not be ended after the catalog commit that removed the tags"
        )) && warnings.contains("the release is recorded next"),
        "{out}"
    );
    assert!(!refs(&g).contains("quarantine/"), "{}", refs(&g));
    let st = state(&g, &id);
    assert_eq!(st["candidate"]["state"], "RELEASED", "{st}");
    assert_eq!(st["candidate"]["reason"], REASON, "{st}");
    assert_eq!(
        st["candidate"]["quarantine"]["release"]["committed_metadata_location"], out["committed_metadata_location"],
        "{st}"
    );
    // The claim was let go, and the next plan proposes the snapshots again.
    let claim = crate::util::sql_text(
        &crate::deleter_safety::registry_uri(&g),
        &format!("SELECT run_id FROM purge_runs WHERE candidate_id = '{id}'"),
    );
    assert_eq!(claim, None, "the claim was let go");
    assert_eq!(ids(&g.candidate()["snapshot_ids"]), sids);
}
