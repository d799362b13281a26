"""The retry policy: an ordered list of named rules, budgets beside them, backoff and fallbacks.

Theory of operation (after Kubernetes' ``podFailurePolicy``): a :class:`Rule` is one
:class:`RuleAction` plus matchers (failure classes, exit codes In / NotIn, a message pattern,
platforms, node states). An empty matcher matches anything. :func:`.decide.decide` walks the rules in
order; the first rule that matches *and* still has budget wins. A rule may name a :class:`Budget`
(counted from the attempt history alone); when it is spent, the decision is GIVE_UP -- unless the rule
says ``fall_through``, in which case matching continues with the next rule. That is how escalation is
written: "restart the worker in place up to 5 times, then retry the whole job up to 3 times" is two
rules on the same class.

A rule with ``fail_over`` first moves the next attempt to the next unused :class:`Fallback` (another
region, zone, machine type, accelerator or scheduling strategy) whose ``on`` set names the failure's
class. Fail-overs are free -- bounded by the number of fallbacks -- and only when none is left does the
rule's own action and budget apply.

Example, with ``fallbacks=(Fallback(region="europe-west4"), Fallback(strategy="SPOT"))``::

    attempt 1  us-central1        stockout -> fail over to europe-west4       (rule capacity-stockout)
    attempt 2  europe-west4       stockout -> fail over to SPOT               (rule capacity-stockout)
    attempt 3  europe-west4 SPOT  stockout -> resubmit after 120 s backoff    (budget stockout 1/3)
    attempt 4  europe-west4 SPOT  exit 139 -> resubmit from checkpoint        (budget transient_crash 1/3)
    attempt 5  europe-west4 SPOT  exit 1   -> fail                            (rule permanent-user-error)

User rules are put in front of the defaults (so they win); a user rule with the name of a default rule
replaces it. Everything here is pure data: no clock, no I/O, no Airflow or Google imports.

Sources of the default rules (each rule's ``source`` names its page):

* Vertex AI, "Understand the custom training service":
  https://cloud.google.com/vertex-ai/docs/training/understanding-training-service
* AI Platform Training, "Understanding the AI Platform Training service":
  https://cloud.google.com/ai-platform/training/docs/understanding-training-service
* Cloud TPU, "Manage maintenance events with Cloud TPU Pods": https://cloud.google.com/tpu/docs/maintenance-events
* Huawei Cloud ModelArts, "Training Fault Tolerance Check":
  https://support.huaweicloud.com/intl/en-us/develop-modelarts/modelarts_trouble_0003.html
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from . import checks
from .failures import PERMANENT_CLASSES, FailureClass, Platform
from .parts import Backoff, Budget, Fallback, Rule, RuleAction

FC = FailureClass
A = RuleAction

#: The default rules, in order. Each rule's ``source`` names the public page it comes from (see the module
#: docstring for the pages' addresses).
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("cancelled", A.FAIL, frozenset({FC.CANCELLED}), source="a user's cancel is never undone"),
    Rule("container-start-error", A.FAIL, frozenset({FC.CONTAINER_START_ERROR}),
         source="bad image, entrypoint or command: retrying cannot help"),
    Rule("out-of-memory", A.FAIL, frozenset({FC.OUT_OF_MEMORY}), fail_over=True,
         source="Vertex AI, Understand the custom training service: 'ran out of memory'; climbs a "
                "machine_type ladder when fallbacks name it"),
    Rule("permanent-user-error", A.FAIL, frozenset({FC.PERMANENT_USER_ERROR}),
         source="Vertex AI, Understand the custom training service: a common error is permanent and shuts "
                "down the whole job"),
    Rule("transient-crash", A.RESUBMIT, frozenset({FC.TRANSIENT_CRASH, FC.HANG}), budget="transient_crash",
         source="Vertex AI, Understand the custom training service: exit 6/134/11/139 are retried up to "
                "three times; hangs share the budget"),
    Rule("internal-error", A.RESUBMIT, frozenset({FC.INTERNAL_ERROR}), budget="internal_error",
         source="Vertex AI, Understand the custom training service: internal errors restart the job twice "
                "(three attempts in total)"),
    Rule("capacity-stockout", A.RESUBMIT, frozenset({FC.CAPACITY_STOCKOUT}), budget="stockout",
         fail_over=True, source="Vertex AI, Understand the custom training service: stockouts are retried up to "
                                 "three times"),
    Rule("quota-wait", A.RESUBMIT, frozenset({FC.QUOTA_EXCEEDED}), budget="quota_wait",
         source="Vertex AI, Understand the custom training service: a job may stay queued until enough quota "
                "frees; bounded by the queue timeout"),
    Rule("worker-restart", A.RESTART_WORKERS, frozenset({FC.WORKER_FAILURE}), platforms=frozenset({Platform.TPU}),
         budget="worker_restarts", fall_through=True,
         source="AI Platform Training and Vertex AI, Understand(ing) the training service: a worker is "
                "restarted in place up to five times"),
    Rule("worker-job-retry", A.RESUBMIT, frozenset({FC.WORKER_FAILURE}), budget="worker_job_retries",
         source="AI Platform Training and Vertex AI, Understand(ing) the training service: then the whole job "
                "is retried up to three times"),
    Rule("maintenance-terminated", A.RECREATE_NODE, frozenset({FC.MAINTENANCE_EVENT}),
         node_states=frozenset({"TERMINATED"}), budget="recreate_node",
         source="Cloud TPU, Manage maintenance events with Cloud TPU Pods: a TPU that does not recover is "
                "deleted and re-created, resuming from a checkpoint"),
    Rule("maintenance-wait", A.WAIT, frozenset({FC.MAINTENANCE_EVENT}), budget="maintenance_wait",
         fall_through=True, source="Cloud TPU, Manage maintenance events with Cloud TPU Pods: most maintenance "
                                    "events recover automatically"),
    Rule("maintenance-recreate", A.RECREATE_NODE, frozenset({FC.MAINTENANCE_EVENT}), budget="recreate_node",
         source="Cloud TPU, Manage maintenance events with Cloud TPU Pods: not back in time -> delete and "
                "re-create the TPU"),
    Rule("preemption", A.RECREATE_NODE, frozenset({FC.PREEMPTION}), budget="preemption",
         source="spot capacity reclaimed: re-create and resume"),
    Rule("node-unhealthy", A.RECREATE_NODE, frozenset({FC.NODE_UNHEALTHY}), budget="recreate_node",
         source="Huawei Cloud ModelArts, Training Fault Tolerance Check: isolate faulty hardware and re-issue "
                "the job"),
    Rule("preflight-failure", A.RECREATE_NODE, frozenset({FC.PREFLIGHT_FAILURE}), budget="preflight",
         source="Huawei Cloud ModelArts, Training Fault Tolerance Check: a failed environment pre-check "
                "isolates the node; 1 to 3 re-issues"),
    Rule("silent-worker", A.RECREATE_NODE, frozenset({FC.WORKER_SILENT}), budget="silent_worker",
         source="Huawei Cloud ModelArts, Training Fault Tolerance Check: isolate the faulty node and re-issue "
                "the job (a worker that never reported)"),
    Rule("queue-timeout", A.FAIL, frozenset({FC.QUEUE_TIMEOUT}), fail_over=True,
         source="Huawei Cloud ModelArts, Training Fault Tolerance Check: queuing over 30 minutes exits; fail "
                "over when fallbacks exist"),
    Rule("checkpoint-restore", A.RESUBMIT, frozenset({FC.CHECKPOINT_RESTORE}), budget="demote_checkpoint",
         source="ours: demote the checkpoint that will not load; resume from the one before it"),
    Rule("unknown", A.RESUBMIT, frozenset(), budget="unknown",
         source="documented default: an unrecognised failure is retried once from the checkpoint"),
)

#: No delay: a node that was reclaimed, terminated or would not come back from its repair is replaced at once. The
#: new node's create gives the capacity's answer itself: a stockout then has its own backoff and fallbacks
#: (``stockout``), a quota refusal its own wait (``quota_wait``).
NO_BACKOFF = Backoff(initial_seconds=0.0, jitter=0.0)

#: Default budgets, by name. Counts are retries on top of the platform's own (Vertex AI already retried three
#: times before it reports a transient crash or stockout: "Understand the custom training service").
DEFAULT_BUDGETS: Mapping[str, Budget] = {
    "transient_crash": Budget(max_retries=3),
    "internal_error": Budget(max_retries=2),
    "stockout": Budget(max_retries=3, backoff=Backoff(initial_seconds=120.0, max_seconds=1800.0)),
    "quota_wait": Budget(max_seconds=1800.0, backoff=Backoff(initial_seconds=60.0, max_seconds=600.0)),
    "worker_restarts": Budget(max_retries=5, per_worker=True, backoff=Backoff(initial_seconds=0.0)),
    "worker_job_retries": Budget(max_retries=3),
    "maintenance_wait": Budget(max_seconds=900.0, backoff=Backoff(initial_seconds=30.0, multiplier=1.0,
                                                                   max_seconds=30.0, jitter=0.0)),
    "recreate_node": Budget(max_retries=3, backoff=NO_BACKOFF),
    "preemption": Budget(max_retries=3, backoff=NO_BACKOFF),
    "preflight": Budget(max_retries=3),
    "silent_worker": Budget(max_retries=2),
    "demote_checkpoint": Budget(max_retries=2, reset_on_progress=False),
    "unknown": Budget(max_retries=1),
}

#: Delay before each hop along the fallbacks: short, since another region or strategy has its own
#: capacity, but jittered by half so that many jobs that lost the same region do not move at once.
DEFAULT_FAILOVER_BACKOFF = Backoff(initial_seconds=10.0, multiplier=2.0, max_seconds=120.0, jitter=0.5)

#: Huawei Cloud ModelArts, "Training Fault Tolerance Check": "If the waiting time exceeds 30 minutes, the
#: training job will automatically exit".
DEFAULT_QUEUE_TIMEOUT_SECONDS = 1800.0


@dataclass(frozen=True)
class RetryPolicy:
    """The whole retry configuration of one operator: rules, budgets, backoff, fallbacks.

    Attributes:
        rules: user rules, tried before the defaults. A rule named like a default replaces it.
        budgets: overrides of :data:`DEFAULT_BUDGETS` by name, plus budgets for user rules.
        backoff: the delay schedule for budgets without their own.
        fallbacks: alternative targets, consumed in order by rules with ``fail_over``.
        failover_backoff: the delay before moving to fallback number n (0-based). Short but jittered by
            default (10 s, doubling, at most 2 min): a stockout strikes every job in the region at once,
            and the jitter keeps them from all landing on the next region in the same second.
        queue_timeout_seconds: how long a job may stay QUEUED / a queued resource WAITING_FOR_RESOURCES
            before it is a QUEUE_TIMEOUT (ModelArts' "Training Fault Tolerance Check": 30 minutes); also
            caps the ``quota_wait`` budget unless that budget is overridden.
        include_default_rules: False to use only ``rules``.
        weigh_repairs: a TPU node in repair (a maintenance event the ``maintenance-wait`` rule matched) is
            re-created instead of waited for when the run's own measures say a new node comes sooner
            (:mod:`.repair`: the repairs and the new nodes seen so far); False: the ``maintenance_wait`` budget
            alone decides how long a repair is waited for.

    Raises:
        ValueError: at construction, naming the field, when a rule names an unknown budget, two rules
            share a name, a bounded budget is out of range (``preflight``: 0 to 3, ModelArts'
            ``fault-tolerance/job-retry-num``), or the queue timeout is not positive.
    """

    rules: tuple[Rule, ...] = ()
    budgets: Mapping[str, Budget] = field(default_factory=dict)
    backoff: Backoff = field(default_factory=Backoff)
    fallbacks: tuple[Fallback, ...] = ()
    queue_timeout_seconds: float = DEFAULT_QUEUE_TIMEOUT_SECONDS
    include_default_rules: bool = True
    failover_backoff: Backoff = field(default_factory=lambda: DEFAULT_FAILOVER_BACKOFF)
    weigh_repairs: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", checks.instances("RetryPolicy.rules", self.rules, Rule,
                                                           "give Rule(name=..., action=..., ...) objects"))
        object.__setattr__(self, "fallbacks", checks.instances(
            "RetryPolicy.fallbacks", self.fallbacks, Fallback, "give Fallback(region=...) objects (an operator's "
            "fallbacks argument also takes dicts)"))
        if not isinstance(self.budgets, Mapping):
            raise ValueError(f"RetryPolicy.budgets: {self.budgets!r:.80} is not a dict of budget name -> Budget")
        for name, budget in self.budgets.items():
            if not isinstance(budget, Budget):
                raise ValueError(f"RetryPolicy.budgets[{name!r}]: {budget!r:.80} is not a Budget; give e.g. "
                                 "Budget(max_retries=3) (or use RetryPolicy.from_counts)")
        object.__setattr__(self, "budgets", dict(self.budgets))
        for name in ("backoff", "failover_backoff"):
            if not isinstance(getattr(self, name), Backoff):
                raise ValueError(f"RetryPolicy.{name}: {getattr(self, name)!r:.80} is not a Backoff")
        checks.flag("RetryPolicy.include_default_rules", self.include_default_rules)
        checks.flag("RetryPolicy.weigh_repairs", self.weigh_repairs)
        checks.number("RetryPolicy.queue_timeout_seconds", self.queue_timeout_seconds, strict=True, unit="seconds")
        if self.queue_timeout_seconds <= 0:
            raise ValueError(f"RetryPolicy.queue_timeout_seconds must be > 0 seconds, got "
                             f"{self.queue_timeout_seconds}")
        names = [r.name for r in self.rules]
        if len(names) != len(set(names)):
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"RetryPolicy.rules: rule names must be unique, repeated: {dupes}")
        merged = self.effective_budgets
        preflight = merged["preflight"].max_retries
        if preflight is None or not 0 <= preflight <= 3:
            raise ValueError("RetryPolicy.budgets['preflight'].max_retries must be 0 to 3 (ModelArts' "
                             "fault-tolerance/job-retry-num: 1 to 3 re-issues, 0 when not given: "
                             f"no re-issue), got {preflight}")
        for rule in self.effective_rules:
            if rule.budget is not None and rule.budget not in merged:
                raise ValueError(f"RetryPolicy: rule {rule.name!r} names budget {rule.budget!r}, which is not "
                                 f"defined; known budgets: {', '.join(sorted(merged))}")
        used = sorted({r.budget for r in self.effective_rules if r.budget is not None} | set(DEFAULT_BUDGETS))
        for name in self.budgets:
            if name not in used:  # a misspelt name would be silently ignored: no rule spends it
                import difflib

                close = difflib.get_close_matches(name, used, n=1)
                hint = f" -- did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"RetryPolicy.budgets[{name!r}]: no rule spends a budget of that name{hint}. "
                                 f"Known budgets: {', '.join(used)}")

    @property
    def effective_rules(self) -> tuple[Rule, ...]:
        """User rules first, then the default rules not replaced by a user rule of the same name."""
        if not self.include_default_rules:
            return self.rules
        own = {r.name for r in self.rules}
        return self.rules + tuple(r for r in DEFAULT_RULES if r.name not in own)

    @property
    def effective_budgets(self) -> Mapping[str, Budget]:
        """Default budgets updated with the user's; ``quota_wait`` follows ``queue_timeout_seconds``."""
        merged = dict(DEFAULT_BUDGETS)
        merged["quota_wait"] = replace(DEFAULT_BUDGETS["quota_wait"], max_seconds=self.queue_timeout_seconds)
        merged.update(self.budgets)
        return merged

    def budget(self, name: str) -> Budget:
        return self.effective_budgets[name]

    def rule(self, name: str) -> Rule:
        """The effective rule called ``name``.

        Raises:
            KeyError: naming the valid rule names.
        """
        for r in self.effective_rules:
            if r.name == name:
                return r
        raise KeyError(f"no rule {name!r}; rules are: {', '.join(r.name for r in self.effective_rules)}")

    @classmethod
    def from_counts(
        cls,
        *,
        transient_retries: int | None = None,
        internal_retries: int | None = None,
        stockout_retries: int | None = None,
        worker_restarts: int | None = None,
        job_retries: int | None = None,
        node_recreates: int | None = None,
        preflight_retries: int | None = None,
        fallbacks: Iterable[Fallback] = (),
        queue_timeout_seconds: float = DEFAULT_QUEUE_TIMEOUT_SECONDS,
    ) -> RetryPolicy:
        """The default rules with some budget counts changed -- the common case, without Budget objects."""
        for argument, value in (("transient_retries", transient_retries), ("internal_retries", internal_retries),
                                ("stockout_retries", stockout_retries), ("worker_restarts", worker_restarts),
                                ("job_retries", job_retries), ("node_recreates", node_recreates),
                                ("preflight_retries", preflight_retries)):
            checks.number(f"RetryPolicy.from_counts: {argument}", value, optional=True, whole=True)
        counts = {"transient_crash": transient_retries, "internal_error": internal_retries,
                  "stockout": stockout_retries, "worker_restarts": worker_restarts,
                  "worker_job_retries": job_retries, "recreate_node": node_recreates,
                  "preflight": preflight_retries}
        budgets = {name: replace(DEFAULT_BUDGETS[name], max_retries=n) for name, n in counts.items() if n is not None}
        return cls(budgets=budgets, fallbacks=tuple(fallbacks), queue_timeout_seconds=queue_timeout_seconds)


#: "Up to five restarts per worker" (AI Platform Training, "Understanding the AI Platform Training service") --
#: the runner's cap and the policy's ``worker_restarts`` budget.
DEFAULT_WORKER_RESTARTS = 5


def align_worker_restarts(policy: RetryPolicy, max_worker_restarts: int | None) -> tuple[RetryPolicy, int]:
    """``(policy, cap)`` with the policy's per-worker ``worker_restarts`` budget equal to the runner's in-place
    restart cap.

    The worker runner restarts a failed command in place up to ``--max-restarts`` times and only then reports
    the worker ``failed`` with its ``restarts``; the policy's ``worker-restart`` rule counts those reported
    restarts against the ``worker_restarts`` budget. With the two equal, a worker out of restarts spends the
    budget at once and the run goes on to the ``worker-job-retry`` rule (a new node) on that very look;
    with a budget above the cap each look would record another RESTART_WORKERS that nothing carries out.

    Args:
        policy: the operator's policy.
        max_worker_restarts: the operator's argument; None: take the policy's budget (5 by default).

    Returns:
        The policy (its ``worker_restarts`` budget's ``max_retries`` set to the cap) and the cap.

    Raises:
        ValueError: ``max_worker_restarts`` is negative, or differs from a ``worker_restarts`` budget the
            policy sets explicitly (set one of them).
    """
    explicit = policy.budgets.get("worker_restarts")
    budget = policy.budget("worker_restarts")
    if max_worker_restarts is None:
        cap = budget.max_retries if budget.max_retries is not None else DEFAULT_WORKER_RESTARTS
    else:
        cap = int(max_worker_restarts)
        if cap < 0:
            raise ValueError(f"max_worker_restarts: must be >= 0, got {cap}")
        if explicit is not None and explicit.max_retries is not None and explicit.max_retries != cap:
            raise ValueError(f"max_worker_restarts: {cap} differs from resilience_policy.budgets['worker_restarts']"
                             f".max_retries ({explicit.max_retries}); they are one limit: set one of them")
    if budget.max_retries == cap:
        return policy, cap
    return replace(policy, budgets={**policy.budgets, "worker_restarts": replace(budget, max_retries=cap)}), cap


def is_permanent(failure_class: FailureClass) -> bool:
    """Whether the class can never be fixed by retrying the same spec."""
    return failure_class in PERMANENT_CLASSES
