"""Where the hooks' Google credentials come from (hooks/vertex_ai.py): the Google provider's GoogleBaseHook
when that provider is installed and the connection exists, else Application Default Credentials with the
cloud-platform scope, impersonated through google-auth for an ``impersonation_chain``; none against the
emulator.

The Google provider is an optional extra: it is replaced here by a fake module in ``sys.modules`` (or
hidden, with ``None`` there), and google-auth's entry points are replaced by recorders. No network.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from airflow_provider_resilient.hooks import vertex_ai as hooks
from airflow_provider_resilient.hooks.vertex_ai import CLOUD_PLATFORM_SCOPE, ResilientVertexAIHook, google_credentials

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
    monkeypatch.delenv("RESILIENT_EMULATOR_HOST", raising=False)
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


def test_without_the_google_provider_adc_are_used_with_the_cloud_platform_scope(adc, no_google_provider):
    assert google_credentials("google_cloud_default", None) is ADC
    assert adc == [{"scopes": [CLOUD_PLATFORM_SCOPE]}]
    assert CLOUD_PLATFORM_SCOPE == "https://www.googleapis.com/auth/cloud-platform"


def test_the_hook_uses_adc_off_the_emulator_and_no_credentials_on_it(adc, no_google_provider):
    assert ResilientVertexAIHook("no_such_connection").credentials is ADC
    assert ResilientVertexAIHook("no_such_connection", emulator="127.0.0.1:9").credentials is None
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


def test_with_the_google_provider_a_missing_connection_falls_back_to_adc(adc, impersonated, google_provider):
    google_credentials("no_such_connection", "trainer@p.iam.gserviceaccount.com")
    assert google_provider == []  # never asked for a connection that does not exist
    assert adc == [{"scopes": [CLOUD_PLATFORM_SCOPE]}]
    assert impersonated[0]["target_principal"] == "trainer@p.iam.gserviceaccount.com"


def test_a_connection_lookup_that_fails_otherwise_is_not_taken_for_a_missing_one(adc, google_provider, monkeypatch):
    from airflow.sdk import BaseHook

    def unreachable(conn_id: str) -> Any:
        raise ConnectionError("API server unreachable")

    monkeypatch.setattr(BaseHook, "get_connection", unreachable)
    with pytest.raises(ConnectionError):
        google_credentials("my_gcp", None)
    assert adc == [] and google_provider == []
    assert hooks.connection_extra("my_gcp") == {}  # the emulator lookup stays lenient
