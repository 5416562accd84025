#!/usr/bin/env python3
"""hub_fixture.py - a fake Hugging Face hub for tests/t_pull.sh (stdlib only).

  hub_fixture.py ROOT PORTFILE LOGDIR

Serves the files below ROOT/ORG/REPO/ on 127.0.0.1 (a free port, written to
PORTFILE once it listens) the way the hub does:

  GET /api/models/ORG/REPO/revision/main?blobs=true
      {"sha": COMMIT, "siblings": [{"rfilename", "size", "lfs": {"sha256",
      "size"}}]} - COMMIT the SHA-1 of "ORG/REPO"; a README.md without lfs
  GET /ORG/REPO/resolve/REV/PATH
      302 to http://localhost:PORT/cdn/ORG/REPO/PATH (another host spelling:
      another origin, which must not get the token), with X-Repo-Commit,
      X-Linked-Etag and X-Linked-Size
  GET /cdn/ORG/REPO/PATH
      the bytes, with Range (206 and Content-Range)

A repository's name picks its faults:
  *gated*    the API and resolve want "Authorization: Bearer secret-token";
             else 401 whose message echoes the Authorization header sent
  *badhash*  the listing gives a SHA-256 that is not the bytes'
  *cut*      the CDN's first answer without Range sends half the file, then
             closes the connection (LOGDIR/cut-done marks it)
  *slow*     the CDN's first answer without Range sends 1 KiB every 30 ms;
             LOGDIR/streaming is created once 8 KiB are out; the answer
             ends when the client goes away (LOGDIR/slow-closed)
  *norange*  the CDN ignores Range (200 and the whole file)
  *evil*     the listing names a file ../../evil.gguf
A repository not below ROOT: 404. Every request is appended to LOGDIR/log
as "PATH host=HOST auth=none|sent range=RANGE status=STATUS".
"""
import hashlib
import http.server
import json
import os
import socket
import sys
import time
import urllib.parse

TOKEN = "secret-token"


class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def note(self, status):
        with open(os.path.join(self.server.logdir, "log"), "a") as f:
            f.write("%s host=%s auth=%s range=%s status=%d\n" % (
                self.path, self.headers.get("Host", ""),
                "sent" if self.headers.get("Authorization") else "none",
                self.headers.get("Range", "none"), status))

    def answer(self, status, body, ctype="application/json", headers=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.note(status)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def mark(self, name):
        open(os.path.join(self.server.logdir, name), "w").close()

    def repo_files(self, org, repo):
        top = os.path.join(self.server.root, org, repo)
        out = []
        for d, _, names in os.walk(top):
            for n in sorted(names):
                p = os.path.join(d, n)
                out.append((os.path.relpath(p, top), p))
        return sorted(out)

    def authorised(self, repo):
        if "gated" not in repo:
            return True
        got = self.headers.get("Authorization", "")
        if got == "Bearer " + TOKEN:
            return True
        self.answer(401, {"error": "Invalid credentials in Authorization "
                          "header (got '%s')" % got})
        return False

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in u.path.split("/")[1:]]
        if len(parts) >= 4 and parts[0] == "api" and parts[1] == "models":
            return self.listing(parts[2], parts[3])
        if len(parts) >= 5 and parts[2] == "resolve":
            return self.resolve(parts[0], parts[1], "/".join(parts[4:]))
        if len(parts) >= 4 and parts[0] == "cdn":
            return self.cdn(parts[1], parts[2], "/".join(parts[3:]))
        self.answer(404, {"error": "no such page"})

    def listing(self, org, repo):
        if not os.path.isdir(os.path.join(self.server.root, org, repo)):
            return self.answer(404, {"error": "Repository not found"})
        if not self.authorised(repo):
            return
        sib = [{"rfilename": "README.md"}]
        for rel, p in self.repo_files(org, repo):
            data = open(p, "rb").read()
            sha = hashlib.sha256(data).hexdigest()
            if "badhash" in repo:
                sha = hashlib.sha256(data + b"!").hexdigest()
            sib.append({"rfilename": rel, "size": len(data),
                        "blobId": hashlib.sha1(data).hexdigest(),
                        "lfs": {"sha256": sha, "size": len(data),
                                "pointerSize": 134}})
        if "evil" in repo:
            sib[-1]["rfilename"] = "../../evil.gguf"
        commit = hashlib.sha1(("%s/%s" % (org, repo)).encode()).hexdigest()
        self.answer(200, {"id": "%s/%s" % (org, repo), "sha": commit,
                          "siblings": sib})

    def resolve(self, org, repo, path):
        p = os.path.join(self.server.root, org, repo, path)
        if not os.path.isdir(os.path.join(self.server.root, org, repo)):
            return self.answer(404, {"error": "Repository not found"})
        if not self.authorised(repo):
            return
        if not os.path.isfile(p):
            return self.answer(404, {"error": "Entry not found"})
        data = open(p, "rb").read()
        commit = hashlib.sha1(("%s/%s" % (org, repo)).encode()).hexdigest()
        loc = "http://localhost:%d/cdn/%s/%s/%s" % (
            self.server.server_address[1], org, repo,
            urllib.parse.quote(path))
        self.answer(302, b"", "text/plain", [
            ("Location", loc), ("X-Repo-Commit", commit),
            ("X-Linked-Etag", '"%s"' % hashlib.sha256(data).hexdigest()),
            ("X-Linked-Size", str(len(data)))])

    def cdn(self, org, repo, path):
        p = os.path.join(self.server.root, org, repo, path)
        if not os.path.isfile(p):
            return self.answer(404, b"NoSuchKey", "text/plain")
        data = open(p, "rb").read()
        rng = self.headers.get("Range")
        logdir = self.server.logdir
        if "cut" in repo and rng is None and \
                not os.path.exists(os.path.join(logdir, "cut-done")):
            return self.send_cut(data)
        if "slow" in repo and rng is None:
            return self.send_slow(data)
        if rng and "norange" not in repo:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                return self.answer(416, b"", "text/plain", [
                    ("Content-Range", "bytes */%d" % len(data))])
            return self.answer(206, data[start:], "application/octet-stream",
                               [("Content-Range", "bytes %d-%d/%d" % (
                                   start, len(data) - 1, len(data)))])
        self.answer(200, data, "application/octet-stream")

    def head_200(self, data):
        self.note(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()

    def send_cut(self, data):
        self.head_200(data)
        self.wfile.write(data[:len(data) // 2])
        self.wfile.flush()
        self.mark("cut-done")
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def send_slow(self, data):
        self.head_200(data)
        sent = 0
        try:
            while sent < len(data):
                self.wfile.write(data[sent:sent + 1024])
                self.wfile.flush()
                sent += 1024
                if sent == 8192:
                    self.mark("streaming")
                time.sleep(0.03)  # the stream's pace, not a wait
        except OSError:
            self.mark("slow-closed")
            self.close_connection = True


def main():
    root, portfile, logdir = sys.argv[1:4]
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    srv.daemon_threads = True
    srv.root = root
    srv.logdir = logdir
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(portfile + ".tmp", portfile)
    srv.serve_forever()


if __name__ == "__main__":
    main()
