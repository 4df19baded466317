"""Workflows written in Python, rendered to the definition the API takes.

    with Workflow("etl", project="sales", params={"dt": "2026-01-01"}) as wf:
        extract = Shell("extract", command="echo extract ${dt}")
        load = Shell("load", command="echo load")
        check = Python("check", script="print('ok')")
        extract >> [load, check]
    client.apply(wf)

Inside ``with``, a task joins the workflow as it is made; outside, ``wf.add(task)`` or
``Task(..., workflow=wf)``. ``a >> b`` makes ``b`` depend on ``a`` (``a << b`` the other
way); a list on either side stands for each of its tasks; the right side is returned so
that chains read left to right.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any, Iterable, Mapping, Sequence, Union, overload

#: A duration as the API takes it: ``"30s"``, ``"5m"``, seconds, or a timedelta.
Duration = Union[str, int, float, timedelta]
#: Either side of ``>>``.
Tasks = Union["Task", Sequence["Task"]]

_current = threading.local()


def duration(value: Duration) -> str:
    """A duration as the API writes it (``"30s"``, ``"1500ms"``)."""
    if isinstance(value, str):
        return value
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative: {value!r}")
    if seconds == int(seconds):
        whole = int(seconds)
        for unit, size in (("h", 3600), ("m", 60)):
            if whole and whole % size == 0:
                return f"{whole // size}{unit}"
        return f"{whole}s"
    return f"{round(seconds * 1000)}ms"


def _stack() -> list[Workflow]:
    stack: list[Workflow] | None = getattr(_current, "stack", None)
    if stack is None:
        stack = []
        _current.stack = stack
    return stack


def _as_list(tasks: Tasks) -> list[Task]:
    if isinstance(tasks, Task):
        return [tasks]
    out = list(tasks)
    for t in out:
        if not isinstance(t, Task):
            raise TypeError(f">> and << take tasks or lists of tasks, not {type(t).__name__}")
    return out


def _render(value: Any) -> Any:
    """A field value as JSON: durations as text, tuples as lists, mappings as dicts."""
    if isinstance(value, timedelta):
        return duration(value)
    if isinstance(value, Mapping):
        return {str(k): _render(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_render(v) for v in value]
    return value


#: Task fields that are durations, so that seconds and timedeltas may be given.
_DURATION_FIELDS = frozenset({"timeout", "retry_interval", "delay", "lease"})


class Task:
    """A task of any type: ``Task("t", "noop")``, ``Task("w", "wait", timeout="1h")``.

    ``fields`` are the task's fields as the definition names them (``retries``,
    ``timeout``, ``params``, ``worker_group``, ``priority``, ``enabled``, ``on_error``,
    ...); ``None`` values are left out. ``depends_on`` names upstream tasks by name besides
    those ``>>`` links.
    """

    def __init__(
        self,
        name: str,
        type: str,
        *,
        workflow: Workflow | None = None,
        depends_on: Iterable[str | Task] = (),
        **fields: Any,
    ) -> None:
        if not name:
            raise ValueError("a task needs a name")
        self.name = name
        self.type = type
        self.fields: dict[str, Any] = {}
        for key, value in fields.items():
            if value is None:
                continue
            if key in _DURATION_FIELDS and not isinstance(value, str):
                value = duration(value)
            self.fields[key] = value
        self.upstream: list[str] = []
        for d in depends_on:
            self._depend_on(d.name if isinstance(d, Task) else d)
        self.workflow: Workflow | None = None
        target = workflow if workflow is not None else (_stack()[-1] if _stack() else None)
        if target is not None:
            target.add(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def _depend_on(self, name: str) -> None:
        if name == self.name:
            raise ValueError(f"task {self.name!r} cannot depend on itself")
        if name not in self.upstream:
            self.upstream.append(name)

    def set_downstream(self, other: Tasks) -> None:
        for t in _as_list(other):
            t._depend_on(self.name)

    def set_upstream(self, other: Tasks) -> None:
        for t in _as_list(other):
            self._depend_on(t.name)

    @overload
    def __rshift__(self, other: Task) -> Task: ...
    @overload
    def __rshift__(self, other: Sequence[Task]) -> Sequence[Task]: ...
    def __rshift__(self, other: Tasks) -> Tasks:
        self.set_downstream(other)
        return other

    @overload
    def __lshift__(self, other: Task) -> Task: ...
    @overload
    def __lshift__(self, other: Sequence[Task]) -> Sequence[Task]: ...
    def __lshift__(self, other: Tasks) -> Tasks:
        self.set_upstream(other)
        return other

    def __rrshift__(self, other: Sequence[Task]) -> Task:
        # [a, b] >> self
        self.set_upstream(other)
        return self

    def __rlshift__(self, other: Sequence[Task]) -> Task:
        # [a, b] << self
        self.set_downstream(other)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The task as the definition writes it."""
        d: dict[str, Any] = {"name": self.name, "type": self.type}
        for key, value in self.fields.items():
            d[key] = _render(value)
        if self.upstream:
            d["depends_on"] = list(self.upstream)
        return d


class Shell(Task):
    """``type: shell``: a bash command (``${name}`` parameters expanded)."""

    def __init__(self, name: str, command: str, **fields: Any) -> None:
        super().__init__(name, "shell", command=command, **fields)


class Python(Task):
    """``type: python``: a script run by the worker's ``--python``."""

    def __init__(self, name: str, script: str, **fields: Any) -> None:
        super().__init__(name, "python", script=script, **fields)


class Http(Task):
    """``type: http``: a request; ``outputs`` maps output names to JSON paths."""

    def __init__(
        self,
        name: str,
        url: str,
        method: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        body: str | None = None,
        expected_status: Sequence[int] | None = None,
        outputs: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> None:
        spec: dict[str, Any] = {"url": url}
        for key, value in (
            ("method", method),
            ("headers", headers),
            ("body", body),
            ("expected_status", expected_status),
            ("outputs", outputs),
        ):
            if value is not None:
                spec[key] = value
        super().__init__(name, "http", http=spec, **fields)


class Sql(Task):
    """``type: sql``: a query against a datasource; ``output``: none, first_row, all_rows."""

    def __init__(
        self,
        name: str,
        datasource: str,
        query: str,
        output: str | None = None,
        **fields: Any,
    ) -> None:
        spec: dict[str, Any] = {"datasource": datasource, "query": query}
        if output is not None:
            spec["output"] = output
        super().__init__(name, "sql", sql=spec, **fields)


class Noop(Task):
    """``type: noop``: does nothing and passes."""

    def __init__(self, name: str, **fields: Any) -> None:
        super().__init__(name, "noop", **fields)


class External(Task):
    """``type: external``: waits, holding no worker slot, until an external worker polling
    ``queue`` takes it (see :class:`shoal_sdk.Worker`); ``params`` are its handler's input,
    ``lease`` how long it stays taken without a heartbeat."""

    def __init__(
        self,
        name: str,
        queue: str,
        params: Mapping[str, Any] | None = None,
        *,
        lease: Duration | None = None,
        timeout: Duration | None = None,
        retries: int | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(
            name,
            "external",
            queue=queue,
            params=dict(params) if params is not None else None,
            lease=lease,
            timeout=timeout,
            retries=retries,
            **fields,
        )


class Workflow:
    """A workflow definition: its settings and tasks. A context manager that collects the
    tasks made inside it.

    ``fields`` are the other workflow fields the definition takes (``failure_strategy``,
    ``priority``, ``timeout``, ``execution_type``, ``tenant``, ``alerts``, ``triggers``,
    ...); ``None`` values are left out.
    """

    def __init__(
        self,
        name: str,
        project: str | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        description: str | None = None,
        **fields: Any,
    ) -> None:
        self.name = name
        self.project = project
        self.params: dict[str, Any] = dict(params or {})
        self.description = description
        self.fields: dict[str, Any] = {}
        for key, value in fields.items():
            if value is None:
                continue
            if key == "timeout" and not isinstance(value, str):
                value = duration(value)
            self.fields[key] = value
        self.tasks: dict[str, Task] = {}

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, project={self.project!r}, tasks={list(self.tasks)})"

    def __enter__(self) -> Workflow:
        _stack().append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _stack()
        if stack and stack[-1] is self:
            stack.pop()

    def add(self, *tasks: Task) -> Workflow:
        """Adds tasks; a name may appear once."""
        for task in tasks:
            if task.workflow is self and self.tasks.get(task.name) is task:
                continue
            if task.workflow is not None:
                raise ValueError(f"task {task.name!r} belongs to workflow {task.workflow.name!r}")
            if task.name in self.tasks:
                raise ValueError(f"workflow {self.name!r} has a task {task.name!r} already")
            task.workflow = self
            self.tasks[task.name] = task
        return self

    def __getitem__(self, name: str) -> Task:
        return self.tasks[name]

    def to_dict(self) -> dict[str, Any]:
        """The definition as the API takes it (``POST /projects/{project}/workflows``).

        Raises ``ValueError`` when a task depends on one the workflow lacks.
        """
        d: dict[str, Any] = {"name": self.name}
        if self.project is not None:
            d["project"] = self.project
        if self.description is not None:
            d["description"] = self.description
        if self.params:
            d["params"] = {k: _render(v) for k, v in self.params.items()}
        for key, value in self.fields.items():
            d[key] = _render(value)
        for task in self.tasks.values():
            for up in task.upstream:
                if up not in self.tasks:
                    raise ValueError(
                        f"task {task.name!r} depends on {up!r}, "
                        f"which workflow {self.name!r} does not have"
                    )
        d["tasks"] = [t.to_dict() for t in self.tasks.values()]
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_yaml(self) -> str:
        """The definition as YAML when PyYAML is installed, else as JSON (which is YAML)."""
        try:
            import yaml
        except ImportError:
            return self.to_json()
        text: str = yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)
        return text
