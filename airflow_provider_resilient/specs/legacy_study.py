"""An AI Platform Training ``hyperparameters`` spec (``HyperparameterSpec``) as a Vertex AI study: the part of the
translation (:mod:`.legacy`) that turns the open parameters into the arguments of
:class:`~..operators.vertex_ai_tuning.ResilientHyperparameterTuningJobOperator` and the fixed ones into flags. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import SpecError


def count_of(value: Any, where: str, problems: list[SpecError]) -> int:
    """An int64 count as the API took it: a number or its string (``"4"``)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
        problems.append(SpecError(where, f"{value!r}: give a whole number >= 0"))
        return 0
    return int(value)


#: AI Platform's metric tag when ``hyperparameterMetricTag`` is not given (its ml v1 documentation).
DEFAULT_METRIC_TAG = "training/hptuning/metric"
_SCALES = {"NONE": None, "UNIT_LINEAR_SCALE": "UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE": "UNIT_LOG_SCALE",
           "UNIT_REVERSE_LOG_SCALE": "UNIT_REVERSE_LOG_SCALE"}


def study_of_hyperparameters(spec: Any, problems: list[SpecError]) -> tuple[list[str], dict[str, Any] | None]:
    """(``--name=value`` of the parameters with one feasible value, the study of the others or None).

    The study is the arguments of
    :class:`~..operators.vertex_ai_tuning.ResilientHyperparameterTuningJobOperator`: ``study_spec`` (the metric
    ``hyperparameterMetricTag``, default ``training/hptuning/metric``, with ``goal``; each open ParameterSpec as
    a Vertex AI one; ``algorithm``), ``max_trial_count`` (``maxTrials``, default 1), ``parallel_trial_count``
    (``maxParallelTrials``, default 1) and ``max_failed_trial_count`` (``maxFailedTrials``, default 0)."""
    if not isinstance(spec, Mapping):
        problems.append(SpecError("trainingInput.hyperparameters", "give a HyperparameterSpec mapping"))
        return [], None
    params = spec.get("params")
    if not isinstance(params, list) or not params:
        problems.append(SpecError("trainingInput.hyperparameters.params", "give the list of ParameterSpecs"))
        return [], None
    args: list[str] = []
    open_params: list[dict[str, Any]] = []
    for i, param in enumerate(params):
        where = f"trainingInput.hyperparameters.params[{i}]"
        if not isinstance(param, Mapping) or not isinstance(param.get("parameterName"), str) or not param.get(
                "parameterName"):
            problems.append(SpecError(where, "give parameterName (a string) and type"))
            continue
        kind, name = str(param.get("type") or ""), param["parameterName"]
        scale = param.get("scaleType")
        if scale is not None and scale not in _SCALES:
            problems.append(SpecError(f"{where}.scaleType", f"{scale!r} is not one of {', '.join(_SCALES)}"))
        vertex: dict[str, Any] = {"parameter_id": name}
        if _SCALES.get(str(scale)):
            vertex["scale_type"] = _SCALES[str(scale)]
        values: list[Any] = []
        if kind in ("CATEGORICAL", "DISCRETE"):
            given = param.get("categoricalValues" if kind == "CATEGORICAL" else "discreteValues")
            values = given if isinstance(given, list) else []
            if not values:
                listed = "categoricalValues" if kind == "CATEGORICAL" else "discreteValues"
                problems.append(SpecError(f"{where}.{listed}", "give the list of values"))
                continue
            vertex["categorical_value_spec" if kind == "CATEGORICAL" else "discrete_value_spec"] = {"values": values}
        elif kind in ("DOUBLE", "INTEGER"):
            try:
                low, high = float(param.get("minValue")), float(param.get("maxValue"))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                problems.append(SpecError(where, "give numeric minValue and maxValue"))
                continue
            if low == high:
                values = [int(low) if kind == "INTEGER" else low]
            elif kind == "INTEGER":
                vertex["integer_value_spec"] = {"min_value": int(low), "max_value": int(high)}
            else:
                vertex["double_value_spec"] = {"min_value": low, "max_value": high}
        else:
            problems.append(SpecError(f"{where}.type", f"{kind or None!r}: give DOUBLE, INTEGER, CATEGORICAL or "
                                                       "DISCRETE"))
            continue
        if len(values) == 1:
            args.append(f"--{name}={values[0]}")
        else:
            open_params.append(vertex)
    if not open_params:
        return args, None
    if spec.get("resumePreviousJobId"):
        problems.append(SpecError("trainingInput.hyperparameters.resumePreviousJobId", "a Vizier study of the shut-"
                                  "down service cannot be resumed on Vertex AI: remove it (the operator resumes its "
                                  "own study across attempts)"))
    if spec.get("enableTrialEarlyStopping"):
        problems.append(SpecError("trainingInput.hyperparameters.enableTrialEarlyStopping", "automated stopping "
                                  "cannot be carried over to a resumed study: remove it"))
    goal = spec.get("goal") or "MAXIMIZE"
    if goal not in ("MAXIMIZE", "MINIMIZE"):
        problems.append(SpecError("trainingInput.hyperparameters.goal", f"{goal!r}: use MAXIMIZE or MINIMIZE"))
    algorithm = spec.get("algorithm") or "ALGORITHM_UNSPECIFIED"
    if algorithm not in ("ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH"):
        problems.append(SpecError("trainingInput.hyperparameters.algorithm", f"{algorithm!r}: use GRID_SEARCH, "
                                                                             "RANDOM_SEARCH or ALGORITHM_UNSPECIFIED"))
    tag = spec.get("hyperparameterMetricTag") or DEFAULT_METRIC_TAG
    where = "trainingInput.hyperparameters"
    study = {"study_spec": {"metrics": [{"metric_id": str(tag), "goal": goal}], "parameters": open_params,
                            "algorithm": algorithm},
             "max_trial_count": count_of(spec.get("maxTrials"), f"{where}.maxTrials", problems) or 1,
             "parallel_trial_count": count_of(spec.get("maxParallelTrials"), f"{where}.maxParallelTrials",
                                              problems) or 1,
             "max_failed_trial_count": count_of(spec.get("maxFailedTrials"), f"{where}.maxFailedTrials", problems)}
    return args, study


__all__ = ["DEFAULT_METRIC_TAG", "count_of", "study_of_hyperparameters"]
