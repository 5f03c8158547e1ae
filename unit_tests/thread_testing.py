"""Running one piece of work in many threads released at once: the tests of thread safety share it."""
from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

THREADS = 8


def run_together(work: Callable[[int], Any], nthreads: int = THREADS) -> list[Any]:
    """work(k) in `nthreads` threads released at once (a barrier, and thread switches as often as possible);
    their results in thread order. Any exception of any thread fails the test."""
    barrier = threading.Barrier(nthreads)
    results: list[Any] = [None] * nthreads
    errors: list[BaseException] = []

    def body(k: int) -> None:
        try:
            barrier.wait()
            results[k] = work(k)
        except BaseException as e:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=body, args=(k,)) for k in range(nthreads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors
    return results
