"""Checkpoint-interval advice from a run's observed interruptions and saves, and the listing of saves from
real checkpoint directories."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from airflow_provider_resilient.checkpoints import CheckpointSave, list_checkpoint_saves
from airflow_provider_resilient.goodput import StepReport, advise_checkpointing, young_daly_interval
from airflow_provider_resilient.policy import Attempt, Failure, FailureClass, Platform, decide, record_incident

T0 = 1_000_000.0


def attempt_failing(number: int, start: float, fail_at: float, kind: FailureClass) -> Attempt:
    attempt = Attempt(number, f"job-{number}", started_at=start)
    failure = Failure(kind, Platform.VERTEX_AI, exit_code=139, timestamp=fail_at)
    return record_incident((attempt,), failure, decide((attempt,), failure, fail_at), fail_at)[0]


def saves_every(interval: float, count: int, cost: float = 10.0, start: float = T0) -> list[CheckpointSave]:
    return [CheckpointSave(step=100 * i, completed_at=start + interval * i, write_seconds=cost)
            for i in range(1, count + 1)]


def history_with_mtbf(mtbf: float, failures: int) -> tuple[Attempt, ...]:
    attempts = [attempt_failing(i + 1, T0 + i * mtbf, T0 + (i + 1) * mtbf, FailureClass.TRANSIENT_CRASH)
                for i in range(failures)]
    return (*attempts, Attempt(failures + 1, "last", started_at=T0 + failures * mtbf,
                               ended_at=T0 + (failures + 1) * mtbf))


@pytest.mark.parametrize(("interval", "verdict"), [(7200.0, "too rarely"), (60.0, "too often"),
                                                   (600.0, "about right")])
def test_the_verdict_compares_the_median_interval_with_young_daly(interval: float, verdict: str):
    history = history_with_mtbf(18_000.0, 4)  # 5 attempts, 90000 s running, 4 interruptions: MTBF 22500 s
    advice = advise_checkpointing(history, saves_every(interval, 6, cost=10.0), end=T0 + 90_000)
    assert advice.interruptions == 4
    assert advice.mtbf == pytest.approx(22_500.0)
    assert advice.optimum == pytest.approx(young_daly_interval(10.0, 22_500.0))  # ~671 s
    assert advice.interval == pytest.approx(interval)
    assert advice.verdict == verdict
    text = advice.summary()
    assert verdict in text and "Vertex AI: at least every 14400 s" in text and "Cloud TPU: about every 3600 s" in text


def test_a_gap_across_a_failure_does_not_move_the_median():
    saves = [*saves_every(600.0, 5), CheckpointSave(900, T0 + 3000 + 5000, 10.0),
             CheckpointSave(1000, T0 + 3000 + 5600, 10.0)]
    advice = advise_checkpointing(history_with_mtbf(20_000.0, 2), saves, end=T0 + 60_000)
    assert advice.interval == pytest.approx(600.0)


def test_stockouts_and_permanent_errors_are_not_interruptions():
    history = (attempt_failing(1, T0, T0 + 100, FailureClass.CAPACITY_STOCKOUT),
               attempt_failing(2, T0 + 200, T0 + 300, FailureClass.QUOTA_EXCEEDED),
               Attempt(3, "job-3", started_at=T0 + 400, ended_at=T0 + 10_400))
    advice = advise_checkpointing(history, saves_every(3600.0, 3), end=T0 + 10_400)
    assert advice.interruptions == 0 and advice.mtbf is None
    assert advice.verdict == "not judged: no interruption yet"
    assert "no interruption in 10200 s running" in advice.summary()
    # Without an interruption only "too often" can be told: the true optimum is above the bound.
    often = advise_checkpointing(history, saves_every(5.0, 3, cost=30.0), end=T0 + 10_400)
    assert often.verdict == "too often"


def test_fewer_than_two_saves_give_no_verdict():
    advice = advise_checkpointing(history_with_mtbf(1000.0, 2), saves_every(600.0, 1), end=T0 + 3000)
    assert advice.verdict == "unknown" and advice.optimum is None
    assert "too few checkpoints" in advice.summary()


def test_saves_are_listed_from_real_step_directories(tmp_path: Path):
    root = tmp_path / "checkpoints"
    for step, written, committed in [(100, 1000.0, 1012.0), (200, 1600.0, 1611.0), (300, 2200.0, 2210.0)]:
        directory = root / f"step_{step}"
        directory.mkdir(parents=True)
        (directory / "state.json").write_text("{}")
        os.utime(directory / "state.json", (written, written))
        (directory / "COMMITTED").write_text("")
        os.utime(directory / "COMMITTED", (committed, committed))
    torn = root / "step_400"  # no marker: not a save
    torn.mkdir()
    (torn / "state.json").write_text("{}")
    saves = list_checkpoint_saves(str(root), marker="COMMITTED")
    assert [(s.step, s.completed_at, s.write_seconds) for s in saves] == [
        (100, 1012.0, 12.0), (200, 1611.0, 11.0), (300, 2210.0, 10.0)]
    assert [s.step for s in list_checkpoint_saves(str(root), marker="COMMITTED", max_saves=2)] == [200, 300]
    # Without a marker a plain directory is proven by its first file; the save's cost still spans all its files.
    assert [s.write_seconds for s in list_checkpoint_saves(str(root))][:3] == [12.0, 11.0, 10.0]
    assert list_checkpoint_saves(str(tmp_path / "missing")) == []
    with pytest.raises(ValueError, match="max_saves"):
        list_checkpoint_saves(str(root), max_saves=0)


def test_saves_of_the_real_dcp_and_orbax_fixtures_are_listed():
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints"
    found = {p.name: list_checkpoint_saves(str(p)) for p in sorted(fixtures.iterdir()) if p.is_dir()}
    assert any(found.values()), found
    for saves in found.values():
        assert all(s.write_seconds >= 0 and s.completed_at <= time.time() for s in saves)


def test_the_looks_at_one_maintenance_event_count_once():
    from airflow_provider_resilient.goodput.advice import count_interruptions

    attempt = Attempt(1, "node-1", started_at=T0)
    history: tuple[Attempt, ...] = (attempt,)
    now = T0
    events = [("REPAIRING", 6), ("TERMINATED", 1)]  # one event seen at 6 looks, then a second event
    for state, looks in events:
        for _ in range(looks):
            now += 30
            failure = Failure(FailureClass.MAINTENANCE_EVENT, Platform.TPU, node_state=state, timestamp=now)
            history = record_incident(history, failure, decide(history, failure, now), now)
    assert [i.decision.action.value for i in history[0].incidents][:6] == ["wait"] * 6
    assert count_interruptions(history) == 2


def test_small_figures_keep_their_digits():
    advice = advise_checkpointing(history_with_mtbf(10.0, 2), saves_every(0.3, 5, cost=0.004), end=T0 + 30)
    assert advice.summary().startswith("checkpoints every 0.3 s, 0.004 s each: ")
    assert "Young/Daly optimum 0.346 s for MTBF 15 s (2 interruptions in 30 s running)" in advice.summary()


def test_the_handed_interval_is_young_daly_bounded_by_seed_000_and_the_users_cap():
    from airflow_provider_resilient.goodput import handed_interval
    from airflow_provider_resilient.goodput.advice import SEED_000_INTERVAL

    advice = advise_checkpointing(history_with_mtbf(18_000.0, 4), saves_every(600.0, 10, cost=10.0),
                                  end=T0 + 5 * 18_000.0)
    # 90000 s running, 4 interruptions, and the 600 s interval kept -- Young/Daly's for 600^2 / (2 x 10) = 18000 s --
    # as a fifth: (90000 + 18000) / 5.
    assert handed_interval(advice) == pytest.approx(young_daly_interval(10.0, 21_600.0))
    assert handed_interval(advice, cap=300.0) == 300.0
    rare = advise_checkpointing(history_with_mtbf(2_000_000.0, 1), saves_every(600.0, 10, cost=60.0),
                                end=T0 + 2 * 2_000_000.0)
    assert young_daly_interval(60.0, 2_000_000.0) > SEED_000_INTERVAL
    assert handed_interval(rare) == SEED_000_INTERVAL  # seed 000: at least every 4 hours
    # No interruption yet: the optimum is only a lower bound -- nothing is handed; nor with fewer than two saves.
    calm = advise_checkpointing((Attempt(1, "a", started_at=T0),), saves_every(600.0, 10), end=T0 + 7200.0)
    assert handed_interval(calm) is None
    assert handed_interval(advise_checkpointing(history_with_mtbf(18_000.0, 4), saves_every(600.0, 1),
                                                end=T0 + 90_000.0)) is None
    unseen = advise_checkpointing(history_with_mtbf(18_000.0, 4), saves_every(600.0, 10, cost=0.0),
                                  end=T0 + 90_000.0)
    assert handed_interval(unseen) is None  # a save cost never seen is no ground for sqrt(2 C MTBF)
    with pytest.raises(ValueError, match="cap must be > 0"):
        handed_interval(advice, cap=0.0)


def run_with_saves_on_notice(covered: int, blind: int, mtbf: float = 3950.0):
    """``covered + blind`` interruptions every ``mtbf`` s; periodic saves every 100 steps (600 s at 6 s a step);
    before each covered one the workload saved on notice at the step it had reached, before a blind one it had
    run 60 steps past its last periodic save."""
    failures = covered + blind
    history = history_with_mtbf(mtbf, failures)
    saves = saves_every(600.0, int(failures * mtbf / 600.0) + 1)
    steps = []
    for i in range(failures):
        at = T0 + (i + 1) * mtbf
        last_periodic = max((s for s in saves if s.completed_at < at), key=lambda s: s.completed_at)
        if i < covered:
            reached = last_periodic.step + 30
            saves.append(CheckpointSave(reached, at - 10, 10.0))  # saved on the SIGTERM, 10 s before the kill
        else:
            reached = last_periodic.step + 60
        steps += [StepReport(at - 40, reached - 5), StepReport(at - 5, reached), StepReport(at + 200, reached, True)]
    return history, sorted(saves, key=lambda s: s.completed_at), steps, failures * mtbf + mtbf


@pytest.mark.parametrize(("covered", "blind"), [(4, 0), (3, 1), (0, 4), (1, 0)])
def test_interruptions_a_save_covered_lengthen_the_optimum_as_for_the_failures_that_lose_progress(covered: int,
                                                                                                   blind: int):
    history, saves, steps, running = run_with_saves_on_notice(covered, blind)
    interruptions = covered + blind
    advice = advise_checkpointing(history, saves, end=T0 + running, steps=steps)
    assert (advice.interruptions, advice.covered) == (interruptions, covered)
    assert advice.mtbf == pytest.approx(running / interruptions)
    r = covered / (interruptions + 1)  # the share seen, shrunk: one lucky failure is no proof
    assert advice.optimum == pytest.approx(young_daly_interval(10.0, advice.mtbf / (1 - r)))
    if covered:
        assert f"{covered} of them covered by a save" in advice.summary()
    # Without step reports nothing tells a covered interruption: Young/Daly for every failure, as before.
    assert advise_checkpointing(history, saves, end=T0 + running).optimum == pytest.approx(
        young_daly_interval(10.0, advice.mtbf))


def test_an_interruption_is_covered_only_with_a_save_close_behind_the_last_step_reported_before_it():
    from airflow_provider_resilient.goodput.advice import COVERED_SHARE, covered_interruptions

    saves = [CheckpointSave(100 * i, T0 + 600.0 * i, 10.0) for i in range(1, 5)]  # every 100 steps
    at = T0 + 2700.0  # after the save of step 400 (T0 + 2400)
    assert COVERED_SHARE * 100 == 12.5
    for reached, covered in [(400, 1), (412, 1), (413, 0), (460, 0)]:
        assert covered_interruptions([at], [StepReport(at - 30, reached)], saves) == covered, reached
    # A start line is not a step reached; no report before it, no save before it, or one save alone: not covered.
    assert covered_interruptions([at], [StepReport(at - 30, 400, True)], saves) == 0
    assert covered_interruptions([at], [StepReport(at + 30, 400)], saves) == 0
    assert covered_interruptions([T0 + 100], [StepReport(T0 + 90, 5)], saves) == 0
    assert covered_interruptions([at], [StepReport(at - 30, 400)], saves[-1:]) == 0


def test_the_first_failures_of_a_run_are_weighed_with_the_interval_it_kept():
    """Two failures in 900 s of running alone would hand 134 s at C = 20 s; the 268 s interval the workload kept
    (Young/Daly for 1800 s) counts as a third failure's worth of evidence: 190 s. Failures a save covered do not
    shorten it; many failures outweigh the interval kept."""
    from airflow_provider_resilient.goodput import handed_interval
    from airflow_provider_resilient.goodput.advice import losing_mtbf

    kept = saves_every(268.0, 3, cost=20.0)
    early = advise_checkpointing(history_with_mtbf(300.0, 2), kept, end=T0 + 900.0)
    assert young_daly_interval(20.0, early.mtbf) == pytest.approx(134.2, abs=0.1)
    assert losing_mtbf(early) == pytest.approx((900.0 + 268.0 ** 2 / 40) / 3)
    assert handed_interval(early) == pytest.approx(189.6, abs=0.1)
    history, saves, steps, running = run_with_saves_on_notice(2, 0)
    covered = advise_checkpointing(history, saves, end=T0 + running, steps=steps)
    assert covered.covered == 2 and losing_mtbf(covered) == pytest.approx(running + covered.interval ** 2 / 20)
    assert handed_interval(covered) > young_daly_interval(10.0, running)  # more than all the running time says
    late = advise_checkpointing(history_with_mtbf(300.0, 40), kept, end=T0 + 41 * 300.0)
    assert handed_interval(late) == pytest.approx(young_daly_interval(20.0, late.mtbf), rel=0.06)
    assert losing_mtbf(advise_checkpointing(history_with_mtbf(300.0, 2), kept[:1], end=T0 + 900.0)) is None
