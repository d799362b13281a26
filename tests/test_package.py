"""The package as users meet it: cheap imports, provider registration, `airflow providers list`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_resilient.get_provider_info import get_provider_info

PURE_IMPORT_CHECK = """
import sys
import airflow_provider_resilient.policy, airflow_provider_resilient.checkpoints
assert 'airflow' not in sys.modules, 'airflow was imported'
# google / google.cloud may exist as namespace stubs created by *-nspkg.pth files at start-up;
# no real google module may be imported.
loaded = sorted(m for m in sys.modules if m.startswith(('google.', 'gcsfs', 'grpc', 'proto'))
                and m != 'google.cloud')
assert not loaded, loaded
print('ok')
"""


def test_policy_and_checkpoints_import_neither_airflow_nor_google():
    out = subprocess.run([sys.executable, "-c", PURE_IMPORT_CHECK], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_provider_info_matches_airflows_schema():
    import jsonschema
    from airflow import __file__ as airflow_init

    schema = json.loads((Path(airflow_init).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == "airflow-provider-resilient"


def test_provider_is_registered_through_the_entry_point():
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="apache_airflow_provider")
           if ep.value.startswith("airflow_provider_resilient")]
    assert len(eps) == 1
    assert eps[0].load()()["package-name"] == "airflow-provider-resilient"


@pytest.mark.airflow_cli
def test_airflow_providers_list_shows_it_with_a_fresh_airflow_home(tmp_path: Path):
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow_home")}
    airflow = Path(sys.executable).parent / "airflow"
    out = subprocess.run([str(airflow), "providers", "list", "--output", "json"], capture_output=True, text=True,
                         env=env, timeout=180, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    listed = {p["package_name"]: p for p in json.loads(out.stdout)}
    assert "airflow-provider-resilient" in listed
    assert listed["airflow-provider-resilient"]["version"] == "0.1.0"


def _imports(path: Path, package: str) -> set[str]:
    """The provider modules ``path`` imports (absolute dotted names), wherever in the module."""
    import ast

    module = package + "." + ".".join(path.relative_to(ROOT).with_suffix("").parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = module.rsplit(".", node.level)[0]
            target = f"{base}.{node.module}" if node.module else base
            found |= {target} | {f"{target}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith(package)}
    return found


ROOT = Path(__file__).resolve().parents[1] / "airflow_provider_resilient"
PLATFORM_MODULES = {"tpu": ("vertex", "vertex_ai"), "vertex": ("tpu",), "vertex_ai": ("tpu",)}


@pytest.mark.parametrize("layer", ["backends", "hooks", "links", "operators", "sensors", "specs", "triggers"])
def test_no_platform_module_imports_another_platforms(layer):
    """Issue 11: what platforms share lives in a shared module (``hooks/base.py``, ``links/base.py``,
    ``specs/common.py`` ...); a TPU module importing a Vertex AI one (or the other way) is sideways."""
    wrong = []
    for path in sorted((ROOT / layer).glob("*.py")):
        others = PLATFORM_MODULES.get(path.stem, ())
        for name in _imports(path, "airflow_provider_resilient"):
            parts = name.split(".")
            if any(part in others for part in parts[1:3]):
                wrong.append(f"{layer}/{path.name} imports {name}")
    assert wrong == []


def test_operators_take_nothing_but_triggers_from_triggers():
    """Helpers shared by an operator and its trigger live below both (``backends/``), not in ``triggers/``."""
    wrong = []
    for path in sorted((ROOT / "operators").glob("*.py")) + sorted((ROOT / "sensors").glob("*.py")):
        for name in _imports(path, "airflow_provider_resilient"):
            if ".triggers." in name and not name.rsplit(".", 1)[1].endswith("Trigger") and name.count(".") > 2:
                wrong.append(f"{path.name} imports {name}")
    assert wrong == []


REPO = Path(__file__).resolve().parents[1]


def test_the_pytest_plugin_never_loads_itself():
    """No ``pytest11`` entry point: the emulator's fixture loads only where a user opts in (``pytest_plugins`` or
    ``-p``), never in every pytest session of an environment that has the provider installed."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "pytest11" not in project.get("entry-points", {})
    from airflow_provider_resilient.testing.emulator import pytest_plugin

    assert "-p airflow_provider_resilient.testing.emulator.pytest_plugin" in (pytest_plugin.__doc__ or "")


def test_the_emulator_without_its_extra_is_an_import_error_naming_the_extra():
    code = ("import sys; sys.modules['gcp_storage_emulator'] = None\n"
            "try:\n    import airflow_provider_resilient.testing.emulator\n"
            "except ImportError as exc:\n    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("ImportError ")  # not a bare ModuleNotFoundError of a dependency deep inside
    assert "pip install 'airflow-provider-resilient[emulator]'" in out and "gcp-storage-emulator" in out


def test_the_version_is_written_once_and_the_license_ships():
    """One version string (``airflow_provider_resilient.__version__``, which pyproject.toml reads); LICENSE (the
    Apache License 2.0) and NOTICE go into the wheel (``license-files``)."""
    import tomllib

    import airflow_provider_resilient

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "airflow_provider_resilient.__version__"}
    assert get_provider_info()["versions"] == [airflow_provider_resilient.__version__]
    assert project["project"]["license-files"] == ["LICENSE", "NOTICE"]
    assert "Apache License\n                        Version 2.0, January 2004" in (REPO / "LICENSE").read_text()
    assert set(project["project"]["urls"]) == {"Homepage", "Documentation", "Changelog", "Issues"}


def test_the_platform_catalog_ships_as_package_data_and_loads_without_google():
    """``specs/catalog.json`` (the names the specs check and the emulator serves) goes into the wheel
    (``package-data``), each list citing Google's public page and the day it was read; loading it imports no
    Google or Airflow module."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "specs/catalog.json" in project["tool"]["setuptools"]["package-data"]["airflow_provider_resilient"]
    data = json.loads((REPO / "airflow_provider_resilient" / "specs" / "catalog.json").read_text())
    lists = {k: v for k, v in data.items() if isinstance(v, dict)}
    assert len(lists) == 7 and all(v["source"].startswith("https://cloud.google.com/") and
                                   v["retrieved"] == "2026-11-27" for v in lists.values())
    code = ("import sys; from airflow_provider_resilient.specs.catalog import catalog; c = catalog()\n"
            "assert 'n1-standard-4' in c.machine_types and 'us-central2-b' in c.tpu_zones\n"
            "print(sorted(m for m in sys.modules if m.startswith(('google.', 'grpc', 'proto', 'airflow.', 'pydantic'))"
            " and m != 'google.cloud'))")  # google / google.cloud: namespace stubs (see PURE_IMPORT_CHECK)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
