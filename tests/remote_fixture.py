#!/usr/bin/env python3
"""remote_fixture.py - the servers of tests/t_remote.sh (stdlib only).

  serve MODEL PIDFILE PORTFILE LOG
      Start llama-cpp-python's OpenAI-compatible server on 127.0.0.1 (a
      free port) with MODEL, in its own session; return once GET
      /v1/models answers (polled), with its pid and port in the files.
      Exit 1 (the log's tail on stderr) when it dies or never answers.

  proxy UPSTREAM_PORT PORTFILE MARKDIR
      A fault-injecting proxy on 127.0.0.1 (a free port, written to
      PORTFILE once it listens). The first path segment picks the fault;
      the rest (/v1/...) is the API path:
        /pass/...        forwarded to the upstream server
        /nologprobs/...  400 for a request with "logprobs", else forwarded
        /401/...         401 whose message echoes the Authorization header
        /404/...         404, no such model
        /429/...         429 with Retry-After: 7
        /500/...         500
        /cut/...         200, two chunks, then the connection closes
                         (no [DONE])
        /garbage/...     200, two chunks, a chunk that is not JSON, [DONE]
        /hold/...        200, two chunks, then comments until the client
                         goes away; then MARKDIR/hold-closed is created
        /silent/...      no answer at all (for 60 s)
        /reasoning/...   200, "Let me think." in two delta.reasoning_content
                         chunks (vLLM's, llama.cpp's server's), then
                         "Hello world" in two content chunks, [DONE]
        /reasoning2/...  the same with delta.reasoning (OpenRouter's)
        /timings/...     200, "Hello world" in two chunks, then a last
                         chunk with llama.cpp's server's "timings" (12
                         prompt tokens in 4 ms: 3000 t/s) and [DONE]
      Every request's Authorization header is appended to MARKDIR/auth.

  tls CERT KEY PORTFILE
      An https server on 127.0.0.1 (a free port, written to PORTFILE once it
      listens) with the certificate CERT (self-signed: a client that
      verifies certificates must refuse it) answering /v1/models.
"""
import http.client
import http.server
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(model, pidfile, portfile, log):
    port = free_port()
    with open(log, "ab") as lf:
        p = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", model,
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
             "--verbose", "false"],
            stdout=lf, stderr=lf, stdin=subprocess.DEVNULL,
            start_new_session=True)
    with open(pidfile, "w") as f:
        f.write("%d\n" % p.pid)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if p.poll() is not None:
            break
        try:
            with urllib.request.urlopen(
                    "http://127.0.0.1:%d/v1/models" % port, timeout=5) as r:
                if json.load(r).get("data"):
                    with open(portfile, "w") as f:
                        f.write("%d\n" % port)
                    return 0
        except OSError:
            pass
        time.sleep(0.2)  # the poll interval, not a wait for an event
    with open(log, "rb") as lf:
        sys.stderr.write(lf.read()[-3000:].decode("utf-8", "replace"))
    return 1


def chunk(content):
    return ("data: " + json.dumps({
        "id": "x", "object": "chat.completion.chunk", "model": "m",
        "choices": [{"index": 0, "delta": {"content": content},
                     "finish_reason": None}]}) + "\n\n").encode()


class Proxy(http.server.BaseHTTPRequestHandler):
    upstream = 0
    markdir = "."

    def log_message(self, *a):
        pass

    def reply(self, code, obj, headers=()):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def stream_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(chunk("Hello"))
        self.wfile.write(chunk(" wor"))
        self.wfile.flush()

    def forward(self, body):
        c = http.client.HTTPConnection("127.0.0.1", self.upstream,
                                       timeout=600)
        hdrs = {"Content-Type": "application/json"} if body else {}
        c.request(self.command, self.rest, body=body, headers=hdrs)
        r = c.getresponse()
        self.send_response(r.status)
        for k in ("Content-Type", "Retry-After"):
            if r.getheader(k):
                self.send_header(k, r.getheader(k))
        self.end_headers()
        while True:
            b = r.read1(65536) if hasattr(r, "read1") else r.read(1)
            if not b:
                break
            self.wfile.write(b)
            self.wfile.flush()
        c.close()

    def handle_any(self):
        parts = self.path.split("/", 2)
        mode = parts[1] if len(parts) > 1 else ""
        self.rest = "/" + (parts[2] if len(parts) > 2 else "")
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        auth = self.headers.get("Authorization") or ""
        with open(os.path.join(self.markdir, "auth"), "a") as f:
            f.write(auth + "\n")
        if mode == "pass":
            return self.forward(body)
        if mode == "nologprobs":
            if body and b'"logprobs"' in body:
                return self.reply(400, {"error": {
                    "message": "logprobs are not supported"}})
            return self.forward(body)
        if mode == "401":
            return self.reply(401, {"error": {
                "message": "Incorrect API key provided: " +
                auth.replace("Bearer ", "")}})
        if mode == "404":
            return self.reply(404, {"error": {
                "message": "The model does not exist"}})
        if mode == "429":
            return self.reply(429, {"error": {"message": "slow down"}},
                              [("Retry-After", "7")])
        if mode == "500":
            return self.reply(500, {"error": {"message": "internal boom"}})
        if mode == "silent":
            time.sleep(60)  # the client's timeout is what is tested
            return None
        if mode in ("reasoning", "reasoning2"):
            key = "reasoning_content" if mode == "reasoning" else "reasoning"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for part in ("Let me", " think."):
                self.wfile.write(("data: " + json.dumps({
                    "id": "x", "object": "chat.completion.chunk",
                    "model": "m", "choices": [{
                        "index": 0, "delta": {key: part},
                        "finish_reason": None}]}) + "\n\n").encode())
            self.wfile.write(chunk("Hello"))
            self.wfile.write(chunk(" world"))
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True
            return None
        if mode == "timings":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(chunk("Hello"))
            self.wfile.write(chunk(" world"))
            self.wfile.write(("data: " + json.dumps({
                "id": "x", "object": "chat.completion.chunk", "model": "m",
                "choices": [{"index": 0, "delta": {},
                             "finish_reason": "stop"}],
                "timings": {"prompt_n": 12, "prompt_ms": 4.0,
                            "predicted_n": 2, "predicted_ms": 10.0}})
                + "\n\n").encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True
            return None
        if mode in ("cut", "garbage", "hold"):
            self.stream_start()
            if mode == "garbage":
                self.wfile.write(b"data: {not json at all\n\n")
                self.wfile.write(chunk("ld"))
                self.wfile.write(b"data: [DONE]\n\n")
            if mode == "hold":
                try:
                    while True:  # until the client closes the connection
                        time.sleep(0.05)
                        self.wfile.write(b": waiting\n\n")
                        self.wfile.flush()
                except OSError:
                    open(os.path.join(self.markdir, "hold-closed"),
                         "w").close()
            self.close_connection = True
            return None
        return self.reply(400, {"error": {"message": "unknown mode"}})

    do_GET = handle_any
    do_POST = handle_any


def write_port(portfile, port):
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.rename(tmp, portfile)  # the port appears whole, once listening


def tls(cert, key, portfile):
    import ssl

    class Models(Proxy):
        def handle_any(self):
            return self.reply(200, {"object": "list", "data": [{"id": "m"}]})
        do_GET = handle_any
        do_POST = handle_any

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    srv.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    write_port(portfile, srv.server_address[1])
    srv.serve_forever()


def proxy(upstream, portfile, markdir):
    Proxy.upstream = int(upstream)
    Proxy.markdir = markdir
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    srv.daemon_threads = True
    write_port(portfile, srv.server_address[1])
    srv.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "serve":
        sys.exit(serve(*sys.argv[2:]))
    if len(sys.argv) == 5 and sys.argv[1] == "proxy":
        sys.exit(proxy(*sys.argv[2:]))
    if len(sys.argv) == 5 and sys.argv[1] == "tls":
        sys.exit(tls(*sys.argv[2:]))
    sys.stderr.write(__doc__)
    sys.exit(2)
