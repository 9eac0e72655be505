"""`python -m packcheck.impls.reference.bench`: the benchmark's command line (main.py)."""

from packcheck.impls.reference.bench.main import main

raise SystemExit(main())
