"""ResilientModelArtsTrainingJobOperator against the emulated ModelArts, driven by the real SDK, with checkpoints in
the emulated OBS: crashes resumed from the checkpoint, the platform's own re-issues kept within one attempt, a
hardware fault outside them made a new job, a user error given up on, a stockout failed over to another flavor, a
killed worker reattached -- each asserting the attempt history and the emulator's jobs (one per attempt, none left
live)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_resilient.compat import MODELARTS_TRIGGER, AirflowFailException
from airflow_provider_resilient.operators.modelarts import ResilientModelArtsTrainingJobOperator
from airflow_provider_resilient.policy import Backoff, Budget, RetryPolicy

from ..operators.test_vertex_operator_unit import TI, Store

WORKLOAD = Path(__file__).resolve().parents[2] / "dags" / "workloads" / "train_digits.py"
FAST = Backoff(initial_seconds=0.05, max_seconds=0.2)
POLICY = RetryPolicy(backoff=FAST, failover_backoff=FAST, budgets={"stockout": Budget(max_retries=3, backoff=FAST)})
RUN_ID = "manual__2026-01-01T00:00:00+00:00"
BUCKET = "ma-ckpt"
pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)


@pytest.fixture
def emulator(resilient_emulator: Any, request: pytest.FixtureRequest) -> Any:
    """The emulator (its OBS's address and credentials exported), and a checkpoint directory of this test's own in
    OBS (the bucket made on demand)."""
    resilient_emulator.ckpt = f"obs://{BUCKET}/{request.node.name}/ckpt"
    return resilient_emulator


def train(epochs: int = 9) -> str:
    return (f"{sys.executable} {WORKLOAD} --epochs {epochs} --checkpoint-every 3 --epoch-seconds 0.05 "
            '--checkpoint-dir "$RESILIENT_CHECKPOINT_DIR"')


def operator(emulator: Any, command: str, **kwargs: Any) -> ResilientModelArtsTrainingJobOperator:
    defaults: dict[str, Any] = dict(task_id="train", name="digits", flavor_id="modelarts.vm.cpu.8u",
                                    command=command, image_url="swr.cn-north-4.myhuaweicloud.com/t/train:1",
                                    checkpoint_dir=emulator.ckpt, checkpoint_marker="COMMITTED", poll_interval=0.2,
                                    resilience_policy=POLICY, min_defer_seconds=0.0)
    defaults.update(kwargs)
    return ResilientModelArtsTrainingJobOperator(**defaults)


def run(op: ResilientModelArtsTrainingJobOperator, store: Store | None = None) -> tuple[Any, dict[str, Any]]:
    ti = TI()
    ctx = {"task_state_store": store or Store(), "ti": ti, "run_id": RUN_ID}
    return op.execute(ctx), ti.xcom


def jobs(emulator: Any) -> list[dict[str, Any]]:
    """The emulator's training jobs (what its control API's GET /modelarts-jobs answers)."""
    return list(emulator.modelarts.summary())


def fault(emulator: Any, **spec: Any) -> None:
    emulator.add_fault({"service": "modelarts", **spec})


def test_a_crash_is_resumed_from_the_latest_checkpoint_in_obs(emulator: Any) -> None:
    # at_step strikes once step 6's directory in the emulated OBS holds an object (emulator.vertex.runs.written_step):
    # possibly during that save, so the newest complete one may be step 3's. At step 3 (the first save) a crash
    # during the save left nothing complete, and attempt 2 started from scratch (a fresh clone's make test, 2026-11-28).
    fault(emulator, kind="crash", exit_code=139, at_step=6, match={"display_name": "digits-*-a1"})
    result, xcom = run(operator(emulator, train()))
    attempts = result["attempts"]
    assert [a["number"] for a in attempts] == [1, 2]
    assert attempts[0]["incidents"][0]["failure"]["failure_class"] == "transient_crash"
    assert attempts[1]["resumed_from_step"] >= 3 and attempts[1]["resumed_from_uri"].startswith(f"{emulator.ckpt}/")
    assert result["state"] == "Completed" and result["checkpoint"]["step"] == 9
    assert xcom["goodput"] and "attempt_history" in xcom
    listed = jobs(emulator)
    assert len(listed) == 2 and all(j["phase"] in ("Failed", "Completed") for j in listed)


def test_the_platforms_own_reissue_after_a_failed_precheck_stays_within_one_attempt(emulator: Any) -> None:
    fault(emulator, kind="preflight", item="disk-size shm", match={"display_name": "digits-*-a1"}, times=1)
    result, _ = run(operator(emulator, train(3), job_retry_num=2))
    assert [a["number"] for a in result["attempts"]] == [1]
    assert list(result["platform_reissues"].values()) == [1]
    assert result["attempts"][0]["platform_restarts"] == 1  # in the attempt history too
    from airflow_provider_resilient.policy import history_table

    assert "succeeded (after 1 platform re-issue)" in history_table(result["attempts"])[1]
    assert [j["phase"] for j in jobs(emulator)] == ["Completed"]


def test_a_hardware_fault_without_the_platforms_fault_tolerance_is_a_new_job_on_new_nodes(emulator: Any) -> None:
    fault(emulator, kind="hardware", at_step=1, step_source="log", match={"display_name": "digits-*-a1"})
    result, _ = run(operator(emulator, train(3)))
    attempts = result["attempts"]
    assert [a["number"] for a in attempts] == [1, 2]
    assert attempts[0]["incidents"][0]["failure"]["failure_class"] == "node_unhealthy"
    assert [j["phase"] for j in jobs(emulator)] == ["Failed", "Completed"]


def test_a_user_error_is_given_up_on_with_one_job(emulator: Any) -> None:
    with pytest.raises(AirflowFailException, match="permanent_user_error"):
        run(operator(emulator, "echo bad input; exit 1"))
    assert [j["phase"] for j in jobs(emulator)] == ["Failed"]


def test_a_sold_out_flavor_fails_over_to_the_fallback_flavor(emulator: Any) -> None:
    """The primary flavor has no capacity: the job queues (Pending) past the queue timeout, is stopped, and the next
    attempt runs on the fallback flavor."""
    fault(emulator, kind="stockout", times=None, match={"display_name": "digits-*-a1"})
    policy = RetryPolicy(backoff=FAST, failover_backoff=FAST, queue_timeout_seconds=1.0)
    result, _ = run(operator(emulator, train(3), resilience_policy=policy,
                             fallbacks=[{"flavor_id": "modelarts.vm.cpu.2u"}]))
    attempts = result["attempts"]
    assert attempts[0]["incidents"][0]["failure"]["failure_class"] == "queue_timeout"
    assert attempts[1]["fallback_index"] == 0 and result["state"] == "Completed"
    assert [j["phase"] for j in jobs(emulator)] == ["Terminated", "Completed"]


def test_a_quota_refusal_is_waited_out(emulator: Any) -> None:
    fault(emulator, kind="quota", match={"display_name": "digits-*-a1"})
    policy = RetryPolicy(backoff=FAST, failover_backoff=FAST, budgets={"quota_wait": Budget(max_seconds=30,
                                                                                             backoff=FAST)})
    result, _ = run(operator(emulator, train(3), resilience_policy=policy))
    assert result["attempts"][0]["incidents"][0]["failure"]["failure_class"] == "quota_exceeded"
    assert result["state"] == "Completed"


class Killed(BaseException):
    """The worker process dying (not an Exception: nothing in the operator may catch it)."""


def test_a_worker_killed_after_the_create_reattaches_with_no_second_job(emulator: Any) -> None:
    store = Store()
    first = operator(emulator, train(6))

    def die(*_: Any) -> None:
        raise Killed

    first._sleep = die  # the first look found it running; the process dies before the next
    with pytest.raises(Killed):
        run(first, store)
    result, _ = run(operator(emulator, train(6)), store)
    assert [a["number"] for a in result["attempts"]] == [1]
    assert len(jobs(emulator)) == 1 and jobs(emulator)[0]["phase"] == "Completed"


def test_on_kill_stops_the_live_job(emulator: Any) -> None:
    store = Store()
    op = operator(emulator, train(400))

    def die(*_: Any) -> None:
        raise Killed

    op._sleep = die
    with pytest.raises(Killed):
        run(op, store)
    op.on_kill()  # outside Airflow's task runner: a kill as asked
    from airflow_provider_resilient.hooks.modelarts import ResilientModelArtsHook

    job = ResilientModelArtsHook().wait_for_end(jobs(emulator)[0]["id"], timeout=30, interval=0.1)
    assert job.status.phase == "Terminated"


def test_a_store_emptied_after_success_returns_the_earlier_result(emulator: Any) -> None:
    run(operator(emulator, train(3)))
    result, _ = run(operator(emulator, train(3)))  # a new store: the run is rebuilt from the job's tags
    assert [a["number"] for a in result["attempts"]] == [1] and len(jobs(emulator)) == 1


@pytest.mark.skipif(not MODELARTS_TRIGGER, reason="before Airflow 3.3 the ModelArts operator watches from the worker")
def test_a_deferred_run_waits_in_the_trigger_and_resumes_through_execute_complete(emulator: Any) -> None:
    import asyncio

    from airflow_provider_resilient.compat import TaskDeferred

    fault(emulator, kind="crash", exit_code=139, at_step=4, step_source="log", match={"display_name": "digits-*-a1"})
    store, ti = Store(), TI()
    ctx = {"task_state_store": store, "ti": ti, "run_id": RUN_ID}
    op = operator(emulator, train(), deferrable=True)

    async def fire(trigger: Any) -> Any:
        async for event in trigger.run():
            return event.payload

    call: Any = lambda: op.execute(ctx)  # noqa: E731
    triggers = []
    for _ in range(10):
        try:
            result = call()
            break
        except TaskDeferred as deferred:
            triggers.append(type(deferred.trigger).__name__)
            payload = asyncio.run(fire(deferred.trigger))
            call = lambda p=payload: op.execute_complete(ctx, p)  # noqa: E731
    assert "ModelArtsTrainingJobTrigger" in triggers
    assert [a["number"] for a in result["attempts"]] == [1, 2] and result["state"] == "Completed"


@pytest.mark.skipif(not MODELARTS_TRIGGER, reason="before Airflow 3.3 the ModelArts operator watches from the worker")
def test_two_deferred_jobs_share_one_poller_of_the_region(emulator: Any) -> None:
    """Two triggers of one event loop watching jobs of one region: one job search per cycle serves both; each reads
    its own job only once it ended (to classify it)."""
    import asyncio

    from airflow_provider_resilient.compat import TaskDeferred
    from airflow_provider_resilient.triggers.modelarts import ModelArtsTrainingJobTrigger

    triggers = []
    for index in (1, 2):
        ti = TI()
        ctx = {"task_state_store": Store(), "ti": ti, "run_id": f"{RUN_ID}-{index}"}
        with pytest.raises(TaskDeferred) as deferred:
            operator(emulator, train(6), deferrable=True, checkpoint_dir=f"{emulator.ckpt}/{index}").execute(ctx)
        assert isinstance(deferred.value.trigger, ModelArtsTrainingJobTrigger)
        triggers.append(deferred.value.trigger)

    async def both() -> list[Any]:
        async def first(trigger: Any) -> Any:
            async for event in trigger.run():
                return event.payload
        return await asyncio.gather(*(first(t) for t in triggers))

    before = {m: len(emulator.calls.list(m)) for m in ("ListTrainingJobs", "ShowTrainingJobDetails")}
    payloads = asyncio.run(both())
    assert [p["status"] for p in payloads] == ["terminal", "terminal"]
    assert all(p["job"]["state"] == "Completed" for p in payloads)
    searches = len(emulator.calls.list("ListTrainingJobs")) - before["ListTrainingJobs"]
    reads = len(emulator.calls.list("ShowTrainingJobDetails")) - before["ShowTrainingJobDetails"]
    assert searches >= 3 and reads == 2, (searches, reads)  # one read each, at the end


@pytest.mark.skipif(MODELARTS_TRIGGER, reason="from Airflow 3.3 a deferrable ModelArts operator defers")
def test_before_airflow_3_3_a_deferrable_operator_watches_from_the_worker(emulator: Any) -> None:
    result, _ = run(operator(emulator, train(3), deferrable=True))  # no TaskDeferred: polled to the end
    assert result["state"] == "Completed"
