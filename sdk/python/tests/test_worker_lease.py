"""Worker behaviour a real server cannot be made to show on cue, against a stand-in of
the external-task calls (tests/fake_external.py)."""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator

import pytest

from shoal_sdk import Client, TaskContext, Worker

from .fake_external import FakeApi, serve


@pytest.fixture
def fake() -> Iterator[tuple[FakeApi, Client]]:
    api = FakeApi()
    server = serve(api)
    try:
        yield api, Client(api=f"http://127.0.0.1:{server.server_address[1]}", token="t")
    finally:
        server.shutdown()
        server.server_close()


def test_a_lost_lease_cancels_the_handler_and_drops_its_result(
    fake: tuple[FakeApi, Client],
) -> None:
    api, client = fake
    task = api.add("q", {"n": "1"}, lease=1.0)
    worker = Worker(client, poll_wait=0.5)
    started = threading.Event()
    cancelled = threading.Event()

    @worker.task("q")
    def handle(params: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
        started.set()
        if ctx.wait_cancelled(10):
            cancelled.set()
        return {"dropped": True}

    thread = worker.start()
    try:
        assert started.wait(5)
        api.revoke(task)
        assert cancelled.wait(5)
        time.sleep(0.3)
        assert task.ended == {"state": "failure", "message": "lost"}  # not the handler's
        assert worker.stats["lost"] == 1 and worker.stats["succeeded"] == 0
    finally:
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()


def test_heartbeats_and_log_lines_flow_while_the_handler_runs(
    fake: tuple[FakeApi, Client],
) -> None:
    api, client = fake
    task = api.add("q", {}, lease=0.6)
    worker = Worker(client, poll_wait=0.5)
    seen_log = threading.Event()

    @worker.task("q")
    def handle(params: dict[str, Any]) -> dict[str, Any]:
        print("first line")
        deadline = time.monotonic() + 5
        while "first line" not in task.log and time.monotonic() < deadline:
            time.sleep(0.05)
        if "first line" in task.log:
            seen_log.set()
        time.sleep(1.0)
        print("last line", end="")
        return {}

    with_thread = worker.start()
    try:
        ended = api.wait_ended(task, 10)
    finally:
        worker.stop()
        with_thread.join(10)
    assert not with_thread.is_alive()
    assert ended is not None and ended["state"] == "success"
    assert seen_log.is_set(), "the log was sent only at the end"
    assert task.log.startswith("first line\n") and task.log.endswith("last line")
    assert task.heartbeats >= 3


def test_stop_lets_the_poll_in_flight_answer_and_runs_what_it_took(
    fake: tuple[FakeApi, Client],
) -> None:
    api, client = fake
    worker = Worker(client, poll_wait=1.5)
    worker.register("q", lambda params: {"ran": True})
    thread = worker.start()
    time.sleep(0.3)  # the poll waits
    began = time.monotonic()
    worker.stop()
    task = api.add("q", {})  # the waiting poll takes it
    thread.join(10)
    assert not thread.is_alive()
    assert time.monotonic() - began < 3
    assert task.ended is not None and task.ended["outputs"] == {"ran": True}


def test_completions_share_a_call_retried_while_the_server_fails(
    fake: tuple[FakeApi, Client],
) -> None:
    api, client = fake
    api.unavailable = 1
    tasks = [api.add("q", {"n": str(i)}) for i in range(3)]
    worker = Worker(client, poll_wait=0.5, concurrency=3, complete_linger=0.3)
    worker.register("q", lambda params: {"n": params["n"]})
    thread = worker.start()
    try:
        ended = [api.wait_ended(t, 10) for t in tasks]
    finally:
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert [e and e["outputs"] for e in ended] == [{"n": "0"}, {"n": "1"}, {"n": "2"}]
    assert api.batches == [3, 3], "one call for the three, sent again after the 503"
    assert worker.stats["succeeded"] == 3
