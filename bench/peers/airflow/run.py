"""Runs the bench DAGs on Airflow with the LocalExecutor and prints the timings as JSON.

Starts what Airflow 3 needs to run tasks (api-server, whose execution API the tasks talk
to; dag-processor; scheduler, which runs the LocalExecutor), triggers each DAG --runs
times one run at a time, reads each run's trigger → success time from Airflow's own
records (dag_run.queued_at → end_date), and stops everything it started. Run it with the
venv's python (setup.sh makes it); shoal-bench --compare airflow does.

`run.py --migrate` only migrates the database (setup.sh calls it).
"""

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psycopg2

HERE = Path(__file__).resolve().parent
HOME = HERE / "home"
DSN = "postgresql://postgres@127.0.0.1:5432/airflow_bench"
DAGS = ["chain_100_bash", "fanout_500_bash", "chain_100_empty", "fanout_500_empty"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(port):
    """Airflow's stock settings, apart from what it takes to run here."""
    env = dict(os.environ)
    env.update(
        AIRFLOW_HOME=str(HOME),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=DSN.replace("postgresql:", "postgresql+psycopg2:"),
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(HERE / "dags"),
        # A free port instead of 8080, which something else on the machine may hold, on
        # loopback only; the tasks find the execution API there.
        AIRFLOW__API__HOST="127.0.0.1",
        AIRFLOW__API__PORT=str(port),
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{port}/execution/",
    )
    return env


def airflow(*args):
    return [str(Path(sys.executable).parent / "airflow"), *args]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Airflow:
    """The processes started, each in a process group of its own (they fork workers)."""

    def __init__(self, env):
        self.env = env
        self.procs = []

    def start(self, name, *args):
        out = open(HOME / f"{name}.log", "wb")
        p = subprocess.Popen(
            airflow(*args), env=self.env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        log(f"started airflow {name} (pid {p.pid}), log in {out.name}")
        self.procs.append((name, p))

    def check(self):
        for name, p in self.procs:
            if p.poll() is not None:
                sys.exit(f"airflow {name} exited with {p.returncode}: see {HOME / (name + '.log')}")

    def stop(self):
        for _, p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for _, p in self.procs:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            # The group, not just the leader: executor and api workers outlive it otherwise.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def wait(what, ready, procs, timeout):
    deadline = time.monotonic() + timeout
    while not ready():
        procs.check()
        if time.monotonic() > deadline:
            sys.exit(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.5)


def healthy(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def query(sql, *params):
    with psycopg2.connect(DSN) as db, db.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def run_once(procs, env, dag, run_id, timeout):
    """Triggers one run of `dag`; returns (trigger → success in seconds, tasks in the run)."""
    subprocess.run(
        airflow("dags", "trigger", dag, "--run-id", run_id), env=env, check=True,
        stdout=subprocess.DEVNULL,
    )
    sql = "SELECT state, end_date - queued_at FROM dag_run WHERE dag_id = %s AND run_id = %s"
    deadline = time.monotonic() + timeout
    while True:
        [(state, took)] = query(sql, dag, run_id)
        if state == "success":
            [(tasks,)] = query(
                "SELECT count(*) FROM task_instance WHERE dag_id = %s AND run_id = %s", dag, run_id
            )
            return took.total_seconds(), tasks
        if state == "failed":
            sys.exit(f"{dag} run {run_id} failed: task logs under {HOME / 'logs'}")
        procs.check()
        if time.monotonic() > deadline:
            sys.exit(f"timed out: {dag} run {run_id} is still {state} after {timeout} s")
        time.sleep(0.5)


def query_config(env, section, key):
    out = subprocess.run(airflow("config", "get-value", section, key), env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]



def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dags", default=",".join(DAGS), help="comma separated")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds, per run")
    parser.add_argument("--migrate", action="store_true", help="only migrate the database")
    args = parser.parse_args()

    HOME.mkdir(exist_ok=True)
    port = free_port()
    env = environment(port)
    if args.migrate:
        subprocess.run(airflow("db", "migrate"), env=env, check=True)
        return
    # Task logs of this invocation only.
    shutil.rmtree(HOME / "logs", ignore_errors=True)

    dags = args.dags.split(",")
    procs = Airflow(env)
    try:
        procs.start("api-server", "api-server")
        procs.start("dag-processor", "dag-processor")
        procs.start("scheduler", "scheduler")
        wait("the api-server", lambda: healthy(f"http://127.0.0.1:{port}/api/v2/monitor/health"),
             procs, 120)
        wait("the DAGs to be parsed",
             lambda: query("SELECT count(*) FROM serialized_dag WHERE dag_id = ANY(%s)", dags)
             == [(len(dags),)], procs, 300)
        stamp = time.strftime("%Y%m%d%H%M%S")
        results = {}
        for dag in dags:
            seconds = []
            for i in range(1, args.runs + 1):
                took, tasks = run_once(procs, env, dag, f"bench-{stamp}-{i}", args.timeout)
                log(f"{dag} run {i}/{args.runs}: {took:.1f} s for {tasks} tasks")
                seconds.append(took)
            results[dag] = {"tasks": tasks, "seconds": seconds}
    finally:
        procs.stop()

    [(pg,)] = query("SHOW server_version")
    print(json.dumps({
        "airflow": importlib.metadata.version("apache-airflow"),
        "python": platform.python_version(),
        "postgres": pg,
        "executor": "LocalExecutor",
        "parallelism": int(query_config(env, "core", "parallelism")),
        "max_active_tasks_per_dag": int(query_config(env, "core", "max_active_tasks_per_dag")),
        "dags": results,
    }))


if __name__ == "__main__":
    main()
