"""The parts a retry policy (:class:`~.rules.RetryPolicy`) is built of: what a rule does (:class:`RuleAction`), what a
decision does (:class:`DecisionAction`), a backoff schedule, a budget, a fallback target and a rule. Each checks its
fields as it is built (:mod:`.checks`): a wrong type or a misspelt name is a ``ValueError`` naming the field. Pure
data: no clock, no I/O, no Airflow or Google imports.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import checks
from .failures import Failure, FailureClass, Platform


class RuleAction(enum.StrEnum):
    """What a rule tells the supervisor to do. A closed set.

    Effect on budgets: every action but FAIL counts one use of the rule's budget (if it names one);
    a fail-over counts against no budget.
    """

    RESUBMIT = "resubmit"
    """Submit a new attempt (a new CustomJob; on TPU, rerun the workload on the same node) resuming
    from the latest complete checkpoint."""
    RESTART_WORKERS = "restart_workers"
    """Restart the failed worker's process in place, on the same VM (TPU worker runner). Off TPU the
    platform does this itself (Vertex AI, "Understand the custom training service"), so the decision becomes
    RESUBMIT."""
    RECREATE_NODE = "recreate_node"
    """Delete the TPU node and create it afresh -- new hardware, the isolation of a faulty node that ModelArts'
    "Training Fault Tolerance Check" describes -- then resume
    from the checkpoint. Off TPU every new attempt already gets fresh VMs, so this becomes RESUBMIT."""
    WAIT = "wait"
    """Submit nothing; look again after the delay (a maintenance event recovering on its own: Cloud TPU, "Manage
    maintenance events with Cloud TPU Pods")."""
    FAIL = "fail"
    """Stop: the failure is permanent. No budget is used; Airflow should not retry the task."""


class DecisionAction(enum.StrEnum):
    """What :func:`.decide.decide` returns: the rule actions plus GIVE_UP (a budget is spent)."""

    RESUBMIT = "resubmit"
    RESTART_WORKERS = "restart_workers"
    RECREATE_NODE = "recreate_node"
    WAIT = "wait"
    FAIL = "fail"
    GIVE_UP = "give_up"

    @property
    def is_terminal(self) -> bool:
        """True for FAIL and GIVE_UP: the run ends here."""
        return self in (DecisionAction.FAIL, DecisionAction.GIVE_UP)

    @property
    def starts_new_attempt(self) -> bool:
        """True when the decision ends the current attempt and starts another (resubmit / re-create)."""
        return self in (DecisionAction.RESUBMIT, DecisionAction.RECREATE_NODE)


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter and a cap.

    The n-th retry under a budget (n = 0 for the first) waits
    ``min(max_seconds, initial_seconds * multiplier ** n)``, reduced by a random fraction of up to
    ``jitter`` of itself (so ``jitter=0.25`` gives 75 % to 100 % of the nominal delay).

    Raises:
        ValueError: on a negative time, ``multiplier < 1`` or ``jitter`` outside [0, 1].
    """

    initial_seconds: float = 30.0
    multiplier: float = 2.0
    max_seconds: float = 600.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        checks.number("Backoff.initial_seconds", self.initial_seconds, unit="seconds")
        checks.number("Backoff.max_seconds", self.max_seconds, unit="seconds")
        checks.number("Backoff.multiplier", self.multiplier, minimum=1)
        checks.number("Backoff.jitter", self.jitter)
        if self.multiplier < 1:
            raise ValueError(f"Backoff.multiplier must be >= 1, got {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"Backoff.jitter must be within [0, 1], got {self.jitter}")

    def delay(self, retry_index: int, unit_random: float) -> float:
        """Seconds to wait before retry number ``retry_index`` (0-based); ``unit_random`` in [0, 1)."""
        nominal = min(self.max_seconds, self.initial_seconds * self.multiplier ** max(0, retry_index))
        return max(0.0, nominal * (1.0 - self.jitter * unit_random))


@dataclass(frozen=True)
class Budget:
    """How much retrying a rule may do, counted from the attempt history.

    Attributes:
        max_retries: at most this many decisions under the budget per run (``None``: no count limit).
        max_seconds: the budget is spent once this many seconds have passed since the first decision of
            the current unbroken streak under it (quota waits, maintenance waits). ``None``: no time limit.
        per_worker: count only decisions for the same ``worker_id`` within the current attempt (a new
            attempt starts the workers' counters afresh), and take the worker's reported
            ``worker_restarts`` into account.
        backoff: the delay schedule for decisions under this budget (``None``: the policy's default).
        reset_on_progress: count only the decisions since training last moved forward -- since the
            newest attempt that resumed from a newer checkpoint than every attempt before it. A long run
            that fails now and then but keeps checkpointing never spends its budget; one that fails again
            and again without a new checkpoint does. The platform's counts (Vertex AI, "Understand the custom
            training service": 3 retries of a transient crash, 2 of an internal error) then mean "in a row
            without progress". False: per run.

    Raises:
        ValueError: when a limit is negative or neither limit is set.
    """

    max_retries: int | None = None
    max_seconds: float | None = None
    per_worker: bool = False
    backoff: Backoff | None = None
    reset_on_progress: bool = True

    def __post_init__(self) -> None:
        checks.number("Budget.max_retries", self.max_retries, optional=True, whole=True)
        checks.number("Budget.max_seconds", self.max_seconds, optional=True, unit="seconds")
        checks.flag("Budget.per_worker", self.per_worker)
        checks.flag("Budget.reset_on_progress", self.reset_on_progress)
        if self.backoff is not None and not isinstance(self.backoff, Backoff):
            raise ValueError(f"Budget.backoff: {self.backoff!r} is not a Backoff; give Backoff(...) or None")
        if self.max_retries is None and self.max_seconds is None:
            raise ValueError("a Budget needs max_retries or max_seconds (or both)")
        if self.max_retries is not None and self.max_retries < 0:
            raise ValueError(f"Budget.max_retries must be >= 0, got {self.max_retries}")
        if self.max_seconds is not None and self.max_seconds < 0:
            raise ValueError(f"Budget.max_seconds must be >= 0 seconds, got {self.max_seconds}")


_STRATEGIES = ("STANDARD", "SPOT", "FLEX_START", "ON_DEMAND", "LOW_COST")


@dataclass(frozen=True)
class Fallback:
    """One alternative target for the next attempt. Set only the fields that change.

    Attributes:
        region: Vertex AI region, e.g. ``europe-west4``.
        zone: Cloud TPU zone, e.g. ``us-central2-b``.
        machine_type: e.g. ``n1-highmem-16`` (a larger machine is the out-of-memory ladder).
        accelerator_type: Vertex ``NVIDIA_L4`` or TPU ``v5litepod-16``.
        accelerator_count: accelerators per replica.
        strategy: Vertex AI ``Scheduling.Strategy`` name: STANDARD, SPOT or FLEX_START.
        flavor_id: Huawei Cloud ModelArts flavor, e.g. ``modelarts.p3.large.public``.
        pool_id: ModelArts resource pool (a dedicated pool's id) to run on instead.
        on: the failure classes that consume this fallback (default: stockouts and queue timeouts).
            Add ``FailureClass.OUT_OF_MEMORY`` to a ``machine_type`` fallback to climb a memory ladder.

    Raises:
        ValueError: when no field is set or ``strategy`` is not a known name.
    """

    region: str | None = None
    zone: str | None = None
    machine_type: str | None = None
    accelerator_type: str | None = None
    accelerator_count: int | None = None
    strategy: str | None = None
    flavor_id: str | None = None
    pool_id: str | None = None
    on: frozenset[FailureClass] = frozenset({FailureClass.CAPACITY_STOCKOUT, FailureClass.QUEUE_TIMEOUT})

    def __post_init__(self) -> None:
        for name in ("region", "zone", "machine_type", "accelerator_type", "strategy", "flavor_id", "pool_id"):
            checks.text(f"Fallback.{name}", getattr(self, name))
        checks.number("Fallback.accelerator_count", self.accelerator_count, optional=True, whole=True, minimum=1)
        if not self.changes():
            raise ValueError("a Fallback must set at least one of region, zone, machine_type, "
                             "accelerator_type, accelerator_count, strategy, flavor_id, pool_id")
        if self.strategy is not None and self.strategy.upper() not in _STRATEGIES:
            raise ValueError(f"Fallback.strategy {self.strategy!r} is not one of {', '.join(_STRATEGIES)}")
        object.__setattr__(self, "on", checks.members(FailureClass, "Fallback.on", self.on))

    def changes(self) -> dict[str, Any]:
        """The fields this fallback sets, e.g. ``{"region": "europe-west4"}``."""
        keys = ("region", "zone", "machine_type", "accelerator_type", "accelerator_count", "strategy", "flavor_id",
                "pool_id")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.changes().items())


@dataclass(frozen=True)
class Rule:
    """One named rule: an action and what it matches.

    Attributes:
        name: unique within a policy; shown in logs and the attempt history.
        action: what to do when it matches.
        classes: failure classes matched (empty: any).
        exit_codes: exit codes matched (empty: any).
        exit_codes_not_in: exit codes excluded.
        message_pattern: a regular expression searched in ``Failure.message`` (None: any).
        platforms: platforms matched (empty: any).
        node_states: TPU node states matched (empty: any).
        budget: the name of the :class:`Budget` that limits it; required for every action but FAIL.
        fall_through: when the budget is spent, continue with the next matching rule instead of giving up.
        fail_over: move to the next unused :class:`Fallback` for this class before using the budget.
        source: where the rule comes from (the public page and what it says, or "user").
    """

    name: str
    action: RuleAction
    classes: frozenset[FailureClass] = frozenset()
    exit_codes: frozenset[int] = frozenset()
    exit_codes_not_in: frozenset[int] = frozenset()
    message_pattern: str | None = None
    platforms: frozenset[Platform] = frozenset()
    node_states: frozenset[str] = frozenset()
    budget: str | None = None
    fall_through: bool = False
    fail_over: bool = False
    source: str = "user"

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"Rule.name: {self.name!r} is not a non-empty string")
        where = f"Rule {self.name!r}"
        object.__setattr__(self, "action", checks.member(RuleAction, f"{where}: action", self.action))
        object.__setattr__(self, "classes", checks.members(FailureClass, f"{where}: classes", self.classes))
        object.__setattr__(self, "platforms", checks.members(Platform, f"{where}: platforms", self.platforms))
        for name in ("node_states", "exit_codes", "exit_codes_not_in"):
            values = getattr(self, name)
            if isinstance(values, str | bytes) or not isinstance(values, Iterable):
                raise ValueError(f"{where}: {name}: {values!r} is not a collection; give e.g. "
                                 + ("{'PREEMPTED'}" if name == "node_states" else "{137, 143}"))
        for state in self.node_states:
            checks.text(f"{where}: node_states", state, optional=False)
        object.__setattr__(self, "node_states", frozenset(s.upper() for s in self.node_states))
        for name in ("exit_codes", "exit_codes_not_in"):
            for code in getattr(self, name):
                checks.number(f"{where}: {name}", code, minimum=-255, whole=True)
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        checks.text(f"{where}: budget", self.budget)
        checks.text(f"{where}: message_pattern", self.message_pattern)
        checks.flag(f"{where}: fall_through", self.fall_through)
        checks.flag(f"{where}: fail_over", self.fail_over)
        if self.action != RuleAction.FAIL and not self.budget:
            raise ValueError(f"Rule {self.name!r}: action {self.action.value} needs a budget name")
        if self.message_pattern is not None:
            try:
                re.compile(self.message_pattern)
            except re.error as exc:
                raise ValueError(f"Rule {self.name!r}: message_pattern is not a valid regex: {exc}") from exc

    def matches(self, failure: Failure) -> bool:
        """Whether every non-empty matcher accepts ``failure``."""
        if self.classes and failure.failure_class not in self.classes:
            return False
        if self.platforms and failure.platform not in self.platforms:
            return False
        if self.exit_codes and failure.exit_code not in self.exit_codes:
            return False
        if self.exit_codes_not_in and failure.exit_code in self.exit_codes_not_in:
            return False
        if self.node_states and (failure.node_state or "").upper() not in self.node_states:
            return False
        return not (self.message_pattern is not None
                    and not re.search(self.message_pattern, failure.message or ""))


__all__ = ["Backoff", "Budget", "DecisionAction", "Fallback", "Rule", "RuleAction"]
