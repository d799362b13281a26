"""The package's import structure: no module imports another that imports it back (directly or round a loop), and
no layer imports a higher one.

The graph is read from the source (every ``import`` and ``from ... import``, module level, inside functions and
under ``TYPE_CHECKING`` alike: a type-only loop still ties two modules together), each imported name resolved to
the module that defines it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "airflow_provider_resilient"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

#: The layers, lowest first: a module may import its own subpackage and any lower layer, never a higher one nor
#: another subpackage of its own layer. The worker runner, the clients' factory, the Airflow-version shims, the
#: extra links and checkpoint discovery stand on nothing of the package; the pure core (policy, then supervisor
#: and the goodput ledger) and the hooks' I/O above them; the platform specs, backends, triggers, operators and
#: sensors above those; the emulator (``testing``) on top, so that nothing of the product imports it.
LAYERS: dict[str, int] = {
    "": 0, "get_provider_info": 1, "worker": 1, "clients": 1, "compat": 1, "links": 1, "checkpoints": 1,
    "policy": 2, "logging_clients": 2,
    "supervisor": 3, "goodput": 3, "hooks": 3,
    "specs": 4,
    "backends": 5,
    "triggers": 6,
    "operators": 7, "sensors": 7,
    "reconcile": 8,
    "testing": 9,
}


def module_name(path: Path) -> str:
    parts = (PACKAGE, *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def defining_module(name: str) -> str | None:
    """The module that ``name`` (``package.module.Name`` or a module) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    """The package's modules that ``module`` imports, anywhere in it."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = f"{base}.{node.module}" if node.module else base
            elif node.module and (node.module + ".").startswith(PACKAGE + "."):
                target = node.module
            else:
                continue
            targets = [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names if (alias.name + ".").startswith(PACKAGE + ".")]
        found |= {m for t in targets if (m := defining_module(t)) is not None}
    found.discard(module)
    return found


GRAPH: dict[str, set[str]] = {module: imports_of(module) for module in MODULES}


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def layer_of(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_the_checker_sees_a_loop_and_the_package_has_none():
    assert loops({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert loops({"a": {"b"}, "b": set()}) == []
    assert loops(GRAPH) == []


def test_every_subpackage_has_a_layer():
    assert {layer_of(m) for m in MODULES} <= set(LAYERS), set(map(layer_of, MODULES)) - set(LAYERS)


def test_no_layer_imports_a_higher_one_or_a_neighbour():
    wrong = [f"{module} imports {target}" for module, targets in sorted(GRAPH.items()) for target in sorted(targets)
             if layer_of(module) != layer_of(target) and LAYERS[layer_of(target)] >= LAYERS[layer_of(module)]]
    assert wrong == []


@pytest.mark.parametrize(("module", "allowed"), [("worker.runner", {"worker.protocol"}), ("worker.protocol", set()),
                                                 ("worker.checkpoint_request", set())])
def test_the_files_shipped_to_training_machines_import_nothing_of_the_package_but_the_protocol(module, allowed):
    """They are copied into a startup script and run there alone (``runner_source()``, ``helper_source()``): the
    runner imports the worker's protocol alone, whose text ``runner_source()`` inlines in place of that import, and
    the protocol and the workload's helper import nothing of the package."""
    assert GRAPH[f"{PACKAGE}.{module}"] == {f"{PACKAGE}.{name}" for name in allowed}


#: The shells: they read the platform and carry out the supervisor's commands; every judgement is the core's.
SHELLS = ("backends", "triggers", "operators", "sensors")
#: What deciding looks like in source: naming a failure class or a phase, making a failure or a run state, reading
#: or rewriting a budget.
DECIDING_NAMES = {"FailureClass": "names a failure class", "Phase": "names a phase of the run"}
DECIDING_CALLS = {"Failure": "makes a failure", "RunState": "makes a run state"}
DECIDING_ATTRIBUTES = {"budget": "reads a budget", "budgets": "reads the budgets",
                       "effective_budgets": "reads the budgets", "max_retries": "reads a budget's count"}
#: Where a shell may read the run's phase to dispatch (not choose) what to carry out: the one resume point.
PHASE_DISPATCH = {f"{PACKAGE}.operators.base"}


def decisions_in(module: str, source: str | None = None) -> list[str]:
    """Each place in ``module`` (its ``source``, by default its file) where a shell would decide a failure class, a
    phase or a budget."""
    found = []
    tree = ast.parse(source if source is not None else MODULES[module].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in DECIDING_NAMES
                and not (node.value.id == "Phase" and module in PHASE_DISPATCH)):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr} ({DECIDING_NAMES[node.value.id]})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in DECIDING_CALLS \
                and (node.args or node.keywords):
            found.append(f"line {node.lineno}: {node.func.id}(...) ({DECIDING_CALLS[node.func.id]})")
        elif isinstance(node, ast.Attribute) and node.attr in DECIDING_ATTRIBUTES:
            found.append(f"line {node.lineno}: .{node.attr} ({DECIDING_ATTRIBUTES[node.attr]})")
    return found


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.split(".")[1:2] and m.split(".")[1] in SHELLS))
def test_no_shell_decides_a_failure_class_a_phase_or_a_budget(module):
    """Read, then judge: the backends read the platform, the triggers watch, the operators and sensors carry out;
    classifications, phases and budgets are ``policy``'s and ``supervisor``'s."""
    assert decisions_in(module) == []


def test_the_decision_finder_sees_each_kind_of_decision():
    source = ("f = Failure(FailureClass.HANG, 'tpu')\nif state.phase == Phase.RUNNING: pass\n"
              "n = policy.budget('x').max_retries\nRunState(phase=p)\nRunState()\n")
    assert sorted(line.split(" (")[0] for line in decisions_in("probe", source)) == [
        "line 1: Failure(...)", "line 1: FailureClass.HANG", "line 2: Phase.RUNNING", "line 3: .budget",
        "line 3: .max_retries", "line 4: RunState(...)"]
