#!/usr/bin/env bash
# Installs Apache Airflow into bench/peers/airflow/.venv and migrates a private database
# for it on the local Postgres (127.0.0.1:5432, trust auth, user postgres). Idempotent:
# the venv is reused when it already has this Airflow, the database is made anew each time.
set -euo pipefail

AIRFLOW_VERSION=3.3.2
PYTHON_VERSION=3.11
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=$HERE/.venv
# Airflow's own constraints pin every dependency to what its release was tested with.
# Where that address cannot be reached, constraints-$PYTHON_VERSION.txt beside this script
# (a `pip freeze` of an install that ran the bench) pins the same way.
CONSTRAINTS_URL=https://raw.githubusercontent.com/apache/airflow/constraints-$AIRFLOW_VERSION/constraints-$PYTHON_VERSION.txt

if [[ "$("$VENV/bin/python" -c 'import airflow; print(airflow.__version__)' 2>/dev/null)" != "$AIRFLOW_VERSION" ]]; then
    python$PYTHON_VERSION -m venv "$VENV"
    constraints=$(mktemp)
    trap 'rm -f "$constraints"' EXIT
    if ! curl -fsS -m 20 -o "$constraints" "$CONSTRAINTS_URL"; then
        echo "setup.sh: $CONSTRAINTS_URL not reachable; using the pinned constraints-$PYTHON_VERSION.txt" >&2
        cp "$HERE/constraints-$PYTHON_VERSION.txt" "$constraints"
    fi
    "$VENV/bin/pip" install --quiet "apache-airflow[postgres]==$AIRFLOW_VERSION" --constraint "$constraints"
fi

# A private database, dropped and made anew, that `airflow db migrate` fills.
psql -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1 -q \
    -c 'DROP DATABASE IF EXISTS airflow_bench WITH (FORCE)' -c 'CREATE DATABASE airflow_bench'
"$VENV/bin/python" "$HERE/run.py" --migrate
