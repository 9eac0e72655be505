"""`packcheck list scenarios|engines|families|mutants`; with no argument, what each of them lists."""

from __future__ import annotations

import shutil
import sys
import textwrap

from packcheck.harness.cli.scenario_facts import ScenarioFacts, facts_in_source


def add_parser(commands) -> None:
    parser = commands.add_parser("list", help="list scenarios, engines, families or mutants")
    parser.add_argument("what", nargs="?", choices=tuple(KINDS), help="what to list (default: say what can be listed)")
    parser.set_defaults(handler=handle)


KINDS = {
    "scenarios": "the golden scenarios: each one's invariant and the bugs it catches",
    "engines": "the engines registered here, with what each declares (families, layouts, dtypes, meshes, losses)",
    "families": "the model families and their size presets (--model)",
    "mutants": "the known-bug engines the suite is proven to catch, one bug each",
}


def handle(args) -> int:
    if args.what is None:  # before the registries are imported: this answer needs none of them
        print("packcheck list WHAT, where WHAT is one of:")
        print("\n".join(f"  {kind:10} {what}" for kind, what in KINDS.items()))
        return 0
    # each kind imports its own registry only (the engines' imports torch); the scenarios' facts are read from their source
    if args.what == "scenarios":
        print(scenario_list(facts_in_source() or registered_facts()))
    elif args.what == "families":
        from packcheck.harness.models import FAMILIES
        from packcheck.harness.models.sizes import PRESETS

        for f in FAMILIES.values():
            print(f"{f.name:10} {f.description}; --model {' | '.join(PRESETS[f.name])}")
    elif args.what == "engines":
        from packcheck.harness.engines import EngineNotFound, EngineVersionError, engine_names, mutant_names, resolve_engine

        unloadable, mutants = 0, set(mutant_names())
        for name in engine_names():
            if name not in mutants:
                try:
                    caps = resolve_engine(name).capabilities
                except (EngineNotFound, EngineVersionError) as err:  # a registered adapter whose engine (its extra, its release) is not here
                    print(f"{name:12} not loadable here: {short_reason(str(err))}")
                    unloadable += 1
                    continue
                print(f"{name:12} families {','.join(sorted(caps.families))}; layouts {','.join(sorted(caps.layouts))}; "
                      f"dtypes {','.join(sorted(caps.dtypes))}; dp<={caps.max_dp} cp<={caps.max_cp} tp<={caps.max_tp} pp<={caps.max_pp} ep<={caps.max_ep}; "
                      f"devices {','.join(sorted(caps.devices))}; losses {','.join(sorted(caps.losses))}; "
                      + (f"advantages {','.join(sorted(caps.advantage_estimators))}; " if caps.advantage_estimators else "")
                      + f"reports {','.join(sorted(caps.reports)) or '-'}")
        if unloadable:
            print(f"({unloadable} not loadable here: `packcheck run --engine NAME` says in full what each needs)")
        print(f"(and {len(mutants)} mutants: packcheck list mutants)")
    else:  # each summary read from the mutant's source: importing the mutants imports the reference trainer (and torch)
        from packcheck.harness.engines.module_doc import module_doc
        from packcheck.harness.engines.registry import mutant_modules

        print(mutant_table({name: doc_summary(module_doc(module), name) for name, module in mutant_modules().items()}))
    return 0


def registered_facts() -> list[ScenarioFacts]:
    """The registry's scenarios, imported (with their judges and torch): where their source cannot be read."""
    from packcheck.harness.scenarios import SCENARIOS

    return [ScenarioFacts(name=s.name, invariant=s.invariant, catches=s.catches) for s in SCENARIOS.values()]


def scenario_list(facts: list[ScenarioFacts]) -> str:
    lines = [f"{s.name}\n{textwrap.indent(textwrap.fill(s.invariant, 90), '    ')}\n    catches: {', '.join(s.catches)}" for s in facts]
    return "\n".join([*lines, "(packcheck explain SCENARIO: its arms, the tolerance per quantity and dtype, the mutants it catches)"])


# Ctrl-C while it imports torch (seconds: the engines' registry) is one line and exit 2, as at start-up:
# main() keeps its start-up handlers in place for it (harness/cli/main.py)
handle.catches_signals = True


REASON_CHARS = 60


def short_reason(error: str) -> str:
    """Why a registered engine does not load, in a few words: the error's first clause, without the engine's name and
    class (the row names it), cut at REASON_CHARS."""
    text = error.splitlines()[0]
    if text.startswith("engine '"):  # "engine 'name' (module:Class): why"
        text = text.split(": ", 1)[-1]
    text = text.removeprefix("importing it raised ").split(". ", 1)[0]
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3].rstrip() + "..."


def mutant_summary(engine) -> str:
    """The first paragraph of the mutant's module docstring (the bug in a sentence or two), without the engine's name that
    heads it (`mutant.pad-in-loss: `)."""
    return doc_summary(sys.modules[type(engine).__module__].__doc__, engine.name)


def doc_summary(doc: str | None, name: str) -> str:
    """mutant_summary from the module's docstring and the mutant's name (`list mutants` reads both without importing it)."""
    first = " ".join((doc or "").strip().split("\n\n", 1)[0].split())
    return first.removeprefix(f"{name}: ")


def mutant_table(summaries: dict[str, str], width: int | None = None) -> str:
    """Two aligned columns, names and whole descriptions, wrapped to the terminal's width (never cut)."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    column = max(map(len, summaries), default=0) + 2
    lines = []
    for name, summary in summaries.items():
        # at least 24 characters a line: a narrow terminal beside the longest name (43) still fits 70 columns
        wrapped = textwrap.wrap(summary, width=max(width - column, 24), break_long_words=False, break_on_hyphens=False) or [""]
        lines += [f"{name:{column}}{wrapped[0]}", *(" " * column + line for line in wrapped[1:])]
    return "\n".join(lines)
