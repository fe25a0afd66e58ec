#!/usr/bin/env python3
"""Write Iceberg tables with Spark + Iceberg Java, and record what Iceberg Java's maintenance would remove.

Usage: python tests/gen/make_spark_tables.py OUT [--pyiceberg-catalog SQLITE_FILE --pyiceberg-warehouse DIR]

One local Spark session (local[2], offline: the Iceberg runtime jar from snowpark-connect-deps-iceberg and
Debian's sqlite-jdbc jar) writes:
  OUT/hadoop/db/v2_mor     v2, merge-on-read: inserts, MoR DELETE + UPDATE (position delete files), tag,
                           branch with its own retention and commits, rollback, INSERT OVERWRITE, a
                           statistics file (compute_table_stats) on an old snapshot, stray files
  OUT/hadoop/db/v2_cow40   v2, copy-on-write: 40 snapshots, manifest merging and rewrite_manifests
  OUT/hadoop/db/v3_dv      v3, merge-on-read: deletion vectors (Puffin), a DV replaced by a later delete,
                           one delete touching two data files; stray files
  OUT/hadoop/db/expired    v2: history already expired once with expire_snapshots
  OUT/jdbc/db/jdbc_v2      v2, JDBC catalog "jc" on SQLite OUT/jdbc_catalog.db, with a MoR delete
  OUT/jdbc/db/purge_v2, purge_v3, rollback_v3   v2 and v3 merge-on-read in "jc" (a tag, a branch, an
                           overwrite), listed under "purge_tables" with their row counts only: tests/it/engines.rs
                           purges the first two and rolls the third back
  OUT/oracle.json          the facts (see below)
With --pyiceberg-*, the PyIceberg tables db.events and db.legacy of tests/gen/make_tables.py (SqlCatalog "pyfix")
get the same oracle (catalog "pyiceberg-sql"): their current metadata files (read from PyIceberg's SQLite file,
which is never written) are registered in a JDBC catalog also named "pyfix" on OUT/pyfix_catalog.db.

oracle.json: {"generated_at_ms", "iceberg_java", "tables": [{name, catalog, identifier, table_root,
metadata_location, format_version, snapshot_row_counts {id: n}, ref_row_counts {ref: n},
expire_cases [{older_than_ms, retain_last, expired_snapshot_ids, removed_files, procedure_result}],
orphan_cases [{older_than_ms, orphan_files}]}]}. Paths in the cases are relative to table_root.

Each expire case: byte-exact backup of the table folder (and the SQLite catalog file), CALL expire_snapshots,
diff snapshot ids and files (Hadoop .crc sidecars ignored), restore, check the current metadata is back.
Orphan cases: CALL remove_orphan_files(..., dry_run => true) for cut-offs at least 2 days back (the procedure
refuses cut-offs within 24 hours), and for "now" Iceberg's DeleteOrphanFiles action (it deletes: run between a
backup and a restore of the table folder, like the expiries). Iceberg Java opens the absolute paths written
in the metadata, so everything runs on the tables where they were written, never on copies.
"""
import datetime
import json
import os
import pathlib
import shutil
import sqlite3
import sys
import time

T0 = time.time()
ICEBERG_JAVA = "1.9.2"
DAY_MS = 86400 * 1000


def log(msg):
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def jars():
    import snowpark_connect_deps_iceberg as p

    ice = pathlib.Path(p.__file__).parent / "jars" / f"iceberg-spark-runtime-3.5_2.12-{ICEBERG_JAVA}.jar"
    if not ice.is_file():
        sys.exit(f"missing {ice}")
    sq = None
    for c in ("/usr/share/java/sqlite-jdbc.jar", "/usr/share/java/xerial-sqlite-jdbc.jar"):
        if os.path.isfile(c):
            sq = c
            break
    if sq is None:
        sys.exit("missing /usr/share/java/sqlite-jdbc.jar (Debian libxerial-sqlite-jdbc-java)")
    return str(ice), sq


def session_builder(app, memory):
    """The local Spark session every Spark script of the project starts (this one and
    benches/engine_histories.py): Iceberg's runtime and sqlite-jdbc on the class path, Iceberg's SQL extensions, no
    UI. Many tiny queries: C1-only JIT, no adaptive planning and no whole-stage codegen cut ~15% of the run on a
    loaded 2-core machine (115 s against 133 s); they change nothing Iceberg writes. Callers add their catalogs."""
    ice_jar, sqlite_jar = jars()
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.jars", f"{ice_jar},{sqlite_jar}")
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.driver.memory", memory)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )


def strip_scheme(p):
    if p.startswith("file://"):
        return p[len("file://"):]
    if p.startswith("file:"):
        return p[len("file:"):]
    return p


def ts_literal(ms):
    d = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return "TIMESTAMP '" + d.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}'"


def now_ms():
    return int(time.time() * 1000)


class Tbl:
    """One table known to the oracle."""

    def __init__(self, name, catalog, spark_cat, ident, sqlite_file=None, catalog_name=None):
        self.name, self.catalog, self.spark_cat, self.ident = name, catalog, spark_cat, ident
        self.sqlite_file, self.catalog_name = sqlite_file, catalog_name
        self.root = None  # filled by metadata()
        self.strays = False

    @property
    def fq(self):
        return f"{self.spark_cat}.{self.ident}"

    def metadata_location(self):
        if self.sqlite_file is None:  # Hadoop catalog: version-hint.text names the current vN.metadata.json
            root = self.root or self.hadoop_root
            with open(os.path.join(root, "metadata", "version-hint.text")) as f:
                n = int(f.read().strip())
            return os.path.join(root, "metadata", f"v{n}.metadata.json")
        ns, tn = self.ident.rsplit(".", 1)
        c = sqlite3.connect(self.sqlite_file, timeout=60)
        try:
            (loc,) = c.execute(
                "SELECT metadata_location FROM iceberg_tables WHERE catalog_name=? AND table_namespace=? AND table_name=?",
                (self.catalog_name, ns, tn),
            ).fetchone()
        finally:
            c.close()
        return strip_scheme(loc)

    def catalog_row(self):
        """The catalog's row for the table (None for the Hadoop catalog)."""
        if self.sqlite_file is None:
            return None
        ns, tn = self.ident.rsplit(".", 1)
        c = sqlite3.connect(self.sqlite_file, timeout=60)
        try:
            return c.execute(
                "SELECT metadata_location, previous_metadata_location FROM iceberg_tables"
                " WHERE catalog_name=? AND table_namespace=? AND table_name=?",
                (self.catalog_name, ns, tn),
            ).fetchone()
        finally:
            c.close()

    def restore_catalog_row(self, row):
        """Put the catalog row back with an ordinary SQL update: replacing the SQLite file under the JDBC
        catalog's open connection is not seen reliably by that connection."""
        if self.sqlite_file is None:
            return
        ns, tn = self.ident.rsplit(".", 1)
        c = sqlite3.connect(self.sqlite_file, timeout=60)
        try:
            with c:
                c.execute(
                    "UPDATE iceberg_tables SET metadata_location=?, previous_metadata_location=?"
                    " WHERE catalog_name=? AND table_namespace=? AND table_name=?",
                    (row[0], row[1], self.catalog_name, ns, tn),
                )
        finally:
            c.close()

    def metadata(self):
        loc = self.metadata_location()
        with open(loc) as f:
            md = json.load(f)
        self.root = strip_scheme(md["location"]).rstrip("/")
        return loc, md


def walk(root):
    out = set()
    for d, _dirs, files in os.walk(root):
        for n in files:
            if n.startswith(".") and n.endswith(".crc"):
                continue
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit("usage: make_spark_tables.py OUT [--pyiceberg-catalog FILE --pyiceberg-warehouse DIR]")
    out = os.path.abspath(args[0])
    py_cat = py_wh = None
    rest = args[1:]
    while rest:
        if rest[0] == "--pyiceberg-catalog" and len(rest) >= 2:
            py_cat, rest = os.path.abspath(rest[1]), rest[2:]
        elif rest[0] == "--pyiceberg-warehouse" and len(rest) >= 2:
            py_wh, rest = os.path.abspath(rest[1]), rest[2:]
        else:
            sys.exit(f"unknown argument {rest[0]}")
    if (py_cat is None) != (py_wh is None):
        sys.exit("--pyiceberg-catalog and --pyiceberg-warehouse go together")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    jdbc_file = os.path.join(out, "jdbc_catalog.db")
    bak = os.path.join(out, "_backup")
    pyfix_file = os.path.join(out, "pyfix_catalog.db")

    b = (
        session_builder("lakedrill-spark-fixtures", "1g")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.sql.catalog.hc", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.hc.type", "hadoop")
        .config("spark.sql.catalog.hc.warehouse", os.path.join(out, "hadoop"))
        .config("spark.sql.catalog.hc.cache-enabled", "false")
        .config("spark.sql.catalog.jc", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.jc.type", "jdbc")
        .config("spark.sql.catalog.jc.uri", f"jdbc:sqlite:{jdbc_file}")
        .config("spark.sql.catalog.jc.warehouse", os.path.join(out, "jdbc"))
        .config("spark.sql.catalog.jc.jdbc.schema-version", "V1")
        .config("spark.sql.catalog.jc.cache-enabled", "false")
    )
    if py_cat:
        # Not PyIceberg's own SQLite file: on a catalog file it did not create, Iceberg's JDBC catalog keeps a
        # lock on it (seen with sqlite-jdbc 3.40), so a catalog row could not be put back after an expiry. The
        # PyIceberg tables are registered (register_table, their current metadata file) in a catalog file of
        # our own under the same catalog name; the table folders are the ones PyIceberg wrote.
        b = (
            b.config("spark.sql.catalog.pyfix", "org.apache.iceberg.spark.SparkCatalog")
            .config("spark.sql.catalog.pyfix.type", "jdbc")
            .config("spark.sql.catalog.pyfix.uri", f"jdbc:sqlite:{pyfix_file}")
            .config("spark.sql.catalog.pyfix.warehouse", "file://" + py_wh)
            .config("spark.sql.catalog.pyfix.jdbc.schema-version", "V1")
            .config("spark.sql.catalog.pyfix.cache-enabled", "false")
        )
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    log("spark session up")

    def sql(q):
        t = time.time()
        r = spark.sql(q).collect()
        if time.time() - t > 2:
            log(f"  slow ({time.time() - t:.1f}s): {q[:90]}")
        return r

    tables = []

    # ---------------------------------------------------------------- v2_mor
    sql("CREATE NAMESPACE IF NOT EXISTS hc.db")
    t = "hc.db.v2_mor"
    sql(
        f"CREATE TABLE {t} (id bigint, cat string, v double) USING iceberg PARTITIONED BY (cat) TBLPROPERTIES ("
        "'format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read',"
        "'write.merge.mode'='merge-on-read')"
    )
    vals = lambda ids, c: ", ".join(f"({i}, '{c}', {i}.5)" for i in ids)  # noqa: E731
    sql(f"INSERT INTO {t} VALUES {vals(range(1, 11), 'a')}, {vals(range(11, 16), 'b')}")  # s1
    sql(f"INSERT INTO {t} VALUES {vals(range(16, 26), 'b')}")  # s2
    s2 = sql(f"SELECT snapshot_id FROM {t}.snapshots ORDER BY committed_at DESC LIMIT 1")[0][0]
    sql(f"DELETE FROM {t} WHERE id IN (3, 12, 20)")  # s3: position deletes in a and b
    sql(f"ALTER TABLE {t} CREATE TAG `audit-s3`")
    sql(f"UPDATE {t} SET v = v + 100 WHERE id IN (5, 17)")  # s4: MoR update
    sql(f"INSERT INTO {t} VALUES {vals(range(26, 31), 'c')}")  # s5
    s5 = sql(f"SELECT snapshot_id FROM {t}.snapshots ORDER BY committed_at DESC LIMIT 1")[0][0]
    sql(f"ALTER TABLE {t} CREATE BRANCH b RETAIN 7 DAYS WITH SNAPSHOT RETENTION 2 SNAPSHOTS")
    sql(f"INSERT INTO {t}.branch_b VALUES {vals(range(100, 104), 'a')}")  # s6 on b
    sql(f"INSERT INTO {t}.branch_b VALUES {vals(range(104, 108), 'd')}")  # s7 on b
    sql(f"DELETE FROM {t}.branch_b WHERE id = 101")  # s8 on b
    sql(f"INSERT INTO {t} VALUES {vals(range(31, 36), 'c')}")  # s9 main (rolled back below)
    sql(f"CALL hc.system.rollback_to_snapshot(table => 'db.v2_mor', snapshot_id => {s5})")
    sql(f"INSERT OVERWRITE {t} VALUES {vals(range(200, 206), 'a')}")  # s10: dynamic overwrite of partition a
    sql(f"INSERT INTO {t} VALUES {vals(range(36, 40), 'c')}")  # s11
    sql(f"DELETE FROM {t} WHERE id = 37")  # s12
    try:  # a statistics file on an old snapshot: does expire remove it with the snapshot?
        sql(f"CALL hc.system.compute_table_stats(table => 'db.v2_mor', snapshot_id => {s2})")
    except Exception as e:  # noqa: BLE001
        log(f"compute_table_stats failed (no statistics file): {str(e)[:200]}")
    tables.append(Tbl("v2_mor", "hadoop", "hc", "db.v2_mor"))
    tables[-1].hadoop_root = os.path.join(out, "hadoop", "db", "v2_mor")
    tables[-1].strays = True
    log("v2_mor written")

    # ---------------------------------------------------------------- v2_cow40
    t = "hc.db.v2_cow40"
    sql(
        f"CREATE TABLE {t} (id bigint, cat string, v double) USING iceberg TBLPROPERTIES ("
        "'format-version'='2', 'write.delete.mode'='copy-on-write', 'write.update.mode'='copy-on-write',"
        "'commit.manifest.min-count-to-merge'='4', 'commit.manifest-merge.enabled'='true')"
    )
    n = 0
    for i in range(1, 41):
        if i in (10, 20, 30):
            sql(f"DELETE FROM {t} WHERE id % 7 = {i % 7}")  # CoW delete: rewrites data files
        elif i == 35:
            sql("CALL hc.system.rewrite_manifests(table => 'db.v2_cow40')")
        else:
            sql(f"INSERT INTO {t} VALUES {vals(range(n, n + 5), 'x' if i % 2 else 'y')}")
            n += 5
    while sql(f"SELECT count(*) FROM {t}.snapshots")[0][0] < 40:  # a no-op maintenance call commits nothing
        sql(f"INSERT INTO {t} VALUES {vals(range(n, n + 5), 'x')}")
        n += 5
    tables.append(Tbl("v2_cow40", "hadoop", "hc", "db.v2_cow40"))
    tables[-1].hadoop_root = os.path.join(out, "hadoop", "db", "v2_cow40")
    log("v2_cow40 written")

    # ---------------------------------------------------------------- v3_dv
    t = "hc.db.v3_dv"
    sql(
        f"CREATE TABLE {t} (id bigint, cat string, v double) USING iceberg TBLPROPERTIES ("
        "'format-version'='3', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read',"
        "'write.delete.distribution-mode'='none', 'write.update.distribution-mode'='none')"
    )
    spark.createDataFrame([(i, "a", i + 0.5) for i in range(1, 21)], "id bigint, cat string, v double").coalesce(
        1
    ).writeTo(t).append()  # s1: one data file
    spark.createDataFrame([(i, "b", i + 0.5) for i in range(21, 41)], "id bigint, cat string, v double").coalesce(
        1
    ).writeTo(t).append()  # s2: a second data file
    sql(f"DELETE FROM {t} WHERE id = 2")  # s3: DV on file 1
    sql(f"DELETE FROM {t} WHERE id = 3")  # s4: new DV on file 1 replaces the old one
    sql("SET spark.sql.shuffle.partitions=1")  # one writer task: one Puffin file with two blobs
    sql(f"DELETE FROM {t} WHERE id IN (4, 22)")  # s5: files 1 and 2 in one commit
    sql("SET spark.sql.shuffle.partitions=2")
    sql(f"UPDATE {t} SET v = -1 WHERE id IN (30, 31)")  # s6
    sql(f"INSERT INTO {t} VALUES {vals(range(41, 46), 'c')}")  # s7
    tables.append(Tbl("v3_dv", "hadoop", "hc", "db.v3_dv"))
    tables[-1].hadoop_root = os.path.join(out, "hadoop", "db", "v3_dv")
    tables[-1].strays = True
    dv = sql(f"SELECT file_path, referenced_data_file FROM {t}.delete_files")
    puffins = {r[0] for r in dv}
    on_disk = [f for f in walk(tables[-1].hadoop_root) if f.endswith(".puffin")]
    log(f"v3_dv written: live DVs={len(dv)} in {len(puffins)} Puffin files; Puffin files on disk: {len(on_disk)}")
    if not on_disk or not all(p.endswith(".puffin") for p in puffins):
        sys.exit("v3_dv: no deletion vectors (Puffin files) were written")

    # ---------------------------------------------------------------- expired
    t = "hc.db.expired"
    sql(f"CREATE TABLE {t} (id bigint, cat string, v double) USING iceberg TBLPROPERTIES ('format-version'='2')")
    for i in range(7):
        if i == 4:
            sql(f"DELETE FROM {t} WHERE id < 3")  # CoW (default) delete
        else:
            sql(f"INSERT INTO {t} VALUES {vals(range(i * 4, i * 4 + 4), 'e')}")
    snaps = sql(f"SELECT snapshot_id, committed_at FROM {t}.snapshots ORDER BY committed_at")
    cut = snaps[3][1]  # expire the first three snapshots
    cut_ms = int(cut.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
    r = sql(f"CALL hc.system.expire_snapshots(table => 'db.expired', older_than => {ts_literal(cut_ms)})")
    sql(f"INSERT INTO {t} VALUES {vals(range(100, 103), 'e')}")  # one more commit after the expiry
    tables.append(Tbl("expired", "hadoop", "hc", "db.expired"))
    tables[-1].hadoop_root = os.path.join(out, "hadoop", "db", "expired")
    log(f"expired written (expiry during generation: {r[0].asDict()})")

    # ---------------------------------------------------------------- jdbc_v2
    sql("CREATE NAMESPACE IF NOT EXISTS jc.db")
    t = "jc.db.jdbc_v2"
    sql(
        f"CREATE TABLE {t} (id bigint, cat string, v double) USING iceberg TBLPROPERTIES ("
        "'format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    sql(f"INSERT INTO {t} VALUES {vals(range(1, 11), 'j')}")
    sql(f"INSERT INTO {t} VALUES {vals(range(11, 21), 'k')}")
    sql(f"DELETE FROM {t} WHERE id IN (4, 15)")
    sql(f"INSERT INTO {t} VALUES {vals(range(21, 26), 'j')}")
    sql(f"DELETE FROM {t} WHERE id = 22")
    tables.append(Tbl("jdbc_v2", "jdbc", "jc", "db.jdbc_v2", sqlite_file=jdbc_file, catalog_name="jc"))
    log("jdbc_v2 written")

    # ---------------------------------------------------------------- purge_v2, purge_v3 (for lakedrill's purge)
    # Two tables only the purge test touches (it deletes their expired history through lakedrill, then Spark reads
    # every ref and retained snapshot): in the JDBC catalog, which lakedrill commits to. history.expire
    # .max-snapshot-age-ms = 1 s so that lakedrill's branch retention leaves history to expire.
    purge_tbls = []
    for name, fv in (("purge_v2", 2), ("purge_v3", 3), ("rollback_v3", 3)):
        t = f"jc.db.{name}"
        sql(
            f"CREATE TABLE {t} (id bigint, cat string, v double) USING iceberg TBLPROPERTIES ("
            f"'format-version'='{fv}', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read',"
            "'write.delete.distribution-mode'='none', 'history.expire.max-snapshot-age-ms'='1000')"
        )
        spark.createDataFrame([(i, "a", i + 0.5) for i in range(1, 21)], "id bigint, cat string, v double").coalesce(
            1
        ).writeTo(t).append()  # s1: file A
        sql(f"ALTER TABLE {t} CREATE TAG `kept-by-tag`")  # keeps s1 (file A)
        sql(f"ALTER TABLE {t} CREATE BRANCH dev")
        sql(f"INSERT INTO {t}.branch_dev VALUES {vals(range(100, 104), 'd')}")  # s2 on dev
        spark.createDataFrame([(i, "b", i + 0.5) for i in range(21, 31)], "id bigint, cat string, v double").coalesce(
            1
        ).writeTo(t).append()  # s3: file B, only main's history reaches it
        sql(f"DELETE FROM {t} WHERE id IN (2, 22)")  # s4: position deletes (v2) or deletion vectors (v3)
        sql(f"DELETE FROM {t} WHERE id IN (4, 23)")  # s5: more deletes (v3: the DVs are replaced)
        sql(f"INSERT OVERWRITE {t} SELECT * FROM {t} WHERE id <> 25")  # s6: rewrites every data file of main
        sql(f"INSERT INTO {t} VALUES {vals(range(31, 36), 'c')}")  # s7
        purge_tbls.append(Tbl(name, "jdbc", "jc", f"db.{name}", sqlite_file=jdbc_file, catalog_name="jc"))
    log("purge_v2, purge_v3, rollback_v3 written")

    # ---------------------------------------------------------------- PyIceberg tables
    if py_cat:
        c = sqlite3.connect(f"file:{py_cat}?mode=ro", uri=True)
        locs = dict(c.execute("SELECT table_name, metadata_location FROM iceberg_tables WHERE catalog_name='pyfix'"
                              " AND table_namespace='db'").fetchall())
        c.close()
        sql("CREATE NAMESPACE IF NOT EXISTS pyfix.db")
        for name in ("events", "legacy"):
            sql(f"CALL pyfix.system.register_table(table => 'db.{name}', metadata_file => '{locs[name]}')")
            tables.append(Tbl(name, "pyiceberg-sql", "pyfix", f"db.{name}", sqlite_file=pyfix_file, catalog_name="pyfix"))

    # ---------------------------------------------------------------- stray files
    now = time.time()
    for tb in tables:
        if not tb.strays:
            continue
        _, md = tb.metadata()
        root = tb.root
        some_data = sorted(f for f in walk(root) if f.startswith("data/") and f.endswith(".parquet"))[0]
        src = open(os.path.join(root, some_data), "rb").read()
        strays = {
            "data/stray-old-1.parquet": 10,
            "data/stray-old-2.parquet": 4,
            "data/stray-new.parquet": 0,
            "metadata/stray.avro": 4,
            "data/.hidden-stray": 10,
            "data/_tmp/stray.parquet": 10,
        }
        for rel, days in strays.items():
            p = os.path.join(root, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(src if rel.endswith(".parquet") else b"not an avro file\n")
            ts = now - days * 86400
            os.utime(p, (ts, ts))

    # ---------------------------------------------------------------- row counts (before any oracle procedure)
    records = []
    for tb in tables + purge_tbls:
        loc, md = tb.metadata()
        ids = [s["snapshot-id"] for s in md.get("snapshots", [])]
        counts = {}
        if ids:
            q = " UNION ALL ".join(
                f"SELECT CAST({i} AS BIGINT) AS sid, count(*) AS n FROM {tb.fq} VERSION AS OF {i}" for i in ids
            )
            counts = {str(r[0]): int(r[1]) for r in sql(q)}
        refs = {}
        for ref in sorted(md.get("refs", {})):
            refs[ref] = int(sql(f"SELECT count(*) FROM {tb.fq} VERSION AS OF '{ref}'")[0][0])
        if "main" not in refs:
            refs["main"] = int(sql(f"SELECT count(*) FROM {tb.fq}")[0][0])
        records.append(
            {
                "name": tb.name,
                "catalog": tb.catalog,
                "identifier": tb.ident,
                "table_root": tb.root,
                "metadata_location": loc,
                "format_version": md["format-version"],
                "snapshot_row_counts": counts,
                "ref_row_counts": refs,
                "expire_cases": [],
                "orphan_cases": [],
            }
        )
        log(f"{tb.name}: {len(counts)} snapshot counts")
    log("row counts read")

    # ---------------------------------------------------------------- expire cases
    def expire_case(tb, rec, older_than_ms, retain_last):
        loc0, md0 = tb.metadata()
        assert loc0 == rec["metadata_location"], (loc0, rec["metadata_location"])
        before = walk(tb.root)
        if os.path.exists(bak):
            shutil.rmtree(bak)
        os.makedirs(bak)
        shutil.copytree(tb.root, os.path.join(bak, "table"), copy_function=shutil.copy2)
        row0 = tb.catalog_row()
        q = f"CALL {tb.spark_cat}.system.expire_snapshots(table => '{tb.ident}', older_than => {ts_literal(older_than_ms)}"
        if retain_last is not None:
            q += f", retain_last => {retain_last}"
        res = sql(q + ")")[0].asDict()
        loc1, md1 = tb.metadata()
        after = walk(tb.root)
        old_ids = {s["snapshot-id"] for s in md0.get("snapshots", [])}
        new_ids = {s["snapshot-id"] for s in md1.get("snapshots", [])}
        case = {
            "older_than_ms": older_than_ms,
            "retain_last": retain_last,
            "expired_snapshot_ids": sorted(old_ids - new_ids),
            "removed_files": sorted(before - after),
            "procedure_result": {k: int(v) for k, v in res.items()},
        }
        # restore, byte-exact
        shutil.rmtree(tb.root)
        shutil.copytree(os.path.join(bak, "table"), tb.root, copy_function=shutil.copy2)
        tb.restore_catalog_row(row0)
        shutil.rmtree(bak)
        spark.sql(f"REFRESH TABLE {tb.fq}")
        loc2, _ = tb.metadata()
        if loc2 != loc0 or walk(tb.root) != before or tb.catalog_row() != row0:
            sys.exit(f"{tb.name}: restore failed ({loc2} != {loc0})")
        return case

    for tb, rec in zip(tables, records):
        _, md = tb.metadata()
        ts = sorted(s["timestamp-ms"] for s in md.get("snapshots", []))
        cases = []
        if len(ts) >= 2:
            k = max(1, len(ts) // 2)
            cases.append((ts[k - 1] + 1, None))  # the first k snapshots are old enough
        cases.append((now_ms(), 2))
        for older, keep in cases:
            rec["expire_cases"].append(expire_case(tb, rec, older, keep))
        # the table is unchanged: main still counts the same
        assert int(sql(f"SELECT count(*) FROM {tb.fq}")[0][0]) == rec["ref_row_counts"]["main"], tb.name
        log(f"{tb.name}: expire cases " + ", ".join(str(len(c["expired_snapshot_ids"])) for c in rec["expire_cases"]))

    # ---------------------------------------------------------------- orphan cases
    def orphans_now(tb, older):
        """remove_orphan_files refuses older_than within the last 24 hours, so the 'now' case runs Iceberg's
        DeleteOrphanFiles action (which deletes) on the table, between a byte-exact backup and restore."""
        before = walk(tb.root)
        if os.path.exists(bak):
            shutil.rmtree(bak)
        os.makedirs(bak)
        shutil.copytree(tb.root, os.path.join(bak, "table"), copy_function=shutil.copy2)
        jss, jvm = spark._jsparkSession, spark._jvm
        table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(jss, tb.fq)
        res = jvm.org.apache.iceberg.spark.actions.SparkActions.get(jss).deleteOrphanFiles(table).olderThan(older).execute()
        it = res.orphanFileLocations().iterator()
        locs = []
        while it.hasNext():
            locs.append(it.next())
        shutil.rmtree(tb.root)
        shutil.copytree(os.path.join(bak, "table"), tb.root, copy_function=shutil.copy2)
        shutil.rmtree(bak)
        if walk(tb.root) != before:
            sys.exit(f"{tb.name}: restore after the orphan action failed")
        return locs

    for tb, rec in zip(tables, records):
        t_now = now_ms()
        olders = [t_now - 7 * DAY_MS, t_now - 2 * DAY_MS] if tb.strays else [t_now - 2 * DAY_MS]
        for older in olders:
            rows = sql(
                f"CALL {tb.spark_cat}.system.remove_orphan_files(table => '{tb.ident}', "
                f"older_than => {ts_literal(older)}, dry_run => true)"
            )
            files = sorted(os.path.relpath(strip_scheme(r[0]), tb.root) for r in rows)
            rec["orphan_cases"].append({"older_than_ms": older, "orphan_files": files})
        t_now = now_ms()
        files = sorted(os.path.relpath(strip_scheme(x), tb.root) for x in orphans_now(tb, t_now))
        rec["orphan_cases"].append({"older_than_ms": t_now, "orphan_files": files})
        log(f"{tb.name}: orphan cases " + ", ".join(str(len(c["orphan_files"])) for c in rec["orphan_cases"]))

    # final check: nothing changed
    for tb, rec in zip(tables, records):
        loc, _ = tb.metadata()
        assert loc == rec["metadata_location"], tb.name

    purge_records = records[len(tables):]
    records = records[: len(tables)]
    for tb, rec in zip(purge_tbls, purge_records):
        rec["catalog_db"] = tb.sqlite_file
        rec["catalog_name"] = tb.catalog_name
    oracle = {
        "generated_at_ms": int(T0 * 1000),
        "iceberg_java": ICEBERG_JAVA,
        "tables": records,
        # Not oracle tables (no cases): written for tests/it/engines.rs, which purges them through lakedrill.
        "purge_tables": purge_records,
    }
    with open(os.path.join(out, "oracle.json"), "w") as f:
        json.dump(oracle, f, indent=1)
        f.write("\n")
    spark.stop()
    log(f"wrote {os.path.join(out, 'oracle.json')} ({len(records)} tables)")


if __name__ == "__main__":
    main()
