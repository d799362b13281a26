"""The reconciler ships with the package: one line of a DAG folder makes its DAG from Airflow's configuration."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_provider_resilient.operators.reconcile import ResilientReconcileOperator
from airflow_provider_resilient.reconcile import OPTIONS, parse_schedule, reconcile_dag, split_list

ROOT = Path(__file__).resolve().parents[1]
ENV = {f"AIRFLOW__RESILIENT__{option.upper()}": "" for option in OPTIONS}


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch) -> None:
    """``[resilient]`` as docker-compose.yaml sets it for the demo."""
    monkeypatch.setenv("AIRFLOW__RESILIENT__RECONCILE_PROJECTS", "resilient-demo")
    monkeypatch.setenv("AIRFLOW__RESILIENT__RECONCILE_REGIONS", "us-central1,europe-west4")
    monkeypatch.setenv("AIRFLOW__RESILIENT__RECONCILE_ZONES", "us-central2-b")
    monkeypatch.setenv("AIRFLOW__RESILIENT__RECONCILE_SCHEDULE", "60")


@pytest.fixture
def unconfigured(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def tasks(dag) -> dict[str, ResilientReconcileOperator]:
    return dict(dag.task_dict)


def test_one_call_makes_the_dag_from_the_configuration(configured):
    dag = reconcile_dag()
    assert dag.dag_id == "resilient_reconcile" and dag.schedule == timedelta(seconds=60)
    assert dag.max_active_runs == 3 and dag.catchup is False  # a run stuck on a lost task holds none back
    (task,) = tasks(dag).values()
    assert isinstance(task, ResilientReconcileOperator) and task.task_id == "release_orphans"
    assert (task.project_id, task.regions, task.zones) == ("resilient-demo", ["us-central1", "europe-west4"],
                                                           ["us-central2-b"])
    assert task.retries == 0 and task.gcp_conn_id == "google_cloud_default"
    assert dag.fileloc == __file__  # the caller's file, not the package's: Airflow parses and shows that one


def test_arguments_win_over_the_configuration_and_each_project_gets_a_task(configured):
    dag = reconcile_dag(projects="p-one p-two", zones=[], regions=["asia-east1"], schedule="@hourly",
                        dag_id="sweep", dry_run=True, gcp_conn_id=None)
    assert dag.dag_id == "sweep" and dag.schedule == "@hourly"
    made = tasks(dag)
    assert sorted(made) == ["release_orphans_p-one", "release_orphans_p-two"]
    assert all(t.regions == ["asia-east1"] and t.zones == [] and t.dry_run and t.gcp_conn_id is None
               for t in made.values())


@pytest.mark.parametrize("missing", ["RECONCILE_PROJECTS", "BOTH_PLACES"])
def test_nothing_configured_is_a_clear_error_at_parse_time(unconfigured, monkeypatch, missing):
    if missing == "BOTH_PLACES":
        monkeypatch.setenv("AIRFLOW__RESILIENT__RECONCILE_PROJECTS", "p")  # a project, but no region or zone
    with pytest.raises(ValueError, match=r"\[resilient\]: reconcile_projects, reconcile_regions, reconcile_zones") \
            as raised:
        reconcile_dag()
    assert "reconcile_dag(projects=[...], regions=[...], zones=[...])" in str(raised.value)
    expected = "no region or zone to reconcile" if missing == "BOTH_PLACES" else "no project to reconcile"
    assert str(raised.value).startswith(f"reconcile_dag: {expected}")


def test_huaweicloud_connections_add_a_modelarts_task_each(configured, monkeypatch):
    monkeypatch.setenv("AIRFLOW__RESILIENT__RECONCILE_HUAWEICLOUD_CONN_IDS", "huaweicloud_default")
    made = tasks(reconcile_dag())
    assert sorted(made) == ["release_orphans", "release_orphans_modelarts"]
    modelarts = made["release_orphans_modelarts"]
    assert (modelarts.huaweicloud_conn_id, modelarts.project_id, modelarts.regions, modelarts.zones) == (
        "huaweicloud_default", None, [], [])
    assert made["release_orphans"].huaweicloud_conn_id is None and modelarts.retries == 0
    several = tasks(reconcile_dag(huaweicloud_conn_ids="hw-beijing, hw-shanghai", dry_run=True))
    assert sorted(several) == ["release_orphans", "release_orphans_modelarts_hw-beijing",
                               "release_orphans_modelarts_hw-shanghai"]
    assert several["release_orphans_modelarts_hw-shanghai"].dry_run


def test_modelarts_alone_needs_no_google_cloud_option(unconfigured, monkeypatch):
    monkeypatch.setenv("AIRFLOW__RESILIENT__RECONCILE_HUAWEICLOUD_CONN_IDS", "huaweicloud_default")
    assert list(tasks(reconcile_dag())) == ["release_orphans_modelarts"]
    # A Google Cloud option given half is still an error, ModelArts or not.
    monkeypatch.setenv("AIRFLOW__RESILIENT__RECONCILE_PROJECTS", "p")
    with pytest.raises(ValueError, match="no region or zone to reconcile"):
        reconcile_dag()


def test_schedules_and_lists():
    assert parse_schedule(None) == parse_schedule("") == timedelta(seconds=300)
    assert parse_schedule("90") == parse_schedule(90) == parse_schedule(timedelta(seconds=90)) == timedelta(seconds=90)
    assert parse_schedule("*/5 * * * *") == "*/5 * * * *"
    with pytest.raises(ValueError, match="> 0 seconds"):
        parse_schedule("0")
    assert split_list(" a, b  c,,") == ["a", "b", "c"] and split_list(None) == [] and split_list(["x", " "]) == ["x"]


@pytest.mark.parametrize("configured_too", [True, False], ids=["configured", "unconfigured"])
def test_the_repositorys_dag_file_is_the_one_line_and_parses(unconfigured, monkeypatch, tmp_path, configured_too):
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow before 3.2
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef]

    monkeypatch.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    source = ROOT / "dags" / "resilient_reconcile.py"
    import ast

    body = ast.parse(source.read_text()).body
    statements = [node for node in body if not isinstance(node, ast.Import | ast.ImportFrom)
                  and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]  # the docstring
    assert [ast.unparse(node) for node in statements] == ["reconcile_dag()"]
    if configured_too:
        monkeypatch.setenv("AIRFLOW__RESILIENT__RECONCILE_PROJECTS", "resilient-demo")
        monkeypatch.setenv("AIRFLOW__RESILIENT__RECONCILE_ZONES", "us-central2-b")
    shutil.copy(source, tmp_path / source.name)
    bag = DagBag(dag_folder=str(tmp_path))
    if configured_too:
        assert not bag.import_errors and list(bag.dags) == ["resilient_reconcile"]
        assert bag.dags["resilient_reconcile"].fileloc == str(tmp_path / source.name)
    else:
        (error,) = bag.import_errors.values()
        assert "reconcile_projects" in error and not bag.dags
