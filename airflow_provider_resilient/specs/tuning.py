"""A Vertex AI HyperparameterTuningJob's arguments: checked before anything is submitted, and the body of one
attempt's job built from the study's owed share (:func:`~..supervisor.study.owed`). Pure: no Google import.

The study is given the way the ``aiplatform_v1`` ``StudySpec`` message reads as a dict (snake_case), e.g.::

    study_spec={
        "metrics": [{"metric_id": "accuracy", "goal": "MAXIMIZE"}],
        "parameters": [{"parameter_id": "learning_rate",
                        "discrete_value_spec": {"values": [0.0003, 0.001, 0.003, 0.01]}}],
        "algorithm": "GRID_SEARCH",
    }
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..supervisor.study import GOALS, Owed, Study
from .common import SpecError

ALGORITHMS = ("ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH")
VALUE_SPECS = ("double_value_spec", "integer_value_spec", "categorical_value_spec", "discrete_value_spec")
SCALE_TYPES = ("SCALE_TYPE_UNSPECIFIED", "UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE")
#: StudySpec fields a resumed study carries over unchanged; any other is refused (naming it).
PASSED_THROUGH = frozenset({"measurement_selection_type", "observation_noise"})
#: The most trials a grid may have before its expansion is refused (it is listed to narrow it).
MAX_GRID_POINTS = 100_000


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value  # not NaN


def _parameter_problems(index: int, spec: Any, algorithm: str) -> list[SpecError]:
    field = f"study_spec.parameters[{index}]"
    if not isinstance(spec, Mapping):
        return [SpecError(field, f"expected a ParameterSpec dict, got {type(spec).__name__}")]
    problems = []
    pid = spec.get("parameter_id")
    if not isinstance(pid, str) or not pid or not pid.replace("_", "").replace("-", "").isalnum():
        problems.append(SpecError(f"{field}.parameter_id", f"{pid!r} is not a flag name: use letters, digits, _ "
                                                           "and - (the trial gets --<parameter_id>=<value>)"))
    kinds = [k for k in VALUE_SPECS if k in spec]
    if len(kinds) != 1:
        problems.append(SpecError(field, f"give exactly one of {', '.join(VALUE_SPECS)} (got {kinds or 'none'})"))
        return problems
    if "conditional_parameter_specs" in spec:
        problems.append(SpecError(f"{field}.conditional_parameter_specs", "conditional parameters are not "
                                  "supported: a resumed study could not narrow them; use separate parameters"))
    unknown = set(spec) - {"parameter_id", "scale_type", *VALUE_SPECS, "conditional_parameter_specs"}
    if unknown:
        problems.append(SpecError(f"{field}.{sorted(unknown)[0]}", "unknown ParameterSpec field (snake_case names "
                                  "of google.cloud.aiplatform_v1.StudySpec.ParameterSpec)"))
    scale = spec.get("scale_type", "SCALE_TYPE_UNSPECIFIED")
    if scale not in SCALE_TYPES:
        problems.append(SpecError(f"{field}.scale_type", f"{scale!r} is not one of {', '.join(SCALE_TYPES)}"))
    (kind,) = kinds
    body = spec[kind]
    where = f"{field}.{kind}"
    if not isinstance(body, Mapping):
        return [*problems, SpecError(where, f"expected a dict, got {type(body).__name__}")]
    if kind in ("double_value_spec", "integer_value_spec"):
        lo: Any = body.get("min_value")
        hi: Any = body.get("max_value")
        integral = kind == "integer_value_spec"
        if not (_number(lo) and _number(hi)) or (integral and not (float(lo).is_integer() and float(hi).is_integer())):
            problems.append(SpecError(where, f"min_value and max_value must be {'integers' if integral else 'numbers'}"
                                             f", got {lo!r} and {hi!r}"))
        elif float(lo) > float(hi):
            problems.append(SpecError(where, f"min_value {lo} is above max_value {hi}"))
        if kind == "double_value_spec" and algorithm == "GRID_SEARCH":
            problems.append(SpecError(where, "GRID_SEARCH needs every parameter INTEGER, CATEGORICAL or DISCRETE "
                                             "(Vertex AI's rule): give discrete_value_spec values, or use "
                                             "RANDOM_SEARCH"))
    else:
        values = body.get("values")
        want_str = kind == "categorical_value_spec"
        if (not isinstance(values, list | tuple) or not values
                or not all(isinstance(v, str) if want_str else _number(v) for v in values)):
            problems.append(SpecError(f"{where}.values", f"a non-empty list of {'strings' if want_str else 'numbers'}"
                                                         f" is needed, got {values!r}"))
        elif len(set(values)) != len(values):
            problems.append(SpecError(f"{where}.values", f"values repeat: {list(values)!r}"))
    return problems


def study_problems(study_spec: Any, max_trial_count: Any, parallel_trial_count: Any,
                   max_failed_trial_count: Any) -> list[SpecError]:
    """Every problem of a tuning job's study arguments (empty: fine), each naming the field and the fix.

    Rules: one metric with goal MAXIMIZE or MINIMIZE (the provider reports the best trial by it); parameters
    with unique ids, one value spec each; GRID_SEARCH only over discrete, categorical and integer values, and
    ``max_trial_count`` at most the grid's size; no conditional parameters and no automated stopping (a resumed
    study cannot carry them over); ``1 <= parallel_trial_count <= max_trial_count``;
    ``0 <= max_failed_trial_count <= max_trial_count``.
    """
    if not isinstance(study_spec, Mapping):
        return [SpecError("study_spec", f"expected a StudySpec dict (metrics, parameters, algorithm), got "
                                        f"{type(study_spec).__name__}")]
    problems: list[SpecError] = []
    metrics = study_spec.get("metrics")
    if not isinstance(metrics, list | tuple) or len(metrics) != 1 or not isinstance(metrics[0], Mapping):
        problems.append(SpecError("study_spec.metrics", "give exactly one metric, e.g. [{'metric_id': 'accuracy', "
                                                        "'goal': 'MAXIMIZE'}]: the best trial is chosen by it"))
    else:
        metric = metrics[0]
        if not isinstance(metric.get("metric_id"), str) or not metric.get("metric_id"):
            problems.append(SpecError("study_spec.metrics[0].metric_id", "the name the trial reports its metric by "
                                                                        "(hypertune's hyperparameter_metric_tag)"))
        if metric.get("goal") not in GOALS:
            problems.append(SpecError("study_spec.metrics[0].goal", f"{metric.get('goal')!r}: use MAXIMIZE or "
                                                                   "MINIMIZE"))
    algorithm = study_spec.get("algorithm", "ALGORITHM_UNSPECIFIED")
    if algorithm not in ALGORITHMS:
        problems.append(SpecError("study_spec.algorithm", f"{algorithm!r} is not one of {', '.join(ALGORITHMS)}"))
    parameters = study_spec.get("parameters")
    if not isinstance(parameters, list | tuple) or not parameters:
        problems.append(SpecError("study_spec.parameters", "give at least one ParameterSpec to tune"))
        parameters = []
    for index, spec in enumerate(parameters):
        problems.extend(_parameter_problems(index, spec, algorithm))
    ids = [p.get("parameter_id") for p in parameters if isinstance(p, Mapping)]
    if len(set(map(str, ids))) != len(ids):
        problems.append(SpecError("study_spec.parameters", f"parameter ids repeat: {ids}"))
    for name in sorted(set(study_spec) - {"metrics", "parameters", "algorithm"} - PASSED_THROUGH):
        problems.append(SpecError(f"study_spec.{name}", "not supported by the resilient tuning operator (automated "
                                                        "stopping and transfer learning cannot be carried over to a "
                                                        "resumed study): remove it"))
    counts_ok = True
    for field, value, low in (("max_trial_count", max_trial_count, 1),
                              ("parallel_trial_count", parallel_trial_count, 1),
                              ("max_failed_trial_count", max_failed_trial_count, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            problems.append(SpecError(field, f"must be an integer >= {low}, got {value!r}"))
            counts_ok = False
    if counts_ok:
        for field, value in (("parallel_trial_count", parallel_trial_count),
                             ("max_failed_trial_count", max_failed_trial_count)):
            if value > max_trial_count:
                problems.append(SpecError(field, f"{value} is more than max_trial_count {max_trial_count}"))
    if algorithm == "GRID_SEARCH" and not problems and counts_ok:
        size = 1
        for spec in parameters:
            size *= len(spec.get("discrete_value_spec", spec.get("categorical_value_spec", {})).get("values", [])) or (
                int(spec["integer_value_spec"]["max_value"]) - int(spec["integer_value_spec"]["min_value"]) + 1
                if "integer_value_spec" in spec else 1)
        if size > MAX_GRID_POINTS:
            problems.append(SpecError("study_spec.parameters", f"the grid has {size} points, more than "
                                                               f"{MAX_GRID_POINTS}: use RANDOM_SEARCH"))
        elif max_trial_count > size:
            problems.append(SpecError("max_trial_count", f"{max_trial_count} is more than the grid's {size} points: "
                                                         f"set it to {size} at most"))
    return problems


def study_of(study_spec: Mapping[str, Any], max_trial_count: int, max_failed_trial_count: int) -> Study:
    """The :class:`~..supervisor.study.Study` of checked arguments (:func:`study_problems` found none)."""
    metric = study_spec["metrics"][0]
    return Study(metric_id=metric["metric_id"], goal=metric["goal"], max_trial_count=max_trial_count,
                 max_failed_trial_count=max_failed_trial_count,
                 algorithm=study_spec.get("algorithm", "ALGORITHM_UNSPECIFIED"),
                 parameters=tuple(dict(p) for p in study_spec["parameters"]))


def build_tuning_job(*, display_name: str, study_spec: Mapping[str, Any], share: Owed, parallel_trial_count: int,
                     trial_job_spec: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """The HyperparameterTuningJob body (a dict) of one attempt: the study narrowed to ``share``'s parameters,
    ``max_trial_count`` its owed trials, ``max_failed_trial_count`` what is left of the user's, at most
    ``parallel_trial_count`` trials at once, each trial a CustomJob of ``trial_job_spec``."""
    spec = {**dict(study_spec), "parameters": [dict(p) for p in share.parameters]}
    return {"display_name": display_name, "study_spec": spec, "max_trial_count": share.max_trial_count,
            "parallel_trial_count": min(parallel_trial_count, share.max_trial_count),
            "max_failed_trial_count": share.max_failed_trial_count, "trial_job_spec": dict(trial_job_spec),
            "labels": dict(labels)}


__all__ = ["ALGORITHMS", "MAX_GRID_POINTS", "build_tuning_job", "study_of", "study_problems"]
