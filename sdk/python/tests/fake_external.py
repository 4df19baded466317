"""A stand-in for the external-task calls of the API, for what a real server cannot be made
to do on cue (take a lease away mid-handler). Same paths, bodies and statuses."""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeTask:
    id: int
    queue: str
    params: dict[str, Any]
    lease: float = 30.0
    token: str | None = None
    expires: float = 0.0
    attempt: int = 1
    ended: dict[str, Any] | None = None
    log: str = ""
    heartbeats: int = 0


@dataclass
class FakeApi:
    tasks: dict[int, FakeTask] = field(default_factory=dict)
    lock: threading.Condition = field(default_factory=threading.Condition)
    next_id: int = 1
    #: The size of each batch of completions sent.
    batches: list[int] = field(default_factory=list)
    #: How many batch calls to answer 503 (a store out of reach) before taking them.
    unavailable: int = 0

    def add(self, queue: str, params: dict[str, Any], lease: float = 30.0) -> FakeTask:
        with self.lock:
            task = FakeTask(self.next_id, queue, params, lease)
            self.next_id += 1
            self.tasks[task.id] = task
            self.lock.notify_all()
            return task

    def revoke(self, task: FakeTask) -> None:
        """The lease lapses as if the worker had vanished, and the attempt fails as lost."""
        with self.lock:
            task.token = None
            task.ended = {"state": "failure", "message": "lost"}

    def _ready(self, queues: list[str], n: int) -> list[FakeTask]:
        now = time.monotonic()
        out = []
        for t in self.tasks.values():
            if t.ended is None and t.queue in queues and (t.token is None and t.expires <= now):
                out.append(t)
        return out[:n]

    def poll(self, body: dict[str, Any]) -> tuple[int, Any]:
        wait = float(re.sub(r"[^0-9.]", "", body.get("wait", "0s")) or 0)
        if str(body.get("wait", "")).endswith("ms"):
            wait /= 1000
        deadline = time.monotonic() + wait
        with self.lock:
            while True:
                ready = self._ready(body["queues"], int(body.get("max", 1)))
                if ready or time.monotonic() >= deadline:
                    break
                self.lock.wait(min(0.05, deadline - time.monotonic()))
            token = secrets.token_hex(8)
            out = []
            for t in ready:
                t.token = token
                t.expires = time.monotonic() + t.lease
                out.append(
                    {
                        "task_instance_id": t.id,
                        "lease_token": token,
                        "queue": t.queue,
                        "project": "p",
                        "workflow": "w",
                        "workflow_instance_id": 1,
                        "task": f"t{t.id}",
                        "attempt": t.attempt,
                        "params": t.params,
                        "lease_expires_at": _at(t.lease),
                    }
                )
            return 200, out

    def held(self, id: int, token: str) -> FakeTask | None:
        t = self.tasks.get(id)
        if t is None or t.ended is not None or t.token != token:
            return None
        return t

    def call(self, id: int, action: str, body: dict[str, Any]) -> tuple[int, Any]:
        with self.lock:
            t = self.held(id, body.get("lease_token", ""))
            if t is None:
                return 409, {"error": f"this lease token does not hold task instance {id}"}
            if action == "heartbeat":
                t.heartbeats += 1
                t.expires = time.monotonic() + t.lease
                return 200, {"lease_expires_at": _at(t.lease)}
            if action == "log":
                t.log += body["text"]
                return 204, None
            if action == "release":
                t.token, t.expires = None, 0.0
                self.lock.notify_all()
                return 204, None
            t.ended = body
            self.lock.notify_all()
            return 200, {"id": id, "state": body.get("state", "success")}

    def complete_batch(self, items: list[dict[str, Any]]) -> tuple[int, Any]:
        self.batches.append(len(items))
        if self.unavailable > 0:
            self.unavailable -= 1
            return 503, {"error": "the store is out of reach"}
        outcomes = []
        for item in items:
            item = dict(item)
            id = int(item.pop("task_instance_id"))
            status, answer = self.call(id, "complete", item)
            outcome = {"task_instance_id": id, "status": status}
            outcome.update(answer)
            outcomes.append(outcome)
        return 200, outcomes

    def wait_ended(self, task: FakeTask, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        with self.lock:
            while task.ended is None and time.monotonic() < deadline:
                self.lock.wait(0.05)
            return task.ended


def _at(seconds: float) -> str:
    at = datetime.now(timezone.utc) + timedelta(seconds=seconds)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def serve(api: FakeApi) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            m = re.fullmatch(r"/api/v1/external/(\d+)/(heartbeat|log|release|complete)", self.path)
            if self.path == "/api/v1/external/poll":
                status, answer = api.poll(body)
            elif self.path == "/api/v1/external/complete":
                status, answer = api.complete_batch(body)
            elif m:
                status, answer = api.call(int(m.group(1)), m.group(2), body)
            else:
                status, answer = 404, {"error": f"no route {self.path}"}
            data = b"" if answer is None else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client gone mid-request

    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
