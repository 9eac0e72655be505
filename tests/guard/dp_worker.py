"""One rank of tests/guard/test_guard.py's data-parallel check, started by torch's launcher (torchrun) on gloo: each rank
checks its own documents with the normaliser the engine would pass. argv: OUT_DIR MODE..., each MODE one of
  right          num_items_in_batch is the DP group's targets (the Trainer's average_tokens_across_devices)
  rank-count     each rank's own targets (the rank-token-count bug: every rank divides by its own count)
  rank1-label    rank 1's collator leaves each document's first label (only rank 1's batch is wrong)
Each rank writes its verdict (or the failure's) to OUT_DIR/MODE-rank{R}.json. The modes run one after the other in one
process group: one launch for all (a launch costs most of the test's time)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import DataCollatorWithFlattening

from packcheck.guard import GuardFailure, check
from packcheck.guard.batch import documents_of, target_count
from tests.guard.models import VOCAB, tiny


def main() -> None:
    out = Path(sys.argv[1])
    dist.init_process_group("gloo")
    for mode in sys.argv[2:]:
        checked(out, mode, dist.get_rank())
    dist.destroy_process_group()


def checked(out: Path, mode: str, rank: int) -> None:
    g = torch.Generator().manual_seed(10 + rank)
    lengths = (5, 9, 3) if rank == 0 else (12, 1, 7, 4)  # uneven ranks
    batch = DataCollatorWithFlattening(return_tensors="pt")([{"input_ids": torch.randint(0, VOCAB, (n,), generator=g).tolist()}
                                                             for n in lengths])
    if mode == "rank1-label" and rank == 1:
        batch["labels"] = batch["input_ids"].clone()
    local = torch.tensor([target_count(batch["labels"], documents_of(batch))])
    total = local.clone()
    dist.all_reduce(total)
    batch["num_items_in_batch"] = int(local if mode == "rank-count" else total)
    raised = False
    try:
        verdict = check(tiny(), batch, shrink=False, localise=False, case_dir=out / "cases")
    except GuardFailure as failure:
        verdict, raised = failure.verdict, True
    (out / f"{mode}-rank{rank}.json").write_text(json.dumps(verdict.to_json() | {"raised": raised}))


if __name__ == "__main__":
    main()
