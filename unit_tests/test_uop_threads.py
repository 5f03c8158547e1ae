"""Hash-consing under threads (issue 8, item 8): threads that build equal UOps get one object, also while other
threads free and rebuild the same graphs, so `is` keeps meaning equal."""
from __future__ import annotations

import gc
import random
import threading

from thread_testing import run_together

import uopir  # noqa: F401 - registers the dialects
from uopir.dialects import core
from uopir.ir import uop as uop_module
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp, gc_paused

IDX = dtypes.index
_BINARY = (core.ADD, core.MUL, core.IDIV, core.MOD, core.MAX)


def random_graph(seed: int, n: int = 60) -> UOp:
    """A random index-math DAG from a seed: the same seed builds an equal graph in every thread."""
    rng = random.Random(seed)
    vals = [UOp(core.CONST, IDX, (), rng.randint(0, 5)) for _ in range(4)]
    for _ in range(n):
        a, b = rng.choice(vals), rng.choice(vals[-8:])
        vals.append(UOp(rng.choice(_BINARY), IDX, (a, b), tag=rng.choice((None, None, 1, 2.0))))
    return UOp.sink(*vals[-3:])


def test_threads_building_the_same_graphs_get_the_same_objects() -> None:
    # regression: the cache lookup and the insert were two steps, so two threads could both miss and each
    # publish its own node (1-15 distinct "equal" nodes a run with 4 threads)
    seeds = list(range(1000, 1100))

    def work(k: int) -> list[UOp]:
        return [random_graph(s) for s in seeds]

    results = run_together(work, 8)
    for j in range(len(seeds)):
        roots = [r[j] for r in results]
        assert all(x is roots[0] for x in roots), f"graph {j}: threads got distinct equal roots"
        nodes = [list(x.toposort()) for x in roots]
        assert all(len(ns) == len(nodes[0]) and all(a is b for a, b in zip(ns, nodes[0], strict=True))
                   for ns in nodes)


def test_identity_holds_while_other_threads_free_and_rebuild() -> None:
    # each thread builds, drops and rebuilds the same graphs; a node may die in one thread while another looks it
    # up. Afterwards, equal graphs are one object and the cache holds exactly the live nodes, once each.
    seeds = list(range(2000, 2040))

    def work(k: int) -> list[UOp]:
        rng = random.Random(k)
        for _ in range(4):
            order = seeds[:]
            rng.shuffle(order)
            for s in order:
                g = random_graph(s)
                assert g is random_graph(s)
                del g
        return [random_graph(s) for s in seeds]

    results = run_together(work, 8)
    for j in range(len(seeds)):
        assert all(r[j] is results[0][j] for r in results)
    gc.collect()
    live = [r() for r in list(uop_module._ucache.values())]
    assert all(u is not None for u in live)  # no dead entry lingers
    keys = [k for k, r in list(uop_module._ucache.items()) if r() is not None]
    assert len(set(map(id, live))) == len(live) == len(keys)
    for u in results[0][0].toposort():  # every live node is the one its key maps to
        assert any(r() is u for r in uop_module._ucache.values())


def test_gc_paused_nests_across_threads() -> None:
    was = gc.isenabled()
    gc.enable()
    try:
        inside = threading.Event()
        release = threading.Event()

        def other() -> None:
            with gc_paused():
                inside.set()
                release.wait(5)

        t = threading.Thread(target=other)
        with gc_paused():
            t.start()
            inside.wait(5)
        assert not gc.isenabled()  # the other thread's block is still open: the collector stays off
        release.set()
        t.join()
        assert gc.isenabled()  # the last block to close turns it back on
    finally:
        if not was:
            gc.disable()
