"""The REST client: definitions, starts, runs, logs, and the external-task calls."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Union

from ._http import Transport, path_segment
from .errors import CommandFailed, WaitTimeout
from .workflow import duration

if TYPE_CHECKING:
    from .workflow import Workflow

#: States in which a workflow instance has ended (a paused one has too: it can be resumed).
FINAL_STATES = frozenset({"success", "failure", "stopped", "paused"})
#: Task states that count as passed, whose outputs flow downstream.
PASSED_TASK_STATES = frozenset({"success", "forced_success"})

DEFAULT_API = "http://127.0.0.1:12345"
#: How long start() waits for a master to make its command an instance, without a timeout.
COMMAND_TIMEOUT = 60.0

#: What :meth:`Client.apply` takes: a mapping, a YAML or JSON string, or a Workflow.
Definition = Union[Mapping[str, Any], str, "Workflow"]
#: A start parameter or an output value: tasks see it as a string.
ParamValue = Union[str, int, float, bool]


@dataclass(frozen=True)
class Applied:
    """What applying a definition did: ``created`` is False when it equals the latest."""

    project: str
    name: str
    version: int
    created: bool


@dataclass(frozen=True)
class ExternalTask:
    """An external task a poll took: its lease token proves the lease in later calls."""

    task_instance_id: int
    lease_token: str
    queue: str
    project: str
    workflow: str
    workflow_instance_id: int
    task: str
    attempt: int
    params: dict[str, Any]
    lease_expires_at: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ExternalTask:
        params = d.get("params")
        return cls(
            task_instance_id=int(d["task_instance_id"]),
            lease_token=str(d["lease_token"]),
            queue=str(d.get("queue", "")),
            project=str(d.get("project", "")),
            workflow=str(d.get("workflow", "")),
            workflow_instance_id=int(d.get("workflow_instance_id", 0)),
            task=str(d.get("task", "")),
            attempt=int(d.get("attempt", 1)),
            params=dict(params) if isinstance(params, Mapping) else {},
            lease_expires_at=str(d.get("lease_expires_at", "")),
            raw=dict(d),
        )


#: The most completions one :meth:`Client.complete_external_batch` call carries.
MAX_BATCH = 100


@dataclass(frozen=True)
class Completion:
    """How a taken external task ended, for :meth:`Client.complete_external_batch`."""

    task_instance_id: int
    lease_token: str
    state: str = "success"
    outputs: Mapping[str, Any] = field(default_factory=dict)
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        body = _completion_body(self.lease_token, self.state, self.outputs, self.message)
        body["task_instance_id"] = self.task_instance_id
        return body


def _completion_body(
    lease_token: str, state: str, outputs: Mapping[str, Any] | None, message: str | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "lease_token": lease_token,
        "state": state,
        "outputs": dict(outputs or {}),
    }
    if message is not None:
        body["message"] = message
    return body


class Run:
    """One workflow instance. ``state`` reads it again until it has ended."""

    def __init__(
        self,
        client: Client,
        id: int,
        *,
        detail: Mapping[str, Any] | None = None,
        command_id: int | None = None,
        version: int | None = None,
    ) -> None:
        self.client = client
        self.id = id
        self.command_id = command_id
        self._detail: dict[str, Any] = dict(detail) if detail is not None else {}
        self._version = version

    def __repr__(self) -> str:
        state = self._detail.get("state", "?")
        return f"Run(id={self.id}, workflow={self._detail.get('workflow')!r}, state={state!r})"

    def refresh(self) -> Run:
        """Reads the instance, its tasks and their attempts again."""
        self._detail = self.client._get_json(f"/instances/{self.id}")
        return self

    @property
    def detail(self) -> dict[str, Any]:
        """The instance as the API last answered it (``GET /instances/{id}``)."""
        if "tasks" not in self._detail:
            self.refresh()
        return self._detail

    @property
    def state(self) -> str:
        """The instance's state, read again unless it had ended."""
        if self._detail.get("state") not in FINAL_STATES:
            self.refresh()
        return str(self._detail["state"])

    @property
    def done(self) -> bool:
        """Whether the instance has ended (success, failure, stopped or paused)."""
        return self.state in FINAL_STATES

    @property
    def ok(self) -> bool:
        """Whether it ended in success."""
        return self.state == "success"

    @property
    def project(self) -> str:
        return str(self.detail["project"])

    @property
    def workflow(self) -> str:
        return str(self.detail["workflow"])

    @property
    def version(self) -> int:
        if self._version is None:
            self._version = int(self.detail["version"])
        return self._version

    @property
    def message(self) -> str | None:
        message = self.detail.get("message")
        return message if isinstance(message, str) else None

    @property
    def tasks(self) -> list[dict[str, Any]]:
        """Every attempt of every task (``TaskInstance`` objects of the API), by id."""
        if self._detail.get("state") not in FINAL_STATES or "tasks" not in self._detail:
            self.refresh()
        tasks = self._detail.get("tasks")
        return list(tasks) if isinstance(tasks, list) else []

    def task(self, name: str) -> dict[str, Any]:
        """The latest attempt of the task of this name."""
        found = [t for t in self.tasks if t.get("name") == name]
        if not found:
            raise KeyError(f"run {self.id} has no task {name!r}")
        return max(found, key=lambda t: (int(t.get("run", 0)), int(t["id"])))

    @property
    def outputs(self) -> dict[str, str]:
        """The output parameters its passed tasks set, later attempts over earlier ones."""
        merged: dict[str, str] = {}
        for t in sorted(self.tasks, key=lambda t: int(t["id"])):
            if t.get("state") in PASSED_TASK_STATES and isinstance(t.get("output"), dict):
                merged.update({str(k): str(v) for k, v in t["output"].items()})
        return merged

    @property
    def task_outputs(self) -> dict[str, dict[str, str]]:
        """Each task's outputs, by task name (its latest passed attempt)."""
        by_task: dict[str, dict[str, str]] = {}
        for t in sorted(self.tasks, key=lambda t: int(t["id"])):
            if t.get("state") in PASSED_TASK_STATES and isinstance(t.get("output"), dict):
                by_task[str(t["name"])] = {str(k): str(v) for k, v in t["output"].items()}
        return by_task

    def wait(self, timeout: float | None = None, interval: float = 0.5) -> str:
        """Polls until the instance has ended and returns its final state.

        Raises :class:`WaitTimeout` after ``timeout`` seconds (the run goes on).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        nap = min(0.05, interval)
        while True:
            state = self.refresh()._detail["state"]
            if state in FINAL_STATES:
                return str(state)
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"run {self.id} is still {state} after {timeout}s",
                )
            left = interval if deadline is None else max(0.0, deadline - time.monotonic())
            time.sleep(min(nap, left))
            nap = min(nap * 2, interval)

    def logs(self, task: str | int) -> str:
        """The log of a task attempt: by task instance id, or the latest attempt of a name."""
        tid = task if isinstance(task, int) else int(self.task(task)["id"])
        return self.client.logs(tid)

    def act(self, action: str) -> dict[str, Any]:
        """``stop``, ``pause``, ``resume``, ``rerun`` or ``resubmit-failed``."""
        return self.client.act(self.id, action)

    def stop(self) -> dict[str, Any]:
        return self.act("stop")


class Client:
    """A client of one shoal API.

    ``api`` is the server's URL (``http://127.0.0.1:12345``, with or without ``/api/v1``),
    ``token`` an API token; both default to ``SHOAL_API`` and ``SHOAL_TOKEN`` as the CLI's
    do, and ``ca_file`` to ``SHOAL_API_CA`` (a private CA for an https API).
    """

    def __init__(
        self,
        api: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        ca_file: str | None = None,
    ) -> None:
        api = api or os.environ.get("SHOAL_API") or DEFAULT_API
        token = token if token is not None else os.environ.get("SHOAL_TOKEN")
        ca_file = ca_file or os.environ.get("SHOAL_API_CA")
        self._http = Transport(api, token or None, timeout, ca_file)

    @property
    def api(self) -> str:
        """The base URL every call goes under (ends in ``/api/v1``)."""
        return self._http.base

    def __repr__(self) -> str:
        return f"Client(api={self.api!r})"

    # ---- plumbing ----

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, str | int | None] | None = None,
    ) -> Any:
        """Any API call (``path`` under ``/api/v1``); returns the decoded JSON answer."""
        return self._http.request(method, path, json_body=body, query=query).json()

    def _get_json(self, path: str, query: Mapping[str, str | int | None] | None = None) -> Any:
        return self._http.request("GET", path, query=query).json()

    # ---- who, projects ----

    def health(self) -> bool:
        """Whether ``GET /health`` answers 200."""
        self._http.request("GET", "/health")
        return True

    def session(self) -> dict[str, Any]:
        """Who the token belongs to and their roles."""
        result: dict[str, Any] = self._get_json("/session")
        return result

    def projects(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._get_json("/projects")
        return result

    def create_project(self, name: str, description: str = "") -> dict[str, Any]:
        """Creates a project (you become its admin); 409 :class:`Conflict` when taken."""
        result: dict[str, Any] = self.request(
            "POST", "/projects", {"name": name, "description": description}
        )
        return result

    def grant(self, project: str, user: str, role: str) -> dict[str, Any]:
        """Gives ``user`` a role in ``project`` (viewer, worker, operator, editor, admin)."""
        result: dict[str, Any] = self.request(
            "PUT",
            f"/projects/{path_segment(project)}/members/{path_segment(user)}",
            {"role": role},
        )
        return result

    # ---- definitions ----

    def apply(self, definition: Definition, project: str | None = None) -> Applied:
        """Validates and stores a definition as a new version (unless it equals the latest).

        ``definition`` is a :class:`~shoal_sdk.Workflow`, a mapping, or a YAML or JSON
        string. Its project is its ``project`` key, else ``project``, else ``default``.
        """
        body, content_type, project = _definition_body(definition, project)
        answer = self._http.request(
            "POST",
            f"/projects/{path_segment(project)}/workflows",
            raw_body=body,
            content_type=content_type,
        ).json()
        return Applied(
            project=str(answer.get("project", project)),
            name=str(answer["name"]),
            version=int(answer["version"]),
            created=bool(answer.get("created", True)),
        )

    def validate(self, definition: Definition, project: str | None = None) -> dict[str, Any]:
        """What the server would store (its tasks and edges); stores nothing."""
        body, content_type, project = _definition_body(definition, project)
        result: dict[str, Any] = self._http.request(
            "POST",
            f"/projects/{path_segment(project)}/validate",
            raw_body=body,
            content_type=content_type,
        ).json()
        return result

    def workflow(self, project: str, name: str, version: int | None = None) -> dict[str, Any]:
        """A stored workflow (latest version, or ``version``), with its ``yaml``."""
        result: dict[str, Any] = self._get_json(
            f"/projects/{path_segment(project)}/workflows/{path_segment(name)}",
            {"version": version},
        )
        return result

    def workflows(self, project: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._get_json(
            f"/projects/{path_segment(project)}/workflows"
        )
        return result

    # ---- runs ----

    def start(
        self,
        project: str,
        workflow: str,
        params: Mapping[str, ParamValue] | None = None,
        wait: bool = False,
        *,
        timeout: float | None = None,
        priority: str | None = None,
        dry_run: bool = False,
        from_task: str | None = None,
        scope: str | None = None,
        version: int | None = None,
    ) -> Run:
        """Starts a run and returns it once the master made it an instance.

        With ``wait``, returns when it has ended (``timeout`` seconds at most, else
        :class:`WaitTimeout`); ``run.state`` tells how.
        """
        began = time.monotonic()
        deadline = None if timeout is None else began + timeout
        body: dict[str, Any] = {}
        if params:
            body["params"] = dict(params)
        if priority is not None:
            body["priority"] = priority
        if dry_run:
            body["dry_run"] = True
        if from_task is not None:
            body["from_task"] = from_task
        if scope is not None:
            body["scope"] = scope
        if version is not None:
            body["version"] = version
        accepted = self.request(
            "POST",
            f"/projects/{path_segment(project)}/workflows/{path_segment(workflow)}/start",
            body,
        )
        command_id = int(accepted["command_id"])
        # Without a timeout, a minute for a master to take the command (none may run).
        instance_id = self._instance_of(command_id, deadline or began + COMMAND_TIMEOUT)
        run = Run(self, instance_id, command_id=command_id, version=int(accepted["version"]))
        if wait:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            run.wait(timeout=left)
        return run

    def _instance_of(self, command_id: int, deadline: float) -> int:
        """Polls a start command until a master made it an instance."""
        nap = 0.02
        while True:
            status = self._get_json(f"/commands/{command_id}")
            if status.get("status") == "done" and status.get("workflow_instance_id") is not None:
                return int(status["workflow_instance_id"])
            if status.get("status") == "error":
                raise CommandFailed(
                    str(status.get("error") or f"command {command_id} failed"),
                    body=status,
                )
            if time.monotonic() >= deadline:
                raise WaitTimeout(f"command {command_id} is still pending: is a master running?")
            time.sleep(nap)
            nap = min(nap * 2, 0.5)

    def instance(self, id: int) -> Run:
        """One instance with its task attempts."""
        return Run(self, id).refresh()

    def instances(
        self,
        project: str | None = None,
        workflow: str | None = None,
        state: str | None = None,
        *,
        limit: int | None = None,
        offset: int | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> list[Run]:
        """Instances, newest first, filtered (``since``/``until``: RFC 3339 creation times)."""
        rows = self._get_json(
            "/instances",
            {
                "project": project,
                "workflow": workflow,
                "state": state,
                "limit": limit,
                "offset": offset,
                "from": since,
                "to": until,
            },
        )
        return [Run(self, int(r["id"]), detail=r) for r in rows]

    def act(self, instance_id: int, action: str) -> dict[str, Any]:
        """``stop``, ``pause``, ``resume``, ``rerun`` or ``resubmit-failed`` an instance."""
        result: dict[str, Any] = self.request(
            "POST", f"/instances/{instance_id}/{path_segment(action)}"
        )
        return result

    def task_instance(self, id: int) -> dict[str, Any]:
        """One task attempt."""
        result: dict[str, Any] = self._get_json(f"/task-instances/{id}")
        return result

    def logs(self, task_instance_id: int) -> str:
        """A task attempt's whole log (read on while the server says there is more)."""
        chunks: list[str] = []
        offset = 0
        while True:
            answer = self._http.request(
                "GET", f"/task-instances/{task_instance_id}/log", query={"offset": offset or None}
            )
            chunks.append(answer.text())
            more = answer.headers.get("X-Shoal-Log-More", "false").lower() == "true"
            next_offset = answer.headers.get("X-Shoal-Log-Next-Offset")
            if not more or next_offset is None or int(next_offset) <= offset:
                return "".join(chunks)
            offset = int(next_offset)

    def complete(
        self,
        task_instance_id: int,
        state: str = "success",
        outputs: Mapping[str, ParamValue] | None = None,
        message: str | None = None,
    ) -> dict[str, Any]:
        """Ends a waiting ``wait`` or ``callback`` task."""
        body: dict[str, Any] = {"state": state, "outputs": dict(outputs or {})}
        if message is not None:
            body["message"] = message
        result: dict[str, Any] = self.request(
            "POST", f"/task-instances/{task_instance_id}/complete", body
        )
        return result

    # ---- external tasks (what a Worker uses) ----

    def poll(
        self,
        queues: Iterable[str],
        worker: str,
        max: int = 1,
        wait: float = 0.0,
    ) -> list[ExternalTask]:
        """Takes up to ``max`` ready external tasks of ``queues``, waiting up to ``wait`` s."""
        body: dict[str, Any] = {"queues": list(queues), "worker": worker, "max": max}
        if wait > 0:
            body["wait"] = duration(wait)
        answer = self._http.request(
            "POST",
            "/external/poll",
            json_body=body,
            timeout=self._http.timeout + wait,
        ).json()
        return [ExternalTask.from_json(t) for t in answer or []]

    def heartbeat(self, task_instance_id: int, lease_token: str) -> str:
        """Renews a lease; returns when it now expires. 409 :class:`Conflict` once lost."""
        answer = self.request(
            "POST", f"/external/{task_instance_id}/heartbeat", {"lease_token": lease_token}
        )
        return str(answer.get("lease_expires_at", ""))

    def append_log(self, task_instance_id: int, lease_token: str, text: str) -> None:
        """Appends text to a taken task's log (end lines with a newline)."""
        self.request(
            "POST",
            f"/external/{task_instance_id}/log",
            {"lease_token": lease_token, "text": text},
        )

    def release(self, task_instance_id: int, lease_token: str) -> None:
        """Hands a taken task back to its queue, for another poll: the attempt goes on (no
        retry is used), this lease ends. 409 :class:`Conflict` when the lease was lost."""
        self.request(
            "POST", f"/external/{task_instance_id}/release", {"lease_token": lease_token}
        )

    def complete_external(
        self,
        task_instance_id: int,
        lease_token: str,
        state: str = "success",
        outputs: Mapping[str, Any] | None = None,
        message: str | None = None,
    ) -> dict[str, Any]:
        """Ends a taken task: ``success`` (its outputs flow downstream) or ``failure``."""
        body = _completion_body(lease_token, state, outputs, message)
        result: dict[str, Any] = self.request(
            "POST", f"/external/{task_instance_id}/complete", body
        )
        return result

    def complete_external_batch(self, completions: Iterable[Completion]) -> list[dict[str, Any]]:
        """Ends up to :data:`MAX_BATCH` taken tasks in one call (one transaction on the
        server), each under its own lease.

        Returns an answer per completion, in order: ``task_instance_id``, ``status`` 200
        with the ``state`` it ended in, or, with ``error``, what its own call would have
        answered: 409 (the lease was lost: drop the task), 404 or 403. A bad completion
        fails the whole call with :class:`BadRequest` naming it, and none is written.
        """
        body = [c.to_json() for c in completions]
        result: list[dict[str, Any]] = self.request("POST", "/external/complete", body)
        return result


_PROJECT_LINE = re.compile(r"^project:\s*['\"]?([\w.-]+)['\"]?\s*(#.*)?$", re.MULTILINE)


def _definition_body(definition: Definition, project: str | None) -> tuple[bytes, str, str]:
    """A definition as a request body, its content type, and the project it belongs to."""
    from .workflow import Workflow

    if isinstance(definition, Workflow):
        definition = definition.to_dict()
    if isinstance(definition, str):
        named = _project_in_text(definition)
        return definition.encode(), "application/yaml", named or project or "default"
    if isinstance(definition, Mapping):
        d = dict(definition)
        named = d.get("project")
        if isinstance(named, str) and named:
            project = named
        return json.dumps(d).encode(), "application/json", project or "default"
    raise TypeError(f"a definition is a Workflow, a mapping or a string, not {type(definition)}")


def _project_in_text(text: str) -> str | None:
    """The ``project`` key of a YAML or JSON definition, when it has one."""
    parsed: Any = None
    try:
        parsed = json.loads(text)
    except ValueError:
        try:
            import yaml

            parsed = yaml.safe_load(text)
        except ImportError:
            match = _PROJECT_LINE.search(text)
            return match.group(1) if match else None
        except Exception:
            return None  # the server names what is wrong with it
    if isinstance(parsed, dict) and isinstance(parsed.get("project"), str):
        return str(parsed["project"])
    return None


__all__ = [
    "Applied",
    "Client",
    "Completion",
    "Definition",
    "ExternalTask",
    "FINAL_STATES",
    "MAX_BATCH",
    "Run",
]
