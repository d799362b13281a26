"""specs/tpu.startup_script: the script a node runs at every boot never takes an env key as code."""

from __future__ import annotations

import pytest

from airflow_provider_resilient.specs.tpu import startup_script


def script(env: dict) -> str:
    return startup_script(command="echo ok", env=env, setup_script=None, runner_source="print('runner')",
                          max_restarts=5, checkpoint_dir="gs://b/ckpt")


def test_env_values_are_quoted_and_keys_must_be_shell_identifiers():
    assert "export TOKEN='a b; rm -rf /'" in script({"TOKEN": "a b; rm -rf /"})
    for key in ("X=1; touch /tmp/pwned; Y", "MY-VAR", "1ST", "", "A B"):
        with pytest.raises(ValueError, match="not a shell variable name") as refused:
            script({key: "secret-value"})
        assert "secret-value" not in str(refused.value)
    with pytest.raises(ValueError, match=r"env\['N'\]: the value must be a string, got int"):
        script({"N": 8})
