"""One shared member per event loop and key, for the watches that share one piece of work in a triggerer.

A triggerer runs every trigger on one asyncio event loop. Some work is better done once for the loop than once per
trigger: one ListCustomJobs poll for the jobs of a location (:class:`~..triggers.vertex_ai.CustomJobPoller`), one
Pub/Sub pull subscription per topic (:class:`~.events.EventFeed`). :class:`PerLoop` keeps that member per loop and
key, makes it on first use and forgets it when the member says it has no one left to serve. Members are never
shared between two loops: a test may run several loops, one after another or on threads of their own (two
triggerers in one process), and an asyncio object belongs to the loop it was made on.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class PerLoop(Generic[K, V]):
    """The members of each event loop, by key.

    A loop that is garbage-collected takes its members with it (a weak key): nothing outlives a closed triggerer.
    """

    def __init__(self) -> None:
        self._members: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[K, V]] = \
            weakref.WeakKeyDictionary()

    def get(self, key: K, make: Callable[[Callable[[], None]], V]) -> V:
        """The running loop's member for ``key``; when there is none, ``make(forget)`` makes it, where
        ``forget()`` -- called by the member once its last user left -- drops it, so the next ``get`` makes a new
        one (a ``forget`` of a member already replaced does nothing).

        Raises:
            RuntimeError: no event loop is running in this thread.
        """
        members = self._members.setdefault(asyncio.get_running_loop(), {})
        member = members.get(key)
        if member is None:
            def forget() -> None:
                if members.get(key) is member:
                    del members[key]

            member = members[key] = make(forget)
        return member

    def active(self) -> dict[K, V]:
        """A copy of the running loop's members, by key (for tests and diagnostics).

        Raises:
            RuntimeError: no event loop is running in this thread.
        """
        return dict(self._members.get(asyncio.get_running_loop(), {}))


__all__ = ["PerLoop"]
