"""Checkpoint discovery on obs:// (Huawei Cloud OBS) served by moto's S3 server in process, through s3fs; and the
rules by which ObsFileSystem finds its endpoint, credentials and addressing style."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

from airflow_provider_resilient.checkpoints import CheckpointFormat, find_latest_checkpoint, list_checkpoint_saves
from airflow_provider_resilient.checkpoints.obs import ObsFileSystem, obs_options
from airflow_provider_resilient.testing.obs import ACCESS_KEY_ID, SECRET_ACCESS_KEY, ObsEmulator

OBS_ENVS = ("OBS_ENDPOINT", "OBS_REGION", "HUAWEICLOUD_REGION", "OBS_ACCESS_KEY_ID", "OBS_SECRET_ACCESS_KEY",
            "OBS_SECURITY_TOKEN")


@pytest.fixture(scope="module")
def obs_emulator() -> Iterator[ObsEmulator]:
    with ObsEmulator() as emulator:
        yield emulator


@pytest.fixture
def obs(obs_emulator: ObsEmulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[ObsEmulator]:
    """The emulator, emptied, with bucket ``test-bucket``, and this process's environment pointing at it."""
    for name in OBS_ENVS:
        monkeypatch.delenv(name, raising=False)
    for name, value in obs_emulator.env().items():
        monkeypatch.setenv(name, value)
    obs_emulator.wipe()
    obs_emulator.create_bucket("test-bucket")
    yield obs_emulator
    obs_emulator.wipe()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in OBS_ENVS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def upload(obs: ObsEmulator, local: Path, url: str) -> None:
    """Copy a local tree under ``url`` (obs://bucket/prefix) with fsspec, then forget the listings that took."""
    fs = obs.filesystem()
    for path in sorted(local.rglob("*")):
        if path.is_file():
            fs.pipe_file(f"{url}/{path.relative_to(local).as_posix()}", path.read_bytes())
    obs.list_calls.clear()


def test_torn_dcp_on_obs_is_skipped_and_the_uri_is_obs(obs: ObsEmulator, checkpoint_fixtures: Path):
    """step_100 and step_200 are complete DCP saves, step_300 has no .metadata (torn): step 200 is found."""
    upload(obs, checkpoint_fixtures / "dcp", "obs://test-bucket/run/ckpt")
    found = find_latest_checkpoint("obs://test-bucket/run/ckpt")
    assert found is not None
    assert (found.step, found.format, found.uri) == (200, CheckpointFormat.PYTORCH_DCP,
                                                     "obs://test-bucket/run/ckpt/step_200")
    assert found.time is not None and found.time.tzinfo is not None
    # Listed by prefix and delimiter: the prefix, the torn step_300, then step_200 -- never the whole bucket.
    calls = [(c.bucket, c.prefix, c.delimiter) for c in obs.list_calls]
    assert calls == [("test-bucket", "run/ckpt/", "/"), ("test-bucket", "run/ckpt/step_300/", "/"),
                     ("test-bucket", "run/ckpt/step_200/", "/")]


def test_a_save_completed_on_obs_is_seen_by_the_next_call(obs: ObsEmulator, checkpoint_fixtures: Path):
    upload(obs, checkpoint_fixtures / "dcp", "obs://test-bucket/run/ckpt")
    assert sorted(s.step for s in list_checkpoint_saves("obs://test-bucket/run/ckpt")) == [100, 200]
    fsspec.core.url_to_fs("obs://test-bucket")[0].pipe_file("obs://test-bucket/run/ckpt/step_300/.metadata", b"m")
    found = find_latest_checkpoint("obs://test-bucket/run/ckpt/")
    assert found is not None and found.uri == "obs://test-bucket/run/ckpt/step_300"


def test_plain_step_folders_with_a_marker_on_obs(obs: ObsEmulator):
    fs = obs.filesystem()
    fs.pipe({"test-bucket/m/step_5/model.pkl": b"w", "test-bucket/m/step_5/COMMITTED": b"",
             "test-bucket/m/step_7/model.pkl": b"w"})
    found = find_latest_checkpoint("obs://test-bucket/m", marker="COMMITTED", fs=fs)
    assert found is not None and (found.step, found.format, found.uri) == (
        5, CheckpointFormat.DIRECTORY, "obs://test-bucket/m/step_5")


def test_missing_prefix_on_obs_gives_none(obs: ObsEmulator):
    assert find_latest_checkpoint("obs://test-bucket/nothing/here") is None


def test_storage_options_reach_the_filesystem(obs: ObsEmulator, clean_env: pytest.MonkeyPatch):
    """No OBS variable in the environment: the endpoint and keys come from storage_options alone."""
    obs.filesystem().pipe_file("test-bucket/so/step_1/.metadata", b"m")
    obs.filesystem().pipe_file("test-bucket/so/step_1/__0_0.distcp", b"d")
    options = {"endpoint_url": obs.url, "key": ACCESS_KEY_ID, "secret": SECRET_ACCESS_KEY}
    found = find_latest_checkpoint("obs://test-bucket/so", storage_options=options)
    assert found is not None and found.uri == "obs://test-bucket/so/step_1"


def test_the_emulator_creates_buckets_idempotently_and_wipe_empties_it(obs: ObsEmulator):
    obs.create_bucket("test-bucket")
    obs.create_bucket("other")
    fs = obs.filesystem()
    fs.pipe_file("other/a", b"x")
    assert sorted(fs.ls("", refresh=True)) == ["other", "test-bucket"]
    obs.wipe()
    assert obs.filesystem().ls("", refresh=True) == []


def test_the_emulator_env_names_the_obs_variables(obs_emulator: ObsEmulator):
    env = obs_emulator.env()
    assert env == {"OBS_ENDPOINT": f"http://127.0.0.1:{obs_emulator.port}", "OBS_ACCESS_KEY_ID": ACCESS_KEY_ID,
                   "OBS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY}
    assert obs_emulator.url == env["OBS_ENDPOINT"]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread that died binding
def test_a_taken_port_is_an_os_error_not_a_hang(obs_emulator: ObsEmulator):
    """ThreadedMotoServer.start waits for a thread that died binding; ours raises."""
    with pytest.raises(OSError, match=r"could not bind 127\.0\.0\.1"):
        ObsEmulator(port=obs_emulator.port).start()


# --- resolution rules, no server ---------------------------------------------------------------------------------


def test_url_to_fs_resolves_obs_through_the_entry_point(clean_env: pytest.MonkeyPatch):
    from importlib.metadata import entry_points

    spec = {e.name: e.value for e in entry_points(group="fsspec.specs")}
    assert spec["obs"] == "airflow_provider_resilient.checkpoints.obs:ObsFileSystem"
    clean_env.setenv("OBS_ENDPOINT", "https://obs.cn-north-4.myhuaweicloud.com")
    fs, path = fsspec.core.url_to_fs("obs://bucket/run/ckpt/")
    assert isinstance(fs, ObsFileSystem) and path == "bucket/run/ckpt"
    assert fs.unstrip_protocol("bucket/run/ckpt/step_1") == "obs://bucket/run/ckpt/step_1"
    assert ObsFileSystem._strip_protocol("obs://bucket/key") == "bucket/key"


def test_endpoint_from_the_storage_option_wins_over_the_environment(clean_env: pytest.MonkeyPatch):
    clean_env.setenv("OBS_ENDPOINT", "https://obs.cn-north-4.myhuaweicloud.com")
    assert obs_options({"endpoint_url": "http://127.0.0.1:9000"})["endpoint_url"] == "http://127.0.0.1:9000"
    assert obs_options({})["endpoint_url"] == "https://obs.cn-north-4.myhuaweicloud.com"


def test_an_endpoint_without_a_scheme_gets_https(clean_env: pytest.MonkeyPatch):
    clean_env.setenv("OBS_ENDPOINT", "obs.ap-southeast-1.myhuaweicloud.com")
    options = obs_options({})
    assert options["endpoint_url"] == "https://obs.ap-southeast-1.myhuaweicloud.com"
    assert options["client_kwargs"]["region_name"] == "ap-southeast-1"  # the signing region, from the host


@pytest.mark.parametrize("variable", ["OBS_REGION", "HUAWEICLOUD_REGION"])
def test_the_endpoint_is_derived_from_the_region(clean_env: pytest.MonkeyPatch, variable: str):
    clean_env.setenv(variable, "cn-north-4")
    options = obs_options({})
    assert options["endpoint_url"] == "https://obs.cn-north-4.myhuaweicloud.com"
    assert options["config_kwargs"]["s3"] == {"addressing_style": "virtual"}


def test_no_endpoint_and_no_region_is_a_value_error_naming_obs_endpoint(clean_env: pytest.MonkeyPatch):
    with pytest.raises(ValueError, match=r"set OBS_ENDPOINT \(e\.g\. https://obs\.cn-north-4\.myhuaweicloud\.com\)"):
        obs_options({})
    with pytest.raises(ValueError, match="OBS_ENDPOINT"):
        fsspec.core.url_to_fs("obs://bucket/key")


@pytest.mark.parametrize(("endpoint", "style"), [
    ("http://127.0.0.1:9000", "path"), ("http://localhost:9000", "path"), ("http://[::1]:9000", "path"),
    ("https://obs.cn-north-4.myhuaweicloud.com", "virtual"), ("https://storage.example.com", "virtual"),
])
def test_addressing_style_defaults_by_host(clean_env: pytest.MonkeyPatch, endpoint: str, style: str):
    assert obs_options({"endpoint_url": endpoint})["config_kwargs"]["s3"]["addressing_style"] == style


def test_addressing_style_is_a_storage_option_and_checked(clean_env: pytest.MonkeyPatch):
    options = obs_options({"endpoint_url": "http://127.0.0.1:9000", "addressing_style": "virtual"})
    assert options["config_kwargs"]["s3"]["addressing_style"] == "virtual"
    assert "addressing_style" not in options
    with pytest.raises(ValueError, match="addressing_style must be one of virtual, path, auto"):
        obs_options({"endpoint_url": "http://127.0.0.1:9000", "addressing_style": "dns"})


def test_credentials_from_the_environment_under_huaweis_names(clean_env: pytest.MonkeyPatch):
    clean_env.setenv("OBS_REGION", "cn-north-4")
    clean_env.setenv("OBS_ACCESS_KEY_ID", "AK")
    clean_env.setenv("OBS_SECRET_ACCESS_KEY", "SK")
    clean_env.setenv("OBS_SECURITY_TOKEN", "TOKEN")
    options = obs_options({})
    assert (options["key"], options["secret"], options["token"]) == ("AK", "SK", "TOKEN")
    assert "anon" not in options


def test_credentials_from_storage_options_win_over_the_environment(clean_env: pytest.MonkeyPatch):
    clean_env.setenv("OBS_REGION", "cn-north-4")
    clean_env.setenv("OBS_ACCESS_KEY_ID", "env-ak")
    clean_env.setenv("OBS_SECRET_ACCESS_KEY", "env-sk")
    options = obs_options({"key": "opt-ak", "secret": "opt-sk"})
    assert (options["key"], options["secret"]) == ("opt-ak", "opt-sk")
    assert "token" not in options


def test_no_credentials_means_anonymous_requests(clean_env: pytest.MonkeyPatch):
    clean_env.setenv("OBS_REGION", "cn-north-4")
    assert obs_options({})["anon"] is True


def test_a_changed_environment_is_not_served_from_the_instance_cache(clean_env: pytest.MonkeyPatch):
    clean_env.setenv("OBS_ENDPOINT", "http://127.0.0.1:9001")
    first = fsspec.filesystem("obs")
    assert fsspec.filesystem("obs") is first
    clean_env.setenv("OBS_ENDPOINT", "http://127.0.0.1:9002")
    second = fsspec.filesystem("obs")
    assert (first.endpoint_url, second.endpoint_url) == ("http://127.0.0.1:9001", "http://127.0.0.1:9002")


def test_importing_the_provider_does_not_import_s3fs():
    code = ("import sys\nimport airflow_provider_resilient.operators.base, airflow_provider_resilient.checkpoints\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('s3fs', 'aiobotocore', 'moto')\n"
            "                or m == 'airflow_provider_resilient.checkpoints.obs')\n"
            "assert not loaded, loaded\nprint('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
