"""The Airflow-version shims (airflow_provider_resilient/compat.py): the task state store's stand-in over XCom."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_resilient.compat import XCOM_PREFIX, XComStateStore, run_state_store


class TI:
    """A task instance's XCom calls as Airflow 3.1's RuntimeTaskInstance takes them."""

    def __init__(self, map_index: int = -1) -> None:
        self.task_id, self.map_index = "train", map_index
        self.xcoms: dict[tuple[str, int | None], Any] = {}
        self.pulls: list[dict[str, Any]] = []

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[(key, None if self.map_index < 0 else self.map_index)] = value

    def xcom_pull(self, *, task_ids: str, key: str, map_indexes: int | None) -> Any:
        self.pulls.append({"task_ids": task_ids, "key": key, "map_indexes": map_indexes})
        return self.xcoms.get((key, map_indexes))


@pytest.mark.parametrize("map_index", [-1, 3])
def test_the_xcom_store_keeps_values_under_its_prefix_for_this_map_index(map_index):
    ti = TI(map_index)
    store = XComStateStore(ti)
    assert store.get("run") is None and store.get("run", {}) == {}
    store.set("run", {"phase": "running"})
    assert ti.xcoms == {(XCOM_PREFIX + "run", None if map_index < 0 else map_index): {"phase": "running"}}
    assert XComStateStore(ti).get("run") == {"phase": "running"}  # a resumed process reads it back
    assert ti.pulls[-1] == {"task_ids": "train", "key": XCOM_PREFIX + "run",
                            "map_indexes": None if map_index < 0 else map_index}


def test_the_xcom_store_refuses_what_json_cannot_hold_before_writing():
    ti = TI()
    with pytest.raises(TypeError):
        XComStateStore(ti).set("run", {1, 2})
    assert ti.xcoms == {}


def test_the_task_state_store_comes_first_then_xcom_then_none():
    store = object()
    assert run_state_store({"task_state_store": store, "ti": TI()}) is store
    assert isinstance(run_state_store({"ti": TI()}), XComStateStore)
    assert run_state_store({}) is None
