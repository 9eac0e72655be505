"""What a scenario's judge sees (Setting, Judgement), how arms are built from a Setting, and the judging
machinery every scenario shares: the evidence a failing verdict's arms show, the diagnosis rules read from
it, the float32-rounding pattern, the golden case and the gradient oracle's arms. Scenarios (harness/scenarios)
are entries built on this part; nothing here imports a scenario."""
