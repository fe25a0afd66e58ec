#!/usr/bin/env python3
"""Create one Iceberg table through SeaweedFS's Iceberg REST catalog with PyIceberg, for the REST tests.

Usage: make_rest_table.py REST_URI S3_ENDPOINT TABLE_BUCKET OUT_JSON [FORMAT_VERSION [no-last-append]]

Creates the table bucket TABLE_BUCKET through the S3 Tables API (boto3 `s3tables`), then, through the REST
catalog (OAuth2 client credentials from AWS_ACCESS_KEY_ID:AWS_SECRET_ACCESS_KEY), the table `db.events` (format
FORMAT_VERSION, 2 unless given): three appends, a tag `audit` on the first, a branch `what-if` on the second, a
delete of one category, and a rollback of main to before the delete followed by another append (none with
`no-last-append`: the delete stays the table's last commit), so the delete's snapshot is no ancestor of any ref: an
expired snapshot for lakedrill's plan (with its manifest list, manifest and the data file it wrote).
Writes OUT_JSON with what PyIceberg sees: {"table", "warehouse", "location", "metadata_location", "snapshots",
"refs", "current_snapshot_id", "rows", "orphaned_snapshot_id", "orphaned_rows"}.
"""
import json
import os
import sys
import time

import boto3
import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType


def main():
    if len(sys.argv) not in (5, 6, 7):
        sys.exit("usage: make_rest_table.py REST_URI S3_ENDPOINT TABLE_BUCKET OUT_JSON [FORMAT_VERSION [no-last-append]]")
    rest, s3, bucket, out = sys.argv[1:5]
    version = sys.argv[5] if len(sys.argv) > 5 else "2"
    last_append = len(sys.argv) < 7 or sys.argv[6] != "no-last-append"
    key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    boto3.client(
        "s3tables", endpoint_url=s3, region_name="us-east-1", aws_access_key_id=key, aws_secret_access_key=secret
    ).create_table_bucket(name=bucket)
    cat = RestCatalog(
        "rest",
        **{
            "uri": rest,
            "credential": f"{key}:{secret}",
            "warehouse": bucket,
            "s3.endpoint": s3,
            "s3.access-key-id": key,
            "s3.secret-access-key": secret,
            "s3.region": "us-east-1",
        },
    )
    cat.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "category", StringType(), required=False),
        NestedField(3, "value", DoubleType(), required=False),
    )
    t = cat.create_table("db.events", schema=schema, properties={"format-version": version})

    def rows(ids, category):
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "category": pa.array([category] * len(ids)),
                "value": pa.array([float(i) for i in ids]),
            }
        )

    ids = []
    for i, c in enumerate("abc"):
        t.append(rows([i * 10 + j for j in range(3)], c))
        ids.append(t.current_snapshot().snapshot_id)
        time.sleep(0.01)
    t.manage_snapshots().create_tag(ids[0], "audit").commit()
    t.manage_snapshots().create_branch(ids[1], "what-if").commit()
    t.delete(delete_filter=EqualTo("category", "b"))
    orphaned = t.current_snapshot().snapshot_id
    orphaned_rows = t.scan().to_arrow().num_rows
    time.sleep(0.01)
    t.manage_snapshots().rollback_to_snapshot(ids[2]).commit()
    if last_append:
        t.append(rows([100, 101], "d"))
    t = cat.load_table("db.events")
    with open(out, "w") as f:
        json.dump(
            {
                "table": "db.events",
                "warehouse": bucket,
                "location": t.location(),
                "metadata_location": t.metadata_location,
                "snapshots": [s.snapshot_id for s in t.metadata.snapshots],
                "refs": {n: r.snapshot_id for n, r in t.metadata.refs.items()},
                "current_snapshot_id": t.metadata.current_snapshot_id,
                "rows": t.scan().to_arrow().num_rows,
                "orphaned_snapshot_id": orphaned,
                "orphaned_rows": orphaned_rows,
            },
            f,
            indent=1,
        )


if __name__ == "__main__":
    main()
