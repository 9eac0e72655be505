"""The launch agent's stand-in for torch's `dynamic_rendezvous.get_method_name` (harness/launch/agent.py): the same
names at every depth, without `inspect.stack()`'s cost."""

from __future__ import annotations

import pytest
from torch.distributed.elastic.rendezvous import dynamic_rendezvous

from packcheck.harness.launch.agent import method_name

TORCHS = dynamic_rendezvous.get_method_name  # taken at import: the agent replaces it only in its own process


def caller_of(name_of, depth):
    def rendezvous_step():  # as torch calls it: from a method of the handler, about that method's caller
        return name_of(depth)
    return rendezvous_step()


@pytest.mark.parametrize("depth", [1, 2, 3, 10_000])  # 0 is the function itself
def test_the_agents_method_name_is_torchs(depth):
    assert caller_of(method_name, depth) == caller_of(TORCHS, depth)
    assert method_name() == TORCHS()  # the default depth, from this test's own frame
