"""External tasks and the Worker against a real `shoal standalone`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

import pytest

from shoal_sdk import (
    BadRequest,
    Client,
    Completion,
    Conflict,
    External,
    ExternalTask,
    Forbidden,
    Shell,
    TaskContext,
    Worker,
    Workflow,
)

from .conftest import Server


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """Runs a worker in a thread for the block; stops it and waits after."""
    thread = worker.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the worker did not stop"


def apply_external(client: Client, project: str, name: str, task: str, **fields: Any) -> str:
    """Applies workflow `name` of one external task; returns its queue, of its own."""
    queue = f"q-{name}"
    with Workflow(name, project=project) as wf:
        External(task, queue=queue, **fields)
    client.apply(wf)
    return queue


def attempts(run: Any, name: str) -> list[dict[str, Any]]:
    return sorted((t for t in run.tasks if t["name"] == name), key=lambda t: int(t["id"]))


def test_a_worker_runs_an_external_task_between_shell_tasks(
    client: Client, project: str, unique: str
) -> None:
    queue = f"q-{unique}"
    with Workflow(unique, project=project) as wf:
        prep = Shell("prep", command="echo '${setValue(url=https://img.example/a.png)}'")
        # (A param named as the value it takes, `url: ${url}`, would stand for itself.)
        resize = External("resize", queue=queue, params={"image": "${url}", "size": "128"})
        after = Shell("after", command='echo "thumb is ${thumb} of ${bytes} bytes"')
        prep >> resize >> after
    client.apply(wf)

    worker = Worker(client, name="sdk-test-1", poll_wait=1)
    seen: list[dict[str, Any]] = []

    @worker.task(queue)
    def handle(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        print("resizing", params["image"])
        print("to", params["size"], file=sys.stderr)
        return {"thumb": f"{params['image']}?w={params['size']}", "bytes": 1234}

    with running(worker):
        run = client.start(project, unique, wait=True, timeout=30)
    assert run.state == "success", run.tasks
    assert seen == [{"image": "https://img.example/a.png", "size": "128"}]
    assert run.task_outputs["resize"] == {
        "thumb": "https://img.example/a.png?w=128",
        "bytes": "1234",
    }
    log = run.logs("resize")
    assert "resizing https://img.example/a.png" in log and "to 128" in log
    assert "thumb is https://img.example/a.png?w=128 of 1234 bytes" in run.logs("after")
    assert worker.stats["succeeded"] == 1 and worker.stats["taken"] == 1


def test_an_exception_fails_the_attempt_and_retries_apply(
    client: Client, project: str, unique: str
) -> None:
    queue = apply_external(client, project, unique, "flaky", retries=1, retry_interval="1s")

    worker = Worker(client, poll_wait=1)

    @worker.task(queue)
    def handle(params: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
        if ctx.task.attempt == 1:
            raise ValueError("bad image")
        return {"attempt": ctx.task.attempt}

    with running(worker):
        run = client.start(project, unique, wait=True, timeout=30)
    assert run.state == "success"
    first, second = attempts(run, "flaky")
    assert first["state"] == "failure" and first["message"] == "ValueError: bad image"
    assert second["state"] == "success" and second["output"] == {"attempt": "2"}
    log = client.logs(int(first["id"]))
    assert "Traceback" in log and "bad image" in log
    assert worker.stats["failed"] == 1 and worker.stats["succeeded"] == 1


def test_a_result_that_is_not_a_dict_fails_the_task(
    client: Client, project: str, unique: str
) -> None:
    queue = apply_external(client, project, unique, "odd")
    worker = Worker(client, poll_wait=1)
    worker.register(queue, lambda params: ["not", "a", "dict"])  # type: ignore[arg-type]
    with running(worker):
        run = client.start(project, unique, wait=True, timeout=30)
    assert run.state == "failure"
    assert "not a dict" in (run.task("odd")["message"] or "")


def test_heartbeats_hold_a_lease_shorter_than_the_handler(
    client: Client, project: str, unique: str
) -> None:
    queue = apply_external(client, project, unique, "slow", lease=2)
    worker = Worker(client, poll_wait=1)

    @worker.task(queue)
    def handle(params: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
        assert not ctx.wait_cancelled(3.5), "the lease was lost"
        return {"slept": "3.5"}

    with running(worker):
        run = client.start(project, unique, wait=True, timeout=30)
    assert run.state == "success", run.tasks
    assert len(attempts(run, "slow")) == 1
    assert worker.stats["lost"] == 0


def test_handlers_run_concurrently(client: Client, project: str, unique: str) -> None:
    queue = f"q-{unique}"
    with Workflow(unique, project=project) as wf:
        for i in range(4):
            External(f"part{i}", queue=queue, params={"i": str(i)})
    client.apply(wf)
    worker = Worker(client, poll_wait=1, concurrency=4)
    lock = threading.Lock()
    now = [0]
    most = [0]

    @worker.task(queue)
    def handle(params: dict[str, Any]) -> dict[str, Any]:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(1.0)
        with lock:
            now[0] -= 1
        return {f"part{params['i']}": "done"}

    with running(worker):
        began = time.monotonic()
        run = client.start(project, unique, wait=True, timeout=30)
        took = time.monotonic() - began
    assert run.state == "success"
    assert most[0] == 4
    assert took < 3.5, f"4 one-second handlers at once took {took:.1f}s"
    assert run.outputs == {f"part{i}": "done" for i in range(4)}


def test_stop_lets_a_running_handler_finish_and_takes_no_more(
    client: Client, project: str, unique: str
) -> None:
    queue = apply_external(client, project, unique, "job")
    worker = Worker(client, poll_wait=2)
    started = threading.Event()

    @worker.task(queue)
    def handle(params: dict[str, Any]) -> dict[str, Any]:
        started.set()
        time.sleep(1.0)
        return {"finished": True}

    thread = worker.start()
    run = client.start(project, unique)
    assert started.wait(15)
    began = time.monotonic()
    worker.stop()
    thread.join(15)
    assert not thread.is_alive()
    assert time.monotonic() - began < 5
    assert run.wait(timeout=15) == "success"
    assert run.outputs == {"finished": "true"}

    # Stopped: a new run's task waits for another worker.
    second = client.start(project, unique)
    time.sleep(1.0)
    assert second.state == "running"
    assert worker.stats["taken"] == 1
    second.stop()
    assert second.wait(timeout=15) == "stopped"


def test_stop_releases_a_task_whose_handler_outlives_the_grace(
    client: Client, project: str, unique: str
) -> None:
    queue = apply_external(client, project, unique, "stuck")
    worker = Worker(client, poll_wait=1, grace=0.5)
    started = threading.Event()
    cancelled = threading.Event()

    @worker.task(queue)
    def handle(params: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
        started.set()
        if ctx.wait_cancelled(30):
            cancelled.set()
        return {"too": "late"}

    thread = worker.start()
    run = client.start(project, unique)
    assert started.wait(15)
    began = time.monotonic()
    worker.stop()
    thread.join(15)
    assert time.monotonic() - began < 5
    assert cancelled.wait(5)
    assert worker.stats["given_up"] == 1
    stuck = run.task("stuck")
    assert stuck["state"] == "waiting", stuck
    assert "released" in (stuck["message"] or ""), stuck

    # Back on its queue: the next worker runs the same attempt.
    after = Worker(client, poll_wait=1)
    after.task(queue)(lambda params: {"by": "after"})
    second = after.start()
    try:
        assert run.wait(timeout=15) == "success"
    finally:
        after.stop()
        second.join(15)
    done = run.task("stuck")
    assert done["attempt"] == 1 and done["output"] == {"by": "after"}, done
    assert "released for another worker" in run.logs("stuck"), done


WORKER_SCRIPT = textwrap.dedent(
    """
    import pathlib, sys, time
    from shoal_sdk import Client, Worker

    queue, marker = sys.argv[1], pathlib.Path(sys.argv[2])
    worker = Worker(Client(), queues=[queue], poll_wait=2)

    @worker.task(queue)
    def handle(params):
        marker.write_text("started")
        time.sleep(1.0)
        print("finished after SIGTERM")
        return {"done": "yes"}

    worker.run()
    print("worker stopped", worker.stats, flush=True)
    """
)


def test_sigterm_stops_a_worker_process_cleanly(
    client: Client, server: Server, project: str, unique: str, tmp_path: Path
) -> None:
    queue = apply_external(client, project, unique, "job")
    marker = tmp_path / "started"
    env = dict(os.environ, SHOAL_API=server.url, SHOAL_TOKEN=server.token)
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER_SCRIPT, queue, str(marker)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        run = client.start(project, unique)
        deadline = time.monotonic() + 15
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the worker did not take the task"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert "worker stopped" in out and "'succeeded': 1" in out, out
    assert run.wait(timeout=15) == "success"
    assert run.outputs == {"done": "yes"}
    assert "finished after SIGTERM" in run.logs("job")


def test_the_http_contract(client: Client, project: str, unique: str) -> None:
    """The calls a worker in any language makes, one by one."""
    queue = f"q-{unique}"
    began = time.monotonic()
    assert client.poll([queue], "raw", max=5, wait=0.5) == []
    assert time.monotonic() - began >= 0.4

    with Workflow(unique, project=project) as wf:
        External("raw", queue=queue, params={"n": "1"}, lease="10s")
    client.apply(wf)
    run = client.start(project, unique)
    (task,) = client.poll([queue], "raw-worker", max=5, wait=10)
    assert (task.queue, task.project, task.workflow, task.task, task.attempt) == (
        queue,
        project,
        unique,
        "raw",
        1,
    )
    assert task.workflow_instance_id == run.id and task.params == {"n": "1"}
    assert client.heartbeat(task.task_instance_id, task.lease_token)
    client.append_log(task.task_instance_id, task.lease_token, "one line\n")
    with pytest.raises(Conflict) as wrong:
        client.heartbeat(task.task_instance_id, "not-the-token")
    assert wrong.value.status == 409
    client.complete_external(
        task.task_instance_id, task.lease_token, "success", {"n": 2}, "done by hand"
    )
    with pytest.raises(Conflict):
        client.complete_external(task.task_instance_id, task.lease_token, "success")
    with pytest.raises(Conflict):
        client.heartbeat(task.task_instance_id, task.lease_token)
    assert run.wait(timeout=15) == "success"
    assert run.outputs == {"n": "2"}
    assert "one line" in run.logs("raw")


def test_a_worker_needs_the_worker_role(
    client: Client, server: Server, project: str, unique: str
) -> None:
    user = f"w{unique}"[:60]
    client.request("POST", "/users", {"name": user})
    token = client.request("POST", "/tokens", {"name": "worker", "user": user})["token"]
    as_user = Client(api=server.url, token=token)
    queue = f"q-{unique}"

    nobody = Worker(as_user, poll_wait=1)
    nobody.register(queue, lambda params: {})
    with pytest.raises(Forbidden):
        nobody.run(handle_signals=False)

    client.grant(project, user, "worker")
    with Workflow(unique, project=project) as wf:
        External("job", queue=queue)
    client.apply(wf)
    worker = Worker(as_user, poll_wait=1)
    worker.register(queue, lambda params: {"by": user})
    with running(worker):
        run = client.start(project, unique, wait=True, timeout=30)
    assert run.state == "success" and run.outputs == {"by": user}


class CountingClient(Client):
    """A client that notes the size of each batch of completions it sends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[int] = []

    def complete_external_batch(self, completions: Iterable[Completion]) -> list[dict[str, Any]]:
        sent = list(completions)
        self.batches.append(len(sent))
        return super().complete_external_batch(sent)


def test_completions_go_out_in_batches_and_a_refused_one_fails_alone(
    client: Client, server: Server, project: str, unique: str
) -> None:
    queue = f"q-{unique}"
    with Workflow(unique, project=project) as wf:
        for i in range(12):
            External(f"t{i}", queue=queue, params={"i": str(i)})
    client.apply(wf)
    counting = CountingClient(api=server.url, token=server.token)
    worker = Worker(counting, poll_wait=1, concurrency=12, complete_linger=0.3)

    @worker.task(queue)
    def handle(params: dict[str, Any]) -> dict[str, Any]:
        if params["i"] == "5":
            return {"bad": [1, 2]}  # not a string, number or boolean: refused
        return {f"out{params['i']}": params["i"]}

    with running(worker):
        run = client.start(project, unique, wait=True, timeout=30)
    assert run.state == "failure", run.tasks
    by_task = run.task_outputs
    assert by_task == {f"t{i}": {f"out{i}": str(i)} for i in range(12) if i != 5}
    (bad,) = attempts(run, "t5")
    assert bad["state"] == "failure" and bad["message"].startswith("outputs refused"), bad
    assert worker.stats["succeeded"] == 11 and worker.stats["failed"] == 1, worker.stats
    assert max(counting.batches) > 1, counting.batches


def test_a_batch_of_completions_ends_each_under_its_own_lease(
    client: Client, project: str, unique: str
) -> None:
    queue = f"q-{unique}"
    with Workflow(unique, project=project) as wf:
        External("a", queue=queue)
        External("b", queue=queue)
    client.apply(wf)
    run = client.start(project, unique)
    taken: list[ExternalTask] = []
    deadline = time.monotonic() + 30
    while len(taken) < 2 and time.monotonic() < deadline:
        taken += client.poll([queue], "batcher", max=2, wait=5)
    a, b = sorted(taken, key=lambda t: t.task)
    stale = Completion(b.task_instance_id, "not-the-token")
    answers = client.complete_external_batch(
        [Completion(a.task_instance_id, a.lease_token, outputs={"x": 1}), stale]
    )
    assert [(o["task_instance_id"], o["status"]) for o in answers] == [
        (a.task_instance_id, 200),
        (b.task_instance_id, 409),
    ]
    assert answers[0]["state"] == "success" and "does not hold" in answers[1]["error"]
    with pytest.raises(BadRequest) as refused:
        client.complete_external_batch([Completion(b.task_instance_id, b.lease_token)] * 2)
    assert "named twice" in refused.value.message
    (answer,) = client.complete_external_batch(
        [Completion(b.task_instance_id, b.lease_token, "failure", message="no disk")]
    )
    assert (answer["status"], answer["state"]) == (200, "failure")
    assert run.wait(timeout=15) == "failure"
    assert run.task("b")["message"] == "no disk"
    assert run.outputs == {"x": "1"}
