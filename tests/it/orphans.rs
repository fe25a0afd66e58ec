//! Orphan safety rules a new user does not have to know (issue 22, point 4): hidden sidecars and files without a
//! modification time are reported and never proposed, `plan` warns below a 24-hour `orphanSafetyInterval`, and a
//! table whose location is shared with another table of a configured catalog (equal, inside or around) is
//! refused naming both tables (Iceberg #17213).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::bounds::{current_metadata, set_location};
use crate::governance::{Gov, python};

/// Writes `bytes` at `path` (folders made) with the modification time `mtime`.
fn put(path: &Path, bytes: &[u8], mtime: SystemTime) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

fn subjects(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| d["subject"].as_str().unwrap().to_owned())
        .collect()
}

fn reasons_of<'a>(v: &'a Value, subject: &str) -> Vec<&'a str> {
    v.as_array()
        .unwrap()
        .iter()
        .find(|d| d["subject"] == subject)
        .unwrap_or_else(|| panic!("{subject} in {v}"))["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect()
}

/// Old unreferenced files of every kind under the table: only the plain Parquet file is an orphan candidate; the
/// `_SUCCESS` marker, a `.crc` sidecar, a writer's `_temporary` staging file and a file whose modification time
/// is the epoch (none known) are reported with their reason and never proposed, also with a baseline that would
/// take them; `plan` warns that 12 h is below the 24-hour floor.
#[test]
fn hidden_sidecars_and_files_without_a_modification_time_are_reported_and_never_orphan_candidates() {
    let g = Gov::new("");
    let root = g.table_root();
    let old = SystemTime::now() - Duration::from_secs(3 * 86_400);
    put(
        &root.join("data/stray.parquet"),
        b"PAR1 an uncommitted writer's file",
        old,
    );
    put(&root.join("data/_SUCCESS"), b"", old);
    put(&root.join("data/.stray.parquet.crc"), b"crc", old);
    put(&root.join("data/_temporary/0/part-00000.parquet"), b"staging", old);
    put(
        &root.join("data/no-mtime.parquet"),
        b"PAR1 age unknown",
        SystemTime::UNIX_EPOCH,
    );

    let r = g.on_table(&["--json", "plan", "--policy", g.policy.to_str().unwrap()]);
    r.expect_code(0);
    let p = r.json();
    let orphans: Vec<String> = p["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "orphans")
        .flat_map(|c| c["objects"].as_array().unwrap().iter())
        .map(|o| o["path"].as_str().unwrap().to_owned())
        .collect();
    assert!(orphans.contains(&"data/stray.parquet".to_owned()), "{orphans:?}");
    let never = [
        "data/_SUCCESS",
        "data/.stray.parquet.crc",
        "data/_temporary/0/part-00000.parquet",
        "data/no-mtime.parquet",
    ];
    for n in never {
        assert!(!orphans.contains(&n.to_owned()), "{n} proposed: {orphans:?}");
    }
    let kept = &p["kept_unreferenced"];
    let listed = subjects(kept);
    for n in never {
        assert!(listed.contains(&n.to_owned()), "{n} not reported: {kept}");
    }
    assert!(!listed.contains(&"data/stray.parquet".to_owned()), "{kept}");
    for n in &never[..3] {
        assert!(reasons_of(kept, n)[0].starts_with("hidden:"), "{kept}");
    }
    assert!(
        reasons_of(kept, "data/no-mtime.parquet")[0].starts_with("no-modification-time:"),
        "{kept}"
    );
    // Plain remove_orphan_files would take the epoch-dated file: the difference says why lakedrill does not.
    assert!(
        reasons_of(&p["differences"], "data/no-mtime.parquet")
            .iter()
            .any(|r| r.starts_with("no-modification-time:")),
        "{}",
        p["differences"]
    );
    assert!(
        p["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("below 24 hours")),
        "{}",
        p["warnings"]
    );
    let human = g.on_table(&["plan", "--policy", g.policy.to_str().unwrap()]);
    human.expect_code(0);
    assert!(
        human.stdout.contains("unreferenced, never an orphan: data/_SUCCESS"),
        "{}",
        human.stdout
    );
}

/// Registers `db.<name>` in the fixture's catalog with a copy of the current metadata whose `location` is
/// `location`, written at `metadata` (a path).
fn register_twin(g: &Gov, name: &str, location: &Path, metadata: &Path) {
    std::fs::create_dir_all(metadata.parent().unwrap()).unwrap();
    std::fs::copy(current_metadata(g), metadata).unwrap();
    set_location(metadata, &format!("file://{}", location.display()));
    let mut md: Value = serde_json::from_slice(&std::fs::read(metadata).unwrap()).unwrap();
    md["table-uuid"] = Value::String(uuid::Uuid::new_v4().to_string());
    std::fs::write(metadata, serde_json::to_vec(&md).unwrap()).unwrap();
    let script = format!(
        "import sqlite3\nc = sqlite3.connect('{}')\nc.execute(\"DELETE FROM iceberg_tables WHERE table_name = '{name}'\")\nc.execute(\"INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location) VALUES ('pyfix', 'db', '{name}', 'file://{}')\")\nc.commit()\n",
        g.dir.join("fx/catalog.db").display(),
        metadata.display()
    );
    let out = Command::new(python()).arg("-c").arg(script).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Another table of the catalog whose location equals this table's, lies inside it or around it: `plan` exits 2
/// naming both tables and how they overlap, and so does `plan` of the other table; without it the plan works.
#[test]
fn a_table_sharing_its_location_with_another_table_is_refused_naming_both() {
    let g = Gov::new("");
    let root = g.table_root();
    let cases = [
        (
            "twin",
            root.clone(),
            root.join("metadata/00099-twin.metadata.json"),
            "shares this location",
        ),
        (
            "nested",
            root.join("data/nested"),
            root.join("data/nested/metadata/00000-n.metadata.json"),
            "lies inside this location",
        ),
        (
            "around",
            root.parent().unwrap().to_path_buf(),
            root.parent().unwrap().join("metadata/00000-a.metadata.json"),
            "lies around this location",
        ),
    ];
    for (name, location, metadata, how) in cases {
        register_twin(&g, name, &location, &metadata);
        let r = g.on_table(&["plan", "--policy", g.policy.to_str().unwrap()]);
        r.expect_code(2);
        assert!(
            r.stderr.contains("db.retention") && r.stderr.contains(&format!("db.{name}")) && r.stderr.contains(how),
            "{name}: {}",
            r.stderr
        );
        let policy = g.dir.join(format!("p-{name}.yaml"));
        let text = std::fs::read_to_string(&g.policy).unwrap();
        std::fs::write(&policy, text.replace("table: retention", &format!("table: {name}"))).unwrap();
        // The nested copy names manifest lists outside its own location: planning it fails on that first.
        if name != "nested" {
            let other = g.run(&[
                "plan",
                "--policy",
                policy.to_str().unwrap(),
                "--catalog",
                "rt",
                "--table",
                &format!("db.{name}"),
            ]);
            other.expect_code(2);
            assert!(other.stderr.contains("db.retention"), "{name}: {}", other.stderr);
        }
        let script = format!(
            "import sqlite3\nc = sqlite3.connect('{}')\nc.execute(\"DELETE FROM iceberg_tables WHERE table_name = '{name}'\")\nc.commit()\n",
            g.dir.join("fx/catalog.db").display()
        );
        let out = Command::new(python()).arg("-c").arg(script).output().unwrap();
        assert!(out.status.success());
        std::fs::remove_file(&metadata).unwrap();
    }
    g.plan();
}
