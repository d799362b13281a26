"""The reconciler's rule: every owner state, keep_node, unowned resources, owners not looked up."""

from __future__ import annotations

import pytest

from airflow_provider_resilient.supervisor.reconcile import (
    FINISHED_STATES,
    GONE,
    OwnedResource,
    Owner,
    owner_env,
    owner_from,
    releases,
    releases_on_kill,
)

OWNER = Owner("dag", "train", "manual__2026-01-01T00:00:00+00:00", -1)
JOB = OwnedResource("projects/p/locations/r/customJobs/1", "custom_job", OWNER)


@pytest.mark.parametrize("state", [*sorted(FINISHED_STATES), GONE])
def test_a_resource_of_a_finished_or_vanished_task_instance_is_released(state):
    (release,) = releases([JOB], {OWNER: state})
    assert release.resource == JOB and (state in release.why or "deleted" in release.why)


@pytest.mark.parametrize("state", ["running", "deferred", "queued", "scheduled", "up_for_retry",
                                   "up_for_reschedule", "restarting", None])
def test_a_resource_of_a_live_or_cleared_task_instance_is_kept(state):
    assert releases([JOB], {OWNER: state}) == []


def test_kept_nodes_unowned_resources_and_owners_not_looked_up_are_left_alone():
    kept = OwnedResource("n/1", "tpu_node", OWNER, keep=True)
    unowned = OwnedResource("n/2", "tpu_node", None)
    assert releases([kept, unowned], {OWNER: "failed"}) == []
    assert releases([JOB], {}) == []


def test_owners_round_trip_through_environment_or_metadata():
    mapped = Owner("dag", "train", "scheduled__2026", 3)
    assert owner_from(owner_env("dag", "train", "scheduled__2026", 3)) == mapped
    assert owner_from(owner_env(*vars(OWNER).values())) == OWNER
    assert owner_from({}) is None
    assert owner_from({**owner_env("d", "t", "r", 0), "AIRFLOW_CTX_MAP_INDEX": "x"}) is None


def test_a_kill_releases_every_live_resource_but_a_kept_one_queued_resources_first():
    node = OwnedResource("z/nodes/a1", "tpu_node", None)
    queued = OwnedResource("z/queuedResources/a1", "queued_resource", None)
    todo = releases_on_kill([node, queued, JOB])
    assert [r.resource for r in todo] == [queued, JOB, node]
    assert all("killed" in r.why for r in todo)
    kept = OwnedResource("z/nodes/a2", "tpu_node", None, keep=True)
    assert releases_on_kill([kept]) == [] and releases_on_kill([]) == []


def test_other_writers_are_other_task_instances_writing_the_same_or_a_nested_directory():
    from airflow_provider_resilient.supervisor.reconcile import other_writers

    other = Owner("dag", "train", "scheduled__2026-01-02", -1)
    mapped = Owner("dag", "train", OWNER.run_id, 3)
    live = [OwnedResource("jobs/1", "custom_job", OWNER, checkpoint_dir="gs://b/run/ckpt"),  # my own attempt
            OwnedResource("jobs/2", "custom_job", other, checkpoint_dir="gs://b/run/ckpt/"),
            OwnedResource("jobs/3", "custom_job", mapped, checkpoint_dir="gs://b/run"),  # holds mine
            OwnedResource("jobs/4", "custom_job", other, checkpoint_dir="gs://b/run/ckpt-2"),  # a sibling
            OwnedResource("jobs/5", "custom_job", None, checkpoint_dir="gs://b/run/ckpt"),  # names no owner
            OwnedResource("jobs/6", "custom_job", other)]  # names no directory
    assert [r.name for r in other_writers(live, OWNER, "gs://b/run/ckpt")] == ["jobs/2", "jobs/3"]
