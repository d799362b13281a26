"""The endpoint switch: an explicit address, then a connection's extra ``emulator_host``; else Google. No
environment variable switches a client of the provider to an emulator."""

from __future__ import annotations

import subprocess
import sys

from airflow_provider_resilient.clients import emulator_host, vertex_endpoint, vertex_job_client
from airflow_provider_resilient.testing.emulator_clients import EMULATOR_HOST_ENV


def test_the_switch_is_an_argument_or_a_connection_extra_never_the_environment(monkeypatch):
    monkeypatch.setenv(EMULATOR_HOST_ENV, "127.0.0.1:1")
    assert emulator_host() is None and emulator_host(extra={}) is None  # the variable alone switches nothing
    assert emulator_host(extra={"emulator_host": "127.0.0.1:2"}) == "127.0.0.1:2"
    assert emulator_host("127.0.0.1:3", extra={"emulator_host": "127.0.0.1:2"}) == "127.0.0.1:3"


def test_without_override_the_client_uses_the_regional_endpoint(monkeypatch):
    from google.auth.credentials import AnonymousCredentials

    monkeypatch.setenv(EMULATOR_HOST_ENV, "127.0.0.1:1")  # ignored
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
