"""The losses as the harness defines them, in closed form and float64, engine-neutral.

The scenarios evaluate these definitions at an engine's own log-probs to know, without a second
engine, what its loss and its per-token weights (`dloss_dlogprobs`) must be. They are written
independently of the reference trainer (which differentiates with autograd), so the two check
each other.
"""

from packcheck.harness.losses.advantages import group_advantages, policy_samples
from packcheck.harness.losses.aggregation import loss_sequences, token_weights
from packcheck.harness.losses.expected import Expected, expected_loss
from packcheck.harness.losses.policy import Branch, TokenLoss, token_loss

__all__ = ["Branch", "Expected", "TokenLoss", "expected_loss", "group_advantages", "loss_sequences", "policy_samples", "token_loss",
           "token_weights"]
