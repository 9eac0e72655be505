"""What an engine declares it can run; a Case outside it must be rejected, never computed.

`unsupported_reason(case)` is the harness's reading of the declaration: the scenario runner
reports such a case as *unsupported* (never passed), and the conformance suite checks the other
direction too: handed such a case anyway, the engine must raise UnsupportedCase.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from packcheck.harness.contract import AdvantageEstimator, Aggregation, Case, LayoutKind, LossKind

# why an engine without the capability cannot take a Case.pad_poison request, and what taking it means
POISON_WHY = ("Case.pad_poison asks the engine to write NaN and +Inf into its own pad positions, which only the engine's "
              "forward can reach; to take it, call harness/engines/pad_poison.py there and declare Capabilities(pad_poison=True)")


@dataclass(frozen=True, kw_only=True, slots=True)
class Capabilities:
    families: frozenset[str]
    layouts: frozenset[LayoutKind] = frozenset(LayoutKind)
    dtypes: frozenset[str] = frozenset({"float64", "float32"})
    devices: frozenset[str] = frozenset({"cpu"})
    losses: frozenset[LossKind] = frozenset({LossKind.SFT_TOKEN_MEAN})
    # for a policy loss (LossKind.PPO_CLIP in `losses`): the aggregation modes and optional terms it implements
    aggregations: frozenset[Aggregation] = frozenset(Aggregation)
    loss_terms: frozenset[str] = frozenset({"dual_clip", "kl", "entropy"})
    # the advantage estimators it computes itself from rewards and groups (LossSpec.advantage); none by default: an
    # engine that reads its advantages from the samples has never been asked for its own
    advantage_estimators: frozenset[AdvantageEstimator] = frozenset()
    max_dp: int = 1
    max_cp: int = 1
    # tensor, pipeline and expert parallel degrees it runs (ParallelPlan.tp, .pp, .ep); 1: it has no such layout
    max_tp: int = 1
    max_pp: int = 1
    max_ep: int = 1
    cp_styles: frozenset[str] = frozenset()
    dp_styles: frozenset[str] = frozenset({"replicate"})  # parallel.dp_style values it honours (None always is)
    optimizer_step: bool = True
    reports: frozenset[str] = frozenset()
    images: bool = False  # samples with image inputs (vision-language families); an engine without it never gets one
    # it reports its modules' activations when a localisation asks (harness/engines/capture.py); without it, the
    # harness says why it cannot locate where two arms part
    activations: bool = False
    # cuts each data-parallel rank's samples into micro-batches under Case.token_budget, equalising their number over
    # the data-parallel group (harness/contract/token_budget.py); without it, a case with a token budget is unsupported
    token_budget: bool = False
    # it writes NaN and +Inf into its own pad positions when a case asks (Case.pad_poison), through
    # harness/engines/pad_poison.py; without it, poisoned_pads is unsupported
    pad_poison: bool = False
    # attention backend -> layouts it keeps documents apart for; "auto" must be a key
    attention: dict[str, frozenset[LayoutKind]] = field(default_factory=lambda: {"auto": frozenset(LayoutKind)})

    def unsupported_reason(self, case: Case) -> str | None:
        checks = (
            (case.model.family in self.families, f"family {case.model.family!r} (supported: {sorted(self.families)})"),
            (case.layout.kind in self.layouts, f"layout {case.layout.kind.value!r}"),
            (case.dtype in self.dtypes, f"dtype {case.dtype!r}"),
            (case.device in self.devices, f"device {case.device!r}"),
            (case.loss.kind in self.losses, f"loss {case.loss.kind.value!r}"),
            (not case.loss.is_policy or case.loss.aggregation in self.aggregations, f"loss aggregation {case.loss.aggregation.value!r}"),
            (not case.loss.is_policy or case.loss.terms <= self.loss_terms, f"loss terms {sorted(case.loss.terms - self.loss_terms)}"),
            (case.loss.advantage is None or case.loss.advantage in self.advantage_estimators,
             f"advantage estimator {case.loss.advantage} (advantages computed from the samples' rewards and groups; declare "
             "Capabilities(advantage_estimators=...))"),
            (case.parallel.dp <= self.max_dp, f"dp={case.parallel.dp} (max {self.max_dp})"),
            (case.parallel.cp <= self.max_cp, f"cp={case.parallel.cp} (max {self.max_cp})"),
            (case.parallel.tp <= self.max_tp, f"tp={case.parallel.tp} (max {self.max_tp}; tensor parallel)"),
            (case.parallel.pp <= self.max_pp, f"pp={case.parallel.pp} (max {self.max_pp}; pipeline parallel)"),
            (case.parallel.ep <= self.max_ep, f"ep={case.parallel.ep} (max {self.max_ep}; expert parallel)"),
            (case.parallel.cp == 1 or case.parallel.cp_style in self.cp_styles, f"cp_style {case.parallel.cp_style!r}"),
            (case.parallel.dp_style is None or case.parallel.dp_style in self.dp_styles, f"dp_style {case.parallel.dp_style!r}"),
            (case.optimizer is None or self.optimizer_step, "an optimizer step"),
            (not case.has_images or self.images, "image inputs (samples with images; declare Capabilities(images=True))"),
            (case.token_budget is None or self.token_budget,
             "token-budget micro-batching (Case.token_budget: cut each rank's samples into micro-batches and equalise their "
             "number over the data-parallel group; declare Capabilities(token_budget=True))"),
            (case.pad_poison is None or self.pad_poison, f"pad poisoning ({POISON_WHY})"),
            (case.attention in self.attention, f"attention backend {case.attention!r} (known: {sorted(self.attention)})"),
        )
        for ok, what in checks:
            if not ok:
                return f"engine does not support {what}"
        if case.layout.kind not in self.attention[case.attention]:
            return (
                f"attention backend {case.attention!r} cannot keep documents apart in a "
                f"{case.layout.kind.value} layout"
            )
        return None

    def to_json(self) -> dict:
        return {
            "families": sorted(self.families),
            "layouts": sorted(k.value for k in self.layouts),
            "dtypes": sorted(self.dtypes),
            "devices": sorted(self.devices),
            "losses": sorted(k.value for k in self.losses),
            "aggregations": sorted(k.value for k in self.aggregations),
            "loss_terms": sorted(self.loss_terms),
            "advantage_estimators": sorted(map(str, self.advantage_estimators)),
            "max_dp": self.max_dp,
            "max_cp": self.max_cp,
            "max_tp": self.max_tp,
            "max_pp": self.max_pp,
            "max_ep": self.max_ep,
            "cp_styles": sorted(self.cp_styles),
            "dp_styles": sorted(self.dp_styles),
            "optimizer_step": self.optimizer_step,
            "reports": sorted(self.reports),
            "images": self.images,
            "activations": self.activations,
            "token_budget": self.token_budget,
            "pad_poison": self.pad_poison,
            "attention": {name: sorted(k.value for k in kinds) for name, kinds in self.attention.items()},
        }

    @classmethod
    def from_json(cls, data: dict) -> Capabilities:
        """The declaration as an engine's process described it (harness/engines/info.py)."""
        words = lambda key: frozenset(map(str, data[key]))  # noqa: E731
        return cls(
            families=words("families"), layouts=frozenset(LayoutKind(k) for k in data["layouts"]), dtypes=words("dtypes"),
            devices=words("devices"), losses=frozenset(LossKind(k) for k in data["losses"]),
            aggregations=frozenset(Aggregation(k) for k in data["aggregations"]), loss_terms=words("loss_terms"),
            advantage_estimators=frozenset(AdvantageEstimator(k) for k in data.get("advantage_estimators", ())),
            max_dp=int(data["max_dp"]), max_cp=int(data["max_cp"]),
            max_tp=int(data.get("max_tp", 1)), max_pp=int(data.get("max_pp", 1)), max_ep=int(data.get("max_ep", 1)), cp_styles=words("cp_styles"),
            dp_styles=words("dp_styles") if "dp_styles" in data else frozenset({"replicate"}),
            optimizer_step=bool(data["optimizer_step"]), reports=words("reports"), images=bool(data.get("images", False)),
            activations=bool(data.get("activations", False)), token_budget=bool(data.get("token_budget", False)),
            pad_poison=bool(data.get("pad_poison", False)),
            attention={str(name): frozenset(LayoutKind(k) for k in kinds) for name, kinds in data["attention"].items()},
        )
