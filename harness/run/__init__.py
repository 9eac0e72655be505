"""Running engines on scenarios: the runner of one verdict, the matrix session with its results
file, verdicts and their provenance."""
