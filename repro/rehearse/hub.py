"""A real HTTP server on 127.0.0.1 that speaks the parts of the Hugging Face hub API huggingface_hub uses: the
rehearsal's stand-in hub (and the tests').

Serves model and dataset repositories from memory: model_info (/api/{type}s/{repo}[/revision/{rev}], with
LFS sha256 when `blobs=true`), the recursive tree listing, and /resolve/ downloads with ETag,
X-Repo-Commit, HEAD and Range. Gated repos answer as the hub does (huggingface_hub 0.3x/1.x `hf_raise_for_status`
reads X-Error-Code): 401 GatedRepo without a token, 403 GatedRepo with a token whose user has not accepted the
license (`Repo.accepted`), 200 once accepted. Faults are switched on per test: token checks (401), a connection
dropped after N bytes, corrupted bytes, slow streaming, plain files under /static/ (for non-hub URLs such as the
MLPerf dataset pickles). As the real hub does for LFS files, `cdn` makes /resolve/ answer with a redirect
(`redirect_status`, 302 by default) to another server's /static/<sha256>?X-Amz-Signature=..., carrying the file's
metadata on the redirect itself; `xet` adds the Xet headers (X-Xet-Hash, X-Xet-Refresh-Route) the hub sends for
Xet-backed files, with a refresh route this server refuses (it is no Xet service).
Every request's method, path, Range and whether it carried an Authorization header are recorded in `log`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

LFS_SUFFIXES = (".safetensors", ".bin", ".parquet", ".pkl", ".model")


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    repo_id: str
    files: dict[str, bytes]
    repo_type: str = "model"
    commit: str = ""
    gated: bool = False
    accepted: set[str] = field(default_factory=set)
    """Tokens whose user accepted the gated repo's license."""

    def __post_init__(self) -> None:
        if not self.commit:
            blob = json.dumps({k: hashlib.sha256(v).hexdigest() for k, v in sorted(self.files.items())}).encode()
            self.commit = hashlib.sha1(self.repo_id.encode() + blob).hexdigest()

    def is_lfs(self, path: str) -> bool:
        return path.endswith(LFS_SUFFIXES)

    def entry(self, path: str) -> dict[str, Any]:
        data = self.files[path]
        row = {"type": "file", "path": path, "size": len(data), "oid": git_blob_sha1(data)}
        if self.is_lfs(path):
            row["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        return row

    def etag(self, path: str) -> str:
        data = self.files[path]
        return hashlib.sha256(data).hexdigest() if self.is_lfs(path) else git_blob_sha1(data)


@dataclass
class Faults:
    drop_after: dict[str, int] = field(default_factory=dict)  # path -> bytes sent before the connection drops (once)
    corrupt: dict[str, int] = field(default_factory=dict)  # path -> how many more downloads serve flipped bytes
    slow: dict[str, float] = field(default_factory=dict)  # path -> seconds to sleep per 4 KiB chunk
    token: str | None = None  # when set, every request must carry this bearer token


class HubServer:
    def __init__(self) -> None:
        self.repos: dict[tuple[str, str], Repo] = {}
        self.static: dict[str, bytes] = {}
        self.faults = Faults()
        self.cdn: str | None = None  # base URL of the server LFS downloads redirect to
        self.redirect_status = 302
        self.xet = False
        self.log: list[dict[str, Any]] = []
        self.errors: list[int] = []  # the status of every error answer, in order
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def add(self, repo: Repo) -> Repo:
        self.repos[(repo.repo_type, repo.repo_id)] = repo
        return repo

    def start(self) -> HubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def record(self, **row: Any) -> None:
        with self._lock:
            self.log.append(row)

    def requests_for(self, path_suffix: str, method: str = "GET") -> list[dict[str, Any]]:
        return [r for r in self.log if r["path"].endswith(path_suffix) and r["method"] == method]

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_API = re.compile(r"^/api/(models|datasets)/(?P<repo>[^/]+/[^/]+)(?:/(?P<kind>revision|tree)/(?P<rev>[^/]+))?/?$")
_RESOLVE = re.compile(r"^/(?:(?P<type>datasets)/)?(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


class _HubHandler(BaseHTTPRequestHandler):
    """The hub's HTTP face: the model/dataset API, resolve with its redirects and ranges, and the faults to inject."""

    hub: HubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: bytes = b"", headers: dict[str, Any] | None = None, *, head: bool = False) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and not head:
            self.wfile.write(body)

    def _json(self, code: int, obj: Any, headers: dict[str, Any] | None = None, head: bool = False) -> None:
        self._send(code, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})}, head=head)

    def _error(self, code: int, error_code: str | None, message: str, head: bool = False) -> None:
        self.hub.errors.append(code)
        headers: dict[str, Any] = {"X-Error-Message": message}
        if error_code:
            headers["X-Error-Code"] = error_code
        self._json(code, {"error": message}, headers, head=head)

    def _authorized(self, head: bool) -> bool:
        if self.hub.faults.token is None:
            return True
        auth = self.headers.get("Authorization")
        if auth == f"Bearer {self.hub.faults.token}":
            return True
        if auth:
            self._error(401, None, "Invalid credentials in Authorization header", head)
        else:
            self._error(401, "RepoNotFound", "Repository not found", head)
        return False

    def do_HEAD(self) -> None:
        self._handle(head=True)

    def do_GET(self) -> None:
        self._handle(head=False)

    def _handle(self, head: bool) -> None:
        parsed = urlparse(self.path)
        path = unquote(parsed.path)
        self.hub.record(
            method=self.command,
            path=path,
            range=self.headers.get("Range"),
            auth=bool(self.headers.get("Authorization")),
        )
        if path.startswith("/static/"):
            return self._serve_bytes(path, self.hub.static.get(path[len("/static/") :]), {}, head)
        if not self._authorized(head):
            return
        if m := _API.match(path):
            return self._api(m, parse_qs(parsed.query), head)
        if m := _RESOLVE.match(path):
            return self._resolve(m, head)
        if path.startswith("/api/xet-read-token/"):
            return self._error(400, None, "this stand-in hub serves no Xet storage", head)
        self._error(404, None, "Not found", head)

    def _repo(self, repo_type: str, repo_id: str, rev: str | None, head: bool) -> Repo | None:
        repo = self.hub.repos.get((repo_type, repo_id))
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found", head)
            return None
        if repo.gated:
            auth = self.headers.get("Authorization") or ""
            token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
            if token is None:
                self._error(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it "
                    "and be authenticated to access it. Please log in.",
                    head,
                )
                return None
            if token not in repo.accepted:
                self._error(
                    403,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted and you are not in the authorized list. "
                    f"Visit {self.hub.url}/{repo_id} to ask for access.",
                    head,
                )
                return None
        if rev not in (None, "main", repo.commit):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
            return None
        return repo

    def _api(self, m: re.Match[str], query: dict[str, list[str]], head: bool) -> None:
        repo_type = m.group(1)[:-1]
        repo = self._repo(repo_type, m.group("repo"), m.group("rev"), head)
        if repo is None:
            return
        if m.group("kind") == "tree":
            return self._json(200, [repo.entry(p) for p in sorted(repo.files)], head=head)
        blobs = query.get("blobs", ["false"])[0].lower() == "true"
        siblings = []
        for p in sorted(repo.files):
            row: dict[str, Any] = {"rfilename": p}
            if blobs:
                e = repo.entry(p)
                row.update(size=e["size"], blobId=e["oid"])
                if "lfs" in e:
                    row["lfs"] = {"sha256": e["lfs"]["oid"], "size": e["size"], "pointerSize": 134}
            siblings.append(row)
        info = {
            "_id": repo.commit[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "sha": repo.commit,
            "private": False,
            "gated": "manual" if repo.gated else False,
            "disabled": False,
            "tags": [],
            "siblings": siblings,
            "lastModified": "2024-01-01T00:00:00.000Z",
        }
        self._json(200, info, head=head)

    def _resolve(self, m: re.Match[str], head: bool) -> None:
        repo_type = "dataset" if m.group("type") else "model"
        repo = self._repo(repo_type, m.group("repo"), m.group("rev"), head)
        if repo is None:
            return
        fname = m.group("file")
        if fname not in repo.files:
            return self._error(404, "EntryNotFound", f"{fname} does not exist", head)
        headers: dict[str, Any] = {"X-Repo-Commit": repo.commit, "ETag": f'"{repo.etag(fname)}"'}
        if repo.is_lfs(fname):
            headers["X-Linked-Etag"] = f'"{repo.etag(fname)}"'
            headers["X-Linked-Size"] = len(repo.files[fname])
            if self.hub.xet:
                headers["X-Xet-Hash"] = repo.etag(fname)
                headers["X-Xet-Refresh-Route"] = f"{self.hub.url}/api/xet-read-token/{repo.commit}"
            if self.hub.cdn:
                sig = hashlib.sha256(repo.etag(fname).encode()).hexdigest()[:16]
                headers["Location"] = f"{self.hub.cdn}/static/{repo.etag(fname)}?X-Amz-Signature={sig}"
                return self._send(self.hub.redirect_status, b"", headers, head=head)
        self._serve_bytes(fname, repo.files[fname], headers, head)

    def _serve_bytes(self, key: str, data: bytes | None, headers: dict[str, Any], head: bool) -> None:
        if data is None:
            return self._error(404, "EntryNotFound", "no such file", head)
        if not head and self.hub.faults.corrupt.get(key, 0) > 0:
            self.hub.faults.corrupt[key] -= 1
            data = bytes(b ^ 0xFF for b in data)
        start, code = 0, 200
        rng = self.headers.get("Range")
        if rng and (rm := re.match(r"bytes=(\d+)-(\d*)$", rng)):
            start = int(rm.group(1))
            end = int(rm.group(2)) if rm.group(2) else len(data) - 1
            if start >= len(data):
                return self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head=head)
            headers = {**headers, "Content-Range": f"bytes {start}-{end}/{len(data)}"}
            data, code = data[start : end + 1], 206
        self.send_response(code)
        for k, v in {**headers, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}.items():
            self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if head:
            return
        drop = self.hub.faults.drop_after.pop(key, None) if code == 200 else None
        delay = self.hub.faults.slow.get(key, 0.0)
        sent = 0
        for i in range(0, len(data), 4096):
            chunk = data[i : i + 4096]
            if drop is not None and sent + len(chunk) > drop:
                self.wfile.write(chunk[: drop - sent])
                self.wfile.flush()
                self.close_connection = True
                return
            try:
                self.wfile.write(chunk)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                return
            sent += len(chunk)
            if delay:
                time.sleep(delay)


def _make_handler(hub: HubServer) -> type[BaseHTTPRequestHandler]:
    """A handler class bound to `hub` (http.server makes one handler object per request)."""
    return type("Handler", (_HubHandler,), {"hub": hub})
