"""Hostile input to the custom job operator (issue 13 item 1): malformed arguments, alone or together, are refused
before anything is submitted, with an AirflowFailException that names each bad field -- never a raw TypeError,
KeyError or AttributeError, never a create call.

Hypothesis draws one to three (field, bad value) mutations of a valid operator's arguments from a table of values
the first adversarial read found submitted or refused obscurely; the emulator records every API call.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_resilient.operators.vertex_ai import ResilientCustomJobOperator

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)

VALID: dict[str, Any] = dict(
    task_id="train", project_id="test-project", region="us-central1", display_name="hostile",
    worker_pool_specs=[{"machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
                        "container_spec": {"image_uri": "python:3.11", "command": ["python", "-c", "print(1)"],
                                           "env": [{"name": "MODE", "value": "train"}]}},
                       {"machine_spec": {"machine_type": "n1-standard-4", "accelerator_type": "NVIDIA_TESLA_T4",
                                         "accelerator_count": 1}, "replica_count": 2,
                        "container_spec": {"image_uri": "python:3.11", "command": ["python", "-c", "print(2)"]}}],
    base_output_dir="gs://hostile-bucket/run", deferrable=False, poll_interval=0.05, min_defer_seconds=0.0)

P0, P1 = ("worker_pool_specs", 0), ("worker_pool_specs", 1)
#: (path into the arguments, the field the error must name, bad values).
MUTATIONS: list[tuple[tuple[Any, ...], str, list[Any]]] = [
    (("project_id",), "project_id", ["P", "", 5, None, "x" * 40]),
    (("region",), "region", ["mars-north1", "US Central", 5, None, ""]),
    (("display_name",), "display_name", ["", "x" * 129, 5]),
    (("worker_pool_specs",), "worker_pool_specs", [None, "pool", [], {"machine_spec": {}}, 5]),
    ((*P0,), "worker_pool_specs[0]", [None, "pool", 5, []]),
    ((*P0, "replica_count"), "worker_pool_specs[0].replica_count", ["1", 1.5, -1, 0, 2, None, True]),
    ((*P1, "replica_count"), "worker_pool_specs[1].replica_count", ["2", 1.5, -1, None]),
    ((*P0, "machine_spec"), "worker_pool_specs[0].machine_spec", ["n1-standard-4", None, [], 5]),
    ((*P0, "machine_spec", "machine_type"), "worker_pool_specs[0].machine_spec.machine_type",
     ["", "n1", 5, None, "N1-STANDARD-4", ["n1-standard-4"]]),
    ((*P1, "machine_spec", "accelerator_type"), "worker_pool_specs[1].machine_spec",
     ["NVIDIA_TESLA_Z999", 3, "", "nvidia_tesla_t4"]),
    ((*P1, "machine_spec", "accelerator_count"), "worker_pool_specs[1].machine_spec",
     [-1, "2", 1.5, None, 0]),
    ((*P0, "container_spec"), "worker_pool_specs[0]", ["python:3.11", [], 5]),
    ((*P0, "container_spec", "image_uri"), "worker_pool_specs[0].container_spec.image_uri", ["", None, 5]),
    ((*P0, "container_spec", "command"), "worker_pool_specs[0].container_spec.command",
     ["python train.py", [], None, [1], ("python",), {"python": 1}]),
    ((*P0, "container_spec", "args"), "worker_pool_specs[0].container_spec.args", ["--epochs 3", [3], {"a": 1}]),
    ((*P0, "container_spec", "env"), "worker_pool_specs[0].container_spec.env",
     [{"MODE": "train"}, "MODE=train", [{"name": "MODE"}], [{"name": "MODE", "value": 1}], [["MODE", "train"]],
      [{"name": "", "value": "x"}]]),
    ((*P0, "container_spec", "workdir"), "worker_pool_specs[0].container_spec.workdir", ["/app"]),
    ((*P0, "disk_spec"), "worker_pool_specs[0].disk_spec",
     [{"boot_disk_size_gb": 10}, {"boot_disk_size_gb": "100"}, "pd-ssd", {"size": 100}]),
    ((*P0, "machine_specs"), "worker_pool_specs[0].machine_specs", [{"machine_type": "n1-standard-4"}]),
    (("labels",), "labels", [{"Team": "ml"}, {"team": 5}, {5: "ml"}, {"team": "x" * 64}, "team=ml",
                             {f"k{i}": "v" for i in range(70)}, {"resilient-attempt": "1"}]),
    (("base_output_dir",), "base_output_dir", ["/tmp/out", "s3://bucket/run", 5]),
    (("checkpoint_dir",), "checkpoint_dir", ["relative/dir", "s3://bucket/ckpt", 5]),
    (("strategy",), "scheduling.strategy", ["CHEAP", 5]),
    (("timeout",), "scheduling.timeout", ["1h", -5, "abc", [], 0]),
    (("fallbacks",), "fallbacks[0]", [[{"region": "Europe"}], [{"region": "mars-north1"}],
                                      [{"machine_type": "bigger"}], [{"accelerator_type": "NVIDIA_TESLA_Z999"}],
                                      [{"accelerator_count": 0}]]),
]


def mutate(arguments: dict[str, Any], path: tuple[Any, ...], value: Any) -> bool:
    """Set ``value`` at ``path`` in ``arguments``; False when an earlier mutation removed the way there."""
    node: Any = arguments
    for step in path[:-1]:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return False
        if not isinstance(node, dict | list):
            return False
    try:
        node[path[-1]] = value
    except (IndexError, TypeError):
        return False
    return True


def named_fields(message: str) -> list[str]:
    """The fields an error message names: one per line, before the first ': ' (the first line starts with the
    operator's class and task id)."""
    lines = message.split("\n")
    lines[0] = lines[0].split(": ", 1)[1]
    return [line.split(": ", 1)[0].split(":", 1)[0] for line in lines]


mutations = st.lists(st.sampled_from(range(len(MUTATIONS))).flatmap(
    lambda i: st.tuples(st.just(i), st.sampled_from(MUTATIONS[i][2]))), min_size=1, max_size=3,
    unique_by=lambda m: m[0])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutations)
def test_malformed_arguments_are_refused_naming_each_field_before_anything_is_created(resilient_emulator, drawn):
    arguments = copy.deepcopy(VALID)
    expected = []
    for index, value in drawn:
        path, field, _ = MUTATIONS[index]
        if mutate(arguments, path, value):
            expected.append(field)
    with pytest.raises(AirflowFailException) as refused:  # at parse time (literal arguments) or in execute
        ResilientCustomJobOperator(**arguments).execute({"run_id": "manual__hostile"})
    named = named_fields(str(refused.value))
    for field in expected:
        assert any(n.startswith(field) or field.startswith(n) for n in named), (field, str(refused.value))
    assert resilient_emulator.calls.list() == []  # nothing reached the platform


def test_an_env_value_never_appears_in_a_refusal():
    secret = "hf_" + "Zq8x" * 8
    arguments = copy.deepcopy(VALID)
    arguments["worker_pool_specs"][0]["container_spec"]["env"] = [{"name": "HF_TOKEN", "value": [secret]}]
    with pytest.raises(AirflowFailException, match=r"container_spec\.env\[0\]\.value") as refused:
        ResilientCustomJobOperator(**arguments)
    assert secret not in str(refused.value)


def test_templated_arguments_are_checked_after_rendering_not_at_parse_time():
    arguments = {**copy.deepcopy(VALID), "region": "{{ params.region }}"}
    op = ResilientCustomJobOperator(**arguments)  # a template cannot be judged before it is rendered
    op.region = "mars-north1"  # what rendering gave
    with pytest.raises(AirflowFailException, match="region: 'mars-north1' is not a Vertex AI region"):
        op.execute({"run_id": "manual__hostile"})


def test_a_new_region_passes_through_the_escape_hatch(monkeypatch):
    monkeypatch.setenv("RESILIENT_EXTRA_REGIONS", "mars-north1, europe-west99")
    ResilientCustomJobOperator(**{**copy.deepcopy(VALID), "region": "mars-north1"})


@pytest.mark.parametrize("model", ["WorkerPoolSpec", "MachineSpec", "ContainerSpec", "PythonPackageSpec", "DiskSpec",
                                   "EnvVar"])
def test_the_pool_models_know_exactly_the_fields_of_the_aiplatform_v1_protos(model):
    """A field the models lack would refuse a valid spec; a field the protos lack would let a typo through."""
    from google.cloud.aiplatform_v1 import types

    from airflow_provider_resilient.specs import vertex_pools

    proto_fields = {f.name for f in getattr(types, model).pb().DESCRIPTOR.fields}
    assert set(getattr(vertex_pools, model).model_fields) == proto_fields


def test_every_accelerator_type_the_api_knows_is_accepted():
    from google.cloud.aiplatform_v1 import types

    from airflow_provider_resilient.specs.vertex_pools import ACCELERATOR_TYPES

    assert set(ACCELERATOR_TYPES) == set(types.AcceleratorType.__members__) - {"ACCELERATOR_TYPE_UNSPECIFIED"}
