#!/usr/bin/env python3
"""Second and third readers for the tests: Iceberg Java (through Spark) and DuckDB, as a local HTTP service.

Usage: python tests/gen/engine_reader.py PORT_FILE

Starts one Spark session (local[2], offline, the Iceberg 1.9.2 runtime jar of snowpark-connect-deps-iceberg)
and one DuckDB connection (the iceberg and avro extensions LOADed from their wheels, no download), binds
127.0.0.1 on a free port, writes the port to PORT_FILE once both engines are ready, and serves until killed.
scripts/test.sh starts it once per run, so the tests pay for one JVM start, not one per read.

POST /counts with JSON {"metadata_location": "/abs/…/vN.metadata.json", "snapshot_ids": [..], "refs": [..],
"engines": ["spark", "duckdb"]} answers {"spark": {"snapshots": {"<id>": n}, "refs": {"<name>": n}},
"duckdb": {"snapshots": {...}}}: count(*) of each snapshot (and, for Spark, of each branch or tag), read the
way each engine reads a table from its metadata file: Spark through Iceberg's HadoopTables (a static table
on that file), DuckDB through iceberg_scan(..., snapshot_from_id => id). Deletes (position, equality,
deletion vectors) are applied by the engine. A read that fails answers {"error": "..."} with status 500,
naming the engine, the table and the snapshot; the test fails on it.
"""
import json
import os
import pathlib
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

ICEBERG_JAVA = "1.9.2"


def spark_session():
    import snowpark_connect_deps_iceberg as p
    from pyspark.sql import SparkSession

    jar = pathlib.Path(p.__file__).parent / "jars" / f"iceberg-spark-runtime-3.5_2.12-{ICEBERG_JAVA}.jar"
    if not jar.is_file():
        sys.exit(f"engine_reader: missing {jar}")
    return (
        SparkSession.builder.master("local[2]")
        .appName("lakedrill-engine-reader")
        .config("spark.jars", str(jar))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        # Iceberg's Spark source reads a path with time-travel options through this catalog name.
        .config("spark.sql.catalog.default_iceberg", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.default_iceberg.type", "hadoop")
        .config("spark.sql.catalog.default_iceberg.warehouse", "/nonexistent-lakedrill-reader-warehouse")
        .config("spark.sql.catalog.default_iceberg.cache-enabled", "false")
        .getOrCreate()
    )


def duckdb_connection():
    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_iceberg

    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for mod, name in ((duckdb_extension_avro, "avro"), (duckdb_extension_iceberg, "iceberg")):
        files = list(pathlib.Path(mod.__file__).parent.glob(f"extensions/*/{name}.duckdb_extension"))
        if len(files) != 1:
            sys.exit(f"engine_reader: expected one {name}.duckdb_extension in {mod.__file__}, found {files}")
        con.execute(f"LOAD '{files[0]}'")
    return con


class Engines:
    def __init__(self):
        self.spark = spark_session()
        self.duck = duckdb_connection()

    def spark_counts(self, md, snapshot_ids, refs):
        out = {"snapshots": {}, "refs": {}}
        for sid in snapshot_ids:
            df = self.spark.read.format("iceberg").option("snapshot-id", str(sid)).load(md)
            out["snapshots"][str(sid)] = df.count()
        for ref in refs:
            # Spark reads a ref as a branch or a tag by name; Iceberg resolves either from the metadata.
            try:
                df = self.spark.read.format("iceberg").option("branch", ref).load(md)
                out["refs"][ref] = df.count()
            except Exception:  # noqa: BLE001 - a tag is not a branch: read it as a tag
                df = self.spark.read.format("iceberg").option("tag", ref).load(md)
                out["refs"][ref] = df.count()
        return out

    def duckdb_counts(self, md, snapshot_ids):
        out = {"snapshots": {}}
        for sid in snapshot_ids:
            q = "SELECT count(*) FROM iceberg_scan(?, snapshot_from_id => ?)"
            out["snapshots"][str(sid)] = self.duck.execute(q, [md, int(sid)]).fetchone()[0]
        return out

    def counts(self, req):
        md = req["metadata_location"]
        sids = [int(s) for s in req.get("snapshot_ids", [])]
        refs = list(req.get("refs", []))
        out = {}
        for engine in req.get("engines", ["spark", "duckdb"]):
            try:
                if engine == "spark":
                    out["spark"] = self.spark_counts(md, sids, refs)
                elif engine == "duckdb":
                    out["duckdb"] = self.duckdb_counts(md, sids)
                else:
                    raise ValueError(f"unknown engine {engine!r}")
            except Exception as e:  # noqa: BLE001 - reported to the test, which fails
                java = getattr(e, "java_exception", None)
                msg = java.toString() if java is not None else (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise RuntimeError(f"{engine} could not read {md}: {msg}") from e
        return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    port_file = pathlib.Path(sys.argv[1])
    engines = Engines()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):  # quiet: the test script keeps a log of errors only
            pass

        def do_GET(self):
            self.send_response(200 if self.path == "/ready" else 404)
            self.end_headers()

        def do_POST(self):
            if self.path != "/counts":
                self.send_response(404)
                self.end_headers()
                return
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                body, status = json.dumps(engines.counts(req)), 200
            except Exception as e:  # noqa: BLE001
                body, status = json.dumps({"error": str(e)}), 500
                print(f"engine_reader: {e}", file=sys.stderr, flush=True)
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    # One thread: PySpark pins each Python thread to its own JVM thread, and the session is active on this one.
    server = HTTPServer(("127.0.0.1", 0), Handler)
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(server.server_address[1]))
    os.replace(tmp, port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
