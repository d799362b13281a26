"""The suite itself: no test sleeps for platform time.

A test that waits for the platform (a queue, a backoff, a provisioning, a maintenance window) steps the emulator's
clock and the operator's together instead (the emulator's ``ManualClock``); a test waits only for work that really
runs -- a workload process, a subprocess -- and then in a bounded loop with a short poll. So a ``time.sleep`` or
``asyncio.sleep`` whose argument is a number literal above 0.05 s is a guess, and is refused here. Outside the rule:
the workloads' own code (``tests/**/workloads/``, and code strings a test hands to an emulated replica, which are
not calls of the test).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: The longest literal sleep a test may have: a poll of a bounded wait, not a guess of the platform's time.
MAX_LITERAL_SLEEP = 0.05


def literal_sleeps(source: str) -> list[tuple[int, float]]:
    """(line, seconds) of each ``time.sleep(x)`` / ``asyncio.sleep(x)`` / ``sleep(x)`` call whose ``x`` is a number
    literal above :data:`MAX_LITERAL_SLEEP`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        named = (isinstance(func, ast.Attribute) and func.attr == "sleep" and isinstance(func.value, ast.Name)
                 and func.value.id in ("time", "asyncio")) or (isinstance(func, ast.Name) and func.id == "sleep")
        arg = node.args[0]
        if named and isinstance(arg, ast.Constant) and isinstance(arg.value, int | float) \
                and not isinstance(arg.value, bool) and arg.value > MAX_LITERAL_SLEEP:
            found.append((node.lineno, float(arg.value)))
    return found


def test_the_check_finds_what_it_is_for():
    code = "import time, asyncio\ntime.sleep(0.2)\nasyncio.sleep(5)\nsleep(1)\ntime.sleep(0.05)\ntime.sleep(x)\n" \
           "run('time.sleep(9)')\n"
    assert literal_sleeps(code) == [(2, 0.2), (3, 5.0), (4, 1.0)]


def test_no_test_sleeps_for_platform_time():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        relative = path.relative_to(TESTS)
        if "workloads" in relative.parts or relative.parts[0] == "fixtures":
            continue
        offenders += [f"tests/{relative}:{line}: sleep({seconds:g})" for line, seconds in
                      literal_sleeps(path.read_text())]
    assert offenders == [], "step the platform's time instead (tests/platform_time.py), or poll a condition:\n" + \
        "\n".join(offenders)
