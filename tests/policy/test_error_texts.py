"""The classifiers against real platform texts (:mod:`.error_texts`): every case gets its class, and quota and
capacity are never confused."""

from __future__ import annotations

import re

import pytest

from airflow_provider_resilient.policy import (
    Failure,
    FailureClass,
    Platform,
    classify_ai_platform_job,
    classify_create_error,
    classify_error_message,
    classify_vertex_job,
)

from .error_texts import CASES, ErrorText

PLATFORM = {
    "vertex_ai": Platform.VERTEX_AI,
    "ai_platform": Platform.AI_PLATFORM,
    "compute_engine": Platform.TPU,
    "cloud_tpu": Platform.TPU,
    "tpu_queued_resources": Platform.TPU,
    "google_api": Platform.TPU,
}

#: Classes a text cannot produce: they come from states, timers and the supervisor, not from a message.
NOT_FROM_TEXT = {
    FailureClass.PREFLIGHT_FAILURE,
    FailureClass.WORKER_SILENT,
    FailureClass.QUEUE_TIMEOUT,
    FailureClass.HANG,
    FailureClass.CANCELLED,
    FailureClass.CHECKPOINT_RESTORE,
}


def classify(case: ErrorText) -> Failure:
    """The case's text through its entry point."""
    platform = PLATFORM[case.surface]
    if case.entry == "create":
        return classify_create_error(case.code, case.text, platform=platform)
    if case.entry == "message":
        return classify_error_message(case.text, platform=platform, rpc_code=case.code)
    if case.entry == "vertex_job":
        failure = classify_vertex_job("JOB_STATE_FAILED", case.code, case.text)
    elif case.entry == "ai_platform_job":
        failure = classify_ai_platform_job("FAILED", case.text)
    else:
        raise AssertionError(f"unknown entry {case.entry!r}")
    assert failure is not None
    return failure


def case_id(case: ErrorText) -> str:
    words = re.sub(r"[^A-Za-z0-9]+", "-", case.text[:48]).strip("-")
    return f"{case.expected.value}-{case.surface}-{case.entry}-{case.code}-{words}"


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_a_real_text_gets_its_class(case: ErrorText):
    failure = classify(case)
    assert failure.failure_class == case.expected, f"{case.text!r} ({case.source})"
    assert failure.message == case.text.strip()


def test_the_table_is_large_covers_every_class_a_text_can_produce_and_cites_public_sources():
    assert len(CASES) >= 100
    assert {c.expected for c in CASES} == set(FailureClass) - NOT_FROM_TEXT
    assert {c.surface for c in CASES} >= {
        "vertex_ai",
        "ai_platform",
        "compute_engine",
        "cloud_tpu",
        "tpu_queued_resources",
    }
    assert all(c.source.startswith("https://") for c in CASES)
    assert not [c for c in CASES if "shared" in c.source.split("/")]
    assert len({(c.text, c.entry, c.code) for c in CASES}) == len(CASES), "duplicate case"


QUOTA_WORDS = re.compile(r"quota", re.IGNORECASE)


def test_a_text_naming_a_quota_is_never_capacity_and_a_capacity_text_never_quota():
    """Quota frees as other jobs end (wait); capacity is Google's hardware (back off, fail over): one must never be
    read as the other, whatever the rpc code -- RESOURCE_EXHAUSTED comes with both."""
    quota_texts = [c for c in CASES if QUOTA_WORDS.search(c.text)]
    capacity_texts = [c for c in CASES if c.expected == FailureClass.CAPACITY_STOCKOUT]
    assert len(quota_texts) >= 15 and len(capacity_texts) >= 15
    for case in quota_texts:
        assert classify(case).failure_class != FailureClass.CAPACITY_STOCKOUT, case.text
        for code in (8, 429, None):
            assert classify(case._replace(code=code)).failure_class != FailureClass.CAPACITY_STOCKOUT, case.text
    for case in capacity_texts:
        assert classify(case).failure_class != FailureClass.QUOTA_EXCEEDED, case.text
        for code in (8, 429, None):
            assert classify(case._replace(code=code)).failure_class != FailureClass.QUOTA_EXCEEDED, case.text


def test_quota_texts_name_their_metric_where_the_text_gives_one():
    metrics = {classify(c).quota_metric for c in CASES if c.expected == FailureClass.QUOTA_EXCEEDED}
    assert {
        "aiplatform.googleapis.com/custom_model_training_cpus",
        "GPUS_ALL_REGIONS",
        "TPUV2sPodPerProjectPerRegionForTPUAPI,TPUV2sPodPerProjectPerZoneForTPUAPI",
        "CPUS",
        "aiplatform.googleapis.com/online_prediction_requests_per_base_model",
    } <= metrics


@pytest.mark.parametrize("code", [8, 429])
def test_a_bare_resource_exhausted_keeps_the_documented_default(code):
    """No telling text: RESOURCE_EXHAUSTED stays a stockout (the module's documented default)."""
    assert classify_create_error(code, "").failure_class == FailureClass.CAPACITY_STOCKOUT
    assert classify_error_message("", rpc_code=code).failure_class == FailureClass.CAPACITY_STOCKOUT


def test_xla_out_of_memory_under_resource_exhausted_is_memory_not_quota_nor_capacity():
    """XLA reports an exhausted TPU/GPU memory as RESOURCE_EXHAUSTED: it is the program's memory, not a quota nor a
    stockout (retrying on the same machine fails the same way)."""
    cases = [c for c in CASES if "RESOURCE_EXHAUSTED" in c.text and c.expected == FailureClass.OUT_OF_MEMORY]
    assert len(cases) >= 4
    for case in cases:
        for code in (8, 429, None):
            for failure in (classify_error_message(case.text, rpc_code=code), classify_create_error(code, case.text)):
                assert failure.failure_class == FailureClass.OUT_OF_MEMORY, case.text
