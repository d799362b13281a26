"""Safe defaults of an operator: a connection that does not exist is refused naming it; the emulator is used only
when the connection switches it on (extra ``emulator_host``), never because of an environment variable; the first
line the task logs says where its calls go."""

from __future__ import annotations

import re
import sys

import pytest

from airflow_provider_resilient.compat import AirflowNotFoundException

from .test_vertex_operator_unit import context, operator

pytestmark = pytest.mark.resilient_emulator(time_scale=0.002)
OUR_LINE = re.compile(r"\[info\s*\] (?P<message>.*?)\s+\[airflow\.task\.operators\.airflow_provider_resilient\.")


def first_line(out: str) -> str:
    """The first line the operator itself logged (the task's log is printed to stdout outside the task runner)."""
    return next(m["message"] for m in OUR_LINE.finditer(out))


def test_a_missing_connection_is_refused_naming_it_before_anything_is_created(resilient_emulator):
    with pytest.raises(AirflowNotFoundException, match=r"'no_such_conn' \(gcp_conn_id\) does not exist") as raised:
        operator(gcp_conn_id="no_such_conn").execute(context())
    assert "gcp_conn_id=None to use Application Default Credentials" in str(raised.value)
    assert resilient_emulator.calls.list() == []


def test_the_emulator_variable_alone_switches_no_operator_to_it(resilient_emulator, monkeypatch, capsys):
    """RESILIENT_EMULATOR_HOST names a running emulator; the task's connection has no ``emulator_host``: the task
    goes to Google (here: its credentials are looked up and missing) and the emulator sees no call."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    assert resilient_emulator.address in str(__import__("os").environ.get("RESILIENT_EMULATOR_HOST"))
    monkeypatch.setenv("AIRFLOW_CONN_PLAIN_GCP", '{"conn_type": "google_cloud_platform"}')
    monkeypatch.setitem(sys.modules, "airflow.providers.google.common.hooks.base_google", None)

    def no_adc(**_: object) -> None:
        raise DefaultCredentialsError("no Application Default Credentials here")

    monkeypatch.setattr(google.auth, "default", no_adc)
    with pytest.raises(DefaultCredentialsError):
        operator(gcp_conn_id="plain_gcp").execute(context())
    assert resilient_emulator.calls.list() == []
    assert first_line(capsys.readouterr().out) == "Using Google Cloud APIs with the credentials of connection plain_gcp"


@pytest.mark.parametrize("conn_id", ["google_cloud_default", "my_emulator"])
def test_the_connection_extra_switches_the_operator_to_the_emulator_and_the_log_says_so_first(
        resilient_emulator, monkeypatch, capsys, conn_id):
    """``google_cloud_default`` is the connection the fixture defines (``Emulator.env()``); any other works the
    same way when it names the emulator."""
    if conn_id != "google_cloud_default":
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", resilient_emulator.connection())
    result = operator(gcp_conn_id=conn_id).execute(context())
    assert result["state"] == "JOB_STATE_SUCCEEDED"
    assert [c.code for c in resilient_emulator.calls.list("CreateCustomJob")] == ["OK"]
    assert first_line(capsys.readouterr().out) == (
        f"Using the Google API emulator at {resilient_emulator.address} (connection {conn_id}): no call reaches "
        "Google Cloud")
