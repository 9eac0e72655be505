"""Third-party progress bars off in engine processes: packcheck owns the console while it runs.

transformers draws a "Loading weights" bar for every model it loads (one per arm and rank: dozens
per run), and the Hugging Face hub and datasets draw download bars; on a shared terminal they
interleave with packcheck's progress lines. Each library reads its switch from the environment
when it is imported, so the switch goes into the environment every engine process starts with.
Set by default only: a user who wants the bars exports the variable (e.g. HF_HUB_DISABLE_PROGRESS_BARS=0).
"""

from __future__ import annotations

QUIET = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # huggingface_hub, and transformers' own tqdm (it asks the hub)
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",  # datasets (TRL's data preparation)
    "TQDM_DISABLE": "1",  # any other tqdm (tqdm >= 4.66 reads TQDM_* defaults from the environment)
}


def quiet(env: dict[str, str]) -> dict[str, str]:
    """`env` with every progress-bar switch off that the user did not set."""
    for name, value in QUIET.items():
        env.setdefault(name, value)
    return env
