"""Run ``dag.test()`` of a DAG file with a fixed logical date *and* run_after, so that a second call runs
the same DagRun again (``airflow dags test`` derives the run id from the current time instead).

    python dag_test_fixed_run.py DAG_FILE DAG_ID 2026-02-02

It prints ``TASK <task_id> <state>`` for each task instance, then ``DAG RUN <run_id> <state>``.
"""

import importlib.util
import sys
from datetime import UTC, datetime

path, dag_id, day = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("dag_module", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
dag = next(v for v in vars(module).values() if getattr(v, "dag_id", None) == dag_id)
moment = datetime.fromisoformat(day).replace(tzinfo=UTC)
run = dag.test(logical_date=moment, run_after=moment)
for ti in run.get_task_instances():
    print(f"TASK {ti.task_id} {ti.state}")
print(f"DAG RUN {run.run_id} {run.state}")
sys.exit(0 if str(run.state).endswith("success") else 1)
