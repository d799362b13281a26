"""Google API list filters (AIP-160 / Cloud Logging subset), evaluated against resources given as plain dicts.

Serves the emulator's ``filter`` fields of Vertex AI ``ListCustomJobs`` / ``ListHyperparameterTuningJobs`` and of
Cloud Logging ``ListLogEntries``. Stdlib only.

* ``compile_filter(text, now=None) -> Callable[[Mapping[str, Any]], bool]``: parse once, evaluate many; blank text
  matches everything. ``now`` (default ``datetime.now(UTC)``) is called at evaluation time to resolve the relative
  times ``now``, ``now-24h``, ``now-30m``, ``now-7d`` (units s, m, h, d, w).
* ``FilterError(ValueError)``: a syntax error; ``.position`` (0-based offset) and ``.token`` are in the message.

>>> job = {"displayName": "my job", "state": "JOB_STATE_FAILED", "labels": {"airflow-dag": "etl"}}
>>> compile_filter('display_name="my job" AND labels.airflow-dag=etl')(job)
True
>>> compile_filter("state=JOB_STATE_RUNNING OR state=JOB_STATE_FAILED")(job), compile_filter("-labels.team:*")(job)
(True, True)
>>> entry = {"severity": "ERROR", "protoPayload": {"methodName": "tpu.nodes.terminate"}}
>>> compile_filter('"tpu.nodes.terminate" OR "tpu.nodes.restart"')(entry)
True
>>> compile_filter("severity>=WARNING protoPayload.methodName=~terminate$")(entry)
True
>>> compile_filter("a=1)")
Traceback (most recent call last):
...
airflow_provider_resilient.testing.emulator.filters.FilterError: unexpected token at position 3 (found ')')

Grammar (AIP-160)::

    expression := sequence {"AND" sequence}
    sequence   := factor {factor}                 -- juxtaposition is an implicit AND
    factor     := term {"OR" term}
    term       := ("NOT" | "-") term | "(" expression ")" | path OP value | value
    OP         := "=" | "!=" | "<" | "<=" | ">" | ">=" | ":" | "=~" | "!~"

Precedence: NOT, then OR, then AND (explicit or implicit). AIP-160 says "the OR operator has higher precedence than
AND" and Cloud Logging documents the same order, so ``a=1 AND b=2 OR c=3`` is ``a=1 AND (b=2 OR c=3)``. Keywords
are upper case only. Values are quoted strings (``\\"`` escapes) or bare words; right after an operator a bare word
may contain ``:`` (``create_time>2026-01-02T03:04:05Z``). A value alone is a global restriction: a case-insensitive
substring of any scalar anywhere in the resource.

Semantics: path segments are tried as given, then camelCase, then snake_case; lists fan out (any element may match).
Missing or null fields fail every operator but ``!=`` and ``!~``, which negate ``=`` and ``=~``. ``path:*`` means
present and non-empty, ``map:key`` that the key exists, ``string:value`` a case-insensitive substring; ``=~`` is
``re.search``. Otherwise the first that applies: ``severity`` fields compare by Logging rank (DEFAULT 0 ...
EMERGENCY 800; names or numbers); two RFC 3339 timestamps (or a relative time) compare as datetimes; two numbers
numerically; anything else as case-sensitive strings (booleans as ``true``/``false``).
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias

__all__ = ["FilterError", "compile_filter", "index_key", "required_values"]

SEVERITIES = {
    "DEFAULT": 0, "DEBUG": 100, "INFO": 200, "NOTICE": 300, "WARNING": 400,
    "ERROR": 500, "CRITICAL": 600, "ALERT": 700, "EMERGENCY": 800,
}  # fmt: skip
_KEYWORDS = frozenset({"AND", "OR", "NOT"})
_OPERATORS = ("<=", ">=", "!=", "=~", "!~", "=", "<", ">", ":")  # two-character operators first
_WORD_STOP = frozenset("()\"'=!<>~:")
_TERM_START = frozenset({"LPAREN", "WORD", "STRING", "NOT", "MINUS"})
_MAX_DEPTH = 100
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?)?([Zz]|[+-]\d{2}:?\d{2})?")
_RELATIVE = re.compile(r"now(?:([+-])(\d{1,9})([smhdw]))?")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip


class FilterError(ValueError):
    """A filter syntax error at ``position`` (0-based character offset), where ``token`` was found."""

    def __init__(self, message: str, position: int, token: str) -> None:
        super().__init__(f"{message} at position {position} (found {token})")
        self.position = position
        self.token = token


@dataclass(frozen=True)
class _Token:
    kind: str  # LPAREN RPAREN OP WORD STRING AND OR NOT MINUS EOF
    text: str
    pos: int


@dataclass(frozen=True)
class Value:
    """A literal, with its readings as number, timestamp, relative time and severity worked out at parse time."""

    text: str
    star: bool  # an unquoted ``*``
    number: int | float | None
    timestamp: datetime | None
    relative: timedelta | None
    severity: int | None


@dataclass(frozen=True)
class Comparison:
    path: tuple[str, ...]
    op: str
    value: Value
    pattern: re.Pattern[str] | None = None


@dataclass(frozen=True)
class Global:
    value: Value


@dataclass(frozen=True)
class Not:
    operand: Node


@dataclass(frozen=True)
class And:
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    operands: tuple[Node, ...]


Node: TypeAlias = Comparison | Global | Not | And | Or


def compile_filter(text: str, now: Callable[[], datetime] | None = None) -> Callable[[Mapping[str, Any]], bool]:
    """Parse ``text`` once; return a predicate over a resource dict. Raises ``FilterError`` on bad syntax."""
    tree = _parse(text)
    clock = now if now is not None else (lambda: datetime.now(UTC))
    return lambda resource: _evaluate(tree, resource, clock)


def required_values(text: str) -> dict[tuple[str, ...], str]:
    """The ``path = value`` restrictions every match of ``text`` meets: the ``=`` comparisons among the operands of
    its top-level AND (explicit or implicit), outside any OR or NOT, whose value is a plain string or a number
    (not a timestamp, a relative time or ``*``; not on a ``severity`` field, which compares by rank). A store can
    look those up in an index (keyed by :func:`index_key`) and evaluate the whole filter on what is left. Paths as
    written; a path repeated with two values keeps the last (the filter then matches nothing the index would
    return). Raises ``FilterError`` on bad syntax, as :func:`compile_filter` does.

    >>> required_values('resource.type="ml_job" AND resource.labels.job_id=42 (a=1 OR b=2) -c=3')
    {('resource', 'type'): 'ml_job', ('resource', 'labels', 'job_id'): '42'}
    """
    return _conjunct_values(_parse(text))


@functools.lru_cache(maxsize=256)
def _parse(text: str) -> Node:
    """The syntax tree of ``text`` (immutable, so shared): a store compiles a filter and takes its required values
    from one parse, and a poller sending the same filter every cycle parses it once."""
    return _Parser(text).parse()


def _conjunct_values(node: Node) -> dict[tuple[str, ...], str]:
    if isinstance(node, And):  # nested (parenthesised) ANDs are conjuncts too
        found: dict[tuple[str, ...], str] = {}
        for part in node.operands:
            found.update(_conjunct_values(part))
        return found
    if isinstance(node, Comparison) and node.op == "=" and _indexable(node):
        return {node.path: node.value.text}
    return {}


def _indexable(node: Comparison) -> bool:
    value = node.value
    return not (value.star or value.timestamp or value.relative is not None or node.path[-1] == "severity")


def index_key(value: Any) -> tuple[str, Any]:
    """How an index files a scalar so that ``=`` finds it: numbers by exact value (``42`` and ``"42.0"`` are equal
    to a filter and share a key, as ``int`` and ``float`` hash alike), booleans as ``true``/``false``, the rest as
    their text -- but any spelling of ``true`` / ``false`` as the lower-case one, since a boolean equals its name in
    any case (``v="FALSE"`` finds ``False``; a string ``"FALSE"`` shares the key: colliding keys only widen a
    lookup)."""
    number = _to_number(value)
    if number is not None:
        return "number", number
    text = _text(value)
    return "text", text.lower() if text.lower() in ("true", "false") else text


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        value_context = bool(tokens) and tokens[-1].kind == "OP"
        if ch.isspace():
            i += 1
        elif ch in "()":
            tokens.append(_Token("LPAREN" if ch == "(" else "RPAREN", ch, i))
            i += 1
        elif ch in "\"'":
            string, end = _read_string(text, i)
            tokens.append(_Token("STRING", string, i))
            i = end
        elif op := next((o for o in _OPERATORS if text.startswith(o, i)), None):
            tokens.append(_Token("OP", op, i))
            i += len(op)
        elif ch in "!~":
            raise FilterError("unexpected character", i, repr(ch))
        elif ch == "-" and not value_context and i + 1 < n and not text[i + 1].isspace():
            tokens.append(_Token("MINUS", ch, i))
            i += 1
        else:
            stop = _WORD_STOP - {":"} if value_context else _WORD_STOP
            start = i
            while i < n and text[i] not in stop and not text[i].isspace():
                i += 1
            word = text[start:i]
            tokens.append(_Token(word if word in _KEYWORDS and not value_context else "WORD", word, start))
    tokens.append(_Token("EOF", "", n))
    return tokens


def _read_string(text: str, start: int) -> tuple[str, int]:
    quote, chars, i = text[start], [], start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            following = text[i + 1]
            chars.append(following if following in (quote, "\\") else ch + following)
            i += 2
        elif ch == quote:
            return "".join(chars), i + 1
        else:
            chars.append(ch)
            i += 1
    raise FilterError("unterminated string", start, repr(text[start : start + 20]))


class _Parser:
    """Recursive descent over the token list, one method per grammar rule."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.index = 0
        self.depth = 0

    def parse(self) -> Node:
        if self._peek().kind == "EOF":
            return And(())
        tree = self._expression()
        if self._peek().kind != "EOF":
            raise self._error("unexpected token", self._peek())
        return tree

    def _peek(self) -> _Token:
        return self.tokens[self.index]

    def _advance(self) -> _Token:
        token = self.tokens[self.index]
        self.index = min(self.index + 1, len(self.tokens) - 1)
        return token

    def _error(self, message: str, token: _Token) -> FilterError:
        return FilterError(message, token.pos, "end of input" if token.kind == "EOF" else repr(token.text))

    def _chain(self, parse: Callable[[], Node], keyword: str | None, combine: type[And | Or]) -> Node:
        parts = [parse()]
        while self._peek().kind == keyword or (keyword is None and self._peek().kind in _TERM_START):
            if keyword is not None:
                self._advance()
            parts.append(parse())
        return parts[0] if len(parts) == 1 else combine(tuple(parts))

    def _expression(self) -> Node:
        return self._chain(self._sequence, "AND", And)

    def _sequence(self) -> Node:
        return self._chain(self._factor, None, And)

    def _factor(self) -> Node:
        return self._chain(self._term, "OR", Or)

    def _term(self) -> Node:
        token = self._advance()
        if token.kind in ("NOT", "MINUS", "LPAREN"):
            self.depth += 1
            if self.depth > _MAX_DEPTH:
                raise self._error("filter nested too deeply", token)
            inner = Not(self._term()) if token.kind != "LPAREN" else self._expression()
            self.depth -= 1
            if token.kind == "LPAREN" and (close := self._advance()).kind != "RPAREN":
                raise self._error("expected ')'", close)
            return inner
        if token.kind not in ("WORD", "STRING"):
            raise self._error("expected a field, a value or '('", token)
        if self._peek().kind != "OP":
            return Global(_make_value(token))
        op = self._advance().text
        path = tuple(token.text.split("."))
        if token.kind == "STRING" or not all(path):
            raise self._error(f"invalid field path before '{op}'", token)
        argument = self._advance()
        if argument.kind not in ("WORD", "STRING"):
            raise self._error(f"expected a value after '{op}'", argument)
        pattern = None
        if op in ("=~", "!~"):
            try:
                pattern = re.compile(argument.text)
            except (re.error, OverflowError, RecursionError, ValueError) as exc:
                raise self._error(f"invalid regular expression ({exc})", argument) from exc
        return Comparison(path, op, _make_value(argument), pattern)


def _make_value(token: _Token) -> Value:
    text = token.text
    relative = None
    if match := _RELATIVE.fullmatch(text):
        sign, amount, unit = match.groups()
        relative = timedelta(**{_UNITS[unit]: int(amount) * (-1 if sign == "-" else 1)}) if unit else timedelta()
    star = text == "*" and token.kind == "WORD"
    return Value(text, star, _to_number(text), _timestamp(text), relative, _severity(text))


def _evaluate(node: Node, resource: Any, now: Callable[[], datetime]) -> bool:
    if isinstance(node, And):
        return all(_evaluate(part, resource, now) for part in node.operands)
    if isinstance(node, Or):
        return any(_evaluate(part, resource, now) for part in node.operands)
    if isinstance(node, Not):
        return not _evaluate(node.operand, resource, now)
    if isinstance(node, Global):
        needle = node.value.text.lower()
        return node.value.star or any(needle in _text(leaf).lower() for leaf in _leaves(resource, maps=True))
    candidates = _resolve(resource, node.path)
    if node.op in ("!=", "!~"):
        positive = "=" if node.op == "!=" else "=~"
        return not any(_matches(candidate, positive, node, now) for candidate in candidates)
    return any(_matches(candidate, node.op, node, now) for candidate in candidates)


def _matches(actual: Any, op: str, node: Comparison, now: Callable[[], datetime]) -> bool:
    value = node.value
    if op == ":":
        if value.star:
            return not isinstance(actual, Mapping | str) or len(actual) > 0
        if isinstance(actual, Mapping):
            return value.text in actual
        return value.text.lower() in _text(actual).lower()
    if isinstance(actual, Mapping):
        return False
    if op == "=~":
        return node.pattern is not None and node.pattern.search(_text(actual)) is not None
    left, right = _coerce(actual, node, now)
    return _COMPARE[op](left, right)


def _coerce(actual: Any, node: Comparison, now: Callable[[], datetime]) -> tuple[Any, Any]:
    """Both sides as one comparable type: severity rank, datetime, float, or str."""
    value = node.value
    if node.path[-1] == "severity" and value.severity is not None and (rank := _severity(actual)) is not None:
        return rank, value.severity
    stamp = value.timestamp
    if value.relative is not None:
        try:
            stamp = _aware(now()) + value.relative
        except OverflowError:
            stamp = None
    if stamp is not None and (actual_stamp := _timestamp(actual)) is not None:
        return actual_stamp, stamp
    if value.number is not None and (number := _to_number(actual)) is not None:
        return number, value.number
    return _text(actual), value.text.lower() if isinstance(actual, bool) else value.text


def _resolve(resource: Any, path: tuple[str, ...]) -> list[Any]:
    """The values at ``path``, with lists flattened; missing and null values are left out."""
    current: list[Any] = [resource]
    for segment in path:
        camel = re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), segment)
        spellings = (segment, camel, re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", segment).lower())
        found = []
        for item in _leaves(current):
            key = next((k for k in spellings if isinstance(item, Mapping) and k in item), None)
            if key is not None:
                found.append(item[key])
        current = found
    return [item for item in _leaves(current) if item is not None]


def _leaves(value: Any, maps: bool = False) -> Iterator[Any]:
    """Flatten nested lists (and, if ``maps``, the values of nested mappings) into their leaves."""
    if isinstance(value, list | tuple) or (maps and isinstance(value, Mapping)):
        for item in value.values() if isinstance(value, Mapping) else value:
            yield from _leaves(item, maps)
    elif not maps or value is not None:
        yield value


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _to_number(value: Any) -> int | float | None:
    """A number exactly as written: integers stay ``int`` (a 19-digit job id is not rounded to a float that
    other ids share -- 1000000000000003015 and ...3019 are one float), the rest ``float``; Python compares the two
    exactly."""
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        return int(value) if _INTEGER.fullmatch(value) else float(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return None


def _severity(value: Any) -> int | None:
    if isinstance(value, str) and value.upper() in SEVERITIES:
        return SEVERITIES[value.upper()]
    number = _to_number(value)
    if isinstance(number, int):
        return number
    return int(number) if number is not None and math.isfinite(number) else None


def _aware(stamp: datetime) -> datetime:
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _timestamp(value: Any) -> datetime | None:
    """A datetime, or an RFC 3339 string (any fraction length; no offset or time means UTC / midnight), else None."""
    if isinstance(value, datetime):
        return _aware(value)
    match = _TIMESTAMP.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return None
    date, time, fraction, offset = match.groups()
    iso = f"{date}T{time or '00:00:00'}" + (f".{fraction[:6].ljust(6, '0')}" if fraction else "")
    try:
        if offset and offset not in ("Z", "z") and ":" not in offset:  # strftime's %z: +0000
            offset = f"{offset[:3]}:{offset[3:]}"
        return _aware(datetime.fromisoformat(iso + ("" if offset in (None, "Z", "z") else offset)))
    except ValueError:
        return None
