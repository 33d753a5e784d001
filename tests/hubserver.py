"""A tiny Hugging Face Hub on 127.0.0.1, for testing ``kvcalc.sources.hub`` with the real client.

It answers the requests ``huggingface_hub`` makes for ``hf_hub_download``, ``get_hf_file_metadata``
and ``get_safetensors_metadata``, with the headers the client reads:

* ``HEAD|GET /{org}/{name}/resolve/{revision}/{path}``: ``X-Repo-Commit``, ``ETag``,
  ``Content-Length``, ``Accept-Ranges``; ``Range: bytes=a-b`` gives ``206`` and ``Content-Range``.
* ``GET /api/models/{org}/{name}[/revision/{revision}]``: ``{"id", "sha", "siblings"}``.
* GGUF files are served like any other file; ``HfFileSystem`` reads them with ``Range`` requests,
  and :attr:`FakeHub.requests` shows how many bytes each asked for (``range`` header).
* Errors as the Hub sends them: unknown repo ``401`` + ``X-Error-Code: RepoNotFound``; gated repo
  ``401`` (no token) or ``403`` (a token without access) + ``X-Error-Code: GatedRepo``; unknown
  revision ``404`` + ``RevisionNotFound``; missing file ``404`` + ``EntryNotFound`` (with the
  commit).
* A repo marked ``slow_s`` sleeps that long before answering anything, for timeouts; one marked
  ``fail_status`` answers every request with that status (500, 429, ...).
* A repo marked with a ``fault`` misbehaves as a broken network, proxy or mirror does (see
  :data:`FAULTS`): a body cut short of its ``Content-Length``, HTML where JSON belongs, a redirect
  loop, a connection closed without an answer.

Every request is recorded in :attr:`FakeHub.requests` so tests can count them and check headers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_API = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


#: ``FakeRepo.fault`` values: what goes wrong, and on which requests
FAULTS = {
    # GET of a file: headers promise more bytes than are sent, then the connection closes
    "truncate": "a file's body cut short of its Content-Length, then the connection closed",
    # every request: 200 text/html, no Hub headers (a captive portal or a proxy's login page)
    "html": "200 text/html for every request, without the Hub's headers",
    # a file keeps the Hub's headers, but its body is an HTML page (a mirror serving an error page)
    "html-body": "a file served with the Hub's headers but an HTML page as its body",
    # every request: 302 to itself
    "redirect-loop": "302 Found pointing back at the same URL, for ever",
    # every request: the connection is closed before any answer
    "reset": "the connection closed before any answer",
}
HTML_PAGE = (
    b"<!doctype html><html><head><title>Sign in</title></head><body>proxy login</body></html>"
)


def commit_sha(text: str) -> str:
    """A stable 40-hex commit id, like the Hub's."""
    return hashlib.sha1(text.encode()).hexdigest()


@dataclass
class FakeRepo:
    """One model repo: ``revisions`` maps a branch, tag or commit to files ``{path: bytes}``."""

    repo_id: str
    revisions: dict[str, dict[str, bytes]] = field(default_factory=dict)
    #: the token that grants access; any other (or none) is refused as for a gated repo
    gated_token: str | None = None
    gated: bool = False
    #: seconds to sleep before every answer about this repo
    slow_s: float = 0.0
    slow_methods: tuple[str, ...] = ("HEAD", "GET")
    #: answer every request with this status (and headers) instead, e.g. 500 or 429
    fail_status: int = 0
    fail_headers: dict[str, str] = field(default_factory=dict)
    #: misbehave as described in :data:`FAULTS` (``""``: answer normally)
    fault: str = ""
    #: only on requests whose path contains this (``""``: every request about the repo)
    fault_paths: str = ""

    def faulty(self, path: str) -> str:
        """The fault that applies to a request for ``path`` (``""`` for none)."""
        return self.fault if self.fault_paths in path else ""

    def commit(self, revision: str) -> str | None:
        """The commit a branch or tag points at (a commit id is its own), ``None`` if unknown."""
        if revision not in self.revisions:
            return revision if self.files_at(revision) is not None else None
        if re.fullmatch(r"[0-9a-f]{40}", revision):
            return revision
        return commit_sha(f"{self.repo_id}@{revision}:{sorted(self.revisions[revision])}")

    def files_at(self, revision: str) -> dict[str, bytes] | None:
        """The files at a branch, tag or commit id."""
        if revision in self.revisions:
            return self.revisions[revision]
        for name, files in self.revisions.items():
            if self.commit(name) == revision:
                return files
        return None


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]


class FakeHub:
    """A threaded HTTP server on an ephemeral port; ``url`` is what ``HF_ENDPOINT`` gets."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with hub._lock:
                    hub._connections.add(self.connection)

            def finish(self) -> None:
                with hub._lock:
                    hub._connections.discard(self.connection)
                super().finish()

            def do_HEAD(self) -> None:
                hub._answer(self, head=True)

            def do_GET(self) -> None:
                hub._answer(self, head=False)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeHub:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop answering, close the port and every kept-alive connection: from now on the client
        gets 'connection refused', as from a host that is down."""
        if self._thread is None:
            return
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            live, self._connections = list(self._connections), set()
        for conn in live:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._thread = None

    # -- content ----------------------------------------------------------------------------
    def add(
        self,
        repo_id: str,
        files: dict[str, bytes | dict],
        *,
        revision: str = "main",
        **options: object,
    ) -> FakeRepo:
        """Add (or extend) a repo; dict values are served as JSON."""
        repo = self.repos.setdefault(repo_id, FakeRepo(repo_id=repo_id))
        for key, value in options.items():
            setattr(repo, key, value)
        repo.revisions[revision] = {
            path: json.dumps(body).encode() if isinstance(body, dict) else body
            for path, body in files.items()
        }
        return repo

    def count(self, *, method: str | None = None, contains: str = "") -> int:
        return sum(
            1
            for r in self.requests
            if (method is None or r.method == method) and contains in r.path
        )

    # -- answering --------------------------------------------------------------------------
    def _answer(self, h: BaseHTTPRequestHandler, *, head: bool) -> None:
        path = urlsplit(h.path).path
        with self._lock:
            self.requests.append(
                Request(h.command, path, {k.lower(): v for k, v in h.headers.items()})
            )
        if m := _RESOLVE.match(path):
            self._resolve(h, m["repo"], unquote(m["rev"]), unquote(m["path"]), head=head)
        elif m := _API.match(path):
            self._api(h, m["repo"], unquote(m["rev"] or "main"))
        else:
            _send(h, 404, b"not found", head=head)

    def _access(self, h: BaseHTTPRequestHandler, repo_id: str, head: bool) -> FakeRepo | None:
        repo = self.repos.get(repo_id)
        if repo is not None and repo.slow_s and h.command in repo.slow_methods:
            time.sleep(repo.slow_s)
        if repo is not None and repo.faulty(h.path) in ("html", "redirect-loop", "reset"):
            _misbehave(h, repo.fault, head=head)
            return None
        if repo is not None and repo.fail_status:
            _send(h, repo.fail_status, b"failure", head=head, headers=repo.fail_headers)
            return None
        if repo is None:
            _send(
                h,
                401,
                b"Repository not found",
                head=head,
                headers={"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"},
            )
            return None
        auth = h.headers.get("Authorization", "")
        if repo.gated and auth != f"Bearer {repo.gated_token}":
            status = 403 if auth else 401
            message = f"Access to model {repo_id} is restricted. You must have access to it."
            _send(
                h,
                status,
                message.encode(),
                head=head,
                headers={"X-Error-Code": "GatedRepo", "X-Error-Message": message},
            )
            return None
        return repo

    def _resolve(
        self, h: BaseHTTPRequestHandler, repo_id: str, rev: str, name: str, *, head: bool
    ) -> None:
        repo = self._access(h, repo_id, head)
        if repo is None:
            return
        commit = repo.commit(rev)
        if commit is None:
            _send(
                h,
                404,
                b"Invalid rev id",
                head=head,
                headers={"X-Error-Code": "RevisionNotFound", "X-Error-Message": "Invalid rev id"},
            )
            return
        body = repo.files_at(rev).get(name)
        if body is None:
            _send(
                h,
                404,
                b"Entry not found",
                head=head,
                headers={
                    "X-Error-Code": "EntryNotFound",
                    "X-Error-Message": "Entry not found",
                    "X-Repo-Commit": commit,
                },
            )
            return
        headers = {
            "X-Repo-Commit": commit,
            "ETag": f'"{hashlib.sha256(body).hexdigest()}"',
            "Accept-Ranges": "bytes",
        }
        fault = repo.faulty(h.path)
        if fault == "html-body":
            body = HTML_PAGE
            headers["ETag"] = f'"{hashlib.sha256(body).hexdigest()}"'
            headers["Content-Type"] = "text/html; charset=utf-8"
        status, part = 200, body
        if m := _RANGE.match(h.headers.get("Range", "")):
            start = int(m[1])
            end = min(int(m[2]) if m[2] else len(body) - 1, len(body) - 1)
            status, part = 206, body[start : end + 1]
            headers["Content-Range"] = f"bytes {start}-{end}/{len(body)}"
        if fault == "truncate" and not head:
            _send_truncated(h, status, part, headers=headers)
            return
        _send(h, status, part, head=head, headers=headers)

    def _api(self, h: BaseHTTPRequestHandler, repo_id: str, rev: str) -> None:
        repo = self._access(h, repo_id, False)
        if repo is None:
            return
        commit = repo.commit(rev)
        if commit is None:
            _send(
                h,
                404,
                b'{"error": "Invalid rev id"}',
                head=False,
                headers={"X-Error-Code": "RevisionNotFound"},
            )
            return
        info = {
            "id": repo_id,
            "modelId": repo_id,
            "sha": commit,
            "gated": repo.gated,
            "siblings": [{"rfilename": p} for p in sorted(repo.files_at(rev))],
        }
        _send(
            h,
            200,
            json.dumps(info).encode(),
            head=False,
            headers={"Content-Type": "application/json"},
        )


def _send(
    h: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    *,
    head: bool,
    headers: dict[str, str] | None = None,
) -> None:
    try:
        h.send_response(status)
        for key, value in (headers or {}).items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
        pass


def _misbehave(h: BaseHTTPRequestHandler, fault: str, *, head: bool) -> None:
    try:
        if fault == "reset":
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault == "redirect-loop":
            h.send_response(302)
            h.send_header("Location", h.path)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/html; charset=utf-8")
        h.send_header("Content-Length", str(len(HTML_PAGE)))
        h.end_headers()
        if not head:
            h.wfile.write(HTML_PAGE)
    except OSError:  # the client gave up
        pass


def _send_truncated(
    h: BaseHTTPRequestHandler, status: int, body: bytes, *, headers: dict[str, str]
) -> None:
    """Promise ``len(body) + 1024`` bytes, send half of ``body``, close the connection."""
    h.close_connection = True
    try:
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(body) + 1024))
        h.end_headers()
        h.wfile.write(body[: len(body) // 2])
        h.wfile.flush()
        h.connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def serve_fake_hub(tmp_path, monkeypatch) -> Iterator[FakeHub]:
    """Body of a ``fake_hub`` fixture: a running :class:`FakeHub`, ``HF_ENDPOINT`` pointing at it,
    a private HF cache, no token from the environment or the machine's stored login.

    ``huggingface_hub`` reads these variables when it is imported; kvcalc reads them on each call,
    which is why setting them here is enough.
    """
    hub = FakeHub().start()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("KVCALC_CACHE_DIR", str(tmp_path / "kvcalc-cache"))  # GGUF headers
    for name in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HUB_ETAG_TIMEOUT",
        "HF_HUB_DOWNLOAD_TIMEOUT",
    ):
        monkeypatch.delenv(name, raising=False)
    # The stored login lives at a path huggingface_hub fixes on import: point it into tmp_path so
    # the machine's own login never leaks in (and tests can write one).
    # Likewise the default cache (HfApi.get_safetensors_metadata downloads a shard index there),
    # and switch off the telemetry request it sends once a day to its import-time endpoint.
    # (constants.ENDPOINT stays: hf_hub_url swaps in the endpoint kvcalc passes only for URLs
    # that start with it.)
    from huggingface_hub import constants

    home = tmp_path / "hf-home"
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    # and undo switches a CI may set before the import: the fake Hub is local
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", False)
    try:
        yield hub
    finally:
        hub.stop()


# -- a small mixed-dtype checkpoint -------------------------------------------------------------
#: name -> (torch dtype name, shape). Bytes per dtype are worked out by hand in EXPECTED_*.
CHECKPOINT_LAYOUT: dict[str, tuple[str, tuple[int, ...]]] = {
    "model.embed_tokens.weight": ("bfloat16", (64, 32)),  # 2,048 x 2 B = 4,096 B
    "model.layers.0.self_attn.q_proj.weight": ("float8_e4m3fn", (32, 32)),  # 1,024 x 1 B
    "model.layers.0.self_attn.q_proj.weight_scale": ("float32", (1,)),  # 4 B (fp8 scale)
    "model.layers.0.mlp.experts.gate_up_proj_blocks": ("uint8", (4, 16, 2, 16)),  # mxfp4: 2,048 B
    "model.layers.0.mlp.experts.gate_up_proj_scales": ("uint8", (4, 16, 2)),  # E8M0: 128 B
    "model.layers.0.mlp.shared_experts.down_proj.weight": (
        "bfloat16",
        (32, 16),
    ),  # 512 x 2 = 1,024 B
    "model.layers.0.mlp.down_proj.qweight": ("int32", (4, 32)),  # int4 x 8 packed: 128 x 4 = 512 B
    "model.layers.0.mlp.down_proj.scales": ("float16", (1, 32)),  # 32 x 2 = 64 B
}
#: dtype -> (stored elements, bytes)
EXPECTED_BY_DTYPE = {
    "BF16": (2048 + 512, 4096 + 1024),
    "U8": (2048 + 128, 2048 + 128),
    "F8_E4M3": (1024, 1024),
    "I32": (128, 512),
    "F16": (32, 64),
    "F32": (1, 4),
}
EXPECTED_TOTAL_BYTES = 4096 + 1024 + 4 + 2048 + 128 + 1024 + 512 + 64  # 8,900
EXPECTED_PARAMETERS = 2048 + 1024 + 1 + 2048 + 128 + 512 + 128 + 32  # 5,921
EXPECTED_EXPERTS_BYTES = 2048 + 128  # routed experts only; shared_experts are dense
#: the first shard holds the embedding and attention tensors, the second the MLP
SHARD_1 = "model-00001-of-00002.safetensors"
SHARD_2 = "model-00002-of-00002.safetensors"


def checkpoint_files(*, sharded: bool) -> dict[str, bytes]:
    """The checkpoint as ``{filename: bytes}``, written by the ``safetensors`` library."""
    import torch
    from safetensors.torch import save

    tensors = {
        name: torch.ones(shape, dtype=getattr(torch, dtype))
        for name, (dtype, shape) in CHECKPOINT_LAYOUT.items()
    }
    if not sharded:
        return {"model.safetensors": save(tensors)}
    first = {k: v for k, v in tensors.items() if "self_attn" in k or "embed" in k}
    second = {k: v for k, v in tensors.items() if k not in first}
    index = {
        "metadata": {"total_size": EXPECTED_TOTAL_BYTES},
        "weight_map": {**dict.fromkeys(first, SHARD_1), **dict.fromkeys(second, SHARD_2)},
    }
    return {
        SHARD_1: save(first),
        SHARD_2: save(second),
        "model.safetensors.index.json": json.dumps(index).encode(),
    }
