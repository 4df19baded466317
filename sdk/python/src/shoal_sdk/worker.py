"""An external-task worker: polls queues, runs a Python handler per task, reports back.

    worker = Worker(client, queues=["images"], concurrency=4)

    @worker.task("images")
    def resize(params: dict) -> dict:
        print("resizing", params["url"])      # goes to the task's log
        return {"thumb": "s3://bucket/thumb.png"}   # the task's outputs

    worker.run()    # until SIGTERM, SIGINT or worker.stop()

What happens to a task:
- a poll takes it under a lease; a thread of its own heartbeats at a fraction of the lease
  (``heartbeat_fraction``, a third by default) and sends what the handler printed to the
  task's log every ``log_interval`` seconds;
- the handler's return value (a dict, or None for none) completes the task as ``success``
  with those outputs; an exception completes it as ``failure`` with ``Type: message``
  (the traceback goes to the log), and the task's ``retries`` apply;
- when the server answers 409 to a heartbeat or a log call, the lease is lost (it lapsed,
  the task timed out or was ended elsewhere): the handler's ``ctx.cancelled`` is set, and
  whatever it returns is dropped.

Stopping (``stop()``, SIGTERM or SIGINT while ``run()`` runs in the main thread): no new
poll starts; the one in flight is let answer (within ``poll_wait``, 10 s by default: cutting
it off could lose the tasks it took until their leases lapse), and the tasks it took run.
Running handlers get ``grace`` seconds (15 by default) to finish and complete as usual; the
two together stay within Kubernetes' default 30 s between SIGTERM and SIGKILL. A handler
still running then cannot be killed (Python threads cannot be): its task is released, back
on its queue for another worker's poll (the same attempt: no retry is used; a line in its
log says why), its heartbeats stop, and what the handler returns later is dropped. A worker
killed without a stop (SIGKILL, a crash) simply stops heartbeating: its tasks fail as lost
when their leases lapse, and their ``retries`` apply.
"""

from __future__ import annotations

import inspect
import io
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
import traceback
from datetime import datetime, timezone
from types import FrameType
from typing import Any, Callable, Mapping, Optional, Sequence, TextIO, Union

from .client import MAX_BATCH, Client, Completion, ExternalTask
from .errors import (
    BadRequest,
    Conflict,
    Forbidden,
    PayloadTooLarge,
    ShoalError,
    Unauthorized,
)

logger = logging.getLogger("shoal_sdk.worker")

#: A handler: ``f(params)`` or ``f(params, ctx)``; returns the outputs (or None).
Handler = Union[
    Callable[[dict[str, Any]], Optional[Mapping[str, Any]]],
    Callable[[dict[str, Any], "TaskContext"], Optional[Mapping[str, Any]]],
]

#: Most text one log call carries (the server takes up to 1 MiB).
_LOG_CHUNK = 512 * 1024
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def default_worker_name() -> str:
    """``host-pid``, trimmed to what the API takes as a worker name."""
    name = _NAME_BAD.sub("-", f"{socket.gethostname()}-{os.getpid()}").lstrip(".-")
    return (name or "worker")[:128]


def _seconds_until(rfc3339: str) -> float | None:
    """Seconds from now to an RFC 3339 time; None when it cannot be read."""
    if not rfc3339:
        return None
    text = rfc3339.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    # Python before 3.11 takes 3 or 6 fraction digits only.
    m = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$", text)
    if m and m.group(2):
        text = m.group(1) + (m.group(2) + "000000")[:7] + m.group(3)
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return (at - datetime.now(timezone.utc)).total_seconds()


class TaskContext:
    """What a handler that takes a second argument is given about its task."""

    def __init__(self, lease: _Lease) -> None:
        self._lease = lease

    @property
    def task(self) -> ExternalTask:
        """The task as the poll returned it (id, attempt, workflow, params, ...)."""
        return self._lease.task

    @property
    def cancelled(self) -> bool:
        """True once the lease is lost or the worker gave the task up: stop, if you can."""
        return self._lease.cancelled.is_set()

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Sleeps up to ``timeout`` seconds, waking early when cancelled; returns cancelled."""
        return self._lease.cancelled.wait(timeout)

    def log(self, text: str) -> None:
        """Appends text to the task's log (a newline is added when missing)."""
        self._lease.write(text if text.endswith("\n") else text + "\n")


class _Lease:
    """One taken task: its heartbeats, its pending log text, who completes it."""

    def __init__(self, worker: Worker, task: ExternalTask) -> None:
        self.worker = worker
        self.task = task
        self.client = worker.client
        self.cancelled = threading.Event()
        self.ended = threading.Event()  # the handler returned (or the task was given up)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()  # log text goes out in the order it was written
        self._pending: list[str] = []
        self._claimed = False
        self.lost = False
        left = _seconds_until(task.lease_expires_at)
        self.expires = time.monotonic() + (left if left is not None else 30.0)
        self._interval = self._interval_for(left)
        self._thread = threading.Thread(
            target=self._beat, name=f"shoal-lease-{task.task_instance_id}", daemon=True
        )

    def _interval_for(self, left: float | None) -> float:
        if left is None or left <= 0.3:
            left = 1.0  # the shortest lease; a clock far off the server's ends here too
        return max(0.1, left * self.worker.heartbeat_fraction)

    def start(self) -> None:
        self._thread.start()

    def write(self, text: str) -> None:
        if text:
            with self._lock:
                self._pending.append(text)

    def claim(self) -> bool:
        """The right to complete the task: True for the first caller only."""
        with self._lock:
            if self._claimed or self.lost:
                return False
            self._claimed = True
            return True

    def _lose(self, why: str) -> None:
        with self._lock:
            already = self.lost or self._claimed
            self.lost = True
        self.cancelled.set()
        if not already:
            self.worker._count("lost")
            logger.warning(
                "task instance %s: lease lost (%s); its result will be dropped",
                self.task.task_instance_id,
                why,
            )

    def flush(self) -> None:
        """Sends the pending log text."""
        with self._send_lock:
            with self._lock:
                text = "".join(self._pending)
                self._pending.clear()
            for i in range(0, len(text), _LOG_CHUNK):
                chunk = text[i : i + _LOG_CHUNK]
                try:
                    self.client.append_log(
                        self.task.task_instance_id, self.task.lease_token, chunk
                    )
                except Conflict as e:
                    self._lose(e.message)
                    return
                except ShoalError as e:
                    logger.warning(
                        "task instance %s: log lines lost: %s", self.task.task_instance_id, e
                    )

    def _beat(self) -> None:
        next_beat = time.monotonic() + self._interval
        while True:
            now = time.monotonic()
            nap = min(self.worker.log_interval, max(0.0, next_beat - now))
            if self._stop.wait(nap):
                return
            if self._pending:
                self.flush()
            if self.lost:
                return
            if time.monotonic() < next_beat:
                continue
            try:
                expires_at = self.client.heartbeat(
                    self.task.task_instance_id, self.task.lease_token
                )
            except Conflict as e:
                self._lose(e.message)
                return
            except ShoalError as e:
                # Unreachable or failing for now: try again soon, while the lease lasts.
                logger.warning(
                    "task instance %s: heartbeat failed: %s", self.task.task_instance_id, e
                )
                next_beat = time.monotonic() + min(1.0, self._interval)
                continue
            left = _seconds_until(expires_at)
            if left is not None:
                self.expires = time.monotonic() + left
            self._interval = self._interval_for(left)
            next_beat = time.monotonic() + self._interval

    def stop_heartbeats(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def complete(
        self, state: str, outputs: Mapping[str, Any], message: str | None
    ) -> str | None:
        """Flushes the log and completes the task in the worker's next batch (retried while
        the server is unreachable and the lease lasts). Stops the heartbeats after. The
        state the server took (a success whose outputs it refused ends as a failure), or
        None when it took none."""
        try:
            self.flush()
            return self.worker._completer.complete(self, state, outputs, message)
        finally:
            self.stop_heartbeats()

    def complete_alone(
        self, state: str, outputs: Mapping[str, Any], message: str | None
    ) -> str | None:
        """Completes the task by a call of its own, retrying while the server is unreachable
        and the lease lasts; outputs the server refuses fail the task saying so. The state
        the server took, or None."""
        while True:
            try:
                self.client.complete_external(
                    self.task.task_instance_id,
                    self.task.lease_token,
                    state=state,
                    outputs=outputs,
                    message=message,
                )
                return state
            except Conflict as e:
                self._lose(e.message)
                return None
            except BadRequest as e:
                if state == "success":
                    # Outputs the server refuses (not strings, numbers or booleans, ...).
                    self.write(f"[shoal-sdk] the server refused the outputs: {e.message}\n")
                    self.flush()
                    state, outputs = "failure", {}
                    message = f"outputs refused: {e.message}"
                    continue
                raise
            except ShoalError as e:
                if not self.retry_completing(e):
                    return None
                time.sleep(0.5)

    def retry_completing(self, error: ShoalError) -> bool:
        """Whether a completion that failed with ``error`` is worth sending again: the
        server was out of reach or failed, and the lease lasts."""
        if not _passing(error):
            logger.error(
                "task instance %s: could not complete it: %s", self.task.task_instance_id, error
            )
            return False
        if time.monotonic() >= self.expires:
            logger.error(
                "task instance %s: could not complete it before its lease lapsed: %s",
                self.task.task_instance_id,
                error,
            )
            return False
        logger.warning(
            "task instance %s: completing failed, trying again: %s",
            self.task.task_instance_id,
            error,
        )
        return True

    def release(self) -> bool:
        """Flushes the log and hands the task back to its queue; stops the heartbeats.
        True when the server took it back."""
        try:
            self.flush()
            self.client.release(self.task.task_instance_id, self.task.lease_token)
            return True
        except Conflict as e:
            self._lose(e.message)
            return False
        except ShoalError as e:
            logger.error(
                "task instance %s: could not release it, its lease will lapse: %s",
                self.task.task_instance_id,
                e,
            )
            return False
        finally:
            self.stop_heartbeats()


def _passing(error: ShoalError) -> bool:
    """Whether sending the same call again may succeed: no answer, 429 or a 5xx."""
    return error.status is None or error.status == 429 or error.status >= 500


class _Pending:
    """A completion waiting for its batch, and what became of it."""

    def __init__(
        self, lease: _Lease, state: str, outputs: Mapping[str, Any], message: str | None
    ) -> None:
        self.lease = lease
        self.state = state
        self.outputs = outputs
        self.message = message
        self.taken: str | None = None
        self.done = threading.Event()

    def completion(self) -> Completion:
        task = self.lease.task
        return Completion(
            task.task_instance_id, task.lease_token, self.state, self.outputs, self.message
        )

    def finish(self, taken: str | None) -> None:
        self.taken = taken
        self.done.set()


class _Completer:
    """Sends the completions of a worker's handlers in batches from a thread of its own: the
    first of a batch waits up to ``complete_linger`` seconds for others (up to
    ``MAX_BATCH``), then one call ends them all, each under its own lease. A batch the
    server refuses whole (one completion's outputs, or a body over its limit) is sent again
    one completion at a time, so that only the bad one fails."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"shoal-complete-{self.worker.name}", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Sends what is queued, then stops; later completions are sent by their callers."""
        with self._cond:
            thread, self._thread = self._thread, None
            self._cond.notify_all()
        if thread is not None:
            thread.join()

    def complete(
        self, lease: _Lease, state: str, outputs: Mapping[str, Any], message: str | None
    ) -> str | None:
        """Completes the task in the next batch; the state the server took, or None."""
        pending = _Pending(lease, state, outputs, message)
        with self._cond:
            queued = self._thread is not None
            if queued:
                self._queue.append(pending)
                self._cond.notify_all()
        if not queued:
            self._send([pending])
        pending.done.wait()
        return pending.taken

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                while not self._queue and self._thread is me:
                    self._cond.wait()
                if not self._queue:
                    return
                deadline = time.monotonic() + self.worker.complete_linger
                while len(self._queue) < MAX_BATCH and self._thread is me:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                batch = self._queue[:MAX_BATCH]
                del self._queue[:MAX_BATCH]
            self._send(batch)

    def _send(self, batch: list[_Pending]) -> None:
        try:
            self._send_batch(batch)
        except Exception:
            logger.exception("worker %s: completing tasks failed", self.worker.name)
        finally:
            for pending in batch:
                if not pending.done.is_set():
                    pending.finish(None)

    def _send_batch(self, batch: list[_Pending]) -> None:
        while batch:
            try:
                answers = self.worker.client.complete_external_batch(
                    [p.completion() for p in batch]
                )
            except (BadRequest, PayloadTooLarge):
                for p in batch:
                    p.finish(p.lease.complete_alone(p.state, p.outputs, p.message))
                return
            except ShoalError as e:
                for p in batch:
                    if not p.lease.retry_completing(e):
                        p.finish(None)
                batch = [p for p in batch if not p.done.is_set()]
                if batch:
                    time.sleep(0.5)
                continue
            for p, answer in zip(batch, answers):
                status, error = answer.get("status"), str(answer.get("error", ""))
                if status == 200:
                    p.finish(p.state)
                    continue
                if status == 409:
                    p.lease._lose(error)
                else:
                    logger.error(
                        "task instance %s: not completed: %s %s",
                        p.lease.task.task_instance_id,
                        status,
                        error,
                    )
                p.finish(None)
            return


class _Sink(threading.local):
    lease: _Lease | None = None


_sink = _Sink()


class _Router(io.TextIOBase):
    """Stands for sys.stdout or sys.stderr: writes of a handler's thread go to its task's
    log, every other write to the stream it replaced."""

    def __init__(self, original: TextIO) -> None:
        super().__init__()
        self.original = original

    def write(self, s: str) -> int:
        lease = _sink.lease
        if lease is not None:
            lease.write(s)
            return len(s)
        return self.original.write(s)

    def flush(self) -> None:
        if _sink.lease is None:
            self.original.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.original.isatty()

    def fileno(self) -> int:
        return self.original.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.original, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        # What a text stream has beyond TextIOBase (buffer, ...): the replaced stream's.
        if name == "original":
            raise AttributeError(name)
        return getattr(self.original, name)


_route_lock = threading.Lock()
_route_users = 0


def _route_output() -> None:
    global _route_users
    with _route_lock:
        _route_users += 1
        if _route_users == 1:
            sys.stdout = _Router(sys.stdout)
            sys.stderr = _Router(sys.stderr)


def _unroute_output() -> None:
    global _route_users
    with _route_lock:
        _route_users -= 1
        if _route_users == 0:
            if isinstance(sys.stdout, _Router):
                sys.stdout = sys.stdout.original
            if isinstance(sys.stderr, _Router):
                sys.stderr = sys.stderr.original


class Worker:
    """Takes external tasks of ``queues`` and runs their handlers, ``concurrency`` at once.

    ``name`` is shown on the tasks it takes (default ``host-pid``); ``poll_wait`` is how
    long one poll waits for a task (at most 60 s); ``grace`` how long a stop waits for
    running handlers; ``capture_output`` routes what handlers print (stdout and stderr of
    their own thread) to their task's log. Completions go out in batches: one call for
    those made within ``complete_linger`` seconds (5 ms) of the first, up to 100.
    """

    def __init__(
        self,
        client: Client,
        queues: Sequence[str] = (),
        *,
        name: str | None = None,
        concurrency: int = 4,
        poll_wait: float = 10.0,
        heartbeat_fraction: float = 1 / 3,
        grace: float = 15.0,
        log_interval: float = 0.5,
        capture_output: bool = True,
        complete_linger: float = 0.005,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency is at least 1")
        if not 0 < heartbeat_fraction < 1:
            raise ValueError("heartbeat_fraction is between 0 and 1")
        self.client = client
        self.queues: list[str] = list(dict.fromkeys(queues))
        self.name = name or default_worker_name()
        self.concurrency = concurrency
        self.poll_wait = poll_wait
        self.heartbeat_fraction = heartbeat_fraction
        self.grace = grace
        self.log_interval = log_interval
        self.capture_output = capture_output
        self.complete_linger = complete_linger
        self._completer = _Completer(self)
        self.handlers: dict[str, tuple[Handler, bool]] = {}
        self.stats: dict[str, int] = {
            "taken": 0,
            "succeeded": 0,
            "failed": 0,
            "lost": 0,
            "given_up": 0,
        }
        self._lock = threading.Condition()
        self._active: dict[int, _Lease] = {}
        # A plain flag, not an Event: stop() runs in signal handlers, where taking a lock
        # the interrupted code holds would hang.
        self._stop_flag = False
        self._stopped = threading.Event()
        self._running = False
        self._signalled: int | None = None

    def __repr__(self) -> str:
        return f"Worker(name={self.name!r}, queues={self.queues})"

    # ---- handlers ----

    def task(self, queue: str) -> Callable[[Handler], Handler]:
        """Decorator: ``@worker.task("images")`` makes the function the queue's handler."""

        def register(handler: Handler) -> Handler:
            self.register(queue, handler)
            return handler

        return register

    def register(self, queue: str, handler: Handler) -> None:
        """Makes ``handler`` the handler of ``queue`` (and polls that queue)."""
        if queue in self.handlers:
            raise ValueError(f"queue {queue!r} has a handler already")
        self.handlers[queue] = (handler, _takes_context(handler))
        if queue not in self.queues:
            self.queues.append(queue)

    # ---- running ----

    @property
    def active(self) -> int:
        """Tasks being handled now."""
        with self._lock:
            return len(self._active)

    def _count(self, what: str) -> None:
        with self._lock:
            self.stats[what] += 1

    def run(self, handle_signals: bool = True) -> None:
        """Polls and handles tasks until :meth:`stop` (or SIGTERM or SIGINT, when called in
        the main thread with ``handle_signals``); returns once stopped cleanly.

        Raises :class:`ShoalError` for an answer that polling again cannot change (400,
        401, 403), after handing back what runs.
        """
        missing = [q for q in self.queues if q not in self.handlers]
        if missing:
            raise ValueError(f"queues without a handler: {', '.join(missing)}")
        if not self.queues:
            raise ValueError("no queue to poll: register a handler with @worker.task(queue)")
        if self._running:
            raise RuntimeError("this worker runs already")
        self._running = True
        self._stop_flag = False
        self._stopped.clear()
        previous: dict[signal.Signals, Any] = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self._on_signal)
        if self.capture_output:
            _route_output()
        logger.info("worker %s polls %s", self.name, ", ".join(self.queues))
        self._completer.start()
        try:
            self._poll_loop()
        finally:
            self._stop_flag = True
            self._drain()
            self._completer.close()
            if self.capture_output:
                _unroute_output()
            for sig, old in previous.items():
                signal.signal(sig, old)
            self._running = False
            self._stopped.set()
            logger.info("worker %s stopped: %s", self.name, self.stats)

    def start(self) -> threading.Thread:
        """Runs :meth:`run` in a thread of its own (no signal handling); returns it."""
        thread = threading.Thread(
            target=self.run, kwargs={"handle_signals": False}, name=f"shoal-worker-{self.name}"
        )
        thread.daemon = True
        thread.start()
        return thread

    def stop(self) -> None:
        """Stops polling: :meth:`run` returns once the poll in flight answered (at most
        ``poll_wait``; the tasks it took are run) and the running handlers finished, or
        ``grace`` seconds later with the others given up. Safe from a signal handler: it
        takes no lock."""
        self._stop_flag = True

    def wait_stopped(self, timeout: float | None = None) -> bool:
        """Waits until :meth:`run` has returned."""
        return self._stopped.wait(timeout)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signalled = signum
        self.stop()

    def _pause(self, seconds: float) -> None:
        """Sleeps up to ``seconds``, waking early on stop."""
        deadline = time.monotonic() + seconds
        while not self._stop_flag and time.monotonic() < deadline:
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    def _poll_loop(self) -> None:
        backoff = 0.5
        while not self._stop_flag:
            with self._lock:
                while len(self._active) >= self.concurrency and not self._stop_flag:
                    self._lock.wait(0.2)
                free = self.concurrency - len(self._active)
            if self._stop_flag:
                break
            try:
                tasks = self.client.poll(
                    self.queues,
                    self.name,
                    max=min(free, 100),
                    wait=self.poll_wait,
                )
            except (BadRequest, Unauthorized, Forbidden):
                raise
            except ShoalError as e:
                if self._stop_flag:
                    break
                logger.warning("worker %s: poll failed (%s); again in %.1fs", self.name, e, backoff)
                self._pause(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            backoff = 0.5
            for t in tasks:
                self._begin(t)
        if self._signalled is not None:
            logger.info("worker %s: signal %s, stopping", self.name, self._signalled)

    def _begin(self, task: ExternalTask) -> None:
        lease = _Lease(self, task)
        with self._lock:
            self._active[task.task_instance_id] = lease
            self.stats["taken"] += 1
        lease.start()
        thread = threading.Thread(
            target=self._handle,
            args=(lease,),
            name=f"shoal-task-{task.task_instance_id}",
            daemon=True,
        )
        thread.start()

    def _handle(self, lease: _Lease) -> None:
        task = lease.task
        try:
            entry = self.handlers.get(task.queue)
            outputs: Mapping[str, Any] = {}
            error: str | None = None
            if entry is None:
                error = f"worker {self.name} has no handler for queue {task.queue!r}"
            else:
                handler, with_context = entry
                _sink.lease = lease if self.capture_output else None
                try:
                    result = (
                        handler(dict(task.params), TaskContext(lease))  # type: ignore[call-arg]
                        if with_context
                        else handler(dict(task.params))  # type: ignore[call-arg]
                    )
                    if result is None:
                        outputs = {}
                    elif isinstance(result, Mapping):
                        outputs = {str(k): v for k, v in result.items()}
                    else:
                        error = (
                            f"the handler returned a {type(result).__name__}, "
                            "not a dict of outputs"
                        )
                except BaseException as e:  # noqa: BLE001 - any failure fails the attempt
                    lease.write(traceback.format_exc())
                    error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                    if not isinstance(e, Exception):
                        logger.warning("task instance %s: handler raised %r", task.task_instance_id, e)
                finally:
                    _sink.lease = None
            lease.ended.set()
            if not lease.claim():
                return  # lost, or given up by a stop
            taken = (
                lease.complete("success", outputs, None)
                if error is None
                else lease.complete("failure", {}, error)
            )
            if taken is not None:
                self._count("succeeded" if taken == "success" else "failed")
        except Exception:
            logger.exception("task instance %s: worker error", task.task_instance_id)
        finally:
            lease.stop_heartbeats()
            with self._lock:
                self._active.pop(task.task_instance_id, None)
                self._lock.notify_all()

    def _drain(self) -> None:
        """Waits up to ``grace`` for running handlers; gives up the others."""
        deadline = time.monotonic() + self.grace
        with self._lock:
            while self._active and time.monotonic() < deadline:
                self._lock.wait(min(0.2, max(0.0, deadline - time.monotonic())))
            leases = list(self._active.values())
        for lease in leases:
            if not lease.claim():
                continue
            lease.cancelled.set()
            self._count("given_up")
            logger.warning(
                "worker %s: giving up task instance %s, its handler still runs",
                self.name,
                lease.task.task_instance_id,
            )
            lease.write(
                f"[shoal-sdk] worker {self.name} stopped before the handler finished "
                f"(grace {self.grace:g}s): released for another worker\n"
            )
            lease.release()
            with self._lock:
                self._active.pop(lease.task.task_instance_id, None)


def _takes_context(handler: Callable[..., Any]) -> bool:
    """Whether a handler takes a second positional argument (the TaskContext)."""
    try:
        sig = inspect.signature(handler)
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values()):
        return True
    return len(positional) >= 2
