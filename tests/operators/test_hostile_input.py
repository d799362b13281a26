"""Hostile input to the custom job and TPU operators (issue 13 item 1): malformed arguments, alone or together, are
refused before anything is submitted, with an AirflowFailException that names each bad field -- never a raw
TypeError, KeyError or AttributeError, never a create call.

Hypothesis draws one to three (field, bad value) mutations of a valid operator's arguments from a table of values
the first adversarial read found submitted or refused obscurely; the emulator records every API call.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_resilient.compat import AirflowFailException
from airflow_provider_resilient.operators.tpu import ResilientTPUWorkloadOperator
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
     ["", "n1", 5, None, "N1-STANDARD-4", ["n1-standard-4"], "n1-standard-5", "a2-highgpu-3g", "zz9-standard-4"]),
    ((*P1, "machine_spec", "machine_type"), "worker_pool_specs[1].machine_spec",  # P1 has a GPU: these take none
     ["n2-standard-4", "e2-standard-8", "c2-standard-8"]),
    ((*P1, "machine_spec", "accelerator_type"), "worker_pool_specs[1].machine_spec",
     ["NVIDIA_TESLA_Z999", 3, "", "nvidia_tesla_t4", "NVIDIA_L4", "NVIDIA_TESLA_A100", "TPU_V2"]),
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
                                      [{"accelerator_count": 0}], [{"machine_type": "n1-standard-5"}],
                                      [{"regoin": "us-east1"}], ["us-east1"], [{"accelerator_count": "2"}],
                                      [{"zone": "us-central2-b"}], [{"strategy": "CHEAP"}], [{}]]),
    (("fallbacks",), "fallbacks", [{"region": "us-east1"}, "us-east1", 5]),
    (("service_account",), "service_account",
     ["trainer", "trainer@", "a@b.com", 5, "abc@test-project.iam.gserviceaccount.com", ["trainer"],
      "trainer@test-project.iam.gserviceaccount.com.evil.com"]),
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


def drawn_mutations(table: list[tuple[tuple[Any, ...], str, list[Any]]]) -> Any:
    """One to three (row of ``table``, bad value) pairs, each row at most once."""
    return st.lists(st.sampled_from(range(len(table))).flatmap(
        lambda i: st.tuples(st.just(i), st.sampled_from(table[i][2]))), min_size=1, max_size=3,
        unique_by=lambda m: m[0])


def refused_naming_each_field(operator_class: type, valid: dict[str, Any],
                              table: list[tuple[tuple[Any, ...], str, list[Any]]], drawn: Any, emulator: Any) -> None:
    """The property: ``valid`` with the ``drawn`` mutations is refused by an AirflowFailException (when the DAG
    is parsed, or in execute) naming every mutated field, and no API call was made."""
    arguments = copy.deepcopy(valid)
    expected = []
    for index, value in drawn:
        path, field, _ = table[index]
        if mutate(arguments, path, value):
            expected.append(field)
    with pytest.raises(AirflowFailException) as refused:
        operator_class(**arguments).execute({"run_id": "manual__hostile"})
    named = named_fields(str(refused.value))
    for field in expected:
        assert any(n.startswith(field) or field.startswith(n) for n in named), (field, str(refused.value))
    assert emulator.calls.list() == []  # nothing reached the platform


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn_mutations(MUTATIONS))
def test_malformed_arguments_are_refused_naming_each_field_before_anything_is_created(resilient_emulator, drawn):
    refused_naming_each_field(ResilientCustomJobOperator, VALID, MUTATIONS, drawn, resilient_emulator)


TPU_VALID: dict[str, Any] = dict(
    task_id="train", project_id="test-project", zone="us-central2-b", accelerator_type="v4-16",
    runtime_version="tpu-ubuntu2204-base", command=["python", "train.py"], checkpoint_dir="gs://tpu-ckpt/run",
    env={"MODE": "train"}, setup_script="pip install -r requirements.txt", poll_interval=0.05,
    min_defer_seconds=0.0, deferrable=False)
TPU_MUTATIONS: list[tuple[tuple[Any, ...], str, list[Any]]] = [
    (("project_id",), "project_id", ["P", "", 5, None]),
    (("zone",), "zone", ["us-central2", "mars-north1-a", 5, None, ""]),
    (("accelerator_type",), "accelerator_type", ["v4-8000000", "v4-12", "V4-8", 8, None, "", "v2-16"]),
    (("runtime_version",), "runtime_version", ["", "Ubuntu 22.04", 5, None, "tpu-ubuntu2404-basee"]),
    (("service_account",), "service_account", ["trainer", "trainer@", "a@b.com", 5, "x@appspot.gserviceaccount.com"]),
    (("command",), "command", ["", [], None, 5, [1, 2], {"python": 1}]),
    (("setup_script",), "setup_script", [5, ["pip"], {"a": 1}]),
    (("env",), "env", [{"X=1; touch /tmp/pwned; Y": "v"}, {"MY-VAR": "v"}, {"A": 1}, {5: "v"}, "A=b", ["A"]]),
    (("tpu_node_id",), "tpu_node_id", ["Train Node", "9lives", 5, "x" * 70]),
    (("checkpoint_dir",), "checkpoint_dir", ["relative/dir", "s3://bucket/ckpt", 5, ""]),
    (("labels",), "labels", [{"Team": "ml"}, {"team": 5}, {5: "ml"}, "team=ml", {f"k{i}": "v" for i in range(70)}]),
    (("heartbeat_seconds",), "heartbeat_seconds", [0, -1, "10", None]),
    (("hang_timeout",), "hang_timeout", [0, -1, "1800", None]),
    (("startup_timeout",), "startup_timeout", [0, -5, "60"]),
    (("valid_until_duration",), "valid_until_duration", [-60, "1h", 0, [60]]),
    (("max_worker_restarts",), "max_worker_restarts", [-1, "5", 1.5]),
    (("spot",), "spot", ["yes", 1]),
    (("reserved",), "reserved", ["no", 0]),
    (("fallbacks",), "fallbacks[0]", [[{"zone": "Europe"}], [{"accelerator_type": "v4-8000000"}],
                                      [{"accelerator_type": "NVIDIA_TESLA_T4"}], [{"region": "europe-west4"}],
                                      [{"machine_type": "n1-standard-8"}],
                                      [{"zone": "us-west4-a", "accelerator_type": "v4-8"}], [{"zone": "us-centrall-b"}],
                                      [{"regoin": "us-east1"}], ["us-central2-b"], [{"accelerator_type": 8}]]),
    (("fallbacks",), "fallbacks", [{"zone": "europe-west4-a"}, "europe-west4-a"]),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn_mutations(TPU_MUTATIONS))
def test_malformed_tpu_arguments_are_refused_naming_each_field_before_any_node_exists(resilient_emulator, drawn):
    refused_naming_each_field(ResilientTPUWorkloadOperator, TPU_VALID, TPU_MUTATIONS, drawn, resilient_emulator)


#: Values refused only with the rest of VALID / TPU_VALID as it is (a T4 on n1-standard-4 pools; v4-16 in
#: us-central2-b): (operator, argument, value, the field named, a phrase of the fix).
IN_CONTEXT = [
    ("vertex", "fallbacks", [{"machine_type": "n2-standard-8"}], "fallbacks[0].machine_type", "takes no accelerators"),
    ("vertex", "fallbacks", [{"accelerator_type": "NVIDIA_L4"}], "fallbacks[0].accelerator_type", "g2-standard"),
    ("vertex", "fallbacks", [{"machine_type": "a2-highgpu-1g"}], "fallbacks[0].machine_type", "NVIDIA_TESLA_A100"),
    ("tpu", "runtime_version", "v2-alpha-tpuv6e", "runtime_version", "does not offer"),
    ("tpu", "runtime_version", "v2-alpha-tpuv5-lite", "runtime_version", "does not offer"),
    ("tpu", "accelerator_type", "v5litepod-8", "accelerator_type", "us-west4-a"),
    ("tpu", "accelerator_type", "v6e-8", "accelerator_type", "RESILIENT_EXTRA_ZONES"),
    ("tpu", "fallbacks", [{"zone": "europe-west4-a"}], "fallbacks[0].zone", "is offered in us-central2-b"),
    ("tpu", "fallbacks", [{"zone": "us-west4-a", "accelerator_type": "v5litepod-8"}], "fallbacks[0].zone",
     "keeps the node's runtime_version"),  # tpu-ubuntu2204-base: v2-v4; us-west4-a offers v5e
]


@pytest.mark.parametrize(("platform", "argument", "value", "field", "fix"), IN_CONTEXT)
def test_values_that_do_not_fit_the_rest_are_refused_naming_the_field_and_the_fix(platform, argument, value, field,
                                                                                 fix):
    operator_class, valid = ((ResilientCustomJobOperator, VALID) if platform == "vertex" else
                             (ResilientTPUWorkloadOperator, TPU_VALID))
    with pytest.raises(AirflowFailException) as refused:
        operator_class(**{**copy.deepcopy(valid), argument: value})
    assert named_fields(str(refused.value)) == [field] and fix in str(refused.value)


def test_the_refusals_say_the_closest_names_and_the_escape_hatch(monkeypatch):
    arguments = copy.deepcopy(VALID)
    arguments["worker_pool_specs"][0]["machine_spec"]["machine_type"] = "n1-standard-5"
    with pytest.raises(AirflowFailException, match=r"worker_pool_specs\[0\]\.machine_spec\.machine_type: "
                                                   r"'n1-standard-5': n1-standard comes in .*closest: 'n1-standard-8', "
                                                   r"'n1-standard-4'.*RESILIENT_EXTRA_MACHINE_TYPES"):
        ResilientCustomJobOperator(**arguments)
    monkeypatch.setenv("RESILIENT_EXTRA_MACHINE_TYPES", "n1-standard-5, n9-future-8")
    ResilientCustomJobOperator(**arguments)  # a machine type Google has just added is not locked out
    with pytest.raises(AirflowFailException, match=r"runtime_version: 'tpu-ubuntu2404-basee' is not a TPU software "
                                                   r"version \(closest: 'tpu-ubuntu2204-base'\).*"
                                                   r"RESILIENT_EXTRA_RUNTIME_VERSIONS"):
        ResilientTPUWorkloadOperator(**{**copy.deepcopy(TPU_VALID), "runtime_version": "tpu-ubuntu2404-basee"})
    monkeypatch.setenv("RESILIENT_EXTRA_RUNTIME_VERSIONS", "tpu-ubuntu2404-basee")
    ResilientTPUWorkloadOperator(**{**copy.deepcopy(TPU_VALID), "runtime_version": "tpu-ubuntu2404-basee"})
    monkeypatch.setenv("RESILIENT_EXTRA_ZONES", "us-central2-b")  # Google offers v6e there now: the zone takes any
    ResilientTPUWorkloadOperator(**{**copy.deepcopy(TPU_VALID), "accelerator_type": "v6e-8",
                                    "runtime_version": "v2-alpha-tpuv6e"})


@pytest.mark.parametrize("account", ["trainer@test-project.iam.gserviceaccount.com",
                                     "123456789012-compute@developer.gserviceaccount.com",
                                     "service-123456789012@gcp-sa-aiplatform-cc.iam.gserviceaccount.com",
                                     "{{ var.value.trainer_account }}"])
def test_service_accounts_of_each_documented_kind_are_accepted(account):
    ResilientCustomJobOperator(**{**copy.deepcopy(VALID), "service_account": account})  # a template: after rendering
    if "{{" not in account:  # the TPU operator does not template service_account
        ResilientTPUWorkloadOperator(**{**copy.deepcopy(TPU_VALID), "service_account": account})


def test_spot_with_reserved_is_refused():
    with pytest.raises(AirflowFailException, match=r"spot: .*reserved"):
        ResilientTPUWorkloadOperator(**{**copy.deepcopy(TPU_VALID), "spot": True, "reserved": True})


def test_an_env_value_never_appears_in_a_refusal():
    secret = "hf_" + "Zq8x" * 8
    arguments = copy.deepcopy(VALID)
    arguments["worker_pool_specs"][0]["container_spec"]["env"] = [{"name": "HF_TOKEN", "value": [secret]}]
    with pytest.raises(AirflowFailException, match=r"container_spec\.env\[0\]\.value") as refused:
        ResilientCustomJobOperator(**arguments)
    assert secret not in str(refused.value)


def test_templated_arguments_are_checked_after_rendering_the_rest_as_the_dag_is_parsed():
    arguments = {**copy.deepcopy(VALID), "region": "{{ params.region }}"}
    op = ResilientCustomJobOperator(**arguments)  # a template cannot be judged before it is rendered
    with pytest.raises(AirflowFailException, match="display_name") as refused:  # the literal ones can
        ResilientCustomJobOperator(**{**arguments, "display_name": ""})
    assert "region" not in str(refused.value)
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
