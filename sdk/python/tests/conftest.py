"""A real `shoal standalone` for the tests: a free port, a temporary data dir, a token.

The binary is $SHOAL_BIN, else the repository's target/debug/shoal (`cargo build -p shoal`).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from shoal_sdk import Client

REPO = Path(__file__).resolve().parents[3]
READY = re.compile(r"shoal standalone ready url=(\S+)")


@dataclass
class Server:
    url: str
    token: str
    log: Path
    data_dir: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def _binary() -> Path:
    given = os.environ.get("SHOAL_BIN")
    path = Path(given) if given else REPO / "target" / "debug" / "shoal"
    if not path.exists():
        pytest.fail(f"no shoal binary at {path}: run `cargo build -p shoal` or set SHOAL_BIN")
    return path


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    data_dir = Path(tempfile.mkdtemp(prefix="shoal-sdk-test-"))
    token = "sdk-test-" + secrets.token_hex(16)
    log = data_dir / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env["SHOAL_TOKEN"] = token
    env.setdefault("RUST_LOG", "info")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                str(_binary()),
                "standalone",
                "--data-dir",
                str(data_dir),
                "--port",
                "0",
                "--single-team",
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None:
            m = READY.search(log.read_text(errors="replace"))
            if m:
                url = m.group(1)
                break
            if proc.poll() is not None:
                pytest.fail(f"shoal standalone exited with {proc.returncode}:\n{log.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"shoal standalone not ready after 60s:\n{log.read_text()}")
            time.sleep(0.05)
        yield Server(url=url, token=token, log=log, data_dir=data_dir)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if os.environ.get("SHOAL_SDK_KEEP_DATA"):
            print(f"shoal data dir kept: {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def client(server: Server) -> Client:
    return Client(api=server.url, token=server.token)


@pytest.fixture(scope="session")
def project(client: Client) -> str:
    """A project of the tests' own."""
    name = "sdk-tests"
    client.create_project(name, "the Python SDK's tests")
    return name


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> str:
    """A workflow name of this test's own."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:100]
    return f"{name}_{secrets.token_hex(3)}"
