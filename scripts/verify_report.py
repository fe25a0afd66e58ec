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
    print(f"OK keyid={keyid} predicateType={stmt.get('predicateType')}")


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
