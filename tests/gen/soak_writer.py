#!/usr/bin/env python3
"""The churn soak's writer (tests/it/soak.rs): commits to one PyIceberg table continuously while lakedrill
plans, quarantines, drills and purges it.

Usage: python tests/gen/soak_writer.py --catalog-db PATH --warehouse URI --table NS.NAME --expected FILE
                                       --log FILE --stop FILE [--max-seconds N] [--seed N]
                                       [--gap-min S] [--gap-max S] [--burst-max N] [--pause-min S] [--pause-max S]

It commits in bursts of 1..--burst-max commits, --gap-min..--gap-max seconds apart, with a pause of
--pause-min..--pause-max seconds between bursts (a micro-batch job). Each commit is one of:
  append        a few rows on main;
  branch-append a few rows on the branch `what-if`;
  delete        one row of main by id, mostly one the writer appended (PyIceberg 0.12 is copy-on-write: it
                rewrites or drops a data file);
  overwrite     the rows of one category of main (mostly the category of a row the writer appended) replaced
                by new ones (a delete and an append snapshot);
  compact       every row of main rewritten into one data file (an overwrite with no filter), whenever main
                has more than 8 data files: the history it leaves behind is what lakedrill can reclaim;
  tag-move      the tag `audit-q2` moved to a random snapshot of the table, or a `soak-N` tag created (at most
                two are kept, the older one removed);
  branch-move   the branch `what-if` moved to a random snapshot this writer made (whose rows it knows).
The first six commits are one of each kind but compact, in that order. It stops when the --stop file exists or
after --max-seconds.

The log (--log) gets one JSON line per attempt: {seq, t, op, ok, new_snapshots[] {snapshot_id, operation, ref,
rows, rows_from}, refs {name: snapshot_id} (every ref but lakedrill's `quarantine/…` tags, after the commit),
error}. `rows` is the row count of that snapshot when it was committed: for the last snapshot of a commit, the
writer's own model of the rows (which must equal the snapshot summary's `total-records`, and a scan of the new
snapshot right after the commit); for the delete step of an overwrite, the summary's `total-records`. The first
lines (op `initial`) record the snapshots the table already had, with the row counts tests/gen/make_tables.py
recorded for them (--expected, its expected/<table>.json).

A commit that loses to another writer (lakedrill's quarantine or purge commit: CommitFailedException), a ref move
to a snapshot a purge removed meanwhile (ValueError "unknown snapshot") and a locked SQLite catalog are logged
with ok=false and the writer goes on. Anything else — a data file missing under a snapshot the table keeps, a
model that disagrees with what PyIceberg reads — is logged and the writer exits 1. The last stdout line is a
JSON summary {commits, failed {kind: n}, ops {op: n}, snapshots}.
"""
import argparse
import json
import os
import random
import sys
import time
import traceback

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.expressions import AlwaysTrue, EqualTo

BRANCH = "what-if"
TAG = "audit-q2"
CATEGORIES = "abcde"
MAX_MAIN_FILES = 8
FIRST_ID = 1_000_000  # the ids of the rows this writer appends start here
# The first commits are one of each kind, so that even a short soak has them all.
FIRST = ["append", "delete", "overwrite", "tag-move", "branch-move", "branch-append"]


class ModelMismatch(Exception):
    """What PyIceberg reads disagrees with the rows the writer committed."""


def arrow(rows):
    """rows: {id: category} -> an Arrow table in the fixture schema (id, category, value)."""
    ids = sorted(rows)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "category": pa.array([rows[i] for i in ids], pa.string()),
            "value": pa.array([i * 0.5 for i in ids], pa.float64()),
        }
    )


def read_rows(table, snapshot_id):
    got = table.scan(snapshot_id=snapshot_id, selected_fields=("id", "category")).to_arrow()
    return dict(zip(got.column("id").to_pylist(), got.column("category").to_pylist()))


def own_refs(md):
    return {k: v.snapshot_id for k, v in sorted(md.refs.items()) if not k.startswith("quarantine/")}


class Writer:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.catalog = SqlCatalog("pyfix", uri=f"sqlite:///{args.catalog_db}", warehouse=args.warehouse)
        self.table = self.catalog.load_table(args.table)
        self.log = open(args.log, "a", buffering=1)
        self.seq = 0
        self.next_id = FIRST_ID
        self.soak_tags = []
        self.tag_counter = 0
        self.failed = {}
        self.ops = {}
        self.commits = 0
        # Rows of every snapshot whose rows the writer knows: {snapshot_id: {id: category}}.
        self.known = {}

    def write(self, entry):
        self.seq += 1
        entry = {"seq": self.seq, "t": time.time(), **entry}
        self.log.write(json.dumps(entry, sort_keys=True) + "\n")

    def initial(self):
        with open(self.args.expected) as f:
            counts = json.load(f)["row_counts"]
        md = self.table.metadata
        snaps = []
        for s in md.snapshots:
            snaps.append(
                {
                    "snapshot_id": s.snapshot_id,
                    "operation": s.summary.operation.value,
                    "ref": None,
                    "rows": counts[str(s.snapshot_id)],
                    "rows_from": "make_tables",
                }
            )
        # The rows of the heads the writer builds on (read once, then modelled).
        for ref in ("main", BRANCH):
            sid = md.refs[ref].snapshot_id
            self.known[sid] = read_rows(self.table, sid)
            if len(self.known[sid]) != counts[str(sid)]:
                raise ModelMismatch(f"{ref} head {sid}: {len(self.known[sid])} rows, make_tables recorded {counts[str(sid)]}")
        self.write({"op": "initial", "ok": True, "new_snapshots": snaps, "refs": own_refs(md), "error": None})

    def head(self, ref):
        return self.table.metadata.refs[ref].snapshot_id

    def new_rows(self, n, category=None):
        out = {}
        for _ in range(n):
            out[self.next_id] = category or self.rng.choice(CATEGORIES)
            self.next_id += 1
        return out

    def commit_data(self, op, ref, fn, expected):
        """Runs one data commit on `ref`; `expected` are the rows its last snapshot must hold."""
        before = {s.snapshot_id for s in self.table.metadata.snapshots}
        fn()
        md = self.table.metadata
        new = sorted((s for s in md.snapshots if s.snapshot_id not in before), key=lambda s: s.sequence_number)
        if not new:
            raise ModelMismatch(f"{op} on {ref} made no snapshot")
        last = new[-1]
        if self.head(ref) != last.snapshot_id:
            raise ModelMismatch(f"{op}: {ref} is at {self.head(ref)}, not at the new snapshot {last.snapshot_id}")
        summary_rows = int(last.summary["total-records"])
        if summary_rows != len(expected):
            raise ModelMismatch(f"{op} on {ref}: snapshot {last.snapshot_id} summary says {summary_rows} rows, model {len(expected)}")
        read = read_rows(self.table, last.snapshot_id)
        if read != expected:
            raise ModelMismatch(f"{op} on {ref}: a scan of {last.snapshot_id} gives {len(read)} rows, model {len(expected)}")
        self.known[last.snapshot_id] = dict(expected)
        snaps = [
            {
                "snapshot_id": s.snapshot_id,
                "operation": s.summary.operation.value,
                "ref": ref,
                "rows": int(s.summary["total-records"]),
                "rows_from": "summary",
            }
            for s in new[:-1]
        ]
        snaps.append(
            {"snapshot_id": last.snapshot_id, "operation": last.summary.operation.value, "ref": ref, "rows": len(expected), "rows_from": "model"}
        )
        return snaps

    def data_files(self, ref):
        return len(self.table.inspect.files(snapshot_id=self.head(ref)))

    def step(self):
        t = self.table
        main = dict(self.known[self.head("main")])
        if self.data_files("main") > MAX_MAIN_FILES:
            op = "compact"
        elif self.commits < len(FIRST):
            op = FIRST[self.commits]
        else:
            op = self.rng.choices(
                ["append", "branch-append", "delete", "overwrite", "tag-move", "branch-move"],
                weights=[25, 5, 30, 20, 12, 8],
            )[0]
        refs_moved = None
        if op == "append":
            rows = self.new_rows(self.rng.randint(1, 4))
            snaps = self.commit_data(op, "main", lambda: t.append(arrow(rows)), {**main, **rows})
        elif op == "branch-append":
            base = dict(self.known[self.head(BRANCH)])
            rows = self.new_rows(self.rng.randint(1, 3))
            snaps = self.commit_data(op, BRANCH, lambda: t.append(arrow(rows), branch=BRANCH), {**base, **rows})
        elif op == "delete":
            if len(main) < 3:
                return self.step_append_instead(main)
            # Mostly one of the writer's own rows: the tables' first rows sit in data files the DR checkpoint
            # keeps for good, so deleting them reclaims nothing.
            own = sorted(k for k in main if k >= FIRST_ID)
            victim = self.rng.choice(own if own and self.rng.random() < 0.8 else sorted(main))
            after = {k: v for k, v in main.items() if k != victim}
            snaps = self.commit_data(op, "main", lambda: t.delete(EqualTo("id", victim)), after)
        elif op == "overwrite":
            own = sorted(v for k, v in main.items() if k >= FIRST_ID)
            category = self.rng.choice(own or sorted(set(main.values())) or list(CATEGORIES))
            rows = self.new_rows(self.rng.randint(1, 3), category)
            after = {**{k: v for k, v in main.items() if v != category}, **rows}
            snaps = self.commit_data(
                op, "main", lambda: t.overwrite(arrow(rows), overwrite_filter=EqualTo("category", category)), after
            )
        elif op == "compact":
            snaps = self.commit_data(op, "main", lambda: t.overwrite(arrow(main), overwrite_filter=AlwaysTrue()), main)
        elif op == "tag-move":
            target = self.rng.choice(t.metadata.snapshots).snapshot_id
            if self.rng.random() < 0.7:
                t.manage_snapshots().create_tag(target, TAG).commit()
                refs_moved = {TAG: target}
            else:
                self.tag_counter += 1
                name = f"soak-{self.tag_counter}"
                ms = t.manage_snapshots().create_tag(target, name)
                if len(self.soak_tags) >= 2:
                    ms = ms.remove_tag(self.soak_tags[0])
                ms.commit()
                if len(self.soak_tags) >= 2:
                    self.soak_tags.pop(0)
                self.soak_tags.append(name)
                refs_moved = {name: target}
            snaps = []
        else:  # branch-move
            present = {s.snapshot_id for s in t.metadata.snapshots}
            targets = sorted(s for s in self.known if s in present)
            target = self.rng.choice(targets)
            t.manage_snapshots().create_branch(target, BRANCH).commit()
            refs_moved = {BRANCH: target}
            snaps = []
        for name, target in (refs_moved or {}).items():
            if own_refs(t.metadata).get(name) != target:
                raise ModelMismatch(f"{op}: {name} is at {own_refs(t.metadata).get(name)}, not {target}")
        self.commits += 1
        self.ops[op] = self.ops.get(op, 0) + 1
        self.write({"op": op, "ok": True, "new_snapshots": snaps, "moved": refs_moved, "refs": own_refs(t.metadata), "error": None})

    def step_append_instead(self, main):
        rows = self.new_rows(3)
        snaps = self.commit_data("append", "main", lambda: self.table.append(arrow(rows)), {**main, **rows})
        self.commits += 1
        self.ops["append"] = self.ops.get("append", 0) + 1
        self.write({"op": "append", "ok": True, "new_snapshots": snaps, "refs": own_refs(self.table.metadata), "error": None})

    def fail(self, kind, e):
        self.failed[kind] = self.failed.get(kind, 0) + 1
        self.write({"op": "failed", "ok": False, "kind": kind, "new_snapshots": [], "error": f"{type(e).__name__}: {e}"})

    def run(self):
        self.initial()
        deadline = time.time() + self.args.max_seconds
        burst_left = 0
        while not os.path.exists(self.args.stop) and time.time() < deadline:
            if burst_left == 0:
                burst_left = self.rng.randint(1, self.args.burst_max)
                time.sleep(self.rng.uniform(self.args.pause_min, self.args.pause_max))
            else:
                time.sleep(self.rng.uniform(self.args.gap_min, self.args.gap_max))
            burst_left -= 1
            if os.path.exists(self.args.stop):
                break
            try:
                self.table.refresh()
                self.step()
            except CommitFailedException as e:
                self.fail("conflict", e)
            except ValueError as e:
                if "unknown snapshot" not in str(e):
                    raise
                self.fail("target-gone", e)
            except Exception as e:  # sqlalchemy's OperationalError: a locked SQLite catalog
                if type(e).__name__ != "OperationalError" or "locked" not in str(e):
                    raise
                self.fail("locked", e)
        print(
            json.dumps(
                {"commits": self.commits, "failed": self.failed, "ops": self.ops, "snapshots": len(self.known)}, sort_keys=True
            )
        )


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--catalog-db", required=True)
    p.add_argument("--warehouse", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--expected", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--stop", required=True)
    p.add_argument("--max-seconds", type=float, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gap-min", type=float, default=0.5)
    p.add_argument("--gap-max", type=float, default=3.0)
    p.add_argument("--burst-max", type=int, default=1)
    p.add_argument("--pause-min", type=float, default=0.5)
    p.add_argument("--pause-max", type=float, default=3.0)
    w = Writer(p.parse_args())
    try:
        w.run()
    except Exception as e:
        w.write({"op": "error", "ok": False, "new_snapshots": [], "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        traceback.print_exc()
        sys.exit(1)


if __name__ == "__main__":
    main()
