"""Wait out a TPU node's repair or re-create it, weighed with what the run measured (policy/repair.py), through
the real supervisor (tests/policy/sim.py)."""

from __future__ import annotations

from itertools import repeat

import pytest

from airflow_provider_resilient.policy import (
    Attempt,
    Budget,
    Decision,
    DecisionAction,
    Failure,
    FailureClass,
    Incident,
    Platform,
    RetryPolicy,
    classify_tpu_node,
    decide,
)
from airflow_provider_resilient.policy.repair import Repair, earlier_repairs, new_node_seconds, repair_outlook

from .sim import run

W, RN = DecisionAction.WAIT, DecisionAction.RECREATE_NODE
T0 = 1_800_000_000.0
REPAIRING = classify_tpu_node("REPAIRING", "UNHEALTHY_MAINTENANCE")
STOCKOUT = Failure(FailureClass.CAPACITY_STOCKOUT, Platform.TPU, timestamp=T0)


def launched(new_node: float) -> tuple[Attempt, ...]:
    """A run whose first create met a stockout and whose second node was READY ``new_node`` seconds after the
    decision to re-create: a new node has been measured once."""
    decision = Decision(RN, "stockout", "stockout", delay_seconds=10.0, budget="stockout", decided_at=T0)
    return (Attempt(1, None, started_at=T0, ended_at=T0, incidents=(Incident(STOCKOUT, decision),)),
            Attempt(2, "node-a2", started_at=T0 + new_node))


def with_repair(history: tuple[Attempt, ...], at: float, seconds: float, looks_every: float = 30.0,
                gave_up: bool = False) -> tuple[Attempt, ...]:
    """``history`` whose last attempt waited on a repair first seen at ``at`` (epoch seconds) for ``seconds``:
    a look every ``looks_every`` seconds; ``gave_up``: its last look re-created the node instead."""
    assert REPAIRING is not None
    looks = [at + i * looks_every for i in range(round(seconds / looks_every))]
    incidents = [Incident(Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state="REPAIRING", timestamp=t),
                          Decision(W, "maintenance-wait", "wait", delay_seconds=looks_every,
                                   budget="maintenance_wait", decided_at=t)) for t in looks]
    if gave_up:
        end = looks[-1] + looks_every
        incidents.append(Incident(Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state="REPAIRING",
                                          timestamp=end),
                                  Decision(RN, "maintenance-recreate", "re-create", budget="recreate_node",
                                           decided_at=end)))
    last = history[-1]
    return (*history[:-1], Attempt(last.number, last.resource_name, started_at=last.started_at,
                                   incidents=(*last.incidents, *incidents)))


def decisions_for(history: tuple[Attempt, ...], policy: RetryPolicy | None = None, looks: int = 40,
                  start: float | None = None) -> list[Decision]:
    """The decisions on a node in repair, looked at every 30 s (a wait of 30 s, then 30 s to the next look)."""
    assert REPAIRING is not None
    decisions, _ = run(repeat(REPAIRING, looks), policy or RetryPolicy(), history=history, step_seconds=30.0,
                       start=start if start is not None else (history[-1].started_at or T0) + 600)
    return decisions


def waited(decisions: list[Decision]) -> float:
    """Seconds from the first look at the repair to the decision to re-create."""
    recreate = next(d for d in decisions if d.action == RN)
    assert {d.action for d in decisions[:decisions.index(recreate)]} <= {W}
    assert recreate.decided_at is not None and decisions[0].decided_at is not None
    return recreate.decided_at - decisions[0].decided_at


def test_with_no_new_node_measured_the_budget_alone_decides():
    history = (Attempt(1, "node-a1", started_at=T0),)
    assert repair_outlook(history, T0 + 100) is None
    assert waited(decisions_for(history)) >= 900  # the maintenance_wait budget


def test_the_first_repair_is_waited_for_as_long_as_a_new_node_took_then_re_created():
    decisions = decisions_for(launched(new_node=120.0))
    assert waited(decisions) == 120.0  # looks at 0, 60, 120 s: the third re-creates
    assert "no repair seen yet" in decisions[0].reason and "wait up to that long" in decisions[0].reason
    recreate = next(d for d in decisions if d.action == RN)
    assert recreate.rule == "maintenance-recreate"
    assert "not waiting out the repair" in recreate.reason and "a new node took 120 s" in recreate.reason


def test_after_a_repair_longer_than_a_new_node_the_next_one_is_re_created_at_once():
    history = with_repair(launched(new_node=120.0), at=T0 + 300, seconds=300.0)
    assert earlier_repairs(history, T0 + 5000) == ([Repair(300.0, ended=True)], None)
    decisions = decisions_for(history, start=T0 + 5000)
    assert decisions[0].action == RN
    assert "1 earlier repair(s) took 300 s on average" in decisions[0].reason
    assert "re-create now" in decisions[0].reason


def test_a_repair_given_up_on_counts_what_it_lasted_and_the_next_is_re_created_at_once():
    history = with_repair(launched(new_node=120.0), at=T0 + 300, seconds=120.0, gave_up=True)
    assert earlier_repairs(history, T0 + 5000)[0] == [Repair(120.0, ended=False)]
    history = (*history, Attempt(3, "node-a3", started_at=T0 + 720))  # this new node took 300 s: 210 s on average
    assert new_node_seconds(history) == [120.0, 300.0]
    decisions = decisions_for(history, start=T0 + 5000)
    assert decisions[0].action == RN
    assert "the last repair was not over after 120 s; a new node took 210 s in this run" in decisions[0].reason


def test_after_short_repairs_a_repair_is_waited_for_until_it_is_overdue_by_a_new_node():
    history = with_repair(launched(new_node=120.0), at=T0 + 300, seconds=60.0)
    decisions = decisions_for(history, start=T0 + 5000)
    assert "1 earlier repair(s) took 60 s on average" in decisions[0].reason
    assert "wait for the repair" in decisions[0].reason
    assert waited(decisions) == 180.0  # 60 s expected + 120 s of a new node


def test_a_repair_that_ends_is_a_measure_and_the_next_look_is_a_new_event():
    history = with_repair(launched(new_node=120.0), at=T0 + 300, seconds=90.0)
    # the next look at the usual time: the same repair
    assert earlier_repairs(history, T0 + 300 + 90) == ([], T0 + 300)
    # long after: that repair ended, this is another
    assert earlier_repairs(history, T0 + 3000) == ([Repair(90.0, ended=True)], None)


def test_weigh_repairs_false_keeps_the_budget_rule():
    decisions = decisions_for(launched(new_node=120.0), RetryPolicy(weigh_repairs=False))
    assert waited(decisions) >= 900


def test_a_spent_re_create_budget_keeps_waiting_for_the_repair():
    policy = RetryPolicy(budgets={"recreate_node": Budget(max_retries=0)})
    decisions = decisions_for(launched(new_node=120.0), policy, looks=6)
    assert [d.action for d in decisions] == [W] * 6


def test_the_repair_is_weighed_only_for_tpu_maintenance_events_in_repair():
    history = launched(new_node=120.0)
    terminated = Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state="TERMINATED")
    decisions, _ = run([terminated], history=history)
    assert decisions[0].rule == "maintenance-terminated" and "repair" not in decisions[0].reason


@pytest.mark.parametrize("value", [None, "yes", 1])
def test_weigh_repairs_must_be_a_bool(value):
    with pytest.raises(ValueError, match="weigh_repairs"):
        RetryPolicy(weigh_repairs=value)


def test_a_second_maintenance_event_on_a_repaired_node_gets_the_whole_maintenance_wait_again():
    """The maintenance_wait budget measures one event: a node back from its repair that meets another event an
    hour later is waited for again, not re-created because the first event's streak began long ago."""
    history = with_repair((Attempt(1, "node-a1", started_at=T0),), at=T0 + 300, seconds=300.0)
    decisions = decisions_for(history, RetryPolicy(weigh_repairs=False), start=T0 + 3600)
    assert decisions[0].action == W
    assert 900 <= waited(decisions) < 1000


def test_a_ready_spare_node_re_creates_a_node_in_repair_once_the_notice_save_had_its_time():
    """A READY spare (``supervisor.spare``) makes a new node cost nothing: even after short repairs, and with no new
    node measured, the next attempt takes the spare -- once the repair has lasted the 30 s a workload gets to save on
    the event's SIGTERM (deleting the node would cut that save off)."""
    assert REPAIRING is not None
    short = with_repair(launched(new_node=120.0), T0 + 600, 60.0)
    for history in (short, (Attempt(1, "node-a1", started_at=T0),)):
        first = decide(history, REPAIRING, T0 + 2000, spare_ready=True)  # the first look at this repair
        assert first.action == W and "once the workload had 30 s to save" in first.reason
        history = with_repair(history, T0 + 2000, 30.0)  # one look, 30 s ago
        outlook = repair_outlook(history, T0 + 2030, spare_ready=True)
        assert outlook is not None and outlook.recreate and "spare node is READY" in outlook.why
        decision = decide(history, REPAIRING, T0 + 2030, spare_ready=True)
        assert decision.action == RN and "taking it beats waiting any repair" in decision.reason
        assert decide(history, REPAIRING, T0 + 2030).action == W  # without the spare: waited for
    assert decide(short, REPAIRING, T0 + 2030, policy=RetryPolicy(weigh_repairs=False), spare_ready=True).action == W
