"""No code reads an arm, problem or exception kind back from a string (issue 30): a kind travels as data (an
ErrorKind, a typed Problem, a typed arm) and text is written for people only. The test walks the syntax of
the package's source (harness/, conformance/) for each way a kind used to be read back, and names file:line.

    exception   a class name tested as text: `error_type.endswith("EngineNotFound")`, `type(e).__name__ == ...`
    arm name    an arm's kind told by its name: `arm.startswith(ORACLE_PREFIX)`, `name.rsplit("/", 1)`, `name.endswith(OTHER)`
    wording     a regular expression over the words of a problem or a verdict: `re.compile(r"non-finite ...")`, `re.sub(r"^arm '...")`
    detail      a verdict's text edited or searched: `verdict.detail.replace(...)`, `... in verdict.detail`, a comparison's
                `"fewer" in c.where`, an unsupported verdict's `"dtype" in reason`
    engine      a mutant told by its registered name: `name.startswith("mutant.")` (the packcheck.mutants group and
                Engine.bug say it)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("harness", "conformance")
AFFIXES = {"startswith", "endswith", "removeprefix", "removesuffix", "split", "rsplit", "partition", "rpartition"}
CLASS_NAMES = {"__name__", "__qualname__"}  # a class's name as text
ARM_NAMES = {"arm", "against"}  # what an arm's name is held in, wherever it is
WORDING = ("non-finite", "NaN/inf", "nan|inf", "arm '", r"result\.")  # validate_result's and the runner's words
REGEX_CALLS = {"compile", "search", "match", "fullmatch", "sub", "subn", "findall", "finditer", "split"}
TEXT = {"detail", "diagnosis"}  # a verdict's text, for people
WORDS_OF = {"where", "reason"}  # a comparison's where, an unsupported verdict's reason: searched for a word (a dict may be called where)
MUTANT_PREFIX = "mutant."


def _name(node: ast.AST) -> str | None:
    """The identifier an expression ends in: `b` for a.b, "arm" for row["arm"], `x` for (x or "")."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, ast.BoolOp):
        return next(filter(None, map(_name, node.values)), None)
    return None


def _exception_text(node: ast.AST, class_names: bool = True) -> bool:
    """Whether the expression holds an exception's class as text: an `error_type`, or (`class_names`) a class's `__name__`
    (a module's bare `__name__` is not one)."""
    attributes = {"error_type"} | (CLASS_NAMES if class_names else set())
    return any(isinstance(n, ast.Attribute) and n.attr in attributes or isinstance(n, ast.Name) and n.id == "error_type"
               for n in ast.walk(node))


def _arm_affix(receiver: ast.AST, args: list[ast.expr]) -> bool:
    """An arm's name cut or tested by a part: anything done to an `arm`; to a `name`, with a constant (ORACLE_PREFIX) or
    with a separator of arm names' parts ("/", or a suffix "_unpacked")."""
    if _name(receiver) in ARM_NAMES:
        return True
    if _name(receiver) != "name" or not args:
        return False
    part = args[0]
    if isinstance(part, ast.Constant) and isinstance(part.value, str):
        return "/" in part.value or part.value.startswith("_")
    return (_name(part) or "").isupper()


def findings(source: str) -> list[tuple[int, str]]:
    """(line, which pattern) for every place `source` reads a kind back from a string."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            equal = any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops)  # `"<locals>" in cls.__qualname__` is no kind
            if any(_exception_text(o, class_names=equal) for o in [node.left, *node.comparators]):
                found.add((node.lineno, "exception"))
            if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and any(
                    _name(c) in TEXT or _name(c) in WORDS_OF and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)
                    for c in node.comparators):
                found.add((node.lineno, "detail"))
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        method, receiver = node.func.attr, node.func.value
        if method in ("startswith", "endswith") and _exception_text(receiver):
            found.add((node.lineno, "exception"))
        elif method in AFFIXES and any(isinstance(a, ast.Constant) and a.value == MUTANT_PREFIX for a in node.args):
            found.add((node.lineno, "engine"))
        elif method in AFFIXES and _arm_affix(receiver, node.args):
            found.add((node.lineno, "arm name"))
        elif method == "replace" and _name(receiver) in TEXT:
            found.add((node.lineno, "detail"))
        elif (method in REGEX_CALLS and _name(receiver) == "re" and node.args and isinstance(node.args[0], ast.Constant)
              and any(word in str(node.args[0].value) for word in WORDING)):
            found.add((node.lineno, "wording"))
    return sorted(found)


@pytest.mark.parametrize(("source", "pattern"), [
    ('(failed.error_type or "").endswith("EngineNotFound")', "exception"),
    ('outcome.error_type == BUILD_TIMEOUT', "exception"),
    ('type(err).__name__ == "UnsupportedCase"', "exception"),
    ('"UnsupportedCase" in (outcome.error_type or "")', "exception"),
    ('arm.startswith(ORACLE_PREFIX)', "arm name"),
    ('row["arm"].startswith(RELOCATED) or row["against"].startswith(RELOCATED)', "arm name"),
    ('case.name.rsplit("/", 1)[-1]', "arm name"),
    ('[name for name in j.results if name.endswith(OTHER)]', "arm name"),
    ('"one_unpacked" if name.endswith("_unpacked") else REFERENCE_ARM', "arm name"),
    ('NON_FINITE = re.compile(r"non-finite|\\bis -?(nan|inf)\\b")', "wording"),
    ('re.sub(r"^arm \'[^\']*\': ", "", first)', "wording"),
    ('verdict.detail = verdict.detail.replace(NOTHING_TO_COMPARE, "")', "detail"),
    ('NOTHING_TO_COMPARE in verdict.detail', "detail"),
    ('if "fewer" in counts[0].where: pass', "detail"),
    ('"dtype" in reason and choices.dtype != AUTO', "detail"),
    ('[n for n in engine_names() if n.startswith("mutant.")]', "engine"),
])
def test_each_way_of_reading_a_kind_back_is_found(source, pattern):
    assert pattern in {which for _, which in findings(source)}, source


@pytest.mark.parametrize("source", [
    'if __name__ == "__main__": pass',
    'f"{error[\'type\'].rsplit(\'.\', 1)[-1]}: {error[\'message\']}"',
    'outcome.error_kind is ErrorKind.UNSUPPORTED_CASE',
    'name.endswith(".bias") or name.startswith(self.frozen) or name.rsplit(".", 1)[-1]',
    'if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__: pass',
    'self.detail.strip().replace("\\n", "\\n  ")',
    're.search(r"\\w(Error|Exception|Exit|Interrupt)\\b", line)',
])
def test_text_for_people_and_other_names_are_left_alone(source):
    assert findings(source) == [], source


def test_no_code_reads_a_kind_back_from_a_string():
    found = [f"{path.relative_to(ROOT)}:{line}: {which}"
             for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))
             for line, which in findings(path.read_text())]
    assert not found, "a kind read back from a string; carry it as data instead (docs/architecture.md):\n" + "\n".join(found)


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
