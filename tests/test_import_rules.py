"""The floors of the house (docs/architecture.md) run one way: every import of a packcheck module
goes to its own part or a lower floor; no module reaches itself through its imports (no circle, inside
a part either, imports inside functions included); harness imports nothing from impls; engines import
only the contract and the engine API, and the programs that drive one (folders of impls/) also models and
provenance, while no engine imports a program; the reference's parts (its folders) run one way too; nothing
imports the repository's folders by their bare names."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("harness", "impls", "conformance", "guard")
# bottom to top; a part may import its own floor and any floor below
FLOORS = (
    {"harness.errors", "harness.files", "harness.lazy", "harness.own_files", "harness.provenance", "harness.registry", "harness.text"},
    {"harness.contract"},
    {"harness.engines"},
    {"harness.models", "harness.data", "harness.losses", "harness.collectives"},
    {"harness.compare"},
    {"harness.golden", "harness.run_dir"},
    {"harness.judging"},
    {"harness.launch"},
    {"harness.scenarios"},
    {"harness.run", "harness.report"},
    {"harness.bisect", "harness.shrink", "harness.kernels", "harness.history"},
    {"harness.cli", "conformance", "guard"},
)
# parts of one floor that must not import each other, though the floors allow it: the report reads a run directory
# through harness.run_dir, never through the runner that writes it (so it stands beside the runner, not above it)
APART = ({"harness.report", "harness.run"},)
ENGINE_API = {"harness.contract", "harness.engines"}
# folders of programs that drive an engine and are not one (the reference's benchmark and training program): they
# may also pick a family's checkpoint and record provenance; no engine imports them
PROGRAMS = ("impls.reference.bench", "impls.reference.train")
PROGRAM_API = ENGINE_API | {"harness.models", "harness.provenance"}
# the reference's parts (its folders; engine.py and fast.py are the engines), bottom to top, as FLOORS
REFERENCE_FLOORS = ({"model"}, {"parallel"}, {"data"}, {"loss"}, {"optim"}, {"step"}, {"engine", "fast"}, {"bench", "train"})


def part(module: str) -> str:
    """The part a dotted name (without `packcheck.`) belongs to: harness.<sub>, impls, conformance."""
    head = module.split(".")
    return ".".join(head[:2]) if head[0] == "harness" else head[0]


def floor(name: str) -> int:
    return next(i for i, names in enumerate(FLOORS) if name in names)


def imports() -> list[tuple[str, str, int]]:
    """(importing module, imported module, line), for every module of the three folders."""
    found = []
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text())):
                names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                found += [(module, name, node.lineno) for name in names]
    return found


def test_nothing_imports_the_folders_by_their_bare_names():
    bare = [f"{m}:{line} imports {name}" for m, name, line in imports() if name.split(".")[0] in FOLDERS]
    assert not bare, "import them as packcheck.<folder>:\n" + "\n".join(bare)


def test_every_part_has_a_floor():
    parts = {part(m) for m, _, _ in imports()} | {part(n[len("packcheck."):]) for _, n, _ in imports() if n.startswith("packcheck.")}
    unplaced = {p for p in parts if p.startswith(("harness", "conformance")) and not any(p in f for f in FLOORS)}
    assert not unplaced, f"parts without a floor in FLOORS (and docs/architecture.md): {sorted(unplaced)}"


def test_imports_run_down_the_floors():
    upward = []
    for module, name, line in imports():
        if not name.startswith("packcheck.") or module.startswith("impls"):
            continue
        source, target = part(module), part(name[len("packcheck."):])
        if target == "impls":
            upward.append(f"{module}:{line} imports {name}: the harness imports no engine")
        elif source != target and floor(target) > floor(source):
            upward.append(f"{module}:{line} imports {name}, a floor above {source}")
    assert not upward, "\n".join(upward)


def test_parts_kept_apart_do_not_import_each_other():
    across = [f"{module}:{line} imports {name}" for module, name, line in imports() if name.startswith("packcheck.")
              for apart in APART if part(module) in apart and part(name[len("packcheck."):]) in apart - {part(module)}]
    assert not across, "parts kept apart (APART) import each other:\n" + "\n".join(across)


def module_graph() -> dict[str, set[str]]:
    """packcheck module -> the packcheck modules it imports (a package's import counts as its __init__'s)."""
    modules = {m for m, _, _ in imports()}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, name, _ in imports():
        target = name[len("packcheck."):] if name.startswith("packcheck.") else None
        if target is None:
            continue
        target = target if target in modules else f"{target}.__init__" if f"{target}.__init__" in modules else None
        if target is not None and target != module:
            graph[module].add(target)
    return graph


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_no_module_reaches_itself_through_its_imports():
    circle = find_circle(module_graph())
    assert circle is None, "an import circle (move what both need below both):\n  " + "\n  -> ".join(circle)


def test_the_circle_check_finds_a_circle():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set()}) is None


def program(module: str) -> str | None:
    """The program folder a module (without `packcheck.`) lies in, or None."""
    return next((p for p in PROGRAMS if module == p or module.startswith(f"{p}.")), None)


def beyond_the_api(found: list[tuple[str, str, int]]) -> list[str]:
    """The imports of impls/ modules past what their folder may import: the contract and the engine API for an
    engine's module, also models and provenance for a program's; and an engine's module importing a program."""
    beyond = []
    for module, name, line in found:
        if not module.startswith("impls") or not name.startswith("packcheck."):
            continue
        target = name[len("packcheck."):]
        if target.startswith("harness") and part(target) not in (PROGRAM_API if program(module) else ENGINE_API):
            beyond.append(f"{module}:{line} imports {name}")
        elif program(target) not in (None, program(module)):
            beyond.append(f"{module}:{line} imports {name}, a program")
    return beyond


def test_engines_import_only_the_contract_and_the_engine_api():
    assert all((ROOT / p.replace(".", "/")).is_dir() for p in PROGRAMS), f"a program folder in PROGRAMS is gone: {PROGRAMS}"
    beyond = beyond_the_api(imports())
    assert not beyond, "engines reach past the contract:\n" + "\n".join(beyond)


def reference_part(module: str) -> str | None:
    """The part of impls/reference a module (without `packcheck.`) belongs to: its folder, or its own name at the top."""
    head = module.split(".")
    return head[2] if head[:2] == ["impls", "reference"] and len(head) > 2 and head[2] != "__init__" else None


def test_the_reference_parts_import_down():
    floors = {p: i for i, names in enumerate(REFERENCE_FLOORS) for p in names}
    upward, unplaced = [], set()
    for module, name, line in imports():
        source, target = reference_part(module), reference_part(name.removeprefix("packcheck."))
        if source is None or target is None or not name.startswith("packcheck."):
            continue
        unplaced |= {p for p in (source, target) if p not in floors}
        if source in floors and target in floors and floors[target] > floors[source]:
            upward.append(f"{module}:{line} imports {name}, a part above {source}")
    assert not unplaced, f"parts of impls/reference without a floor in REFERENCE_FLOORS (and docs/architecture.md): {sorted(unplaced)}"
    assert not upward, "\n".join(upward)


def test_the_api_check_finds_an_engine_reaching_past_the_contract():
    assert beyond_the_api([("impls.reference.step.train_step", "packcheck.harness.models", 3),
                           ("impls.reference.engine", "packcheck.impls.reference.bench.main", 5),
                           ("impls.reference.train.trainer", "packcheck.harness.run", 7)]) == [
        "impls.reference.step.train_step:3 imports packcheck.harness.models",
        "impls.reference.engine:5 imports packcheck.impls.reference.bench.main, a program",
        "impls.reference.train.trainer:7 imports packcheck.harness.run"]
    assert beyond_the_api([("impls.reference.train.trainer", "packcheck.harness.models", 3),
                           ("impls.reference.bench.main", "packcheck.impls.reference.bench.arms", 5),
                           ("impls.reference.bench.arms", "packcheck.impls.reference.fast", 7)]) == []
