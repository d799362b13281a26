"""The pure maintenance plan (:mod:`airflow_provider_resilient.supervisor.maintenance`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_resilient.policy import Attempt
from airflow_provider_resilient.supervisor import EndAttempt, MoveOff, Phase, RunState, Submit, step
from airflow_provider_resilient.supervisor.maintenance import (
    MaintenancePolicy,
    MaintenanceSettings,
    Notice,
    plan,
)

START = 1_800_000_000.0
NOTICE = Notice("SCHEDULED", "PENDING", START, START + 3600)
RIDE = MaintenanceSettings(MaintenancePolicy.RIDE_OUT, lead_seconds=600)
MOVE = MaintenanceSettings(MaintenancePolicy.MOVE, lead_seconds=600)


def test_nothing_before_the_lead_then_one_request_naming_the_window():
    assert plan(NOTICE, START - 601, RIDE, requested=None, acked=[""]) is None
    first = plan(NOTICE, START - 599, RIDE, requested=None, acked=[""])
    assert first is not None and first.request == "scheduled maintenance at 2027-01-15T08:00:00Z" and not first.move
    # Requested once: riding out, nothing more to do until the window.
    assert plan(NOTICE, START - 10, RIDE, requested=first.request, acked=[first.request]) is None


def test_a_late_notice_is_acted_on_at_once_and_an_ongoing_one_is_left_to_the_node_state():
    assert plan(NOTICE, START - 5, RIDE, requested=None, acked=[]).request is not None
    ongoing = Notice("SCHEDULED", "ONGOING", START, START + 3600)
    assert plan(ongoing, START + 5, RIDE, requested=None, acked=[]) is None
    assert plan(None, START, RIDE, requested=None, acked=[]) is None


def test_move_waits_for_every_worker_or_half_the_lead():
    token = NOTICE.token
    assert plan(NOTICE, START - 500, MOVE, requested=token, acked=[token, ""]) is None
    assert plan(NOTICE, START - 500, MOVE, requested=token, acked=[token, token]).move
    assert plan(NOTICE, START - 299, MOVE, requested=token, acked=["", ""]).move  # no helper in the workload


def test_a_moved_window_is_a_new_request():
    moved = Notice("SCHEDULED", "PENDING", START + 86400, START + 90000)
    assert plan(moved, START + 86000, RIDE, requested=NOTICE.token, acked=[NOTICE.token]).request == moved.token


@given(st.floats(-1e6, 1e6), st.sampled_from(list(MaintenancePolicy)), st.lists(st.sampled_from(["", "x"])))
def test_never_a_move_before_the_checkpoint_was_requested(offset, policy, acked):
    settings = MaintenanceSettings(policy, lead_seconds=600)
    ahead = plan(NOTICE, START + offset, settings, requested=None, acked=acked)
    assert ahead is None or (ahead.request == NOTICE.token and not ahead.move)


def test_a_move_off_ends_the_attempt_and_submits_the_next_without_an_incident():
    running = RunState(phase=Phase.RUNNING, history=(Attempt(1, "node-a1", 0, started_at=START),),
                       job_name="node-a1")
    state, action = step(running, MoveOff(START + 10, "window ahead"))
    assert action == EndAttempt("node-a1", "window ahead") and state.phase == Phase.ENDING
    assert state.history[-1].ended_by == "maintenance" and not state.history[-1].incidents
    assert state.next_submit == Submit(2, 0, "maintenance_event")


def test_a_lead_of_zero_never_asks():
    never = MaintenanceSettings(MaintenancePolicy.MOVE, lead_seconds=0)
    assert plan(NOTICE, START - 1, never, requested=None, acked=[]) is None


def test_the_next_look_is_the_request_time_then_half_the_lead_when_moving():
    from airflow_provider_resilient.supervisor.maintenance import next_look

    assert next_look(NOTICE, RIDE, requested=None) == START - 600
    assert next_look(NOTICE, RIDE, requested=NOTICE.token) is None  # requested, riding out: nothing more
    assert next_look(NOTICE, MOVE, requested=NOTICE.token) == START - 300
    assert next_look(None, MOVE, requested=None) is None
    assert next_look(NOTICE, MaintenanceSettings(lead_seconds=0), requested=None) is None
