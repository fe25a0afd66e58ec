#!/usr/bin/env python3
"""A counting HTTP proxy in front of a test server (S3 or the Iceberg REST catalog): the deleter tests count the
requests lakedrill sends with it (DeleteObjects batches, single deletes) instead of trusting lakedrill's own
counters, and the REST tests use it to land another writer's commit at the worst moment.

Usage: s3_count_proxy.py UPSTREAM PORTFILE LOGFILE [--no-delete-objects] [--no-lifecycle] [--race-post REGEX SCRIPT]
                          [--lose-post REGEX 504|drop|unsent-504] [--redirect-post REGEX]
                          [--redirect-get REGEX] [--status-post REGEX STATUS] [--ignore-version-deletes] [--delay-ms MS]
                          [--token-life SECONDS] [--revoke-first-token] [--truncate-listings N REGEX]
                          [--hide-get-versions] [--forbid-reads REGEX] [--redirect-delete REGEX]

Listens on a free 127.0.0.1 port (written to PORTFILE once it accepts connections) and forwards every request
to UPSTREAM (http://127.0.0.1:8333) unchanged: the same method, path, query, headers (Host included, so that
SigV4 signatures made for the proxy's address still verify upstream) and body. Appends one line per request to
LOGFILE, flushed before the request is forwarded:

    <unix time, 6 decimals> <METHOD> <path?query>

(`PROBE-<METHOD>` for the requests of the deleter's delete-condition probe, an object under `.lakedrill-probe/`.)

With --no-delete-objects it plays a provider that does not implement DeleteObjects: every `POST ?delete` is
answered `501 NotImplemented` (logged, never forwarded), as S3-compatible stores without batch deletes answer.

With --no-lifecycle it plays credentials without `s3:GetLifecycleConfiguration`: every `GET ?lifecycle` is answered
`403 AccessDenied` (logged, never forwarded).

With --race-post, the first POST whose path matches REGEX (say, a REST table commit) waits while
`python SCRIPT` runs to completion (another writer committing through the catalog directly, after lakedrill read
the table and before its commit arrives), then is forwarded. The script's exit status is logged as
`<time> RACE <status>`; it runs once.

With --lose-post, the first POST whose path matches REGEX (after --race-post's writer, when both match it) is
forwarded and its answer read, then lost: `504` answers 504 Gateway Timeout instead (a gateway whose upstream
applied the commit too late), `drop` closes the connection without an answer. `unsent-504` answers 504 without forwarding it at all (the
gateway gave up before its upstream saw the request). Logged as `<time> LOST <mode> <upstream status or ->`; it
happens once.

With --redirect-post, the first POST whose path matches REGEX is answered `303 See Other` with `Location:` the
same URL, without forwarding it (a load balancer moving clients to another address). A client that follows it
sends a GET of the same URL, whose 200 for a REST table is the table unchanged. Logged as
`<time> REDIRECTED 303`; it happens once. --redirect-get does the same to the first matching GET, and
--redirect-delete to the first matching DELETE (a client following that one sends a GET of the object, whose 200
is its bytes, not a delete).

With --status-post, the first POST whose path matches REGEX is forwarded and its answer read, then answered with
STATUS and an empty body instead (a gateway that answers a commit it passed on `204 No Content`). Logged as
`<time> STATUS <STATUS> <upstream status>`; it happens once.

With --ignore-version-deletes, it plays an S3 provider that ignores `versionId` in deletes: a `DeleteObjects`
request (not the delete-condition probe) is served by deleting each key without its version (a plain delete:
on a versioned bucket, a delete marker on top, the version named untouched), answered `<Deleted>` with
`<DeleteMarker>true</DeleteMarker>` and the marker's `<DeleteMarkerVersionId>`; a single `DELETE ?versionId=`
likewise, answered 204 with `x-amz-delete-marker: true` and the marker's `x-amz-version-id`. The plain deletes
are sent with boto3 (the AWS_* variables of the environment) to UPSTREAM; logged as `<time> MARKER <key>`.

With --delay-ms, every request waits MS milliseconds before it is forwarded: a store behind that much latency per
request (`benches/scale.rs`, h, the purge behind 20 ms).

With --token-life, it plays an OAuth2 server whose tokens live SECONDS: every answer of a `POST .../oauth/tokens`
gets `expires_in: SECONDS` (logged `<time> TOKEN <n>`, the nth token issued), and a request carrying a token issued
more than SECONDS ago is answered `401` with a REST error document, never forwarded (logged `<time> EXPIRED <n>`).
With --revoke-first-token (tokens rewritten likewise), the first token issued is revoked once it has been used
once: its second use and every later one are answered `401` (logged `<time> REVOKED 1`). Tokens the proxy did not
issue are forwarded as they are.

With --truncate-listings, it plays a provider that cuts listings short: an answer to a `GET ?list-type=2` whose
query matches REGEX and that lists more than N keys keeps only the first N, says `<IsTruncated>true</IsTruncated>`
and names no `NextContinuationToken` (as ListObjects V1 providers answer V2 requests). Logged as
`<time> TRUNCATED <keys listed> <keys kept>`.

With --hide-get-versions, every answer to a GET loses its `x-amz-version-id` header (HEAD answers keep it): a
provider, or a gateway in front of one, that does not say which version a read returned, so a quarantine's seal
records no version for the objects it reads.

With --forbid-reads, every GET or HEAD whose path matches REGEX is answered `403 AccessDenied` (logged as
`<time> FORBIDDEN <method>`, never forwarded): credentials that may not read those objects (the read right after
an `undelete`'s marker removal fails).

Runs until killed.
"""
import http.client
import os
import http.server
import re
import subprocess
import sys
import threading
import time
import urllib.parse

UPSTREAM = urllib.parse.urlsplit(sys.argv[1])
PORTFILE, LOGFILE = sys.argv[2], sys.argv[3]
NO_DELETE_OBJECTS = "--no-delete-objects" in sys.argv[4:]
NO_LIFECYCLE = "--no-lifecycle" in sys.argv[4:]
RACE = None
if "--race-post" in sys.argv[4:]:
    i = sys.argv.index("--race-post")
    RACE = (re.compile(sys.argv[i + 1]), sys.argv[i + 2])
LOSE = None
if "--lose-post" in sys.argv[4:]:
    i = sys.argv.index("--lose-post")
    LOSE = (re.compile(sys.argv[i + 1]), sys.argv[i + 2])
    assert LOSE[1] in ("504", "drop", "unsent-504"), f"--lose-post: 504, drop or unsent-504, not {LOSE[1]}"
LOSE_FIRED = threading.Event()
REDIRECT = None
if "--redirect-post" in sys.argv[4:]:
    REDIRECT = re.compile(sys.argv[sys.argv.index("--redirect-post") + 1])
REDIRECT_FIRED = threading.Event()
REDIRECT_GET = None
if "--redirect-get" in sys.argv[4:]:
    REDIRECT_GET = re.compile(sys.argv[sys.argv.index("--redirect-get") + 1])
REDIRECT_GET_FIRED = threading.Event()
REDIRECT_DELETE = None
if "--redirect-delete" in sys.argv[4:]:
    REDIRECT_DELETE = re.compile(sys.argv[sys.argv.index("--redirect-delete") + 1])
REDIRECT_DELETE_FIRED = threading.Event()
STATUS = None
if "--status-post" in sys.argv[4:]:
    i = sys.argv.index("--status-post")
    STATUS = (re.compile(sys.argv[i + 1]), int(sys.argv[i + 2]))
STATUS_FIRED = threading.Event()
IGNORE_VERSIONS = "--ignore-version-deletes" in sys.argv[4:]
HIDE_GET_VERSIONS = "--hide-get-versions" in sys.argv[4:]
FORBID_READS = None
if "--forbid-reads" in sys.argv[4:]:
    FORBID_READS = re.compile(sys.argv[sys.argv.index("--forbid-reads") + 1])
DELAY = 0.0
if "--delay-ms" in sys.argv[4:]:
    DELAY = float(sys.argv[sys.argv.index("--delay-ms") + 1]) / 1000.0
TOKEN_LIFE = None
if "--token-life" in sys.argv[4:]:
    TOKEN_LIFE = float(sys.argv[sys.argv.index("--token-life") + 1])
REVOKE_FIRST = "--revoke-first-token" in sys.argv[4:]
TRUNCATE = None
if "--truncate-listings" in sys.argv[4:]:
    i = sys.argv.index("--truncate-listings")
    TRUNCATE = (int(sys.argv[i + 1]), re.compile(sys.argv[i + 2]))
ISSUED = {}  # the proxy's token -> [n, issued at, uses, the upstream token]
RACE_FIRED = threading.Event()
LOCK = threading.Lock()
HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def refuse(self, status, reason, code, message):
        """Answers as S3 refuses a request (an XML error document), without forwarding it."""
        data = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                f"<Message>{message}</Message></Error>").encode()
        self.send_response_only(status, reason)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def losing(self, status):
        """Whether this request's answer is the one --lose-post loses: asked before forwarding (status None, only
        for unsent-504) and after (with the upstream status, for 504 and drop). Logs LOST once."""
        if not LOSE or self.command != "POST" or not LOSE[0].search(urllib.parse.urlsplit(self.path).path):
            return False
        if (status is None) != (LOSE[1] == "unsent-504"):
            return False
        with LOCK:
            if LOSE_FIRED.is_set():
                return False
            LOSE_FIRED.set()
            with open(LOGFILE, "a") as log:
                log.write(f"{time.time():.6f} LOST {LOSE[1]} {status if status is not None else '-'}\n")
        return True

    def gateway_timeout(self):
        """Answers 504 Gateway Timeout with a REST error document."""
        data = (b'{"error": {"message": "gateway timeout (the test proxy lost the answer)", '
                b'"type": "GatewayTimeout", "code": 504}}')
        self.send_response_only(504, "Gateway Timeout")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def once(self, regex, fired, method="POST"):
        """Whether this request is a `method` request matching `regex` and the first one (sets `fired`)."""
        if not regex or self.command != method or not regex.search(urllib.parse.urlsplit(self.path).path):
            return False
        with LOCK:
            if fired.is_set():
                return False
            fired.set()
        return True

    def log(self, line):
        with LOCK, open(LOGFILE, "a") as log:
            log.write(f"{time.time():.6f} {line}\n")

    def plain_delete(self, bucket, key):
        """Deletes `key` without a version (a delete marker on a versioned bucket); returns the marker's version."""
        import boto3
        s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name=os.environ.get("AWS_REGION", "us-east-1"))
        r = s3.delete_object(Bucket=bucket, Key=key)
        self.log(f"MARKER {key}")
        return r.get("VersionId", "")

    def ignore_versions(self, body, asked):
        """--ignore-version-deletes: serves a DeleteObjects request or a versioned DELETE with plain deletes.
        Returns whether it answered."""
        import xml.etree.ElementTree as ET
        from xml.sax.saxutils import escape
        parts = urllib.parse.urlsplit(self.path).path.lstrip("/").split("/", 1)
        bucket = urllib.parse.unquote(parts[0])
        if self.command == "POST" and "delete" in asked and body and b".lakedrill-probe" not in body:
            root = ET.fromstring(body)
            out = []
            for obj in root.iter():
                if obj.tag.split("}")[-1] != "Object":
                    continue
                key = next(c.text for c in obj if c.tag.split("}")[-1] == "Key")
                marker = self.plain_delete(bucket, key)
                out.append(f"<Deleted><Key>{escape(key)}</Key><DeleteMarker>true</DeleteMarker>"
                           f"<DeleteMarkerVersionId>{escape(marker)}</DeleteMarkerVersionId></Deleted>")
            data = ('<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                    + "".join(out) + "</DeleteResult>").encode()
            self.send_response_only(200, "OK")
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return True
        if self.command == "DELETE" and "versionId" in asked and ".lakedrill-probe" not in self.path:
            marker = self.plain_delete(bucket, urllib.parse.unquote(parts[1]))
            self.send_response_only(204, "No Content")
            self.send_header("x-amz-delete-marker", "true")
            self.send_header("x-amz-version-id", marker)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True
        return False

    def unauthorized(self, why):
        """Answers 401 with a REST error document (a token the OAuth2 server no longer accepts)."""
        data = ('{"error": {"message": "' + why + '", "type": "NotAuthorizedException", "code": 401}}').encode()
        self.send_response_only(401, "Unauthorized")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def refused_token(self):
        """--token-life / --revoke-first-token: whether this request's bearer token is expired or revoked (then
        answered 401 and logged). A token the proxy issued is put back to the upstream token it stands for."""
        auth = self.headers.get("Authorization") or ""
        if not auth.startswith("Bearer "):
            return False
        with LOCK:
            seen = ISSUED.get(auth[len("Bearer "):])
            if seen is None:
                return False
            seen[2] += 1
            n, issued, uses, upstream = seen
        if TOKEN_LIFE is not None and time.time() - issued > TOKEN_LIFE:
            self.log(f"EXPIRED {n}")
            self.unauthorized("token expired")
            return True
        if REVOKE_FIRST and n == 1 and uses >= 2:
            self.log("REVOKED 1")
            self.unauthorized("token revoked")
            return True
        self.headers.replace_header("Authorization", f"Bearer {upstream}")
        return False

    def issued(self, data):
        """Replaces a token answer's access token by one of the proxy's own (`proxy-token-<n>`, standing for the
        upstream one: an upstream server may issue the same token twice) and sets its `expires_in` under
        --token-life; returns the answer to send."""
        import json
        answer = json.loads(data)
        if TOKEN_LIFE is not None:
            answer["expires_in"] = int(TOKEN_LIFE)
        with LOCK:
            n = len(ISSUED) + 1
            mine = f"proxy-token-{n}"
            ISSUED[mine] = [n, time.time(), 0, answer["access_token"]]
        answer["access_token"] = mine
        self.log(f"TOKEN {n}")
        return json.dumps(answer).encode()

    def truncated(self, data):
        """--truncate-listings: the listing answer `data` cut to its first N keys, marked truncated, without a
        continuation token; `data` itself when it lists N keys or fewer."""
        text = data.decode()
        contents = re.findall(r"<Contents>.*?</Contents>", text, flags=re.S)
        if len(contents) <= TRUNCATE[0]:
            return data
        head = text[:text.index("<Contents>")]
        tail = text[text.rindex("</Contents>") + len("</Contents>"):]
        head = re.sub(r"<IsTruncated>\w+</IsTruncated>", "<IsTruncated>true</IsTruncated>", head)
        tail = re.sub(r"<IsTruncated>\w+</IsTruncated>", "<IsTruncated>true</IsTruncated>", tail)
        head = re.sub(r"<NextContinuationToken>.*?</NextContinuationToken>", "", head, flags=re.S)
        tail = re.sub(r"<NextContinuationToken>.*?</NextContinuationToken>", "", tail, flags=re.S)
        if "<IsTruncated>" not in head + tail:
            tail = "<IsTruncated>true</IsTruncated>" + tail
        self.log(f"TRUNCATED {len(contents)} {TRUNCATE[0]}")
        return (head + "".join(contents[:TRUNCATE[0]]) + tail).encode()

    def forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        # The deleter's once-per-run probe of whether the server honours a delete's ETag condition (an object
        # under `.lakedrill-probe/`) is logged as PROBE-<method>: the counts are of the requests for the inventory.
        probe = ".lakedrill-probe" in self.path or (body is not None and b".lakedrill-probe" in body)
        with LOCK, open(LOGFILE, "a") as log:
            log.write(f"{time.time():.6f} {'PROBE-' if probe else ''}{self.command} {self.path}\n")
        if (TOKEN_LIFE is not None or REVOKE_FIRST) and self.refused_token():
            return
        if DELAY:
            time.sleep(DELAY)
        query = urllib.parse.urlsplit(self.path).query
        if RACE and self.command == "POST" and RACE[0].search(urllib.parse.urlsplit(self.path).path):
            with LOCK:
                fire = not RACE_FIRED.is_set()
                RACE_FIRED.set()
            if fire:
                status = subprocess.run([sys.executable, RACE[1]]).returncode
                with LOCK, open(LOGFILE, "a") as log:
                    log.write(f"{time.time():.6f} RACE {status}\n")
        asked = urllib.parse.parse_qs(query, keep_blank_values=True)
        if NO_DELETE_OBJECTS and self.command == "POST" and "delete" in asked:
            self.refuse(501, "Not Implemented", "NotImplemented",
                        "A header you provided implies functionality that is not implemented")
            return
        if NO_LIFECYCLE and self.command == "GET" and "lifecycle" in asked:
            self.refuse(403, "Forbidden", "AccessDenied", "Access Denied")
            return
        if IGNORE_VERSIONS and self.ignore_versions(body, asked):
            return
        if (FORBID_READS and self.command in ("GET", "HEAD")
                and FORBID_READS.search(urllib.parse.urlsplit(self.path).path)):
            self.log(f"FORBIDDEN {self.command}")
            if self.command == "HEAD":
                self.send_response_only(403, "Forbidden")
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self.refuse(403, "Forbidden", "AccessDenied", "Access Denied")
            return
        if (self.once(REDIRECT, REDIRECT_FIRED) or self.once(REDIRECT_GET, REDIRECT_GET_FIRED, "GET")
                or self.once(REDIRECT_DELETE, REDIRECT_DELETE_FIRED, "DELETE")):
            self.log("REDIRECTED 303")
            self.send_response_only(303, "See Other")
            self.send_header("Location", f"http://{self.headers.get('Host')}{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        status_now = self.once(STATUS[0] if STATUS else None, STATUS_FIRED)
        lose = self.losing(None)
        if lose and LOSE[1] == "unsent-504":
            self.gateway_timeout()
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        conn = http.client.HTTPConnection(UPSTREAM.hostname, UPSTREAM.port, timeout=300)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            if ((TOKEN_LIFE is not None or REVOKE_FIRST) and self.command == "POST" and resp.status == 200
                    and urllib.parse.urlsplit(self.path).path.endswith("/oauth/tokens")):
                data = self.issued(data)
            query_now = urllib.parse.urlsplit(self.path).query
            if (TRUNCATE and self.command == "GET" and resp.status == 200 and "list-type=2" in query_now
                    and TRUNCATE[1].search(query_now)):
                data = self.truncated(data)
            if status_now:
                self.log(f"STATUS {STATUS[1]} {resp.status}")
                self.send_response_only(STATUS[1])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.losing(resp.status):
                if LOSE[1] == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                else:
                    self.gateway_timeout()
                return
            self.send_response_only(resp.status, resp.reason)
            for k, v in resp.getheaders():
                # A HEAD answer keeps the object's Content-Length (its size); others get the body's.
                if HIDE_GET_VERSIONS and self.command == "GET" and k.lower() == "x-amz-version-id":
                    continue
                if k.lower() not in HOP and (k.lower() != "content-length" or self.command == "HEAD"):
                    self.send_header(k, v)
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        finally:
            conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    with open(PORTFILE + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(PORTFILE + ".tmp", PORTFILE)
    server.serve_forever()


if __name__ == "__main__":
    main()
