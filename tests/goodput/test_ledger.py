"""Ledger arithmetic on hand-built histories: buckets sum to the total, redone steps are counted once,
a run without failures has no disruption badput; Young/Daly figures and the seeds' advice."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_resilient.goodput import (
    BUCKETS,
    StepReport,
    goodput_ceiling,
    goodput_ledger,
    young_daly_interval,
)
from airflow_provider_resilient.policy import (
    Attempt,
    Decision,
    DecisionAction,
    Failure,
    FailureClass,
    Platform,
    decide,
    record_incident,
)

T0 = 1_000_000.0
CRASH = Failure(FailureClass.TRANSIENT_CRASH, Platform.VERTEX_AI, exit_code=139)


def failed_attempt(number: int, start: float, fail_at: float, decided_at: float, resumed: int | None = None):
    attempt = Attempt(number, f"job-{number}", started_at=start, resumed_from_step=resumed)
    failure = Failure(CRASH.failure_class, CRASH.platform, exit_code=139, timestamp=fail_at)
    decision = decide((attempt,), failure, decided_at)
    return record_incident((attempt,), failure, decision, decided_at)[0]


def test_a_run_without_failures_is_all_productive_but_startup():
    history = (Attempt(1, "job-1", started_at=T0, ended_at=T0 + 100),)
    steps = [StepReport(T0 + 10 + i * 9, i) for i in range(11)]  # steps 0..10, 10 s startup
    ledger = goodput_ledger(history, steps, end=T0 + 100)
    assert ledger.total == pytest.approx(100)
    assert ledger.checkpoint_restore == pytest.approx(10)
    assert ledger.productive == pytest.approx(90)
    assert ledger.wasted_progress == ledger.recovery == ledger.detection == 0
    assert ledger.goodput == pytest.approx(0.9)


def test_redone_steps_are_wasted_once_and_gaps_are_recovery():
    # Attempt 1: steps 0..20 at 1 step/s from T0+5, crashes at T0+30 (last report step 20 at T0+25),
    # decided at T0+32. Attempt 2 starts at T0+40 from the step-10 checkpoint and redoes 11..20.
    first = failed_attempt(1, T0, fail_at=T0 + 30, decided_at=T0 + 32)
    first = Attempt(1, "job-1", started_at=T0, ended_at=T0 + 32, incidents=first.incidents)
    second = Attempt(2, "job-2", started_at=T0 + 40, ended_at=T0 + 80, resumed_from_step=10)
    steps = [StepReport(T0 + 5 + s, s) for s in range(21)]
    steps += [StepReport(T0 + 45 + (s - 10), s) for s in range(10, 41)]  # step 10 restored at +45
    ledger = goodput_ledger((first, second), steps, end=T0 + 80)
    assert ledger.total == pytest.approx(80)
    assert ledger.recovery == pytest.approx(8)  # decision at +32 -> attempt 2 running at +40
    assert ledger.detection == pytest.approx(2)  # failure at +30, decided at +32
    assert ledger.checkpoint_restore == pytest.approx(5 + 5)
    # wasted: steps 11..20 redone (10 s) + 5 s of lost work after the last report of attempt 1
    assert ledger.wasted_progress == pytest.approx(10 + 5)
    assert ledger.productive == pytest.approx(20 + 20 + 5)  # + the tail after step 40 of the success
    assert sum(getattr(ledger, b) for b in BUCKETS) == pytest.approx(ledger.total)
    # The same run as ml-goodput-measurement's badput breakdown (percent of the total per BadputType name).
    assert ledger.badput_breakdown() == {"WASTED_PROGRESS_FROM_DISRUPTION": 18.75,  # 15 of 80 s
                                         "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION": 12.5,  # detection 2 + recovery 8
                                         "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME": 12.5,
                                         "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME": 0.0, "OTHER": 0.0}
    assert ledger.as_dict()["badput_breakdown"] == ledger.badput_breakdown()
    assert type(ledger).from_dict(ledger.as_dict()) == ledger  # the XCom reads back


def test_a_hangs_timeout_is_hang_detection_and_a_crash_seen_by_a_look_is_detection():
    # Attempt 1 hangs after step 20 (T0+25) and is judged hung 300 s later (hang_timeout); attempt 2 crashes at
    # T0+400 and the next look sees it 12 s later; attempt 3 runs to the end.
    hang = Failure(FailureClass.HANG, Platform.VERTEX_AI, timestamp=T0 + 25)
    first = Attempt(1, "job-1", started_at=T0)
    first = record_incident((first,), hang, decide((first,), hang, T0 + 330), T0 + 330)[0]
    second = failed_attempt(2, T0 + 340, fail_at=T0 + 400, decided_at=T0 + 412, resumed=20)
    third = Attempt(3, "job-3", started_at=T0 + 420, ended_at=T0 + 500, resumed_from_step=40)
    steps = [StepReport(T0 + 5 + s, s) for s in range(21)]
    steps += [StepReport(T0 + 345 + (s - 20), s) for s in range(20, 51)]
    steps += [StepReport(T0 + 425 + (s - 40), s) for s in range(40, 111)]
    ledger = goodput_ledger((first, second, third), steps, end=T0 + 500)
    assert ledger.hang_detection == pytest.approx(330 - 25)  # the last step to the decision: hang_timeout's wait
    assert ledger.detection == pytest.approx(12)  # the crash to the look that saw it
    assert sum(getattr(ledger, b) for b in BUCKETS) == pytest.approx(ledger.total)
    assert type(ledger).from_dict(ledger.as_dict()) == ledger
    # A ledger pushed before the bucket existed reads it as 0.
    old = {k: v for k, v in ledger.as_dict().items() if k != "hang_detection"}
    assert type(ledger).from_dict(old).hang_detection == 0


def test_without_step_reports_the_bounds_are_stated():
    first = failed_attempt(1, T0, fail_at=T0 + 50, decided_at=T0 + 50)
    second = Attempt(2, "job-2", started_at=T0 + 60, ended_at=T0 + 100)
    ledger = goodput_ledger((first, second), (), end=T0 + 100)
    assert ledger.basis == "attempts" and ledger.productive == pytest.approx(40)
    assert ledger.wasted_progress == pytest.approx(50) and ledger.recovery == pytest.approx(10)
    assert "goodput 40.0%" in ledger.summary()


@settings(max_examples=200, deadline=None)
@given(durations=st.lists(st.tuples(st.floats(1, 100), st.floats(0, 50), st.integers(0, 30), st.booleans()),
                          min_size=1, max_size=6))
def test_buckets_always_add_up_to_the_total(durations):
    history, steps, now, best = [], [], T0, 0
    for number, (run, gap, progress, restarted) in enumerate(durations, start=1):
        if restarted:  # a process start at the attempt's start and one restarted in place mid-attempt
            steps += [StepReport(now + run * 0.05, max(0, best - progress // 2), start=True),
                      StepReport(now + run * 0.5, max(0, best - progress), start=True)]
        resumed = max(0, best - progress // 2)
        attempt = failed_attempt(number, now, fail_at=now + run * 0.9, decided_at=now + run, resumed=resumed)
        history.append(Attempt(number, f"job-{number}", started_at=now, ended_at=now + run,
                               resumed_from_step=resumed, incidents=attempt.incidents))
        for k in range(1, progress + 1):
            steps.append(StepReport(now + run * 0.8 * k / max(progress, 1), resumed + k))
        best = max(best, resumed + progress)
        now += run + gap
    ledger = goodput_ledger(history, steps, end=now)
    parts = [getattr(ledger, b) for b in BUCKETS]
    assert all(p >= -1e-9 for p in parts)
    assert sum(parts) == pytest.approx(ledger.total) == pytest.approx(now - T0)
    assert 0 <= ledger.goodput <= 1


def test_young_daly_interval_and_ceiling():
    assert young_daly_interval(60, 3600 * 10) == pytest.approx(math.sqrt(2 * 60 * 36000))
    assert goodput_ceiling(60, 300, 36000) == pytest.approx(1 - math.sqrt(120 / 36000) - 300 / 36000)
    with pytest.raises(ValueError):
        young_daly_interval(0, 10)


def test_a_waited_out_maintenance_event_is_a_repair_wait_then_restore_not_other():
    # Steps 0..10 at 1 step/s from T0+5; maintenance at T0+15: the node is REPAIRING and we WAIT at
    # T0+16 and T0+18; it is READY at T0+20, the workload restarts and reports its old step 10 until it
    # moves again at T0+24 (step 11), then runs to step 16 and succeeds at T0+29.
    attempt = Attempt(1, "node-1", started_at=T0, ended_at=T0 + 29)
    history: tuple[Attempt, ...] = (attempt,)
    for at in (T0 + 16, T0 + 18):
        failure = Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state="REPAIRING", timestamp=at)
        history = record_incident(history, failure, decide(history, failure, at), at)
    assert [i.decision.action.value for i in history[0].incidents] == ["wait", "wait"]
    steps = [StepReport(T0 + 5 + i, i) for i in range(11)]  # step 10 at T0+15
    steps += [StepReport(T0 + 20, 10), StepReport(T0 + 22, 10), StepReport(T0 + 23, 10)]
    steps += [StepReport(T0 + 24 + i, 11 + i) for i in range(6)]  # step 16 at T0+29
    ledger = goodput_ledger(history, steps, end=T0 + 29)
    assert ledger.total == pytest.approx(29)
    assert ledger.repair_wait == pytest.approx(4)  # T0+16 (our first WAIT look) .. T0+20
    assert ledger.recovery == 0
    assert ledger.checkpoint_restore == pytest.approx(5 + 3)  # start-up, and T0+20 .. T0+23 still at step 10
    assert ledger.productive == pytest.approx(10 + 6)  # steps 0..10, then 10..16
    assert ledger.other == pytest.approx(1)  # T0+15 .. T0+16: no step, before we saw the event


def test_a_repair_given_up_on_is_a_repair_wait_from_the_first_wait_not_wasted_progress():
    # Steps 0..10 at 1 step/s from T0+5 (step 10 at T0+15); the node is REPAIRING, we WAIT at T0+16, T0+18 and
    # T0+20, and at T0+22 re-create it; the next node starts at T0+30 and runs steps 10..15 by T0+35.
    history: tuple[Attempt, ...] = (Attempt(1, "node-1", started_at=T0),)
    for at in (T0 + 16, T0 + 18, T0 + 20):
        failure = Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state="REPAIRING", timestamp=at)
        history = record_incident(history, failure, Decision(DecisionAction.WAIT, "maintenance-wait", "wait",
                                                             delay_seconds=2.0, budget="maintenance_wait",
                                                             decided_at=at), at)
    failure = Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state="REPAIRING", timestamp=T0 + 22)
    history = record_incident(history, failure, Decision(DecisionAction.RECREATE_NODE, "maintenance-recreate",
                                                         "re-create", decided_at=T0 + 22), T0 + 22)
    history = (*history, Attempt(2, "node-2", started_at=T0 + 30, ended_at=T0 + 35, resumed_from_step=10))
    steps = [StepReport(T0 + 5 + i, i) for i in range(11)]
    steps += [StepReport(T0 + 30, 10, start=True)] + [StepReport(T0 + 31 + i, 11 + i) for i in range(5)]
    ledger = goodput_ledger(history, steps, end=T0 + 35)
    assert ledger.total == pytest.approx(35)
    assert ledger.repair_wait == pytest.approx(6)  # T0+16 (the first WAIT) .. T0+22 (re-created)
    assert ledger.wasted_progress == pytest.approx(1)  # T0+15 .. T0+16: after the last step, before we saw it
    assert ledger.recovery == pytest.approx(8)  # T0+22 .. T0+30: the new node
    assert ledger.productive == pytest.approx(10 + 5)


def test_steps_reached_just_before_an_event_are_work_until_the_first_wait():
    # The last look before the event saw step 8 at T0+13; the workload reached step 10 by T0+15, the event
    # struck, we WAITed from T0+16, and after it the node reported the stale step 10 at T0+20.
    attempt = Attempt(1, "node-1", started_at=T0, ended_at=T0 + 25)
    failure = Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state="REPAIRING", timestamp=T0 + 16)
    history = record_incident((attempt,), failure, decide((attempt,), failure, T0 + 16), T0 + 16)
    steps = [StepReport(T0 + 5, 0), StepReport(T0 + 13, 8), StepReport(T0 + 20, 10), StepReport(T0 + 22, 10),
             StepReport(T0 + 25, 13)]
    ledger = goodput_ledger(history, steps, end=T0 + 25)
    assert ledger.total == pytest.approx(25)
    assert ledger.productive == pytest.approx(8 + 3 + 3)  # 0..8; 8..10 until the WAIT; 10..13
    assert ledger.repair_wait == pytest.approx(4)  # T0+16 .. T0+20
    assert ledger.checkpoint_restore == pytest.approx(5 + 2)  # start-up; T0+20 .. T0+22 still at step 10
    assert ledger.other == pytest.approx(0)


def test_checkpoint_saves_stand_in_for_lost_step_reports():
    """A failed attempt whose step reports were lost (a SIGKILLed triggerer): its complete checkpoints still
    place the work, so only the time after the last save counts as lost; a save from before the run is not its."""
    from airflow_provider_resilient.checkpoints.formats import CheckpointSave
    from airflow_provider_resilient.policy import (
        Attempt,
        Decision,
        DecisionAction,
        Failure,
        FailureClass,
        Incident,
        Platform,
    )

    t0 = 1_800_000_000.0
    crash = Failure(FailureClass.TRANSIENT_CRASH, Platform.TPU, timestamp=t0 + 100)
    decision = Decision(DecisionAction.RESUBMIT, "transient-crash", "r", decided_at=t0 + 100)
    history = (Attempt(1, "a1", started_at=t0, ended_at=t0 + 100, incidents=(Incident(crash, decision),)),
               Attempt(2, "a2", started_at=t0 + 110, ended_at=t0 + 200, resumed_from_step=90))
    saves = [CheckpointSave(5, t0 - 50, 0.1), CheckpointSave(30, t0 + 30, 0.1), CheckpointSave(90, t0 + 90, 0.1)]
    blind = goodput_ledger(history, [], end=t0 + 200)
    seen = goodput_ledger(history, [], end=t0 + 200, saves=saves)
    assert blind.basis == "attempts" and blind.wasted_progress == pytest.approx(100)
    assert seen.basis == "steps" and seen.wasted_progress == pytest.approx(10)  # from step 90's save to the crash


def test_steps_before_the_first_surviving_save_are_timed_at_the_attempts_pace():
    """A workload that keeps only its two newest saves: at the end, attempt 1's first report is its step-80
    save. The 80 steps before it are work at the attempt's pace (1 s a step), not start-up; what is left of the
    span from the start is start-up (10 s). Attempt 2 resumed from step 90 and redid nothing."""
    first = failed_attempt(1, T0, fail_at=T0 + 100, decided_at=T0 + 100)
    first = Attempt(1, "job-1", started_at=T0, ended_at=T0 + 100, incidents=first.incidents)
    second = Attempt(2, "job-2", started_at=T0 + 110, ended_at=T0 + 150, resumed_from_step=90)
    steps = [StepReport(T0 + 90, 80), StepReport(T0 + 100, 90), StepReport(T0 + 120, 100), StepReport(T0 + 150, 130)]
    ledger = goodput_ledger((first, second), steps, end=T0 + 150)
    assert ledger.checkpoint_restore == pytest.approx(10 + 0)  # attempt 2's step 100 came at its pace: no start-up
    assert ledger.productive == pytest.approx(80 + 10 + 10 + 30)
    assert ledger.recovery == pytest.approx(10) and ledger.wasted_progress == pytest.approx(0)
    # Without a second report there is no pace: the span to the first report stays start-up.
    alone = goodput_ledger((Attempt(1, "job-1", started_at=T0, ended_at=T0 + 100),), [StepReport(T0 + 90, 80)],
                           end=T0 + 100)
    assert alone.checkpoint_restore == pytest.approx(90)


def test_a_stall_the_history_does_not_see_is_a_stall_not_productive():
    """Steps 5 to 6 took 60 s at a pace of 10 s a step, with no restart seen: 10 s of it are the step; 50 s are a
    stall -- not hidden in productive time, and not "other" (the ledger saw where it was)."""
    times = [T0 + 10 * i for i in range(6)] + [T0 + 50 + 60 + 10 * (i - 6) for i in range(6, 11)]
    steps = [StepReport(t, i) for i, t in enumerate(times)]
    ledger = goodput_ledger((Attempt(1, "job-1", started_at=T0, ended_at=times[-1]),), steps, end=times[-1])
    assert ledger.stall == pytest.approx(50)
    assert ledger.other == 0
    assert ledger.productive == pytest.approx(100)


def test_a_blocking_save_is_checkpoint_save_time_not_a_stall():
    """Steps every 6 s; after steps 5 and 10 the workload blocks 30 s writing a checkpoint (seen by its write
    time: first object to completion proof), and once more after its last step 12. Given the saves, their 90 s
    are ``checkpoint_save`` (ml-goodput-measurement's UNPRODUCTIVE_CHECKPOINT_SAVE_TIME) and nothing is a stall;
    without them the two mid-run saves are stalls (61 s) and the final one is work after the last step."""
    from airflow_provider_resilient.checkpoints.formats import CheckpointSave

    times, saves, t = [], [], T0 + 10  # 10 s start-up
    for step in range(13):
        times.append(t)
        if step in (5, 10, 12):
            saves.append(CheckpointSave(step, t + 30.5, 30.0))  # marker half a second after the write time
            t += 30.5
        t += 6
    end = times[-1] + 31
    steps = [StepReport(at, step) for step, at in enumerate(times)]
    history = (Attempt(1, "job-1", started_at=T0, ended_at=end),)
    known = goodput_ledger(history, steps, end=end, saves=saves)
    assert known.checkpoint_save == pytest.approx(90)
    assert known.other == known.stall == 0
    assert known.productive == pytest.approx(12 * 6 + 2 * 0.5 + 1)  # steps, each save's 0.5 s beyond its write time
    assert known.checkpoint_restore == pytest.approx(10)
    assert known.badput_breakdown()["UNPRODUCTIVE_CHECKPOINT_SAVE_TIME"] == pytest.approx(100 * 90 / known.total,
                                                                                          abs=0.01)
    assert type(known).from_dict(known.as_dict()) == known
    blind = goodput_ledger(history, steps, end=end)
    assert blind.checkpoint_save == 0 and blind.stall == pytest.approx(2 * 30.5) and blind.other == 0
    assert blind.total == pytest.approx(known.total)
    # A ledger pushed before the later buckets existed still reads back.
    old = {k: v for k, v in blind.as_dict().items() if k not in ("checkpoint_save", "in_place_restart", "stall")}
    read = type(blind).from_dict(old)
    assert read.stall == read.in_place_restart == read.checkpoint_save == 0 and read.productive == blind.productive


def test_a_first_look_at_the_resume_step_saw_the_workload_starting():
    """Attempt 2 resumed from step 50. The first look (T0+5) finds the workload still at step 50 -- it is starting
    -- and the next finds step 55 at T0+70, then 2 s a step. The 55 s beyond those 5 steps' pace are start-up and
    restore (``checkpoint_restore``), not a stall; a stall after the attempt has moved stays a stall."""
    history = (Attempt(2, "job-2", started_at=T0, ended_at=T0 + 130, resumed_from_step=50),)
    steps = [StepReport(T0 + 5, 50), StepReport(T0 + 70, 55)] + [StepReport(T0 + 70 + 2 * i, 55 + i)
                                                                 for i in range(1, 11)]
    steps += [StepReport(T0 + 130, 70)]  # 40 s for 5 steps after it had moved: a stall of 30 s
    ledger = goodput_ledger(history, steps, end=T0 + 130)
    assert ledger.checkpoint_restore == pytest.approx(5 + 55)
    assert ledger.stall == pytest.approx(30)
    assert ledger.productive == pytest.approx(10 + 20 + 10)


def restarted_in_place(start_line: bool) -> list[StepReport]:
    """10 s a step from T0+10 (step 0); the workload saves at step 4; its process dies during step 7 (last report step
    6 at T0+70); the platform restarts it in place and the new process prints ``start step 4`` at T0+120, then
    steps 5, 6, ... every 10 s again until step 12."""
    reports = [StepReport(T0 + 10 + 10 * s, s) for s in range(7)]
    if start_line:
        reports.append(StepReport(T0 + 120, 4, start=True))
    reports += [StepReport(T0 + 120 + 10 * (s - 4), s) for s in range(5, 13)]
    return reports


def test_an_in_place_restart_is_named_by_the_restarted_process_start():
    """The restarted process's start line names the 50 s from the last report to it: the step being made when the
    process died (10 s at the pace) is lost progress, 40 s the in-place restart; steps 5 and 6 are redone
    (wasted); nothing is a stall or unexplained. Without the start line the same run cannot say where the restart
    was: its time is "other", the ledger's blind spot, not hidden in another bucket."""
    history = (Attempt(1, "job-1", started_at=T0, ended_at=T0 + 200),)
    seen = goodput_ledger(history, restarted_in_place(True), end=T0 + 200)
    assert seen.in_place_restart == pytest.approx(40)
    assert seen.wasted_progress == pytest.approx(10 + 20)
    assert seen.checkpoint_restore == pytest.approx(10)  # T0 .. step 0
    assert seen.stall == seen.other == 0
    assert seen.productive == pytest.approx(60 + 60)  # steps 1..6 and 7..12
    assert seen.badput_breakdown()["INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION"] == pytest.approx(20.0)
    blind = goodput_ledger(history, restarted_in_place(False), end=T0 + 200)
    assert blind.in_place_restart == 0 and blind.other > 0
    assert blind.total == pytest.approx(seen.total)


def test_a_restarted_process_that_takes_long_to_move_is_restoring_not_stalled():
    """After ``start step 4`` (T0+120) the process takes 60 s to reach step 5 (loading the checkpoint): 50 s beyond
    the step's pace are checkpoint_restore, as after an attempt's start, not a stall."""
    reports = [r if r.start or r.step < 5 or r.time < T0 + 100 else StepReport(r.time + 50, r.step)
               for r in restarted_in_place(True)]
    history = (Attempt(1, "job-1", started_at=T0, ended_at=T0 + 250),)
    ledger = goodput_ledger(history, reports, end=T0 + 250)
    assert ledger.checkpoint_restore == pytest.approx(10 + 50)
    assert ledger.stall == ledger.other == 0


def test_a_look_behind_a_save_already_made_is_stale_not_steps_going_back():
    """1 step/s from T0 (step 0). The workload saves step 20 at T0+20 (a plain directory: seen from its first file,
    written for 0.5 s); a look at T0+21 reads step 19, the newest line that had reached the log. That report is
    stale -- any restart would resume from step 20 or later -- so no step counts as redone and nothing as lost."""
    from airflow_provider_resilient.checkpoints.formats import CheckpointSave

    history = (Attempt(1, "job-1", started_at=T0, ended_at=T0 + 41),)
    looks = [StepReport(T0 + t, t) for t in range(0, 20, 5)] + [StepReport(T0 + 21, 19)]
    looks += [StepReport(T0 + 26 + i, 25.0 + i) for i in range(0, 16, 5)]
    looks = [StepReport(r.time, int(r.step)) for r in looks]
    saves = [CheckpointSave(20, T0 + 20, 0.5, started_at=T0 + 20)]
    ledger = goodput_ledger(history, looks, end=T0 + 41, saves=saves)
    assert ledger.wasted_progress == 0 and ledger.other == 0
    assert ledger.checkpoint_save == pytest.approx(0.5)
    assert ledger.productive == pytest.approx(41 - 0.5)


def test_an_attempt_that_never_ran_lost_no_progress():
    """A launch stockout: attempt 1 stays PENDING until ours' queue timeout at T0+150 and never trains; attempt 2
    (another region) starts at T0+160, steps from T0+220. Attempt 1's time is recovery (a wait for capacity), not
    wasted progress; a crash before any step report stays wasted progress."""
    from airflow_provider_resilient.policy import Decision, DecisionAction, Incident

    def ended(cls):
        failure = Failure(cls, Platform.VERTEX_AI, timestamp=T0 + 150)
        decision = Decision(DecisionAction.RESUBMIT, "r", "why", decided_at=T0 + 150)
        return Attempt(1, "job-1", started_at=T0, ended_at=T0 + 150, incidents=(Incident(failure, decision),))

    second = Attempt(2, "job-2", started_at=T0 + 160, ended_at=T0 + 260)
    steps = [StepReport(T0 + 220 + i, i) for i in range(41)]
    queued = goodput_ledger((ended(FailureClass.QUEUE_TIMEOUT), second), steps, end=T0 + 260)
    assert queued.wasted_progress == 0 and queued.recovery == pytest.approx(150 + 10)
    crashed = goodput_ledger((ended(FailureClass.TRANSIENT_CRASH), second), steps, end=T0 + 260)
    assert crashed.wasted_progress == pytest.approx(150) and crashed.recovery == pytest.approx(10)


def test_a_step_seen_twice_counts_from_when_it_was_first_seen():
    """A CustomJob's steps are its checkpoints: each is seen at its save (``completed_at``) and again at the
    next poll that lists it, up to a poll interval later. The second sighting is no new event: the workload
    trained on between them. (The demo's ledger showed 41 % "other": each step's save-to-poll delay counted as a
    span without progress, and the shortened spans after it set a pace that made ordinary spans stalls.)"""
    from airflow_provider_resilient.checkpoints.formats import CheckpointSave

    saves = [CheckpointSave(10 * i, T0 + 5 + 10 * i, 0.1) for i in range(1, 10)]  # 1 step/s, a save every 10 s
    polled = [StepReport(T0 + 5 + 10 * i + (7 if i % 2 else 1), 10 * i) for i in range(1, 10)]  # 1-7 s later
    history = (Attempt(1, "job-1", started_at=T0, ended_at=T0 + 100),)
    ledger = goodput_ledger(history, polled, end=T0 + 100, saves=saves)
    assert ledger.other == pytest.approx(0)
    assert ledger.checkpoint_restore == pytest.approx(5)  # start-up until step 0 ... step 10 at its pace
    assert ledger.productive == pytest.approx(95)


def test_the_trace_ceiling_is_the_best_fixed_interval_for_the_failures_that_struck():
    from airflow_provider_resilient.goodput import trace_ceiling, trace_wall_time

    # No failure: checkpointing only costs; the best is to save never (one interval = the whole work).
    assert trace_wall_time(100, [1e9], 1, 5, 100) == 100
    assert trace_ceiling(100, [1e9], 1, 5)[0] == pytest.approx(1.0)
    # One failure after 55 s of running: with a 10 s interval (5 saves of 1 s = 55 s) 50 s are kept, 5 s of
    # restart, then 50 s left = 50 + 4 saves.
    assert trace_wall_time(100, [55, 1e9], 1, 5, 10) == pytest.approx(55 + 5 + 54)
    goodput, interval = trace_ceiling(100, [55, 1e9], 1, 5)
    assert goodput >= 100 / (55 + 5 + 54) and 0 < interval <= 100
    # The gaps end before the work: no finite time.
    assert trace_wall_time(100, [10, 10], 1, 5, 50) == math.inf


def test_the_ceilings_budget_says_where_its_wall_time_goes():
    from airflow_provider_resilient.goodput import trace_budget

    # The trace above: 100 s of work, 5 + 4 saves of 1 s, no work lost (the failure struck right after a save),
    # one restart of 5 s.
    assert trace_budget(100, [55, 1e9], 1, 5, 10) == pytest.approx(
        {"work": 100, "checkpoint": 9, "wasted_progress": 0, "restart": 5, "total": 114})
    # A failure 7 s into the third segment: 2 segments kept, 7 s lost.
    budget = trace_budget(100, [29, 1e9], 1, 5, 10)
    assert budget["wasted_progress"] == pytest.approx(7) and budget["work"] == pytest.approx(100)
    assert trace_budget(100, [10, 10], 1, 5, 50)["total"] == math.inf


@given(st.lists(st.floats(1, 500), min_size=1, max_size=8), st.floats(0.1, 20), st.floats(0, 60),
       st.floats(1, 300))
@settings(max_examples=50, deadline=None)
def test_the_ceilings_budget_adds_up_to_its_wall_time(gaps, cost, restart, interval):
    from airflow_provider_resilient.goodput import trace_budget

    budget = trace_budget(300, [*gaps, 1e9], cost, restart, interval)
    parts = budget["work"] + budget["checkpoint"] + budget["wasted_progress"] + budget["restart"]
    assert budget["total"] == pytest.approx(parts) and budget["work"] == pytest.approx(300)
    assert budget["wasted_progress"] >= 0 and budget["restart"] <= restart * len(gaps) + 1e-9


@given(st.lists(st.floats(1, 500), min_size=1, max_size=8), st.floats(0.1, 20), st.floats(0, 60))
@settings(max_examples=50, deadline=None)
def test_the_trace_ceiling_is_never_above_one_and_never_below_its_end_points(gaps, cost, restart):
    from airflow_provider_resilient.goodput import trace_ceiling, trace_wall_time

    gaps = [*gaps, 1e9]  # the trace runs out of failures
    goodput, _ = trace_ceiling(300, gaps, cost, restart)
    assert 0 < goodput <= 1
    for interval in (max(1e-3, cost / 10), 300.0):  # the search's first and last interval
        assert goodput >= 300 / trace_wall_time(300, gaps, cost, restart, interval) - 1e-9


def test_the_first_process_start_read_after_a_look_is_no_restart():
    """A look at T0+5 saw step 0 (the checkpoints' clock) before the log lines were read; the first process's
    ``start step 0`` line is stamped T0+6. It is the attempt's first process, not a restart in place."""
    reports = [StepReport(T0 + 5, 0), StepReport(T0 + 6, 0, start=True)] + [StepReport(T0 + 6 + i, i)
                                                                            for i in range(1, 20)]
    ledger = goodput_ledger((Attempt(1, "job-1", started_at=T0, ended_at=T0 + 25),), reports, end=T0 + 25)
    assert ledger.in_place_restart == 0 and ledger.other == ledger.stall == 0
    assert ledger.checkpoint_restore == pytest.approx(5)
    assert ledger.productive == pytest.approx(20)
