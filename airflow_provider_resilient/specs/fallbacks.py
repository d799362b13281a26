"""The shape of the operators' ``fallbacks`` argument, checked before it becomes :class:`~..policy.Fallback` objects.

Pure (no Airflow, no Google imports). ``fallbacks`` is a list whose entries are :class:`~..policy.Fallback` objects or
dicts of its fields (``region``, ``zone``, ``machine_type``, ``accelerator_type``, ``accelerator_count``,
``strategy``, ``on``). A dict with a misspelt key, a value of the wrong type, a bare string or a single dict instead
of a list would otherwise surface as a raw ``TypeError`` / ``ValueError`` from the operator's constructor, before
the other arguments are checked: :func:`fallbacks_of` turns each into a :class:`~.common.SpecError` naming
``fallbacks[i]`` (or ``fallbacks``), reported with the other problems. Whether a value is a region, machine type or
zone the platform offers is the platform spec's check (:mod:`.vertex`, :mod:`.tpu`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..policy import FailureClass, Fallback
from ..policy.checks import closest, member, members
from .common import SpecError

#: The text fields of a fallback dict; ``accelerator_count`` is a whole number, ``on`` a list of failure classes.
TEXT_FIELDS = ("region", "zone", "machine_type", "accelerator_type", "strategy", "flavor_id", "pool_id")
FIELDS = (*TEXT_FIELDS, "accelerator_count", "on")
_EXAMPLE = "e.g. [{'region': 'us-east1'}, {'machine_type': 'n1-highmem-16'}]"


def _entry_problems(value: Mapping[Any, Any], at: str) -> list[SpecError]:
    problems = []
    for key, item in value.items():
        if key not in FIELDS:
            close = closest(str(key), FIELDS)
            hint = f" -- did you mean {close!r}?" if close else ""
            problems.append(SpecError(f"{at}.{key}" if isinstance(key, str) else at,
                                      f"unknown key{hint}. Give some of {', '.join(FIELDS)}"))
        elif key in TEXT_FIELDS and item is not None and not isinstance(item, str):
            problems.append(SpecError(f"{at}.{key}", f"{item!r}: give a string"))
        elif key == "accelerator_count" and item is not None and (type(item) is not int or item < 1):
            problems.append(SpecError(f"{at}.{key}", f"{item!r}: give a whole number >= 1"))
        elif key == "on":
            if isinstance(item, str | bytes) or not isinstance(item, list | tuple | set | frozenset):
                problems.append(SpecError(f"{at}.on", f"{item!r} is not a list of failure classes: give e.g. "
                                                      "['capacity_stockout', 'queue_timeout']"))
                continue
            for index, name in enumerate(item):
                try:
                    member(FailureClass, f"{at}.on[{index}]", name)
                except ValueError as exc:
                    where, _, why = str(exc).partition(": ")
                    problems.append(SpecError(where, why.replace("is not a FailureClass", "is not a failure class")))
    if not problems and not any(value.get(k) is not None for k in FIELDS if k != "on"):
        problems.append(SpecError(at, f"{dict(value)!r}: set at least one of {', '.join(FIELDS[:-1])}"))
    return problems


def fallbacks_of(fallbacks: object) -> tuple[list[Fallback | Mapping[str, Any]], list[SpecError]]:
    """``fallbacks`` split into the entries that make a :class:`~..policy.Fallback` (as given) and one problem per
    entry that does not (``fallbacks[i]``, ``fallbacks[i].<field>``; ``fallbacks`` for a value that is not a list).
    Never raises."""
    if fallbacks is None:
        return [], []
    if not isinstance(fallbacks, list | tuple):  # a single dict, a string
        return [], [SpecError("fallbacks", f"{_short(fallbacks)}: give a list of fallbacks (Fallback objects or "
                                           f"dicts), {_EXAMPLE}")]
    usable: list[Fallback | Mapping[str, Any]] = []
    problems: list[SpecError] = []
    for i, value in enumerate(fallbacks):
        at = f"fallbacks[{i}]"
        if isinstance(value, Fallback):
            usable.append(value)
            continue
        if not isinstance(value, Mapping):
            problems.append(SpecError(at, f"{_short(value)}: give a dict of the fields to change, {_EXAMPLE}"))
            continue
        found = _entry_problems(value, at)
        if not found:
            try:  # what the policy's own checks refuse (a strategy it does not know)
                fields: dict[str, Any] = {k: (members(FailureClass, f"{at}.on", v) if k == "on" else v)
                                          for k, v in value.items()}
                Fallback(**fields)
            except (TypeError, ValueError) as exc:
                found = [SpecError(at, str(exc))]
        if found:
            problems += found
        else:
            usable.append(value)
    return usable, problems


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["FIELDS", "fallbacks_of"]
