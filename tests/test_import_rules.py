"""The floors of the house (docs/architecture.md) run one way: every import of a packcheck module
goes to its own part or a lower floor; no module reaches itself through its imports (no circle, inside
a part either, imports inside functions included); harness imports nothing from impls; engines import
only the contract and the engine API; nothing imports the repository's folders by their bare names."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("harness", "impls", "conformance")
# bottom to top; a part may import its own floor and any floor below
FLOORS = (
    {"harness.errors", "harness.files", "harness.provenance", "harness.registry", "harness.text"},
    {"harness.contract"},
    {"harness.engines"},
    {"harness.models", "harness.data", "harness.losses", "harness.collectives"},
    {"harness.compare"},
    {"harness.golden"},
    {"harness.judging"},
    {"harness.launch"},
    {"harness.scenarios"},
    {"harness.run"},
    {"harness.report", "harness.bisect"},
    {"harness.cli", "conformance"},
)
ENGINE_API = {"harness.contract", "harness.engines"}
# programs that drive an engine and are not one: the reference trainer picks a family's checkpoint and records provenance
PROGRAMS = {"impls.reference.train": {"harness.models", "harness.provenance"},
            "impls.reference.bench": {"harness.models", "harness.provenance"}}


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


def test_engines_import_only_the_contract_and_the_engine_api():
    beyond = []
    for module, name, line in imports():
        if not module.startswith("impls") or not name.startswith("packcheck.harness"):
            continue
        target = part(name[len("packcheck."):])
        if target not in ENGINE_API | PROGRAMS.get(module, set()):
            beyond.append(f"{module}:{line} imports {name}")
    assert not beyond, "engines reach past the contract:\n" + "\n".join(beyond)


ARM_KIND_TEXT = ("oracle/", "cpu_float64/", "^arm '")  # the text forms of an arm's role and pass, and of a note about an arm


def test_no_arm_kind_is_read_back_from_its_text():
    """An arm's role and pass are data (harness/compare/arm_id.py, ArmId): no code spells their text form to test a name."""
    found = []
    for path in (ROOT / "harness").rglob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                      and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        found += [f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                  and any(text in node.value for text in ARM_KIND_TEXT)]
    assert not found, "read the arm's ArmId (role, pass_) instead:\n" + "\n".join(found)
