"""The endpoint override: argument, then connection extra, then RESILIENT_EMULATOR_HOST; else Google."""

from __future__ import annotations

import subprocess
import sys

from airflow_provider_resilient.clients import EMULATOR_HOST_ENV, emulator_host, vertex_endpoint, vertex_job_client


def test_override_precedence(monkeypatch):
    monkeypatch.setenv(EMULATOR_HOST_ENV, "127.0.0.1:1")
    assert emulator_host() == "127.0.0.1:1"
    assert emulator_host(extra={"emulator_host": "127.0.0.1:2"}) == "127.0.0.1:2"
    assert emulator_host("127.0.0.1:3", extra={"emulator_host": "127.0.0.1:2"}) == "127.0.0.1:3"
    monkeypatch.delenv(EMULATOR_HOST_ENV)
    assert emulator_host() is None and emulator_host(extra={}) is None


def test_without_override_the_client_uses_the_regional_endpoint(monkeypatch):
    from google.auth.credentials import AnonymousCredentials

    monkeypatch.delenv(EMULATOR_HOST_ENV, raising=False)
    client = vertex_job_client("europe-west4", credentials=AnonymousCredentials())
    assert client.api_endpoint == vertex_endpoint("europe-west4") == "europe-west4-aiplatform.googleapis.com"


def test_importing_the_clients_module_imports_no_google_library():
    code = ("import sys, airflow_provider_resilient.clients, airflow_provider_resilient.testing.emulator.pytest_plugin;"
            "bad = [m for m in sys.modules if m.startswith(('google.', 'grpc')) and m != 'google.cloud'];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_impersonation_chain_is_carried_to_triggers_as_json():
    from airflow_provider_resilient.clients import serializable_chain

    assert serializable_chain(None) is None and serializable_chain("sa@p.iam.gserviceaccount.com") == \
        "sa@p.iam.gserviceaccount.com"
    assert serializable_chain(("a@p", "b@p")) == ["a@p", "b@p"] == serializable_chain(["a@p", "b@p"])
