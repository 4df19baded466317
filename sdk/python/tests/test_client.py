"""The client against a real `shoal standalone`."""

from __future__ import annotations

import json

import pytest

from shoal_sdk import (
    BadRequest,
    Client,
    Conflict,
    ConnectionFailed,
    NotFound,
    Python,
    Shell,
    ShoalError,
    Unauthorized,
    WaitTimeout,
    Workflow,
)

from .conftest import Server


def test_apply_a_dict_then_start_and_wait(client: Client, project: str, unique: str) -> None:
    definition = {
        "name": unique,
        "project": project,
        "params": {"dt": "2026-01-01"},
        "tasks": [
            {"name": "a", "type": "shell", "command": "echo \"a ${dt}\"; echo '${setValue(x=41)}'"},
            {"name": "b", "type": "shell", "command": "echo b ${x}", "depends_on": ["a"]},
        ],
    }
    applied = client.apply(definition)
    assert (applied.project, applied.name, applied.version, applied.created) == (
        project,
        unique,
        1,
        True,
    )
    # The same definition again stores nothing.
    again = client.apply(definition)
    assert (again.version, again.created) == (1, False)

    run = client.start(project, unique, params={"dt": "2026-02-01"}, wait=True, timeout=30)
    assert run.state == "success"
    assert run.done and run.ok
    assert run.outputs == {"x": "41"}
    assert run.task_outputs == {"a": {"x": "41"}, "b": {}}
    assert run.project == project and run.workflow == unique and run.version == 1
    assert "a 2026-02-01" in run.logs("a")
    assert "b 41" in client.logs(int(run.task("b")["id"]))


def test_apply_a_yaml_string_in_the_definitions_project(
    client: Client, project: str, unique: str
) -> None:
    text = f"""
name: {unique}
project: {project}
tasks:
  - {{ name: only, type: shell, command: "echo from yaml" }}
"""
    applied = client.apply(text)
    assert applied.project == project and applied.version == 1
    # JSON text too, and a project given beside a definition without one.
    as_json = json.dumps({"name": unique + "_j", "tasks": [{"name": "n", "type": "noop"}]})
    assert client.apply(as_json, project=project).project == project
    run = client.start(project, unique)
    assert run.wait(timeout=30) == "success"
    assert "from yaml" in run.logs("only")


def test_a_python_workflow_runs_to_success(client: Client, project: str, unique: str) -> None:
    with Workflow(unique, project=project, params={"who": "world"}) as wf:
        greet = Shell("greet", command="echo \"hello ${who}\"; echo '${setValue(greeting=hi)}'")
        count = Python(
            "count",
            script="import os\nprint('count', os.environ['SHOAL_PARAM_greeting'])\n"
            "print('${setValue(n=3)}')",
        )
        left = Shell("left", command="echo left")
        right = Shell("right", command="echo right ${n}")
        greet >> count >> [left, right]
    applied = client.apply(wf)
    assert applied.created
    stored = client.workflow(project, unique)
    assert stored["name"] == unique

    run = client.start(project, unique, wait=True, timeout=30)
    assert run.state == "success", run.tasks
    assert {t["name"] for t in run.tasks} == {"greet", "count", "left", "right"}
    assert run.outputs == {"greeting": "hi", "n": "3"}
    assert "count hi" in run.logs("count")
    assert "right 3" in run.logs("right")


def test_a_failing_run_ends_in_failure(client: Client, project: str, unique: str) -> None:
    client.apply({"name": unique, "tasks": [{"name": "boom", "type": "shell", "command": "exit 3"}]}, project)
    run = client.start(project, unique, wait=True, timeout=30)
    assert run.state == "failure"
    assert not run.ok
    boom = run.task("boom")
    assert boom["state"] == "failure" and boom["exit_code"] == 3


def test_instances_filter_by_workflow_and_state(client: Client, project: str, unique: str) -> None:
    client.apply({"name": unique, "tasks": [{"name": "n", "type": "noop"}]}, project)
    first = client.start(project, unique, wait=True, timeout=30)
    second = client.start(project, unique, wait=True, timeout=30)
    found = client.instances(project, workflow=unique, state="success")
    assert [r.id for r in found] == [second.id, first.id]  # newest first
    assert all(r.state == "success" for r in found)
    assert client.instances(project, workflow=unique, state="failure") == []
    assert client.instance(first.id).workflow == unique
    assert client.instances(project, workflow=unique, limit=1)[0].id == second.id


def test_wait_times_out_and_the_run_goes_on(client: Client, project: str, unique: str) -> None:
    client.apply({"name": unique, "tasks": [{"name": "s", "type": "shell", "command": "sleep 30"}]}, project)
    run = client.start(project, unique)
    with pytest.raises(WaitTimeout):
        run.wait(timeout=0.3)
    assert run.state in ("running", "submitted")
    run.stop()
    assert run.wait(timeout=30) == "stopped"
    with pytest.raises(Conflict) as err:
        run.stop()
    assert err.value.status == 409 and "stopped" in err.value.message


def test_errors_carry_the_status_and_the_servers_message(
    client: Client, server: Server, project: str, unique: str
) -> None:
    with pytest.raises(BadRequest) as bad:
        client.apply(
            {
                "name": unique,
                "tasks": [{"name": "a", "type": "shell", "command": "true", "depends_on": ["nope"]}],
            },
            project,
        )
    assert bad.value.status == 400
    assert "nope" in bad.value.message
    assert bad.value.task == "a"

    with pytest.raises(BadRequest) as syntax:
        client.apply("name: [unclosed\n", project)
    assert syntax.value.line is not None

    with pytest.raises(NotFound) as missing:
        client.start(project, "no_such_workflow")
    assert missing.value.status == 404 and "no_such_workflow" in missing.value.message
    assert isinstance(missing.value, ShoalError)

    with pytest.raises(NotFound):
        client.logs(10**9)

    with pytest.raises(Unauthorized) as unauthorized:
        Client(api=server.url, token="wrong").projects()
    assert unauthorized.value.status == 401 and unauthorized.value.message

    with pytest.raises(ConnectionFailed) as down:
        Client(api="http://127.0.0.1:9", token="t", timeout=2).health()
    assert down.value.status is None


def test_validate_stores_nothing(client: Client, project: str, unique: str) -> None:
    with Workflow(unique, project=project) as wf:
        Shell("a", command="true") >> Shell("b", command="true")
    validated = client.validate(wf)
    assert validated
    with pytest.raises(NotFound):
        client.workflow(project, unique)


def test_session_and_projects(client: Client, project: str) -> None:
    assert client.session()["admin"] is True
    assert project in [p["name"] for p in client.projects()]
    assert client.api.endswith("/api/v1")
