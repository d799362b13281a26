"""Seed 004's fault-tolerance checks end to end on the emulator: the worker runner's pre-check and periodic
hardware check on emulated TPU VMs (their own ``/dev`` with one ``accelN`` per chip, their own disks), and what
the operator does with each of seed 004's four scenarios:

1. preflight failed, hardware faulty  -> isolate (a new node) and re-issue;
2. preflight failed, hardware fine    -> isolate and re-issue;
3. job failed, hardware faulty        -> isolate and re-issue;
4. job failed, hardware fine          -> the job fails.

On stepped time (``tests/tpu_time.py``): a node's creation and deletion and the backoffs cost no real time; the
runner's checks and the commands run in real time.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_resilient.compat import AirflowFailException
from airflow_provider_resilient.policy import Budget, RetryPolicy
from airflow_provider_resilient.specs.preflight import GB, Preflight

from ..tpu_time import STEPPED, PlatformTime
from .test_tpu_operator import (
    A1,
    A2,
    POLICY,
    context,
    created,
    decisions,
    deleted,
    nodes_left,
    operator,
    stored_decisions,
)

pytestmark = STEPPED


@pytest.fixture
def platform_time(resilient_emulator: Any) -> PlatformTime:
    """The emulator's manual clock and the operator's clock and sleep, as one time."""
    return PlatformTime(resilient_emulator)


#: A workload that reports step 1, then runs until the test's fault takes a chip; it then fails the way a user's
#: job does on lost hardware (exit 1: a plain error, no signal), unless the runner stopped it first (SIGTERM).
USES_THE_CHIPS = ('echo "step 1"; while ls "$RESILIENT_DEVICE_ROOT"/accel0 >/dev/null 2>&1 && '
                  '[ "$(ls "$RESILIENT_DEVICE_ROOT" | grep -c accel)" = 4 ]; do sleep 0.02; done; exit 1')
SUCCEEDS = 'echo "step 1"'
#: Attempt 1 uses the chips until the fault; later attempts end at once.
FIRST_USES_THE_CHIPS = f'if [ "$RESILIENT_ATTEMPT" = 1 ]; then {USES_THE_CHIPS}; else {SUCCEEDS}; fi'


def worker_log(emulator, node_id: str) -> str:
    return (emulator.work_dir / "tpu" / node_id / "worker-0.log").read_text()


@pytest.mark.parametrize(("fault", "item"), [
    ({"kind": "hardware", "chips": 1}, "tpu-check"),  # scenario 1: a chip of the first node is missing
    ({"kind": "preflight", "item": "dns"}, "dns"),  # scenario 2: the slice's hosts do not resolve
    ({"kind": "preflight", "item": "disk-size root"}, "disk-size root"),  # scenario 2: its boot disk is full
    ({"kind": "preflight", "item": "disk-size shm"}, "disk-size shm"),  # scenario 2: a 64 MiB /dev/shm
], ids=["1-preflight-failed-hardware-faulty", "2-dns", "2-disk-root", "2-shm"])
def test_a_failed_preflight_isolates_the_node_and_re_issues_the_job(resilient_emulator, platform_time, fault, item):
    resilient_emulator.add_fault({**fault, "match": {"nth": 1}})
    result = platform_time.drive(operator(SUCCEEDS)).execute(context())
    assert decisions(result) == [("preflight_failure", "recreate_node")]
    message = result["attempts"][0]["incidents"][0]["failure"]["message"]
    assert f"preflight failed: item {item}: " in message, message  # seed 004: the log keyword "item"
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator) and nodes_left() == []
    first, second = worker_log(resilient_emulator, A1), worker_log(resilient_emulator, A2)
    assert f"preflight failed: item {item}: " in first and "step 1" not in first  # the command never ran there
    for seed_item in ("dns", "disk-size root", "disk-size shm", "ulimit", "tpu-check"):
        assert f"preflight ok: item {seed_item}: " in second, second
    assert "preflight ok: item tpu-check: 4 of 4 TPU chips visible" in second
    assert "preflight skipped: item disk-size cache: /cache does not exist" in second


@pytest.mark.parametrize("periodic", [False, True], ids=["found-when-the-job-failed", "found-by-the-periodic-check"])
def test_scenario_3_a_job_failed_on_faulty_hardware_is_re_issued_on_a_new_node(resilient_emulator, platform_time,
                                                                               periodic):
    """A chip is lost while training runs. Either the job fails on it first (exit 1, which alone is a user's
    error) and the runner's device check at its exit finds the hardware faulty, or the periodic check finds it
    and stops the job (SIGTERM): both isolate the node."""
    resilient_emulator.add_fault({"kind": "hardware", "chips": 1, "at_step": 1, "match": {"nth": 1}})
    checks = Preflight(hardware_check_seconds=0.05 if periodic else 0)
    command = FIRST_USES_THE_CHIPS if not periodic else f'if [ "$RESILIENT_ATTEMPT" = 1 ]; then echo "step 1"; ' \
                                                        f'sleep 120; else {SUCCEEDS}; fi'
    result = platform_time.drive(operator(command, preflight=checks)).execute(context())
    assert decisions(result) == [("node_unhealthy", "recreate_node")]
    failure = result["attempts"][0]["incidents"][0]["failure"]
    assert failure["message"].startswith("worker 0 hardware check failed: tpu-check: 3 of 4 TPU chips visible")
    assert created(resilient_emulator) == [A1, A2] == deleted(resilient_emulator) and nodes_left() == []
    log = worker_log(resilient_emulator, A1)
    assert "hardware check failed: item tpu-check" in log
    assert ("no restart on this node" in log) is not periodic


def test_scenario_4_a_job_failed_on_sound_hardware_fails(resilient_emulator, platform_time):
    ctx = context()
    with pytest.raises(AirflowFailException, match="permanent_user_error"):
        platform_time.drive(operator('echo "step 1"; exit 1')).execute(ctx)
    assert stored_decisions(ctx) == [("permanent_user_error", "fail")]
    assert created(resilient_emulator) == [A1] == deleted(resilient_emulator) and nodes_left() == []


def test_job_retry_num_0_means_a_failed_preflight_fails_the_run(resilient_emulator, platform_time):
    """Seed 004's ``fault-tolerance/job-retry-num``: 0 -- no re-issue; the policy's ``preflight`` budget."""
    resilient_emulator.add_fault({"kind": "preflight", "item": "dns", "match": {"nth": 1}})
    policy = RetryPolicy(backoff=POLICY.backoff, budgets={**POLICY.budgets, "preflight": Budget(max_retries=0)})
    ctx = context()
    with pytest.raises(AirflowFailException, match="preflight"):
        platform_time.drive(operator(SUCCEEDS, resilience_policy=policy)).execute(ctx)
    assert stored_decisions(ctx) == [("preflight_failure", "give_up")]
    assert created(resilient_emulator) == [A1] == deleted(resilient_emulator)


def test_preflight_false_runs_no_check_and_thresholds_reach_the_runner(resilient_emulator, platform_time):
    resilient_emulator.add_fault({"kind": "preflight", "item": "disk-size root", "match": {"nth": 1}})
    result = platform_time.drive(operator(SUCCEEDS, preflight=False)).execute(context())  # the full disk goes unnoticed
    assert decisions(result) == [] and "preflight" not in worker_log(resilient_emulator, A1)
    resilient_emulator.reset()
    resilient_emulator.add_fault({"kind": "preflight", "item": "disk-size root", "match": {"nth": 1}})
    result = platform_time.drive(operator(SUCCEEDS, preflight={"min_root_free_bytes": GB // 2})).execute(context())
    assert decisions(result) == []  # 1 GB free passes a 0.5 GB threshold
    assert "preflight ok: item disk-size root: 1.0 GB free in /, need > 0.5 GB" in worker_log(resilient_emulator, A1)


@pytest.mark.parametrize(("preflight", "field"), [
    ({"min_root_free_gb": 10}, "preflight.min_root_free_gb"),
    ({"hardware_check_seconds": -1}, "preflight.hardware_check_seconds"),
    ({"infiniband": "maybe"}, "preflight.infiniband"),
    ("yes", "preflight"),
])
def test_bad_preflight_settings_are_refused_before_any_node(preflight, field):
    with pytest.raises(AirflowFailException, match=f"{field}: "):
        operator(SUCCEEDS, preflight=preflight)
