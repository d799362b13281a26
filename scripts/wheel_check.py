"""`make wheel-check`: the wheel is only the product, and it works where users run Airflow.

1. builds the wheel from the repository's files (``python -m build --wheel`` when ``build`` is installed, else
   ``pip wheel --no-deps``), in a temporary copy so that the working tree gets no build artefacts;
2. checks its contents: LICENSE and NOTICE in its ``.dist-info``, no module of the repository's dev tools or tests,
   no module that mentions a system package manager (apt-get, dnf, yum, brew) or runs pip, no ``pytest11`` entry
   point (the emulator's pytest plugin is opt-in);
3. makes a fresh virtual environment in a temporary directory and installs the wheel with its runtime
   dependencies only (no extra), pinned by ``constraints.txt`` (with ``uv`` when it is on PATH or next to this
   interpreter, else pip);
4. there, outside the repository, imports every public operator, sensor, trigger, hook and extra link class
   (the modules ``get_provider_info()`` lists, every module of those packages, their ``__all__``), the reconciler's
   DAG factory, and checks that the provider is registered and that the emulator asks for its extra;
5. prints the wheel's size and file count, and exits non-zero on any failure.

    python scripts/wheel_check.py [--keep] [--list] [--constraints constraints.txt]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "airflow_provider_resilient"
#: Top-level directories of the repository that must not be in the wheel.
NOT_SHIPPED = ("devtools", "tests", "dags", "benchmarks", "scripts", "examples", "docs")
#: A system package manager named anywhere in a module of the wheel.
PACKAGE_MANAGERS = re.compile(r"apt-get|\bapt install\b|\bdnf\b|\byum\b|\bbrew\b")
#: Command words that run an installer when they are a program's argv[0] or a ``-m`` module.
INSTALLERS = frozenset({"pip", "pip3", "ensurepip", "pipx", "uv", "easy_install", "apt-get", "apt", "dnf", "yum",
                        "brew"})
PROCESS_CALLS = frozenset({"run", "Popen", "call", "check_call", "check_output", "system", "execv", "execvp",
                           "spawnv", "create_subprocess_exec", "create_subprocess_shell", "getoutput"})

#: Runs in the fresh environment (outside the repository): imports every public class, answers JSON.
IMPORT_CHECK = r'''
import importlib, inspect, json, pkgutil, sys
from importlib.metadata import distribution, entry_points

import airflow_provider_resilient as package
from airflow_provider_resilient.get_provider_info import get_provider_info

report = {"package": package.__file__, "version": package.__version__, "classes": {}, "problems": []}
info = get_provider_info()
listed = {kind: [m for entry in info.get(kind, []) for m in entry["python-modules"]]
          for kind in ("operators", "sensors", "hooks", "triggers")}
modules = {m: kind for kind, names in listed.items() for m in names}
for kind in ("operators", "sensors", "hooks", "triggers", "links"):
    sub = importlib.import_module(f"airflow_provider_resilient.{kind}")
    for found in pkgutil.iter_modules(sub.__path__):
        modules.setdefault(f"airflow_provider_resilient.{kind}.{found.name}", kind)
modules["airflow_provider_resilient.reconcile"] = "dag factory"
for name, kind in sorted(modules.items()):
    try:
        module = importlib.import_module(name)
    except Exception as exc:
        report["problems"].append(f"import {name}: {type(exc).__name__}: {exc}")
        continue
    public = getattr(module, "__all__", None)
    if public is None:
        public = [n for n, o in vars(module).items()
                  if inspect.isclass(o) and o.__module__ == name and not n.startswith("_")]
    classes = []
    for attr in public:
        try:
            value = getattr(module, attr)
        except AttributeError:
            report["problems"].append(f"{name}.__all__ names {attr}, which it does not define")
            continue
        if inspect.isclass(value):
            classes.append(attr)
    if name in listed.get(kind, ()) and not classes:
        report["problems"].append(f"{name} (get_provider_info {kind}) has no public class")
    if classes:
        report["classes"][name] = classes
for path in info.get("extra-links", []):
    module, _, attr = path.rpartition(".")
    try:
        getattr(importlib.import_module(module), attr)
    except Exception as exc:
        report["problems"].append(f"extra link {path}: {type(exc).__name__}: {exc}")
from airflow_provider_resilient.reconcile import reconcile_dag  # noqa: F401  (imports Airflow only when called)

ours = [ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("airflow_provider_resilient")]
if len(ours) != 1 or ours[0].load()()["package-name"] != "airflow-provider-resilient":
    report["problems"].append(f"the provider is not registered through apache_airflow_provider: {ours}")
groups = {ep.group for ep in distribution("airflow-provider-resilient").entry_points}
if "pytest11" in groups:
    report["problems"].append("a pytest11 entry point: the emulator's pytest plugin would load itself")
try:
    import airflow_provider_resilient.testing.emulator  # noqa: F401
except ImportError as exc:
    if type(exc) is not ImportError or "[emulator]" not in str(exc):
        report["problems"].append(f"the emulator without its extra raised {type(exc).__name__}: {exc}")
else:
    report["problems"].append("the emulator imported without the emulator extra (runtime dependencies only)")
print(json.dumps(report))
'''


def run(command: list[str], **kwargs: object) -> None:
    print("+", " ".join(map(str, command)), flush=True)
    subprocess.run(command, check=True, **kwargs)  # type: ignore[call-overload]


def source_files() -> list[Path]:
    """The repository's files a release is built from: tracked and untracked but not ignored (git), else all."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                             capture_output=True, check=True).stdout
        return [Path(p) for p in out.decode().split("\0") if p and (ROOT / p).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", ".venv-bench", "build", "dist", ".demo"}
        return [p.relative_to(ROOT) for p in ROOT.rglob("*")
                if p.is_file() and not skip & set(p.relative_to(ROOT).parts) and "__pycache__" not in p.parts]


def build_wheel(work: Path) -> Path:
    """The wheel of a copy of the repository (``work/src``), in ``work/dist``."""
    src, dist = work / "src", work / "dist"
    for rel in source_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    if importlib.util.find_spec("build") is not None:
        run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(src)])
    else:
        run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(dist), str(src)])
    (wheel,) = dist.glob("*.whl")
    return wheel


def _runs_an_installer(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in PROCESS_CALLS:
        return False
    words: list[str] = []
    for arg in node.args:
        for sub in ast.walk(arg):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                words.extend(sub.value.split())
    if not words:
        return False
    first = Path(words[0]).name
    return first in INSTALLERS or any(w == "-m" and i + 1 < len(words) and words[i + 1] in INSTALLERS
                                      for i, w in enumerate(words))


def check_contents(wheel: Path) -> tuple[list[str], list[str]]:
    """(problems, file names) of the wheel."""
    problems = []
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        dist_info = [n for n in names if ".dist-info/" in n]
        for required in ("LICENSE", "NOTICE"):
            if not any(n.rsplit("/", 1)[-1] == required for n in dist_info):
                problems.append(f"{required} is not in the wheel's .dist-info")
        license_text = next((archive.read(n).decode() for n in dist_info if n.endswith("/LICENSE")), "")
        if license_text and "Apache License" not in license_text:
            problems.append("LICENSE is not the Apache License")
        for name in names:
            top = name.split("/", 1)[0]
            if top in NOT_SHIPPED or (not top.startswith(PACKAGE) and ".dist-info" not in top):
                problems.append(f"{name}: not part of the package")
        entry_points = next((archive.read(n).decode() for n in dist_info if n.endswith("entry_points.txt")), "")
        if "[pytest11]" in entry_points:
            problems.append("entry_points.txt has a pytest11 entry point")
        for name in names:
            if not name.endswith(".py"):
                continue
            text = archive.read(name).decode("utf-8", "replace")
            if match := PACKAGE_MANAGERS.search(text):
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{name}:{line} mentions a system package manager ({match[0]})")
            try:
                tree = ast.parse(text)
            except SyntaxError as exc:
                problems.append(f"{name}: does not parse: {exc}")
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    if any(m.split(".")[0] in ("pip", "ensurepip") for m in modules):
                        problems.append(f"{name}:{node.lineno} imports pip")
                elif isinstance(node, ast.Call) and _runs_an_installer(node):
                    problems.append(f"{name}:{node.lineno} runs an installer")
    return problems, names


def installer(venv_python: Path) -> list[str]:
    """How to install into the fresh environment: ``uv pip install --python ...`` when uv is at hand (fast, the
    same resolution), else that environment's pip."""
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if Path(uv).exists():
        return [uv, "pip", "install", "--quiet", "--python", str(venv_python)]
    return [str(venv_python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--constraints", type=Path, default=ROOT / "constraints.txt",
                        help="pins for the runtime dependencies (default: constraints.txt)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (wheel, venv)")
    parser.add_argument("--list", action="store_true", help="print every file of the wheel")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="wheel-check-"))
    started = time.monotonic()
    try:
        wheel = build_wheel(work)
        problems, names = check_contents(wheel)
        size = wheel.stat().st_size
        print(f"\nwheel: {wheel.name}: {size / 1024:.1f} KiB, {len(names)} files")
        by_dir = Counter("/".join(n.split("/")[:2]) if n.count("/") > 1 else n.split("/")[0] for n in names)
        for directory, count in sorted(by_dir.items()):
            print(f"  {count:4d}  {directory}")
        if args.list:
            for name in names:
                print(f"        {name}")

        venv = work / "venv"
        run([sys.executable, "-m", "venv", str(venv)])
        python = venv / "bin" / "python"
        run([*installer(python), "-c", str(args.constraints), str(wheel)])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AIRFLOW", "VIRTUAL_ENV"))}
        env["AIRFLOW_HOME"] = str(work / "airflow_home")
        out = subprocess.run([str(python), "-c", IMPORT_CHECK], cwd=work, env=env, capture_output=True, text=True,
                             check=False)
        if out.returncode != 0:
            problems.append(f"the import check failed ({out.returncode}):\n{out.stderr[-4000:]}")
        else:
            report = json.loads(out.stdout.strip().splitlines()[-1])
            if not report["package"].startswith(str(venv)):
                problems.append(f"imported {report['package']}, not the installed wheel")
            problems.extend(report["problems"])
            count = sum(len(v) for v in report["classes"].values())
            print(f"\nimported {count} public classes of {len(report['classes'])} modules from the wheel "
                  f"(version {report['version']}, runtime dependencies only):")
            for module, classes in sorted(report["classes"].items()):
                print(f"  {module}: {', '.join(classes)}")
    except subprocess.CalledProcessError as exc:
        problems = [f"{' '.join(map(str, exc.cmd))} exited {exc.returncode}"]
    finally:
        if args.keep:
            print(f"\nkept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{time.monotonic() - started:.0f} s")
    if problems:
        print(f"\nwheel-check FAILED ({len(problems)}):", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print("wheel-check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
