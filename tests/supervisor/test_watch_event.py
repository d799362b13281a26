"""The one trigger event (issue 31): typed, versioned, the same for every trigger; the operators read it back."""

from __future__ import annotations

import pytest

from airflow_provider_resilient.supervisor.watch_event import WATCH_EVENT_VERSION, WatchEvent, WatchEventTooNew

JOB = "projects/p/locations/us-central1/customJobs/1"


def test_a_hang_verdict_travels_with_the_job_the_memory_and_the_steps():
    event = WatchEvent("hang", JOB, "no progress", {"name": JOB, "state": "JOB_STATE_RUNNING"},
                       {"hang": "no new checkpoint past step 20 for 600 s", "hang_since": 1000.0},
                       {"resource": JOB}, ((900.0, 20),))
    payload = event.payload()
    assert payload["version"] == WATCH_EVENT_VERSION and payload["resource"] == JOB
    assert payload["hang"].startswith("no new checkpoint") and payload["steps"] == [[900.0, 20]]
    back = WatchEvent.from_payload(payload)
    assert back == WatchEvent("hang", JOB, "no progress", payload["job"], {"hang": payload["hang"],
                                                                          "hang_since": 1000.0},
                              {"resource": JOB}, ((900.0, 20),))


def test_a_payload_without_a_version_is_read_as_the_first_shape():
    node = "projects/p/locations/us-central2-b/nodes/n"
    event = WatchEvent.from_payload({"status": "changed", "node_name": node, "message": "node is PREEMPTED",
                                     "steps": [[1.0, 5]]})
    assert event == WatchEvent("changed", node, "node is PREEMPTED", steps=((1.0, 5),))


def test_a_newer_version_is_refused_naming_the_fix_and_nonsense_is_refused():
    with pytest.raises(WatchEventTooNew, match="upgrade the provider on the workers"):
        WatchEvent.from_payload({"version": WATCH_EVENT_VERSION + 1, "status": "terminal"})
    with pytest.raises(ValueError, match="is not one of"):
        WatchEvent.from_payload({"status": "exploded"})
    assert WatchEvent.from_payload(None) is None and WatchEvent.from_payload({}) is None
