#!/usr/bin/env python3
"""Generate fresh Iceberg tables with PyIceberg, plus PyIceberg's own answers about them.

Usage: python tests/gen/make_tables.py [--retention] OUTDIR

With --retention, OUTDIR gets only db.retention (history expiring after 1 ms, a tag and a branch on old
snapshots), in a catalog of its own: tests that quarantine and purge make one each.

Writes (ids differ on every run):
  OUTDIR/catalog.db              SqlCatalog "pyfix" (SQLite), same schema as iceberg-catalog-sql
  OUTDIR/warehouse/db/<table>/   the tables: db.events (v2, full history), db.legacy (v1), db.empty,
                                 db.many (32 appends, for drills)
  OUTDIR/expected/<table>.json   PyIceberg's answers, in lakedrill's JSON field names

Written for pyiceberg 0.12.0 (pinned in scripts/test.sh). Facts about that version, checked:
  * writes to a branch work (append/overwrite/delete take branch=...);
  * rollback: manage_snapshots().rollback_to_snapshot(id) (id must be an ancestor of main);
  * expiry: table.maintenance.expire_snapshots().by_id(..).commit() removes snapshots from the
    metadata only; it never deletes files, so the expired snapshots' manifest lists, manifests and
    data files stay on disk (they are unreferenced files afterwards);
  * no delete files are ever written (copy-on-write only): overwrite and delete rewrite data files.
Do not put OUTDIR under a folder whose name starts with "." (pyarrow treats it as hidden).
"""
import json
import os
import sys
import time

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo, LessThan
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

CONTENT_FILE = {0: "data", 1: "position_deletes", 2: "equality_deletes"}
CONTENT_MANIFEST = {0: "data", 1: "deletes"}
FAR_FUTURE_MS = 4102444800000  # 2100-01-01


def pause():
    """Keep the timestamps of consecutive commits apart."""
    time.sleep(0.005)


def rows(ids, category, value=1.0, note=None):
    cols = {
        "id": pa.array(ids, pa.int64()),
        "category": pa.array([category] * len(ids), pa.string()),
        "value": pa.array([value + i for i in ids], pa.float64()),
    }
    if note is not None:
        cols["note"] = pa.array([note] * len(ids), pa.string())
    return pa.table(cols)


def both(*tables):
    return pa.concat_tables(tables)


SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "category", StringType(), required=False),
    NestedField(3, "value", DoubleType(), required=False),
)


def make_events(cat):
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="category"))
    t = cat.create_table("db.events", schema=SCHEMA, partition_spec=spec, properties={"format-version": "2"})
    snap = {}

    def commit(label, fn):
        fn()
        pause()
        t.refresh()
        snap[label] = t.current_snapshot().snapshot_id

    commit("append1", lambda: t.append(both(rows([1, 2, 3], "a"), rows([4, 5], "b"))))
    commit("append2", lambda: t.append(both(rows([6, 7], "a"), rows([8], "c"))))
    # overwrite: replaces partition a (PyIceberg commits a delete snapshot and an append snapshot)
    commit("overwrite", lambda: t.overwrite(rows([10, 11], "a", 5.0), overwrite_filter=EqualTo("category", "a")))
    # copy-on-write delete with a filter that only partly covers a file: rewrites it
    commit("delete", lambda: t.delete(delete_filter=LessThan("id", 5)))
    with t.update_schema() as u:  # schema evolution
        u.add_column("note", StringType())
    pause()
    commit("append_note", lambda: t.append(rows([20, 21], "b", note="added after schema change")))
    with t.update_spec() as u:  # partition spec evolution
        # identity: every other transform needs the optional pyiceberg-core wheel to write data
        u.add_field("note", IdentityTransform(), "note")
    pause()
    commit("append_spec2", lambda: t.append(both(rows([30, 31, 32], "c", note="spec 1"), rows([33], "d", note="spec 1"))))
    commit("append_lost", lambda: t.append(rows([40, 41], "e", note="rolled back later")))
    commit("append_lost2", lambda: t.append(rows([42], "e", note="rolled back later")))

    t.manage_snapshots().create_tag(snap["append_note"], "audit-q2").commit()
    pause()
    t.manage_snapshots().create_branch(snap["append_spec2"], "dev").commit()
    pause()
    t.append(rows([50, 51], "dev", note="on branch dev"), branch="dev")  # branch write
    pause()
    t.delete(delete_filter=EqualTo("category", "b"), branch="dev")
    pause()

    # rollback of main to an ancestor, then a new commit on top of it
    t.manage_snapshots().rollback_to_snapshot(snap["append_spec2"]).commit()
    pause()
    commit("after_rollback", lambda: t.append(rows([60], "f", note="after rollback")))

    # expire: the first append (its child's parent id now names a missing snapshot) and one of the
    # rolled-back snapshots (append_lost stays, not an ancestor of main any more)
    t.maintenance.expire_snapshots().by_ids([snap["append1"], snap["append_lost2"]]).commit()
    pause()
    t.refresh()
    return t


def make_legacy(cat):
    t = cat.create_table("db.legacy", schema=SCHEMA, properties={"format-version": "1"})
    t.append(rows([1, 2], "a"))
    pause()
    t.append(rows([3, 4], "b"))
    pause()
    t.append(rows([5], "c"))
    pause()
    t.overwrite(rows([7, 8, 9], "z", 3.0), overwrite_filter=EqualTo("category", "b"))
    pause()
    t.refresh()
    return t


def make_empty(cat):
    return cat.create_table("db.empty", schema=SCHEMA, properties={"format-version": "2"})


def make_retention(cat):
    """A table whose own retention expires history after 1 ms, so that lakedrill's plan has candidates:
    appends, an overwrite, a delete, a tag on an old snapshot and a branch on another. The last append's
    file is rewritten by a second overwrite (same rows, corrected values), so the first version of that
    Parquet file is reachable only from the expiring append snapshot: the candidate holds a data file, and
    a purge deletes data, not only metadata (issue 18 point 5)."""
    t = cat.create_table(
        "db.retention",
        schema=SCHEMA,
        properties={
            "format-version": "2",
            "history.expire.max-snapshot-age-ms": "1",
            "history.expire.min-snapshots-to-keep": "1",
        },
    )
    ids = []
    for i in range(4):
        t.append(rows([i * 10 + j for j in range(4)], "abcd"[i]))
        pause()
        ids.append(t.current_snapshot().snapshot_id)
    t.overwrite(rows([100, 101], "a", 9.0), overwrite_filter=EqualTo("category", "a"))
    pause()
    t.delete(delete_filter=EqualTo("category", "b"))
    pause()
    t.append(rows([200, 201], "e"))
    pause()
    # every row of the file matches the filter: PyIceberg drops the whole file and appends its replacement
    t.overwrite(rows([200, 201], "e", 2.0), overwrite_filter=EqualTo("category", "e"))
    pause()
    t.manage_snapshots().create_tag(ids[1], "audit-q2").commit()
    pause()
    t.manage_snapshots().create_branch(ids[2], "what-if").commit()
    pause()
    t.refresh()
    return t


def make_many(cat):
    """32 small appends: enough snapshots to seal for a 30-item weekly drill."""
    t = cat.create_table("db.many", schema=SCHEMA, properties={"format-version": "2"})
    for i in range(32):
        t.append(rows([i * 10 + j for j in range(3)], "m"))
        pause()
    return t


def expected(t):
    md = t.metadata
    out = {
        "table": ".".join(t.name()),
        "metadata_location": t.metadata_location,
        "table_location": t.location(),
        "format_version": md.format_version,
        "table_uuid": str(md.table_uuid),
        "current_snapshot_id": md.current_snapshot_id,
    }

    # Snapshots: from the metadata objects (inspect.snapshots() lacks the sequence number).
    # For v1 tables PyIceberg reports sequence_number 0 (v1 metadata has none).
    # PyIceberg's expiry sets parent_id to null on the children of an expired snapshot (Java keeps the
    # dangling id), and removes the expired snapshots' snapshot-log entries.
    snaps = sorted(md.snapshots, key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
    out["snapshots"] = [
        {
            "snapshot_id": s.snapshot_id,
            "parent_id": s.parent_snapshot_id,
            "sequence_number": s.sequence_number,
            "timestamp_ms": s.timestamp_ms,
            "operation": s.summary.operation.value,
            "manifest_list": s.manifest_list,
            "summary": {k: str(v) for k, v in s.summary.additional_properties.items() if k != "operation"},
        }
        for s in snaps
    ]

    # Refs: inspect.refs() (names, types, retention); cross-checked against metadata.refs.
    refs = t.inspect.refs().to_pylist()
    out["refs"] = sorted(
        (
            {
                "name": r["name"],
                "type": r["type"].lower(),
                "snapshot_id": r["snapshot_id"],
                "max_ref_age_ms": r["max_reference_age_in_ms"],
                "max_snapshot_age_ms": r["max_snapshot_age_in_ms"],
                "min_snapshots_to_keep": r["min_snapshots_to_keep"],
            }
            for r in refs
        ),
        key=lambda r: r["name"],
    )
    assert {r["name"]: r["snapshot_id"] for r in out["refs"]} == {k: v.snapshot_id for k, v in md.refs.items()}

    # History: inspect.history(), in snapshot-log order; made_current_at is timestamp[ms] -> int ms.
    hist = t.inspect.history()
    hist = hist.set_column(0, "made_current_at", hist.column("made_current_at").cast(pa.int64()))
    out["history"] = [
        {
            "made_current_at_ms": h["made_current_at"],
            "snapshot_id": h["snapshot_id"],
            "parent_id": h["parent_id"],
            "is_current_ancestor": h["is_current_ancestor"],
        }
        for h in hist.to_pylist()
    ]
    assert [h["made_current_at_ms"] for h in out["history"]] == [e.timestamp_ms for e in md.snapshot_log]

    # Live files of every snapshot still in metadata: inspect.files(snapshot_id=...).
    files, row_counts = {}, {}
    for s in md.snapshots:
        f = t.inspect.files(snapshot_id=s.snapshot_id).select(
            ["content", "file_path", "file_size_in_bytes", "record_count", "spec_id"]
        )
        lst = [dict(r, content=CONTENT_FILE[r["content"]]) for r in f.to_pylist()]
        files[str(s.snapshot_id)] = sorted(lst, key=lambda r: r["file_path"])
        row_counts[str(s.snapshot_id)] = t.scan(snapshot_id=s.snapshot_id).to_arrow().num_rows
        # self-check: PyIceberg writes no delete files, so the scan must equal the data files' counts
        assert all(r["content"] == "data" for r in lst)
        assert row_counts[str(s.snapshot_id)] == sum(r["record_count"] for r in lst), s.snapshot_id
    out["files"] = files

    # Manifests per snapshot: inspect.manifests() covers only the current snapshot, so use
    # inspect.all_manifests() (one row per manifest per snapshot, keyed by reference_snapshot_id).
    # PyIceberg splits the counts into *_data_files_count / *_delete_files_count by content; one of
    # each pair is 0, so their sum is the manifest list's added/existing/deleted_files_count.
    manifests = {str(s.snapshot_id): [] for s in md.snapshots}
    for m in t.inspect.all_manifests().to_pylist():
        manifests[str(m["reference_snapshot_id"])].append(
            {
                "path": m["path"],
                "length": m["length"],
                "content": CONTENT_MANIFEST[m["content"]],
                "added_snapshot_id": m["added_snapshot_id"],
                "added_files_count": m["added_data_files_count"] + m["added_delete_files_count"],
                "existing_files_count": m["existing_data_files_count"] + m["existing_delete_files_count"],
                "deleted_files_count": m["deleted_data_files_count"] + m["deleted_delete_files_count"],
            }
        )
    out["manifests"] = {k: sorted(v, key=lambda m: m["path"]) for k, v in manifests.items()}

    # Time travel probes, answered by snapshot_as_of_timestamp (inclusive). An entry of the log whose
    # snapshot was expired answers null (PyIceberg returns snapshot_by_id(...) == None).
    log_ts = [e.timestamp_ms for e in md.snapshot_log]
    probes = {FAR_FUTURE_MS, (min(log_ts) if log_ts else md.last_updated_ms) - 86_400_000}
    for ts in log_ts:
        probes |= {ts - 1, ts, ts + 1}
    out["as_of"] = []
    for ts in sorted(probes):
        s = t.snapshot_as_of_timestamp(ts)
        out["as_of"].append({"timestamp_ms": ts, "snapshot_id": s.snapshot_id if s else None})
    out["row_counts"] = row_counts
    return out


def main():
    args = sys.argv[1:]
    only = None
    warehouse = None
    if len(args) >= 2 and args[0] == "--retention":
        only, args = "retention", args[1:]
        if len(args) == 3 and args[0] == "--warehouse":  # e.g. s3://bucket/prefix on the test S3 server
            warehouse, args = args[1], args[2:]
    if len(args) != 1:
        sys.exit("usage: make_tables.py [--retention [--warehouse URI]] OUTDIR")
    outdir = os.path.abspath(args[0])
    if any(p.startswith(".") for p in outdir.split(os.sep) if p):
        sys.exit(f"OUTDIR must not contain a hidden path component (pyarrow skips those): {outdir}")
    os.makedirs(os.path.join(outdir, "warehouse"), exist_ok=True)
    os.makedirs(os.path.join(outdir, "expected"), exist_ok=True)
    props = {}
    if warehouse and warehouse.startswith("s3://"):
        endpoint = os.environ["LAKEDRILL_TEST_S3_ENDPOINT"]
        props = {
            "s3.endpoint": endpoint,
            "s3.access-key-id": os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
            "s3.secret-access-key": os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
            "s3.region": os.environ.get("AWS_REGION", "us-east-1"),
        }
    cat = SqlCatalog(
        "pyfix", uri=f"sqlite:///{outdir}/catalog.db", warehouse=warehouse or f"file://{outdir}/warehouse", **props
    )
    cat.create_namespace("db")
    makers = (make_events, make_legacy, make_empty, make_many)
    if only == "retention":  # one isolated table, for tests that change it (quarantine, purge)
        makers = (make_retention,)
    for make in makers:
        t = make(cat)
        exp = expected(t)
        name = exp["table"]
        with open(os.path.join(outdir, "expected", f"{name}.json"), "w") as f:
            json.dump(exp, f, indent=1, sort_keys=False)
            f.write("\n")
        print(
            f"{name}: v{exp['format_version']} snapshots={len(exp['snapshots'])} refs={len(exp['refs'])}"
            f" history={len(exp['history'])} current={exp['current_snapshot_id']}"
            f" rows={exp['row_counts'].get(str(exp['current_snapshot_id']), 0)} metadata={exp['metadata_location']}"
        )


if __name__ == "__main__":
    main()
