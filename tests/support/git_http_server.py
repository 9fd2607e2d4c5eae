#!/usr/bin/env python3
"""Smart HTTP on the loopback for tests/publication.rs: `git http-backend`
behind a tiny HTTP/1.0 server.

Usage: git_http_server.py ROOT MODE [USER:PASSWORD]

ROOT is the directory of the bare repositories (GIT_PROJECT_ROOT). MODE:
  serve  every request goes to git http-backend; with USER:PASSWORD, a
         request without those Basic credentials gets 401 first
  drop   every connection is accepted and closed without an answer (a
         dropped connection)
Listens on 127.0.0.1, on the port GIT_HTTP_TEST_PORT names (default: any
free one), prints the port, then serves until killed.
"""

import base64
import http.server
import os
import subprocess
import sys

ROOT, MODE = sys.argv[1], sys.argv[2]
CREDENTIALS = sys.argv[3] if len(sys.argv) > 3 else None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def handle_one_request(self):
        if MODE == "drop":
            self.close_connection = True
            self.rfile.readline(65537)
            return
        super().handle_one_request()

    def authorized(self):
        if CREDENTIALS is None:
            return True
        expected = "Basic " + base64.b64encode(CREDENTIALS.encode()).decode()
        return self.headers.get("Authorization") == expected

    def serve(self):
        if not self.authorized():
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": ROOT,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": ROOT,
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type") or "",
            "CONTENT_LENGTH": str(length),
            "REMOTE_USER": "tester",
            "REMOTE_ADDR": "127.0.0.1",
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True
        ).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.split(b"\r\n"):
            name, _, value = line.decode().partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = serve
    do_POST = serve


PORT = int(os.environ.get("GIT_HTTP_TEST_PORT", "0"))
server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
