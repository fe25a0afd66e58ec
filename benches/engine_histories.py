#!/usr/bin/env python3
"""Long Iceberg histories written by PyIceberg and by Spark (Iceberg Java), for `lakedrill plan` benchmarks.

Run with the test venv (scripts/test.sh makes it): target/test-venv/bin/python benches/engine_histories.py ...

  write-pyiceberg ROOT --snapshots N --files-per-snapshot K [--name hist] [--mode append|add-files]
      SqlCatalog('bench', uri=sqlite:///ROOT/catalog.db, warehouse=file://ROOT/warehouse), table bench.NAME
      (v2, one column `id long`, location ROOT/warehouse/bench/NAME as benches/scale.rs makes it), written by N
      PyIceberg commits of K one-row Parquet data files each. --mode append (default, what users run, and
      as fast as the other: ~0.15 s per commit of 100 files): one `Table.append()` per snapshot of a pyarrow
      table of K one-row record batches, with table property write.target-file-size-bytes=1 so that PyIceberg
      writes one file per batch. --mode add-files: K one-row Parquet files written with pyarrow, then one
      `Table.add_files(K paths)` (PyIceberg reads each footer for the column statistics). Both are PyIceberg
      fast appends: one new manifest per snapshot, every earlier manifest carried into the new manifest list.
  write-spark ROOT --snapshots N --files-per-snapshot K [--name hist]
      The same table written by Spark 3.5 + Iceberg 1.9.2 (local[2]) through Iceberg's JDBC catalog on the
      same SQLite file layout (catalog name `bench`, jdbc.schema-version V1: the iceberg_tables table that
      PyIceberg's SqlCatalog and lakedrill's `sql` catalog read). Each snapshot is one DataFrame append
      (`writeTo(...).append()`) of K one-row partitions (K files), Spark's default merge append.
  pyiceberg-all-files ROOT TABLE
      Prints PyIceberg's inspect.all_files().num_rows (the baseline of benches/scale.rs bench c).
  spark-expire ROOT TABLE --older-than-ms T [--retain-last R] [--max-concurrent-deletes M] [--stream-results]
      Times `CALL x.system.expire_snapshots(...)` (Iceberg 1.9.2 has no dry run: its parameters are table,
      older_than, retain_last, max_concurrent_deletes, stream_results, snapshot_ids). The table's current
      metadata file is registered in a scratch JDBC catalog (ROOT/catalog.db is never written), the table
      folder is backed up with hard links first (Iceberg never rewrites a file in place) and put back
      afterwards. Prints one JSON line {jvm_start_s, register_s, procedure_s, result {...}, expired_snapshots}.
  config ROOT TABLE
      (Re)writes ROOT/lakedrill.toml and ROOT/policy-NAME.yaml as benches/scale.rs write_config/make_table
      do (the policy binds the table UUID; minSnapshotAge 1s). The write-* commands do this themselves.

1,000 snapshots x 100 files took 684 s with write-pyiceberg and 1,852 s with write-spark (plus ~6 s of session
start) on 2 cores shared with other work; 50 x 10 takes ~5 s and ~20 s.

Then, as bench c runs it:  cd ROOT && lakedrill --json -q plan --catalog bench --table bench.NAME
--policy policy-NAME.yaml
"""
import argparse
import datetime
import json
import os
import pathlib
import shutil
import sqlite3
import sys
import tempfile
import time



def log(msg):
    print(f"engine_histories: {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------- common


def table_names(table):
    ns, name = table.rsplit(".", 1) if "." in table else ("bench", table)
    return ns, name


def current_metadata(root, table):
    """(metadata_location, parsed metadata) of bench catalog row TABLE in ROOT/catalog.db."""
    ns, name = table_names(table)
    c = sqlite3.connect(f"file:{root}/catalog.db?mode=ro", uri=True)
    try:
        row = c.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name='bench' AND table_namespace=? "
            "AND table_name=?",
            (ns, name),
        ).fetchone()
    finally:
        c.close()
    if row is None:
        sys.exit(f"no table {table} in catalog 'bench' of {root}/catalog.db")
    loc = row[0]
    with open(strip_scheme(loc)) as f:
        return loc, json.load(f)


def strip_scheme(p):
    for s in ("file://", "file:"):
        if p.startswith(s):
            return p[len(s):]
    return p


def write_config(root, table):
    """As benches/scale.rs: write_config plus the policy make_table writes."""
    _, name = table_names(table)
    _, md = current_metadata(root, table)
    (pathlib.Path(root) / "lakedrill.toml").write_text(
        f'[catalog.bench]\ntype = "sql"\nuri = "sqlite:{root}/catalog.db"\nwarehouse = "file://{root}/warehouse"\n'
        f'[registry]\nuri = "sqlite:{root}/registry.db"\n'
    )
    (pathlib.Path(root) / f"policy-{name}.yaml").write_text(
        f"schema: lakehouseRetentionPolicy.v1\ntable: {name}/{md['table-uuid']}\nprotectedRefs: [main]\n"
        "minSnapshotAge: 1s\nmaxReaderLease: 14d\nmaxWriterDuration: 6h\nlegalHoldGeneration: 0\n"
        "orphanSafetyInterval: 12h\n"
    )


def fresh_root(root):
    root = os.path.abspath(root)
    if os.path.exists(os.path.join(root, "catalog.db")):
        sys.exit(f"{root}/catalog.db exists: give an empty or new ROOT")
    os.makedirs(os.path.join(root, "warehouse"), exist_ok=True)
    return root


def summary(root, table, started, kind, n, k):
    loc, md = current_metadata(root, table)
    out = {
        "writer": kind,
        "root": root,
        "table": table,
        "snapshots": len(md.get("snapshots", [])),
        "files_per_snapshot": k,
        "write_s": round(time.time() - started, 1),
        "metadata_location": loc,
        "table_uuid": md["table-uuid"],
    }
    print(json.dumps(out), flush=True)
    if out["snapshots"] != n:
        sys.exit(f"expected {n} snapshots, the table has {out['snapshots']}")


# ------------------------------------------------------------------------------------------- PyIceberg


def pyiceberg_catalog(root):
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")


def write_pyiceberg(a):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    root = fresh_root(a.root)
    table = f"bench.{a.name}"
    cat = pyiceberg_catalog(root)
    cat.create_namespace_if_not_exists("bench")
    location = f"file://{root}/warehouse/bench/{a.name}"
    props = {"format-version": "2"}
    if a.mode == "append":
        props["write.target-file-size-bytes"] = "1"  # one file per record batch
    t = cat.create_table(
        table, schema=Schema(NestedField(1, "id", LongType(), required=False)), location=location, properties=props
    )
    arrow_schema = pa.schema([pa.field("id", pa.int64(), nullable=True)])
    data_dir = f"{root}/warehouse/bench/{a.name}/data"
    os.makedirs(data_dir, exist_ok=True)
    started = time.time()
    for i in range(a.snapshots):
        ids = range(i * a.files_per_snapshot, (i + 1) * a.files_per_snapshot)
        if a.mode == "append":
            batches = [pa.record_batch([pa.array([j], pa.int64())], schema=arrow_schema) for j in ids]
            t.append(pa.Table.from_batches(batches, schema=arrow_schema))
        else:
            paths = []
            for j in ids:
                p = f"{data_dir}/s{i:05}-f{j % a.files_per_snapshot:04}.parquet"
                pq.write_table(pa.table({"id": pa.array([j], pa.int64())}, schema=arrow_schema), p)
                paths.append("file://" + p)
            t.add_files(paths, check_duplicate_files=False)
        if a.snapshots >= 10 and (i + 1) % (a.snapshots // 10) == 0:
            log(f"pyiceberg: {i + 1} of {a.snapshots} commits, {time.time() - started:.0f} s")
    write_config(root, table)
    summary(root, table, started, f"pyiceberg-{a.mode}", a.snapshots, a.files_per_snapshot)


def pyiceberg_all_files(a):
    root = os.path.abspath(a.root)
    t = pyiceberg_catalog(root).load_table(a.table)
    print(t.inspect.all_files().num_rows)


# ------------------------------------------------------------------------------------------- Spark


def spark_session(catalogs):
    """The project's local Spark session (tests/gen/make_spark_tables.py's `session_builder`); `catalogs` maps a
    Spark catalog name to (SQLite file, warehouse) of an Iceberg JDBC catalog."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "gen"))
    from make_spark_tables import session_builder

    b = session_builder("lakedrill-engine-histories", "2g")
    for name, (db, wh) in catalogs.items():
        b = (
            b.config(f"spark.sql.catalog.{name}", "org.apache.iceberg.spark.SparkCatalog")
            .config(f"spark.sql.catalog.{name}.type", "jdbc")
            .config(f"spark.sql.catalog.{name}.uri", f"jdbc:sqlite:{db}")
            .config(f"spark.sql.catalog.{name}.warehouse", wh)
            .config(f"spark.sql.catalog.{name}.jdbc.schema-version", "V1")
            .config(f"spark.sql.catalog.{name}.cache-enabled", "false")
        )
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def write_spark(a):
    root = fresh_root(a.root)
    table = f"bench.{a.name}"
    t0 = time.time()
    spark = spark_session({"bench": (f"{root}/catalog.db", f"file://{root}/warehouse")})
    log(f"spark: session up in {time.time() - t0:.1f} s")
    fq = f"bench.bench.{a.name}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS bench.bench").collect()
    spark.sql(
        f"CREATE TABLE {fq} (id bigint) USING iceberg LOCATION 'file://{root}/warehouse/bench/{a.name}' "
        "TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none')"
    ).collect()
    k = a.files_per_snapshot
    started = time.time()
    for i in range(a.snapshots):
        # K partitions of one row each: one Parquet file per task, K files per commit.
        spark.range(i * k, (i + 1) * k, 1, k).writeTo(fq).append()
        if a.snapshots >= 10 and (i + 1) % (a.snapshots // 10) == 0:
            log(f"spark: {i + 1} of {a.snapshots} commits, {time.time() - started:.0f} s")
    spark.stop()
    write_config(root, table)
    summary(root, table, started, "spark", a.snapshots, k)


def ts_literal(ms):
    d = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return "TIMESTAMP '" + d.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}'"


def spark_expire(a):
    root = os.path.abspath(a.root)
    loc, md0 = current_metadata(root, a.table)
    table_root = strip_scheme(md0["location"]).rstrip("/")
    scratch = tempfile.mkdtemp(prefix="expire-", dir=root)
    backup = os.path.join(scratch, "table")
    # Hard links: the procedure only deletes files and writes new ones, never rewrites one in place.
    t = time.time()
    shutil.copytree(table_root, backup, copy_function=os.link)
    backup_s = time.time() - t
    out = {"table": a.table, "older_than_ms": a.older_than_ms, "retain_last": a.retain_last}
    try:
        t = time.time()
        spark = spark_session({"x": (os.path.join(scratch, "catalog.db"), f"file://{scratch}/warehouse")})
        out["jvm_start_s"] = round(time.time() - t, 2)
        ns, name = table_names(a.table)
        t = time.time()
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS x.{ns}").collect()
        spark.sql(f"CALL x.system.register_table(table => '{ns}.{name}', metadata_file => '{loc}')").collect()
        out["register_s"] = round(time.time() - t, 2)
        q = f"CALL x.system.expire_snapshots(table => '{ns}.{name}', older_than => {ts_literal(a.older_than_ms)}"
        if a.retain_last is not None:
            q += f", retain_last => {a.retain_last}"
        if a.max_concurrent_deletes is not None:
            q += f", max_concurrent_deletes => {a.max_concurrent_deletes}"
        if a.stream_results:
            q += ", stream_results => true"
        q += ")"
        t = time.time()
        row = spark.sql(q).collect()[0].asDict()
        out["procedure_s"] = round(time.time() - t, 2)
        out["result"] = {k: int(v) for k, v in row.items()}
        out["deleted_data_files"] = out["result"].get("deleted_data_files_count")
        c = sqlite3.connect(os.path.join(scratch, "catalog.db"))
        (loc1,) = c.execute("SELECT metadata_location FROM iceberg_tables WHERE table_name=?", (name,)).fetchone()
        c.close()
        with open(strip_scheme(loc1)) as f:
            md1 = json.load(f)
        out["expired_snapshots"] = len(md0.get("snapshots", [])) - len(md1.get("snapshots", []))
        spark.stop()
    finally:
        t = time.time()
        shutil.rmtree(table_root)
        os.rename(backup, table_root)
        shutil.rmtree(scratch)
        out["backup_restore_s"] = round(backup_s + time.time() - t, 2)
    loc2, _ = current_metadata(root, a.table)
    assert loc2 == loc, "ROOT/catalog.db changed"
    print(json.dumps(out), flush=True)


# ------------------------------------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for cmd in ("write-pyiceberg", "write-spark"):
        w = sub.add_parser(cmd)
        w.add_argument("root")
        w.add_argument("--snapshots", type=int, required=True)
        w.add_argument("--files-per-snapshot", type=int, required=True)
        w.add_argument("--name", default="hist")
        if cmd == "write-pyiceberg":
            w.add_argument("--mode", choices=("append", "add-files"), default="append")
    f = sub.add_parser("pyiceberg-all-files")
    f.add_argument("root")
    f.add_argument("table")
    e = sub.add_parser("spark-expire")
    e.add_argument("root")
    e.add_argument("table")
    e.add_argument("--older-than-ms", type=int, required=True)
    e.add_argument("--retain-last", type=int)
    e.add_argument("--max-concurrent-deletes", type=int)
    e.add_argument("--stream-results", action="store_true")
    c = sub.add_parser("config")
    c.add_argument("root")
    c.add_argument("table")
    a = p.parse_args()
    if a.cmd == "write-pyiceberg":
        write_pyiceberg(a)
    elif a.cmd == "write-spark":
        write_spark(a)
    elif a.cmd == "pyiceberg-all-files":
        pyiceberg_all_files(a)
    elif a.cmd == "spark-expire":
        spark_expire(a)
    elif a.cmd == "config":
        write_config(os.path.abspath(a.root), a.table)


if __name__ == "__main__":
    main()
