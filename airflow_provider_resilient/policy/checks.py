"""Checks of the policy objects' fields as they are built (:mod:`.rules`): a value of the wrong type or out of range
is a ``ValueError`` naming the class and field (``Budget.max_retries``), the value and what to give -- never a raw
``TypeError`` from a comparison deep inside, and never a policy that silently means something else (a budget given
as a number, a misspelt failure class). Pure: no I/O, no imports beyond the standard library.
"""

from __future__ import annotations

import difflib
import enum
import math
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

E = TypeVar("E", bound=enum.Enum)


def closest(name: str, names: Sequence[str]) -> str | None:
    """The name of ``names`` that ``name`` most likely misspells (difflib's ratio over the whole name, else over the
    words of each name, so ``"stockuot"`` finds ``"capacity_stockout"``), or None."""
    name = name.strip().lower()
    if found := difflib.get_close_matches(name, names, n=1):
        return found[0]
    words = {w: n for n in names for w in n.split("_") if len(w) > 3}
    found = difflib.get_close_matches(name, list(words), n=1, cutoff=0.75)
    return words[found[0]] if found else None


def number(where: str, value: Any, *, minimum: float = 0.0, strict: bool = False, optional: bool = False,
           whole: bool = False, unit: str = "") -> None:
    """``value`` is a finite number (a whole one with ``whole``) >= ``minimum`` (> with ``strict``); None only when
    ``optional``.

    Raises:
        ValueError: naming ``where``.
    """
    if value is None and optional:
        return
    kind = "a whole number" if whole else "a number"
    suffix, of_unit = (f" {unit}", f" of {unit}") if unit else ("", "")
    if isinstance(value, bool) or not isinstance(value, int if whole else int | float) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"{where}: {value!r} is not {kind}{of_unit}; give {kind} "
                         f"{'>' if strict else '>='} {minimum:g}" + (" or None" if optional else ""))
    if value < minimum or (strict and value == minimum):
        raise ValueError(f"{where} must be {'>' if strict else '>='} {minimum:g}{suffix}, got {value!r}")


def flag(where: str, value: Any) -> None:
    """``value`` is True or False (a string such as ``"no"`` would read as on).

    Raises:
        ValueError: naming ``where``.
    """
    if not isinstance(value, bool):
        raise ValueError(f"{where}: {value!r} is not a bool; give True or False")


def text(where: str, value: Any, *, optional: bool = True) -> None:
    """``value`` is a non-empty string (or None when ``optional``).

    Raises:
        ValueError: naming ``where``.
    """
    if value is None and optional:
        return
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: {value!r} is not a non-empty string")


def member(kind: type[E], where: str, value: Any) -> E:
    """The member of the enum ``kind`` that ``value`` is or names (its value or name, any case).

    Raises:
        ValueError: naming ``where``, the closest name and every name.
    """
    if isinstance(value, kind):
        return value
    values = [str(m.value) for m in kind]
    if isinstance(value, str):
        for m in kind:
            if value.strip().lower() in (str(m.value).lower(), m.name.lower()):
                return m
    close = closest(str(value), values)
    hint = f" -- did you mean {close!r}?" if close else ""
    raise ValueError(f"{where}: {value!r} is not a {kind.__name__}{hint}. One of: {', '.join(values)}")


def members(kind: type[E], where: str, values: Any) -> frozenset[E]:
    """The members ``values`` (an iterable that is not a string) are or name (:func:`member`).

    Raises:
        ValueError: naming ``where`` (and the index of a bad item).
    """
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ValueError(f"{where}: {values!r} is not a collection of {kind.__name__} values; give e.g. "
                         f"[{str(next(iter(kind)).value)!r}]")
    return frozenset(member(kind, f"{where}[{i}]", v) for i, v in enumerate(values))


def instances(where: str, values: Any, cls: type, hint: str) -> tuple[Any, ...]:
    """``values`` (an iterable that is not a string or a mapping) as a tuple, each an instance of ``cls``.

    Raises:
        ValueError: naming ``where`` (and the index of a bad item) and ``hint`` (how to build one).
    """
    if isinstance(values, str | bytes | dict) or not isinstance(values, Iterable):
        raise ValueError(f"{where}: {values!r:.80} is not a list of {cls.__name__}; {hint}")
    items = tuple(values)
    for i, item in enumerate(items):
        if not isinstance(item, cls):
            raise ValueError(f"{where}[{i}]: {item!r:.80} is not a {cls.__name__}; {hint}")
    return items


__all__ = ["closest", "flag", "instances", "member", "members", "number", "text"]
