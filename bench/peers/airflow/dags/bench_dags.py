"""The shapes shoal-bench --compare airflow runs on shoal, as Airflow DAGs.

chain_100_*: 100 tasks one after another. fanout_500_*: an EmptyOperator root and 500
tasks depending on it, as shoal's fan-out has a noop root. *_bash tasks run `true` in
bash; *_empty tasks are EmptyOperators, which the scheduler marks done without running
anything (shoal's noop tasks).
"""

from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, chain

CHAIN = 100
FANOUT = 500


def task(kind, task_id):
    if kind == "bash":
        return BashOperator(task_id=task_id, bash_command="true")
    return EmptyOperator(task_id=task_id)


for kind in ("bash", "empty"):
    # Unpaused from the start, so that a trigger runs without an `airflow dags unpause`.
    with DAG(f"chain_{CHAIN}_{kind}", schedule=None, is_paused_upon_creation=False):
        chain(*(task(kind, f"t{i}") for i in range(CHAIN)))

    with DAG(f"fanout_{FANOUT}_{kind}", schedule=None, is_paused_upon_creation=False):
        EmptyOperator(task_id="root") >> [task(kind, f"f{i}") for i in range(FANOUT)]
