"""Where the hooks' Google credentials come from (hooks/base.py): the connection ``gcp_conn_id`` must exist (a
missing one is an error naming it); with the Google provider installed its ``GoogleBaseHook`` reads the connection;
without it, Application Default Credentials with the cloud-platform scope (refused for a connection that holds a
key), impersonated through google-auth for an ``impersonation_chain``; ``gcp_conn_id=None`` is ADC; none against the
emulator.

The Google provider is an optional extra: it is replaced here by a fake module in ``sys.modules`` (or
hidden, with ``None`` there), and google-auth's entry points are replaced by recorders. No network.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from airflow_provider_resilient.hooks.base import CLOUD_PLATFORM_SCOPE, connection_extra, google_credentials
from airflow_provider_resilient.hooks.vertex_ai import ResilientVertexAIHook

PROVIDER_MODULE = "airflow.providers.google.common.hooks.base_google"
ADC = object()  # what google.auth.default returns here


@pytest.fixture
def adc(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """google.auth.default returning :data:`ADC`; the calls' keyword arguments, in order."""
    import google.auth

    calls: list[dict[str, Any]] = []

    def default(**kwargs: Any) -> tuple[object, str]:
        calls.append(kwargs)
        return ADC, "adc-project"

    monkeypatch.setattr(google.auth, "default", default)
    return calls


@pytest.fixture
def impersonated(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """google.auth.impersonated_credentials.Credentials recording its keyword arguments."""
    from google.auth import impersonated_credentials

    made: list[dict[str, Any]] = []

    class Recorded:
        def __init__(self, **kwargs: Any) -> None:
            made.append(kwargs)

    monkeypatch.setattr(impersonated_credentials, "Credentials", Recorded)
    return made


@pytest.fixture
def no_google_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Google provider is not installed (importing it raises ImportError)."""
    monkeypatch.setitem(sys.modules, PROVIDER_MODULE, None)


@pytest.fixture
def google_provider(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A fake Google provider whose GoogleBaseHook records how it was made; its credentials are
    ``("from-connection", gcp_conn_id)``."""
    made: list[dict[str, Any]] = []

    class GoogleBaseHook:
        def __init__(self, gcp_conn_id: str, impersonation_chain: Any = None, **_: Any) -> None:
            made.append({"gcp_conn_id": gcp_conn_id, "impersonation_chain": impersonation_chain})
            self.gcp_conn_id = gcp_conn_id

        def get_credentials(self) -> tuple[str, str]:
            return "from-connection", self.gcp_conn_id

    module = types.ModuleType(PROVIDER_MODULE)
    module.GoogleBaseHook = GoogleBaseHook  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, PROVIDER_MODULE, module)
    return made


KEYLESS = '{"conn_type": "google_cloud_platform", "extra": {"project": "p1"}}'


def test_gcp_conn_id_none_is_adc_with_the_cloud_platform_scope(adc, no_google_provider):
    assert google_credentials(None, None) is ADC
    assert adc == [{"scopes": [CLOUD_PLATFORM_SCOPE]}]
    assert CLOUD_PLATFORM_SCOPE == "https://www.googleapis.com/auth/cloud-platform"


def test_without_the_google_provider_a_keyless_connection_is_adc_and_a_key_is_refused(adc, no_google_provider,
                                                                                       monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_MY_GCP", KEYLESS)
    assert google_credentials("my_gcp", None) is ADC  # what the Google provider does for a connection without a key
    monkeypatch.setenv("AIRFLOW_CONN_MY_GCP", '{"conn_type": "google_cloud_platform", "extra": {"key_path": "/k"}}')
    with pytest.raises(ValueError, match=r"'my_gcp' holds a key \(key_path\).*airflow-provider-resilient\[google\]"):
        google_credentials("my_gcp", None)
    assert len(adc) == 1


@pytest.mark.parametrize("provider", ["with-the-google-provider", "without-it"])
def test_a_connection_that_does_not_exist_is_refused_naming_it_and_the_fix(adc, request, provider):
    from airflow_provider_resilient.compat import AirflowNotFoundException

    made = request.getfixturevalue("google_provider") if provider == "with-the-google-provider" else \
        request.getfixturevalue("no_google_provider")
    for build in (lambda: google_credentials("no_such_connection", None),
                  lambda: ResilientVertexAIHook("no_such_connection").credentials,
                  lambda: ResilientVertexAIHook("no_such_connection").emulator):
        with pytest.raises(AirflowNotFoundException) as raised:
            build()
        message = str(raised.value)
        assert "'no_such_connection' (gcp_conn_id) does not exist" in message
        assert "AIRFLOW_CONN_NO_SUCH_CONNECTION" in message and "gcp_conn_id=None" in message
    assert adc == [] and not made  # never a silent fall-back to the worker's own credentials


def test_the_hook_uses_no_credentials_on_the_emulator(adc, no_google_provider):
    assert ResilientVertexAIHook("no_such_connection", emulator="127.0.0.1:9").credentials is None
    assert ResilientVertexAIHook(None).credentials is ADC
    assert len(adc) == 1  # the emulator needs none


@pytest.mark.parametrize(("chain", "target", "delegates"), [
    ("trainer@p.iam.gserviceaccount.com", "trainer@p.iam.gserviceaccount.com", []),
    (["a@p.iam.gserviceaccount.com", "b@p.iam.gserviceaccount.com", "trainer@p.iam.gserviceaccount.com"],
     "trainer@p.iam.gserviceaccount.com", ["a@p.iam.gserviceaccount.com", "b@p.iam.gserviceaccount.com"]),
], ids=["one-account", "a-chain"])
def test_an_impersonation_chain_impersonates_its_last_account_through_the_others(
        adc, impersonated, no_google_provider, chain, target, delegates):
    google_credentials(None, chain)
    (made,) = impersonated
    assert made == {"source_credentials": ADC, "target_principal": target, "delegates": delegates,
                    "target_scopes": [CLOUD_PLATFORM_SCOPE]}


def test_with_the_google_provider_the_connection_gives_the_credentials(adc, google_provider, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_MY_GCP", '{"conn_type": "google_cloud_platform", "extra": {"project": "p1"}}')
    chain = ["a@p.iam.gserviceaccount.com", "trainer@p.iam.gserviceaccount.com"]
    assert google_credentials("my_gcp", chain) == ("from-connection", "my_gcp")
    assert google_provider == [{"gcp_conn_id": "my_gcp", "impersonation_chain": chain}]
    assert adc == []  # the provider's hook decides, not ADC
    assert ResilientVertexAIHook("my_gcp").credentials == ("from-connection", "my_gcp")


def test_a_connection_lookup_that_fails_otherwise_is_not_taken_for_a_missing_one(adc, google_provider, monkeypatch):
    from airflow.sdk import BaseHook

    def unreachable(conn_id: str) -> Any:
        raise ConnectionError("API server unreachable")

    monkeypatch.setattr(BaseHook, "get_connection", unreachable)
    with pytest.raises(ConnectionError):
        google_credentials("my_gcp", None)
    with pytest.raises(ConnectionError):  # nor for no emulator: the endpoint never changes because a lookup failed
        connection_extra("my_gcp")
    assert adc == [] and google_provider == []
