"""Shrinking: a failing verdict made as small as it stays failing, written as a standalone case and replayed.

    subject.py  what is shrunk (a verdict's cell, the run's inputs) and how one candidate is built and run
    target.py   what must still fail: the comparison and the diagnosis's class
    plans.py    the scenario's plan narrowed to the comparison's arms, or replaying recorded arms
    search.py   the passes (ranks, layers, documents, lengths, rows, micro-batches, heads, width) and the search
    driver.py   one verdict shrunk within a budget; what cannot be shrunk, refused
    budget.py   the default budget, apart so that the CLI's parser states it without importing the driver
    size.py     a case's size: tokens, documents, rows, ranks, micro-batches, layers
    record.py   the minimal case as a JSON file, read back (the report reads its summary)
    replay.py   that case run again against the engine (`packcheck replay`)
    locate.py   the verdict `packcheck shrink RUN_DIR/ENGINE/FAMILY/SCENARIO` names

docs/shrink.md says what it does and what it measured.
"""
