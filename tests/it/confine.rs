//! Objects of a table are read (and deleted) only inside the table: inventory URIs bound to their paths,
//! and symlinks that leave the table refused on the local filesystem.
//! See: issue 16, points 3 and 4.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{copy_tree, interop, lakedrill, tmpdir};

/// The written table location of the interop fixture (relative).
const LOCATION: &str = "data/iceberg/generated_spec2_0_001/pyspark_iceberg_table";

/// A copy of a committed interop table, a test key, and the table's current snapshot.
struct Fixture {
    tmp: tempfile::TempDir,
    table: PathBuf,
    key: PathBuf,
    trust: PathBuf,
    snapshot: i64,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tmpdir();
        let table = tmp.path().join("t");
        copy_tree(&interop().join("tree-31f6b388").join(LOCATION), &table);
        let (key, trust) = crate::drill::keygen(tmp.path(), "confine-TEST-ONLY");
        let snapshot = lakedrill(&[
            "--json",
            "resolve",
            "--metadata",
            table.to_str().unwrap(),
            "--ref",
            "main",
        ])
        .expect_code(0)
        .json()["snapshot_id"]
            .as_i64()
            .unwrap();
        Fixture {
            table,
            key,
            trust,
            snapshot,
            tmp,
        }
    }

    /// A folder outside the table.
    fn outside(&self) -> PathBuf {
        let p = self.tmp.path().join("outside");
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    fn seal(&self) -> crate::util::Run {
        crate::drill::seal(
            &["--metadata", self.table.to_str().unwrap()],
            self.snapshot,
            &self.key,
            &self.tmp.path().join("bundles"),
        )
    }

    /// Seals the current snapshot and returns the bundle folder.
    fn sealed(&self) -> PathBuf {
        let v = self.seal().expect_code(0).json();
        PathBuf::from(v["uri"].as_str().unwrap().trim_start_matches("file://"))
    }

    fn restore(&self, bundle: &Path) -> Value {
        let r = crate::drill::restore(bundle.to_str().unwrap(), &self.trust, &["--deep"]);
        let v = r.json();
        assert_eq!(r.code, if v["status"] == "RESTORE_VERIFIED" { 0 } else { 1 }, "{v}");
        v
    }

    /// A data file of the current snapshot, relative to the table folder.
    fn data_file(&self) -> String {
        let files = lakedrill(&["--json", "inspect", "files", "--metadata", self.table.to_str().unwrap()])
            .expect_code(0)
            .json();
        let f = files["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["content"] == "data")
            .unwrap();
        rel(f["file_path"].as_str().unwrap())
    }

    /// The current snapshot's manifest list, relative to the table folder.
    fn manifest_list(&self) -> String {
        let snaps = lakedrill(&[
            "--json",
            "inspect",
            "snapshots",
            "--metadata",
            self.table.to_str().unwrap(),
        ])
        .expect_code(0)
        .json();
        let s = snaps["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["snapshot_id"].as_i64() == Some(self.snapshot))
            .unwrap();
        rel(s["manifest_list"].as_str().unwrap())
    }
}

fn rel(written: &str) -> String {
    written.strip_prefix(&format!("{LOCATION}/")).unwrap().to_owned()
}

fn read_statement(envelope: &Path) -> Value {
    use base64::Engine;
    let env: Value = serde_json::from_slice(&std::fs::read(envelope).unwrap()).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(env["payload"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap()
}

/// Re-signs a modified statement with the trusted key, fixing its root and subject, so only the
/// modification is tested.
fn resign(bundle: &Path, key: &Path, st: &mut Value, inventory: &[Value]) {
    crate::util::rewrite_inventory(bundle, st, inventory);
    let key = lakedrill::evidence::keys::load_signing_key(key).unwrap();
    let env = lakedrill::evidence::sign("application/vnd.in-toto+json", st.to_string().as_bytes(), &key);
    std::fs::write(bundle.join("bundle.dsse.json"), env.to_json_bytes()).unwrap();
}

fn findings_of<'a>(v: &'a Value, kind: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

/// Replaces `rel` in the table by a symlink to an identical copy outside it; returns the copy.
fn link_outside(fx: &Fixture, rel: &str) -> PathBuf {
    let inside = fx.table.join(rel);
    let copy = fx.outside().join(inside.file_name().unwrap());
    if inside.is_dir() {
        copy_tree(&inside, &copy);
        std::fs::remove_dir_all(&inside).unwrap();
    } else {
        std::fs::copy(&inside, &copy).unwrap();
        std::fs::remove_file(&inside).unwrap();
    }
    std::os::unix::fs::symlink(&copy, &inside).unwrap();
    copy
}

/// The bundle must not verify, with a SYMLINK_OUTSIDE_TABLE finding naming `path` and the outside target;
/// sealing again must be refused (exit 1, nothing written) with the same finding.
fn assert_refused_both_ways(fx: &Fixture, bundle: &Path, path: &str, target: &Path) {
    let v = fx.restore(bundle);
    assert_eq!(v["status"], "FAILED", "{v}");
    let f = findings_of(&v, "SYMLINK_OUTSIDE_TABLE");
    assert!(
        f.iter()
            .any(|f| f["path"] == path && f["actual"].as_str().unwrap().contains(target.to_str().unwrap())),
        "{v}"
    );
    std::fs::remove_dir_all(bundle).unwrap();
    let r = fx.seal();
    let s = r.expect_code(1).json();
    assert_eq!(s["status"], "REFUSED", "{s}");
    let f = findings_of(&s, "SYMLINK_OUTSIDE_TABLE");
    assert!(
        f.iter()
            .any(|f| f["path"] == path && f["actual"].as_str().unwrap().contains(target.to_str().unwrap())),
        "{s}"
    );
    assert!(!bundle.exists(), "a refused seal wrote {}", bundle.display());
}

// See: issue 16, point 3.
#[test]
fn r016_an_inventory_uri_not_derived_from_its_path_is_a_finding_and_never_opened() {
    let fx = Fixture::new();
    let bundle = fx.sealed();
    let env = bundle.join("bundle.dsse.json");
    let mut st = read_statement(&env);
    let mut inv = crate::util::bundle_inventory(&bundle);
    let e = inv.iter_mut().find(|e| e["layer"] == "data").unwrap();
    let path = e["path"].as_str().unwrap().to_owned();
    let own = fx.table.join(rel(&path));
    // An identical copy outside the table, named by the entry's uri; the path (what is signed into the
    // root) is unchanged.
    let copy = fx.outside().join("copy.parquet");
    std::fs::copy(&own, &copy).unwrap();
    e["uri"] = Value::String(format!("file://{}", copy.display()));
    resign(&bundle, &fx.key, &mut st, &inv);
    std::fs::remove_file(&own).unwrap();

    let v = fx.restore(&bundle);
    assert_eq!(v["status"], "FAILED", "{v}");
    let f = findings_of(&v, "URI_NOT_DERIVED");
    assert_eq!(f.len(), 1, "{v}");
    assert_eq!(f[0]["path"], path.as_str());
    let actual = f[0]["actual"].as_str().unwrap();
    assert!(
        actual.contains(copy.to_str().unwrap()) && actual.contains("not derived"),
        "{v}"
    );
    assert!(
        f[0]["expected"].as_str().unwrap().contains(own.to_str().unwrap()),
        "{v}"
    );
    // The outside file was not opened: made unreadable, it gives no READ_FAILED (nor anything else).
    std::fs::remove_file(&copy).unwrap();
    std::fs::create_dir(&copy).unwrap();
    let v = fx.restore(&bundle);
    let kinds: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["URI_NOT_DERIVED"], "{v}");
}

// See: issue 16, point 4.
#[test]
fn r016_a_data_file_symlinked_outside_the_table_is_refused_by_seal_and_restore() {
    let fx = Fixture::new();
    let bundle = fx.sealed();
    let rel = fx.data_file();
    let copy = link_outside(&fx, &rel);
    assert_refused_both_ways(&fx, &bundle, &format!("{LOCATION}/{rel}"), &copy);
}

// See: issue 16, point 4.
#[test]
fn r016_a_partition_folder_symlinked_outside_the_table_is_refused_by_seal_and_restore() {
    let fx = Fixture::new();
    let bundle = fx.sealed();
    let rel = fx.data_file();
    let folder = rel.rsplit_once('/').unwrap().0.to_owned();
    let copy = link_outside(&fx, &folder);
    let target = copy.join(rel.rsplit_once('/').unwrap().1);
    assert_refused_both_ways(&fx, &bundle, &format!("{LOCATION}/{rel}"), &target);
}

// See: issue 16, point 4.
#[test]
fn r016_a_manifest_list_symlinked_outside_the_table_is_refused_by_seal_and_restore() {
    let fx = Fixture::new();
    let bundle = fx.sealed();
    let rel = fx.manifest_list();
    let copy = link_outside(&fx, &rel);
    assert_refused_both_ways(&fx, &bundle, &format!("{LOCATION}/{rel}"), &copy);
}

// See: issue 16, point 4: the rule is about where a path resolves, not about symlinks as such.
#[test]
fn r016_a_symlink_that_stays_inside_the_table_is_followed() {
    let fx = Fixture::new();
    let rel = fx.data_file();
    let inside = fx.table.join(&rel);
    let moved = fx.table.join("elsewhere-in-table");
    std::fs::create_dir_all(&moved).unwrap();
    let target = moved.join(inside.file_name().unwrap());
    std::fs::rename(&inside, &target).unwrap();
    std::os::unix::fs::symlink(&target, &inside).unwrap();
    let bundle = fx.sealed();
    let v = fx.restore(&bundle);
    assert_eq!(v["status"], "RESTORE_VERIFIED", "{v}");
}

// See: issue 16, point 4: the deleter never deletes through a folder symlinked outside the table.
#[test]
fn r016_purge_never_deletes_through_a_folder_symlinked_outside_the_table() {
    let g = crate::governance::Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let root = g.table_root();
    let victim = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["path"].as_str().unwrap().to_owned())
        .find(|p| p.contains('/') && root.join(p).exists())
        .unwrap();
    // The folder holding the victim becomes a symlink to an identical copy outside the table.
    let folder = root.join(victim.rsplit_once('/').unwrap().0);
    let outside = g.dir.join("outside-copy");
    copy_tree(&folder, &outside);
    std::fs::remove_dir_all(&folder).unwrap();
    std::os::unix::fs::symlink(&outside, &folder).unwrap();
    let outside_file = outside.join(victim.rsplit_once('/').unwrap().1);
    assert!(outside_file.exists());

    let r = g.purge(id, Some(&ev), &[]);
    let v = r.expect_code(1).json();
    assert_eq!(v["status"], "HALTED", "{v}");
    assert!(
        outside_file.exists(),
        "the purge deleted {} outside the table",
        outside_file.display()
    );
    let text = format!("{}{}", r.stdout, r.stderr);
    assert!(text.contains(&victim) && text.contains("outside the table"), "{text}");
}

/// A folder of the table replaced after the quarantine by a symlink to an identical copy elsewhere in the same
/// table (allowed: the link stays inside): a delete through it removes the copy's file, the same file under another
/// path, which a retained snapshot may reference. The purge refuses it (exit 1, naming the path and where it
/// resolves) and the copy's file stays.
#[test]
fn purge_never_deletes_through_a_folder_symlinked_inside_the_table() {
    let g = crate::governance::Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let root = g.table_root();
    let victim = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["path"].as_str().unwrap().to_owned())
        .find(|p| p.contains('/') && root.join(p).exists())
        .unwrap();
    let folder = root.join(victim.rsplit_once('/').unwrap().0);
    let real = root.join("linked-copy");
    copy_tree(&folder, &real);
    std::fs::remove_dir_all(&folder).unwrap();
    std::os::unix::fs::symlink(&real, &folder).unwrap();
    let real_file = real.join(victim.rsplit_once('/').unwrap().1);
    assert!(real_file.exists());

    // The independent closure check refuses it (the path reaches its file through a link); were it passed, the
    // deleter's own last check halts before the delete.
    let r = g.purge(id, Some(&ev), &[]);
    let v = r.expect_code(1).json();
    assert!(v["status"] == "REFUSED" || v["status"] == "HALTED", "{v}");
    assert!(
        real_file.exists(),
        "the purge deleted {} through the link",
        real_file.display()
    );
    let text = format!("{}{}", r.stdout, r.stderr);
    assert!(text.contains(&victim) && text.contains("through a symlink"), "{text}");
}

// See: issue 16, point 4: a cold backup copies no bytes from outside the table either.
#[test]
fn r016_backup_refuses_a_partition_folder_or_manifest_list_symlinked_outside_the_table() {
    for shape in ["folder", "manifest list"] {
        let fx = Fixture::new();
        let dir = fx.tmp.path();
        std::fs::write(
            dir.join("lakedrill.toml"),
            format!("[registry]\nuri = \"sqlite:{}/registry.db\"\n", dir.display()),
        )
        .unwrap();
        let rel = match shape {
            "folder" => fx.data_file().rsplit_once('/').unwrap().0.to_owned(),
            _ => fx.manifest_list(),
        };
        let copy = link_outside(&fx, &rel);
        let to = dir.join("backups");
        let r = crate::util::lakedrill_in(
            dir,
            &[
                "--json",
                "backup",
                "--metadata",
                fx.table.to_str().unwrap(),
                "--snapshot-id",
                &fx.snapshot.to_string(),
                "--key",
                fx.key.to_str().unwrap(),
                "--to",
                to.to_str().unwrap(),
            ],
        );
        let v = r.expect_code(1).json();
        assert_eq!(v["status"], "REFUSED", "{shape}: {v}");
        let f = findings_of(&v, "SYMLINK_OUTSIDE_TABLE");
        assert!(
            f.iter().any(
                |f| f["path"].as_str().unwrap().starts_with(&format!("{LOCATION}/{rel}"))
                    && f["actual"].as_str().unwrap().contains(copy.to_str().unwrap())
            ),
            "{shape}: {v}"
        );
        let bundles = to.join("bundles");
        assert!(
            !bundles.exists() || std::fs::read_dir(&bundles).unwrap().count() == 0,
            "{shape}: a refused backup wrote a bundle"
        );
    }
}
