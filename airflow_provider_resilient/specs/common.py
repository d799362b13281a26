"""What every platform's specs share: the labels that identify a task instance's resources, bad-argument errors,
and the ``RESILIENT_*`` environment handed to every attempt's workload (the documentation's "Workload contract"
page):

==========================  =======================================================================
``RESILIENT_RESUME_FROM``   URI of the latest complete checkpoint to resume from (unset: from scratch)
``RESILIENT_RESUME_STEP``   its step
``RESILIENT_ATTEMPT``       the attempt number (1-based) of this run
``RESILIENT_FAILURE_CLASS`` what ended the previous attempt (e.g. ``transient_crash``); unset on 1
``RESILIENT_CHECKPOINT_DIR`` where to write checkpoints
==========================  =======================================================================

Pure: no Airflow, no Google imports. Label rules (Google Cloud labels, for CustomJobs and TPU nodes alike):
keys start with a lowercase letter; keys and values use lowercase letters, digits, ``_`` and ``-``, at most
63 characters; at most 64 labels per resource.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Collection, Mapping, Sequence
from datetime import timedelta
from typing import Any

LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
MAX_LABELS = 64
#: A Google Cloud project id: 6-30 characters, lowercase letters, digits and hyphens, starting with a letter.
PROJECT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")

#: Labels the operators put on every job and node they create, to find them again (reattach) and to audit.
LABEL_DAG = "airflow-dag"
LABEL_TASK = "airflow-task"
LABEL_RUN = "airflow-run"
LABEL_MAP_INDEX = "airflow-map-index"
LABEL_ATTEMPT = "resilient-attempt"
#: Label ``"true"`` on a resource the user asked to keep after the task ends (``keep_node``): the reconciler
#: (:mod:`..supervisor.reconcile`) leaves it alone.
LABEL_KEEP = "resilient-keep"
#: Label ``"true"`` on a spare TPU node (:mod:`..supervisor.spare`): made for its attempt before that attempt came,
#: its startup script waiting; the attempt that takes it removes the label. A rebuilt run never watches it as an
#: attempt.
LABEL_SPARE = "resilient-spare"
OUR_LABELS = (LABEL_DAG, LABEL_TASK, LABEL_RUN, LABEL_MAP_INDEX, LABEL_ATTEMPT)

ENV_RESUME_FROM = "RESILIENT_RESUME_FROM"
ENV_RESUME_STEP = "RESILIENT_RESUME_STEP"
ENV_ATTEMPT = "RESILIENT_ATTEMPT"
ENV_FAILURE_CLASS = "RESILIENT_FAILURE_CLASS"
#: Checkpoint steps demoted by the supervisor (comma-separated): complete, but they would not load.
ENV_DEMOTED_STEPS = "RESILIENT_DEMOTED_STEPS"
ENV_CHECKPOINT_DIR = "RESILIENT_CHECKPOINT_DIR"
#: Seconds between checkpoints the run advises the attempt (goodput.handed_interval): the workload's to honour.
ENV_CHECKPOINT_INTERVAL = "RESILIENT_CHECKPOINT_INTERVAL_SECONDS"


class SpecError(ValueError):
    """A bad argument, found before anything was submitted. ``field`` names it (the first, when several);
    ``errors`` holds each problem (one line of the message each).

    Args:
        field: the argument's path, e.g. ``worker_pool_specs[0].container_spec.command``.
        message: what is wrong and the fix; the message is ``"<field>: <message>"``.
        line: the whole line instead, when it was composed already.
    """

    def __init__(self, field: str, message: str, *, line: str | None = None) -> None:
        super().__init__(line if line is not None else f"{field}: {message}")
        self.field = field
        self.errors: list[SpecError] = [self]

    @classmethod
    def of_many(cls, errors: Sequence[SpecError]) -> SpecError:
        """Several problems as one error: one line each; ``field`` names the first."""
        flat = [e for error in errors for e in error.errors]
        if len(flat) == 1:
            return flat[0]
        combined = cls(flat[0].field, "", line="\n".join(str(e) for e in flat))
        combined.errors = flat
        return combined

    def without(self, arguments: Collection[str]) -> SpecError | None:
        """This error without the problems of ``arguments`` (top-level argument names: a templated argument is
        judged after rendering, not as the DAG is parsed); None when nothing is left."""
        kept = [e for e in self.errors if re.split(r"[.\[]", e.field, maxsplit=1)[0] not in arguments]
        return SpecError.of_many(kept) if kept else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def seconds_problems(name: str, value: Any, *, minimum: float = 0.0, strict: bool = True,
                     optional: bool = False) -> list[SpecError]:
    """Problems of a duration argument in seconds: a finite number (not a bool, not a string), above ``minimum``
    (``strict``) or at least it; None only when ``optional``."""
    if value is None and optional:
        return []
    if isinstance(value, str) and ("{{" in value or "{%" in value):
        return []  # a template: judged once rendered
    if isinstance(value, timedelta):
        value = value.total_seconds()
    bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
    if not _is_number(value):
        return [SpecError(name, f"{value!r} is not a number of seconds: give a number {bound}, e.g. 30"
                                + (" (or None)" if optional else ""))]
    if (value <= minimum) if strict else (value < minimum):
        return [SpecError(name, f"{value!r} must be {bound} seconds")]
    return []


def flag_problems(name: str, value: Any) -> list[SpecError]:
    """Problems of an on/off argument: exactly True or False (``"no"`` would read as on)."""
    return [] if isinstance(value, bool) else [SpecError(name, f"{value!r} is not a bool: give True or False")]


def label_problems(labels: object) -> list[SpecError]:
    """What is wrong with a user's ``labels`` for a job or a node (Google's label rules: keys start with a
    lowercase letter; keys and values hold lowercase letters, digits, ``_`` and ``-``, at most 63 characters;
    at most 64 labels -- the operators' own included, which a user may not set), one :class:`SpecError` each."""
    if not isinstance(labels, Mapping):
        return [SpecError("labels", f"{labels!r}: give a dict of label keys to values")]
    problems = []
    for key, value in labels.items():
        field = f"labels[{key!r}]"
        if key in OUR_LABELS:
            problems.append(SpecError(field, "is set by the operator itself; choose another key"))
        elif not isinstance(key, str) or not LABEL_KEY_RE.match(key):
            problems.append(SpecError(field, "keys start with a lowercase letter and hold only lowercase letters, "
                                             "digits, '_' and '-' (at most 63 characters)"))
        elif not isinstance(value, str) or not LABEL_VALUE_RE.match(value):
            problems.append(SpecError(field, f"value {value!r} may hold only lowercase letters, digits, '_' and "
                                             "'-' (at most 63 characters)"))
    if len(labels) + len(OUR_LABELS) > MAX_LABELS:
        problems.append(SpecError("labels", f"at most {MAX_LABELS - len(OUR_LABELS)} labels (the operator adds "
                                            f"{len(OUR_LABELS)} of its own)"))
    return problems


def location_problems(field: str, value: object, pattern: re.Pattern[str], known: frozenset[str], what: str,
                      example: str, extra_env: str, extra: str) -> list[SpecError]:
    """``value`` as a region or zone (``what``: "Vertex AI region", "Cloud TPU zone"): a string of ``pattern``'s
    shape, in ``known`` or named in ``extra`` (the comma-separated environment variable ``extra_env``: the escape
    hatch for one Google has just added)."""
    if not isinstance(value, str) or not pattern.match(value):
        return [SpecError(field, f"{value!r} is not a name like {example!r}")]
    if value not in known and value not in {v.strip() for v in extra.split(",") if v.strip()}:
        return [SpecError(field, f"{value!r} is not a {what}; if Google has just added it, name it in {extra_env} "
                                 "(comma-separated)")]
    return []


def service_account_problems(value: object, field: str = "service_account") -> list[SpecError]:
    """``value`` as the service account a job or node runs as (None: the platform's default): an email of one of
    the formats IAM gives service accounts (:mod:`.catalog`: ``NAME@PROJECT_ID.iam.gserviceaccount.com`` with a
    6-30 character account id, the Compute Engine default ``PROJECT_NUMBER-compute@developer.gserviceaccount.com``,
    the App Engine default and the service agents)."""
    from .catalog import catalog

    if value is None:
        return []
    how = ("give the email of a service account, NAME@PROJECT_ID.iam.gserviceaccount.com (NAME: 6-30 lowercase "
           "letters, digits and '-', starting with a letter), e.g. 'trainer@my-project.iam.gserviceaccount.com', or "
           "the Compute Engine default PROJECT_NUMBER-compute@developer.gserviceaccount.com; or leave it unset for "
           "the platform's default")
    if not isinstance(value, str):
        return [SpecError(field, f"{value!r}: {how}")]
    if any(kind.pattern.match(value) for kind in catalog().service_accounts):
        return []
    name, at, domain = value.partition("@")
    if at and domain and not domain.endswith("gserviceaccount.com"):
        why = f"{value!r} is not a service account (its domain is not gserviceaccount.com)"
    elif at and domain.endswith(".iam.gserviceaccount.com") and not re.fullmatch(r"[a-z][a-z0-9-]{4,28}[a-z0-9]",
                                                                                   name):
        why = f"{value!r}: the account id {name!r} is not 6-30 lowercase letters, digits and '-' starting with a letter"
    else:
        why = f"{value!r} is not a service account email"
    return [SpecError(field, f"{why}: {how}")]


def checkpoint_dir_problems(value: object, required: bool = False) -> list[SpecError]:
    """``checkpoint_dir`` must be a ``gs://`` URI, or an absolute local path (the emulator's runs): every attempt
    and every worker must see the same place."""
    if value is None and not required:
        return []
    if isinstance(value, str) and ((value.startswith("gs://") and len(value) > 5) or value.startswith("/")):
        return []
    return [SpecError("checkpoint_dir", f"{value!r}: give a gs:// URI (or, with the emulator, an absolute local "
                                        "path): every attempt and the workload must see the same place")]


#: A Pub/Sub topic name ("Resource names", https://cloud.google.com/pubsub/docs/pubsub-basics#resource_names: the
#: topic ID starts with a letter and is 3-255 letters, digits and ``-_.~+%``).
TOPIC_RE = re.compile(r"^projects/[^/]+/topics/[A-Za-z][-\w.~+%]{2,254}$")


def topic_problem(topic: object) -> str | None:
    """Why ``topic`` is not a Pub/Sub topic name (``projects/PROJECT/topics/TOPIC``), or None when it is one."""
    if isinstance(topic, str) and TOPIC_RE.match(topic):
        return None
    return (f"{topic!r} is not a Pub/Sub topic name: give projects/PROJECT/topics/TOPIC, the topic a Cloud Logging "
            "sink routes the job's or node's log entries to")


def label_value(text: str) -> str:
    """``text`` as a valid label value: lowercase, ``[a-z0-9_-]`` only, at most 63 characters.

    Values that had to be changed or cut get a short hash suffix so that two different inputs never
    map to the same label (``my.DAG`` and ``my_DAG`` stay apart).
    """
    cleaned = re.sub(r"[^a-z0-9_-]", "-", text.lower())
    if cleaned == text and len(cleaned) <= 63:
        return cleaned
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return f"{cleaned[:52]}-{digest}"


def job_labels(dag_id: str, task_id: str, run_id: str, map_index: int, attempt: int | None) -> dict[str, str]:
    """The labels that identify a job of this task instance (and, with ``attempt``, of this attempt).

    The run id is always hashed (``manual__2026-11-21T10:00:00+00:00`` is not a label value).
    """
    labels = {
        LABEL_DAG: label_value(dag_id),
        LABEL_TASK: label_value(task_id),
        LABEL_RUN: hashlib.sha256(run_id.encode()).hexdigest()[:16],
        LABEL_MAP_INDEX: str(map_index if map_index >= 0 else "none"),
    }
    if attempt is not None:
        labels[LABEL_ATTEMPT] = str(attempt)
    return labels



def resume_env(*, attempt: int, checkpoint_dir: str, resume_uri: str | None, resume_step: int | None,
               failure_class: str | None, demoted: Sequence[int] = (),
               checkpoint_interval: float | None = None) -> dict[str, str]:
    """The RESILIENT_* variables of one attempt (only those with a value). ``demoted``: checkpoint steps the
    supervisor demoted (complete, but they would not load) -> ``RESILIENT_DEMOTED_STEPS`` (comma-separated):
    a workload that finds its own newest checkpoint (after a platform restart) skips them.
    ``checkpoint_interval``: seconds -> ``RESILIENT_CHECKPOINT_INTERVAL_SECONDS`` (three decimals), the interval
    the run's observed failures and save cost advise (:func:`~..goodput.handed_interval`)."""
    env = {ENV_ATTEMPT: str(attempt), ENV_CHECKPOINT_DIR: checkpoint_dir}
    if demoted:
        env[ENV_DEMOTED_STEPS] = ",".join(str(s) for s in sorted(demoted))
    if resume_uri:
        env[ENV_RESUME_FROM] = resume_uri
        env[ENV_RESUME_STEP] = str(resume_step if resume_step is not None else "")
    if failure_class:
        env[ENV_FAILURE_CLASS] = failure_class
    if checkpoint_interval is not None:
        env[ENV_CHECKPOINT_INTERVAL] = f"{checkpoint_interval:.3f}"
    return env
