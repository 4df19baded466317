"""shoal's Python SDK: a REST client, workflows written in Python, external task workers.

    from shoal_sdk import Client, Workflow, Shell

    client = Client(api="http://127.0.0.1:12345", token="...")
    with Workflow("hello", project="default") as wf:
        Shell("a", command="echo a") >> Shell("b", command="echo b")
    client.apply(wf)
    run = client.start("default", "hello", wait=True)
    print(run.state, run.outputs)
"""

from ._version import __version__
from .client import FINAL_STATES, Applied, Client, Completion, ExternalTask, Run
from .errors import (
    BadRequest,
    CommandFailed,
    Conflict,
    ConnectionFailed,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    ServerError,
    ShoalError,
    Unauthorized,
    WaitTimeout,
)
from .worker import TaskContext, Worker
from .workflow import External, Http, Noop, Python, Shell, Sql, Task, Workflow, duration

__all__ = [
    "__version__",
    "Applied",
    "BadRequest",
    "Client",
    "CommandFailed",
    "Completion",
    "Conflict",
    "ConnectionFailed",
    "External",
    "ExternalTask",
    "FINAL_STATES",
    "Forbidden",
    "Http",
    "Noop",
    "NotFound",
    "PayloadTooLarge",
    "Python",
    "Run",
    "ServerError",
    "Shell",
    "ShoalError",
    "Sql",
    "Task",
    "TaskContext",
    "Unauthorized",
    "WaitTimeout",
    "Worker",
    "Workflow",
    "duration",
]
