"""The spare node's rule (:mod:`airflow_provider_resilient.supervisor.spare`): when a run holds one, for which
attempt, and when it lets it go."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_resilient.policy import Attempt, Decision, DecisionAction, Failure, FailureClass
from airflow_provider_resilient.policy.records import Incident
from airflow_provider_resilient.supervisor import Phase, RunState
from airflow_provider_resilient.supervisor.spare import (
    CreateSpare,
    ReleaseSpare,
    Spare,
    SpareSettings,
    review_at,
    tend_spare,
)

T0 = 1_800_000_000.0
ALWAYS, AT_RISK, NEVER = SpareSettings("always"), SpareSettings("at_risk", 600.0), SpareSettings()


def failed_at(number: int, at: float) -> Attempt:
    decision = Decision(DecisionAction.RECREATE_NODE, "preemption", "preempted", decided_at=at)
    return Attempt(number, f"n-a{number}", -1, started_at=at - 100, ended_at=at,
                   incidents=(Incident(Failure(FailureClass.PREEMPTION, "preempted"), decision),))


def running(*history: Attempt) -> RunState:
    current = Attempt(len(history) + 1, f"n-a{len(history) + 1}", -1, started_at=T0)
    return RunState(phase=Phase.RUNNING, history=(*history, current), job_name=current.resource_name)


def test_always_creates_the_next_attempts_spare_while_an_attempt_runs_and_keeps_it():
    held, command = tend_spare(running(), None, T0, ALWAYS)
    assert held is None and command == CreateSpare(2, "spare_node='always'")
    spare = Spare("n-a2", 2, T0)
    assert tend_spare(running(), spare, T0 + 60, ALWAYS) == (spare, None)


def test_never_holds_nothing():
    assert tend_spare(running(failed_at(1, T0 - 5)), None, T0, NEVER) == (None, None)


def test_the_attempt_that_runs_on_the_spare_has_taken_it_and_the_next_spare_follows():
    state = running(failed_at(1, T0 - 5))  # attempt 2 runs on n-a2, which was attempt 1's spare
    held, command = tend_spare(state, Spare("n-a2", 2, T0 - 300), T0, ALWAYS)
    assert held is None and command == CreateSpare(3, "spare_node='always'")


@pytest.mark.parametrize("phase", [Phase.SUCCEEDED, Phase.FAILED])
def test_a_run_that_stops_releases_its_spare(phase):
    state = replace(running(), phase=phase)
    spare = Spare("n-a2", 2, T0)
    assert tend_spare(state, spare, T0, ALWAYS) == (spare, ReleaseSpare("n-a2", f"the run {phase}"))


def test_a_spare_made_for_another_attempt_is_released():
    """Attempt 2 was refused (no resource) and attempt 3 now runs elsewhere: the spare of attempt 2 is no one's."""
    refused = Attempt(2, None, 0, started_at=T0 - 50)
    state = running(failed_at(1, T0 - 60), refused)
    spare = Spare("n-a2", 2, T0 - 500)
    _, command = tend_spare(state, spare, T0, ALWAYS)
    assert isinstance(command, ReleaseSpare) and "made for attempt 2; attempt 4 is next" in command.reason


def test_at_risk_holds_a_spare_for_risk_seconds_after_an_interruption_then_releases_it():
    state = running(failed_at(1, T0 - 100))
    assert tend_spare(running(), None, T0, AT_RISK) == (None, None)  # nothing failed yet
    _, command = tend_spare(state, None, T0, AT_RISK)
    assert isinstance(command, CreateSpare) and command.attempt == 3 and "100 s ago" in command.reason
    spare = Spare("n-a3", 3, T0)
    assert review_at(state, AT_RISK) == T0 + 500
    assert tend_spare(state, spare, T0 + 499, AT_RISK) == (spare, None)
    assert tend_spare(state, spare, T0 + 500, AT_RISK) == (spare, ReleaseSpare("n-a3", "the run is no longer at risk"))


def test_at_risk_holds_a_spare_while_a_maintenance_window_is_announced():
    _, command = tend_spare(running(), None, T0, AT_RISK, maintenance_pending=True)
    assert command == CreateSpare(2, "a maintenance window is announced for the node")


@pytest.mark.parametrize("phase", [Phase.SUBMITTING, Phase.SLEEPING, Phase.ENDING])
def test_no_spare_is_created_while_no_attempt_runs(phase):
    assert tend_spare(replace(running(), phase=phase), None, T0, ALWAYS) == (None, None)


@pytest.mark.parametrize(("when", "risk", "field"), [("sometimes", 60.0, "spare_node"), ("at_risk", 0, "spare_risk"),
                                                     ("at_risk", True, "spare_risk")])
def test_bad_settings_name_the_argument(when, risk, field):
    with pytest.raises(ValueError, match=field):
        SpareSettings(when, risk)


@given(st.sampled_from([ALWAYS, AT_RISK, NEVER]), st.integers(0, 4), st.booleans(),
       st.sampled_from(list(Phase)), st.floats(0, 5000))
def test_at_most_one_command_and_never_a_spare_for_an_attempt_that_ran(settings, failures, hold, phase, later):
    history = tuple(failed_at(n, T0 - 1000 + 100 * n) for n in range(1, failures + 1))
    state = replace(running(*history), phase=phase)
    spare = Spare(f"n-a{len(state.history) + 1}", len(state.history) + 1, T0) if hold else None
    held, command = tend_spare(state, spare, T0 + later, settings)
    if isinstance(command, CreateSpare):
        assert held is None and command.attempt == len(state.history) + 1 and phase == Phase.RUNNING
    if phase in (Phase.SUCCEEDED, Phase.FAILED) and hold:
        assert isinstance(command, ReleaseSpare)


def test_a_stored_spare_reads_back_and_an_unreadable_one_is_none():
    spare = Spare("n-a2", 2, T0)
    assert Spare.from_json(spare.to_json()) == spare
    assert Spare.from_json({}) is None and Spare.from_json(None) is None


def test_a_create_refused_for_capacity_puts_no_run_at_risk():
    refused = Attempt(1, None, -1, started_at=T0 - 50, incidents=(Incident(
        Failure(FailureClass.CAPACITY_STOCKOUT, "stockout"),
        Decision(DecisionAction.RECREATE_NODE, "stockout", "no capacity", decided_at=T0 - 40)),))
    assert tend_spare(running(refused), None, T0, AT_RISK) == (None, None)
