"""How many examples a property test draws: `make test` runs a short slice of each random-program test (a fifth of
its full count, at least 20), and UOPIR_SLOW=1 (what `make fuzz` sets for its property-test step) the full count, so
the long randomized runs cost the fuzz target, not every test run."""
from __future__ import annotations

import os

FULL = bool(os.environ.get("UOPIR_SLOW"))


def examples(full: int) -> int:
    """The max_examples of a property test whose long run draws `full` examples."""
    return full if FULL else min(full, max(20, full // 5))
