"""Workflows written in Python render to the definition the API takes (no server)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from shoal_sdk import External, Http, Noop, Python, Shell, Sql, Task, Workflow, duration


def test_context_manager_collects_tasks_and_edges() -> None:
    with Workflow("etl", project="sales", params={"dt": "2026-01-01"}) as wf:
        extract = Shell("extract", command="echo ${dt}", priority="high")
        load = Shell("load", command="echo load")
        check = Python("check", script="print(1)")
        done = Noop("done")
        extract >> [load, check] >> done

    assert wf.to_dict() == {
        "name": "etl",
        "project": "sales",
        "params": {"dt": "2026-01-01"},
        "tasks": [
            {"name": "extract", "type": "shell", "command": "echo ${dt}", "priority": "high"},
            {"name": "load", "type": "shell", "command": "echo load", "depends_on": ["extract"]},
            {"name": "check", "type": "python", "script": "print(1)", "depends_on": ["extract"]},
            {"name": "done", "type": "noop", "depends_on": ["load", "check"]},
        ],
    }


def test_chains_return_the_right_side_and_lshift_goes_the_other_way() -> None:
    with Workflow("chain") as wf:
        a, b, c = Noop("a"), Noop("b"), Noop("c")
        a >> b >> c
        d = Noop("d")
        d << c
        e = Noop("e")
        [a, b] >> e
    deps = {t["name"]: t.get("depends_on", []) for t in wf.to_dict()["tasks"]}
    assert deps == {"a": [], "b": ["a"], "c": ["b"], "d": ["c"], "e": ["a", "b"]}
    # No project key: the API puts it in the URL's project.
    assert "project" not in wf.to_dict()


def test_explicit_workflow_and_depends_on_by_name() -> None:
    wf = Workflow("explicit", project="p", failure_strategy="continue", timeout=timedelta(hours=1))
    a = Task("a", "noop")
    b = Task("b", "delay", delay=90, depends_on=["a"])
    c = Shell("c", command="true", workflow=wf, depends_on=[b], retries=2, retry_interval=30)
    wf.add(a, b)
    d = wf.to_dict()
    assert d["failure_strategy"] == "continue"
    assert d["timeout"] == "1h"
    assert [t["name"] for t in d["tasks"]] == ["c", "a", "b"]
    assert wf["b"].to_dict() == {"name": "b", "type": "delay", "delay": "90s", "depends_on": ["a"]}
    assert c.to_dict() == {
        "name": "c",
        "type": "shell",
        "command": "true",
        "retries": 2,
        "retry_interval": "30s",
        "depends_on": ["b"],
    }


def test_typed_tasks_render_their_specs() -> None:
    with Workflow("types") as wf:
        Http(
            "call",
            "https://example.test/api",
            "POST",
            headers={"X-A": "1"},
            body='{"a": 1}',
            expected_status=[200, 201],
            outputs={"id": "$.data.id"},
        )
        Sql("q", datasource="warehouse", query="select 1 as n", output="first_row")
        External(
            "resize",
            queue="images",
            params={"url": "${url}"},
            lease=timedelta(seconds=30),
            timeout="5m",
            retries=2,
        )
        Task("ask", "wait", timeout=3600, on_timeout="succeed")
    tasks = {t["name"]: t for t in wf.to_dict()["tasks"]}
    assert tasks["call"] == {
        "name": "call",
        "type": "http",
        "http": {
            "url": "https://example.test/api",
            "method": "POST",
            "headers": {"X-A": "1"},
            "body": '{"a": 1}',
            "expected_status": [200, 201],
            "outputs": {"id": "$.data.id"},
        },
    }
    assert tasks["q"]["sql"] == {
        "datasource": "warehouse",
        "query": "select 1 as n",
        "output": "first_row",
    }
    assert tasks["resize"] == {
        "name": "resize",
        "type": "external",
        "queue": "images",
        "params": {"url": "${url}"},
        "lease": "30s",
        "timeout": "5m",
        "retries": 2,
    }
    assert tasks["ask"] == {"name": "ask", "type": "wait", "timeout": "1h", "on_timeout": "succeed"}


def test_bad_graphs_are_refused_before_the_server() -> None:
    with Workflow("bad") as wf:
        Noop("a")
        with pytest.raises(ValueError, match="has a task 'a' already"):
            Noop("a")
        b = Noop("b")
        with pytest.raises(ValueError, match="itself"):
            b >> b
        Task("c", "noop", depends_on=["missing"])
    with pytest.raises(ValueError, match="depends on 'missing'"):
        wf.to_dict()
    other = Workflow("other")
    with pytest.raises(ValueError, match="belongs to workflow 'bad'"):
        other.add(b)
    with pytest.raises(TypeError):
        b >> "c"  # type: ignore[operator]


def test_nested_workflows_collect_into_the_innermost() -> None:
    with Workflow("outer") as outer:
        Noop("o")
        with Workflow("inner") as inner:
            Noop("i")
        Noop("o2")
    assert list(outer.tasks) == ["o", "o2"]
    assert list(inner.tasks) == ["i"]
    assert Noop("free").workflow is None


def test_yaml_and_json_render_the_same_definition() -> None:
    with Workflow("y", project="p", params={"dt": "2026-01-01"}) as wf:
        Shell("a", command="echo '${setValue(x=1)}'") >> Noop("b")
    assert json.loads(wf.to_json()) == wf.to_dict()
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load(wf.to_yaml()) == wf.to_dict()


def test_durations() -> None:
    assert duration(30) == "30s"
    assert duration(300) == "5m"
    assert duration(7200) == "2h"
    assert duration(90) == "90s"
    assert duration(1.5) == "1500ms"
    assert duration(timedelta(minutes=2)) == "2m"
    assert duration("20s") == "20s"
    with pytest.raises(ValueError):
        duration(-1)
