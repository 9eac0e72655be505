"""`python -m packcheck.impls.reference.train`: the training program's command line (trainer.py)."""

from packcheck.impls.reference.train.trainer import main

raise SystemExit(main())
