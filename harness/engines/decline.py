"""An engine's answer to "do you decline this case?", checked: None runs it, a string declines it and says why;
anything else is a broken contract named by its field (a non-string reason was once taken as a decline).

    decline_reason(engine, case)   # None, "needs an optimizer step", or ContractError("...unsupported_reason returned 5 (int)...")
"""

from __future__ import annotations

from packcheck.harness.contract import Case
from packcheck.harness.contract.errors import ContractError
from packcheck.harness.engines.protocol import Engine


def decline_reason(engine: Engine, case: Case) -> str | None:
    """`engine.unsupported_reason(case)`, or ContractError where it is neither None nor a string."""
    reason = engine.unsupported_reason(case)
    if reason is not None and not isinstance(reason, str):
        raise ContractError(f"{type(engine).__name__}.unsupported_reason returned {reason!r:.80} ({type(reason).__name__}): "
                            "return None to run the case, or a str saying why the engine declines it")
    return reason
