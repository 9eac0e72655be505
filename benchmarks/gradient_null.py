"""Does a bug-proof null predict a gradient's arm-vs-arm rounding? (issue 41 item 1; docs/margins.md, "Gradients: a null
measured in the run").

    python benchmarks/gradient_null.py --family qwen3 --model 0.6b --seed 1 --device cuda --out null.json
    python benchmarks/gradient_null.py --family llama --model flat --device cpu --out null.json   # the same on the CPU
    python benchmarks/gradient_null.py --scenario rl_loss_aggregation --arms seq-mean-token-mean/clip/one \
        seq-mean-token-mean/clip/uneven --mutant mutant.drgrpo-constant --out null.json   # a policy loss's arms

For one scenario's base arm (`one`) and another arm of it (`uneven`), each gradient tensor's error, in the run's dtype
(bfloat16), of:
  arm    the other arm against the base arm, as the scenario's judge compares them (what the table bounds today);
  null   the base arm in bfloat16 against the same engine's base arm in float32 (the same case, its dtype changed): the
         engine's own bf16 rounding of that case, which no logic bug (the same in every dtype) can enter;
  repeat the base arm run twice in bfloat16 (0 where the engine is deterministic);
  mutant the other arm of `--mutant` against its own base arm (a bug the scenario must flag).
Each as rel_l2 and max_rel, per tensor, written to --out as JSON with the per-tensor ratios arm/null and mutant/null; the
summary prints their quantiles. Engines run in this process (world-1 arms only); a scenario's earlier stages (a policy
loss's rollout, whose log-probs its arms take as the old ones) run first, with the same engine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from packcheck.harness.compare.metrics import max_rel, rel_l2
from packcheck.harness.engines import resolve_engine
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.scenarios import Scenario, get_scenario
from packcheck.harness.scenarios.base import Before


def grads(engine: str, case) -> dict[str, torch.Tensor]:
    result = resolve_engine(engine).run(case)
    return {name: g.detach() for name, g in result.grads.items()}


def arms_of(scenario: Scenario, setting, engine: str) -> dict:
    """Every arm of the scenario's last stage, its earlier stages run by `engine` in this process."""
    cases, results = {}, {}
    for index, stage in enumerate(scenario.stages):
        built = stage.build(setting, Before(cases=dict(cases), results=dict(results)))
        cases |= built
        if index < len(scenario.stages) - 1:
            runner = resolve_engine(engine)
            results |= {name: runner.run(case) for name, case in built.items()}
    return cases


def errors(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict[str, tuple[float, float]]:
    return {name: (rel_l2(a[name], b[name]), max_rel(a[name], b[name])[0]) for name in sorted(b)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="qwen3")
    parser.add_argument("--model", default="0.6b")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--scenario", default="microbatch_invariance")
    parser.add_argument("--arms", nargs=2, default=("one", "uneven"), metavar=("BASE", "OTHER"))
    parser.add_argument("--mutant", default="mutant.ga-mean-of-means")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    base, other = args.arms
    inputs, scenario = Inputs(model=args.model, seed=args.seed), get_scenario(args.scenario)
    setting = inputs.setting(args.family, "bfloat16", args.device)
    started = time.perf_counter()
    bf16 = arms_of(scenario, setting, "reference")
    one = grads("reference", bf16[base])
    measured = {
        "arm": errors(grads("reference", bf16[other]), one),
        "repeat": errors(grads("reference", bf16[base]), one),
    }
    reference32 = grads("reference", bf16[base].with_(dtype="float32"))
    measured["null"] = errors(one, reference32)
    del reference32
    mutant = arms_of(scenario, setting, args.mutant)
    measured["mutant"] = errors(grads(args.mutant, mutant[other]), grads(args.mutant, mutant[base]))
    rows = [{"tensor": name, "numel": one[name].numel(), **{f"{kind}_{metric}": measured[kind][name][i]
            for kind in measured for i, metric in enumerate(("rel_l2", "max_rel"))}} for name in sorted(one)]
    with open(args.out, "w") as out:
        json.dump({"args": vars(args), "seconds": time.perf_counter() - started, "rows": rows}, out, indent=1)
    for metric in ("rel_l2", "max_rel"):
        for kind in ("arm", "mutant"):
            ratios = sorted(r[f"{kind}_{metric}"] / r[f"null_{metric}"] for r in rows if r[f"null_{metric}"] > 0)
            q = statistics.quantiles(ratios, n=20) if len(ratios) > 1 else ratios
            print(f"{metric} {kind}/null over {len(ratios)} tensors: min {ratios[0]:.3g} p5 {q[0]:.3g} median "
                  f"{statistics.median(ratios):.3g} p95 {q[-1]:.3g} max {ratios[-1]:.3g}")
    print(f"repeat: largest rel_l2 {max(r['repeat_rel_l2'] for r in rows):.3g}")


if __name__ == "__main__":
    main()
