#!/usr/bin/env python3
"""Verify a lakedrill DSSE report with only the public key: verify_report.py REPORT PUBKEY_PEM

Needs only the `cryptography` package. Exit 0 and "OK keyid=... predicateType=..." when the envelope
carries a valid ed25519 signature by that key over DSSE's PAE and an in-toto v1 Statement; else exit 1.
"""
import base64, binascii, hashlib, json, sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_public_key


def verify(report_path, pem_path):
    with open(pem_path, "rb") as f:
        key = load_pem_public_key(f.read())
    if not isinstance(key, Ed25519PublicKey):
        return "public key is not ed25519"
    keyid = hashlib.sha256(key.public_bytes(Encoding.Raw, PublicFormat.Raw)).hexdigest()
    with open(report_path, "rb") as f:
        env = json.load(f)
    ptype = env["payloadType"]
    if ptype != "application/vnd.in-toto+json":
        return f"unexpected payloadType {ptype!r}"
    body = base64.b64decode(env["payload"], validate=True)
    t = ptype.encode()
    pae = b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)
    sigs = [s for s in env.get("signatures") or [] if s.get("keyid") == keyid]
    if not sigs:
        return f"no signature with keyid {keyid}"
    try:
        key.verify(base64.b64decode(sigs[0]["sig"], validate=True), pae)
    except InvalidSignature:
        return f"signature by keyid {keyid} does not verify"
    stmt = json.loads(body)
    if not isinstance(stmt, dict) or stmt.get("_type") != "https://in-toto.io/Statement/v1":
        return "payload is not an in-toto Statement v1"
    member = (stmt.get("predicate") or {}).get("inventory_member")
    if stmt.get("predicateType") == "https://lakedrill.dev/bundle/v1" and member is not None:
        err = check_inventory_member(report_path, stmt, member)
        if err:
            return err
    print(f"OK keyid={keyid} predicateType={stmt.get('predicateType')}")


def check_inventory_member(report_path, stmt, member):
    """A bundle's inventory member (inventory.jsonl beside the envelope) against the signed statement: its size,
    line count and SHA-256 as the predicate signs them, and the SHA-256 of its canonical lines
    ([layer, path, size, blake3, e_tag, version] per object, in order) as the subject signs it."""
    import os
    if member.get("name") != "inventory.jsonl":
        return f"inventory member named {member.get('name')!r}"
    path = os.path.join(os.path.dirname(os.path.abspath(report_path)), "inventory.jsonl")
    with open(path, "rb") as f:
        data = f.read()
    if len(data) != member["bytes"] or hashlib.sha256(data).hexdigest() != member["sha256"]:
        return f"{path} is not the inventory member the bundle signs (size or SHA-256 differ)"
    canonical, last = hashlib.sha256(), None
    lines = data.split(b"\n")
    if lines[-1] != b"":
        return f"{path} does not end with a newline"
    for n, line in enumerate(lines[:-1], 1):
        e = json.loads(line)
        key = (LAYERS.index(e["layer"]), e["path"])
        if last is not None and key <= last:
            return f"{path} line {n} is out of canonical order"
        last = key
        row = [e["layer"], e["path"], e["size"], e["blake3"], e["e_tag"], e["version"]]
        canonical.update(json.dumps(row, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
    if len(lines) - 1 != member["objects"]:
        return f"{path} holds {len(lines) - 1} lines; the bundle signs {member['objects']}"
    if canonical.hexdigest() != stmt["subject"][0]["digest"]["sha256"]:
        return f"the canonical lines of {path} do not hash to the subject's sha256"
    print(f"inventory OK objects={member['objects']}")


LAYERS = ["metadata", "manifest_list", "manifest", "data", "position_deletes", "equality_deletes"]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: verify_report.py REPORT PUBKEY_PEM")
    try:
        err = verify(sys.argv[1], sys.argv[2])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, binascii.Error) as e:  # JSONDecodeError is a ValueError
        err = f"{type(e).__name__}: {e}"
    if err:
        print(f"FAILED: {err}")
        sys.exit(1)
