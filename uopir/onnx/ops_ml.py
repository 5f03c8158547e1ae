"""ONNX's classical machine-learning operators (the ai.onnx.ml domain): Binarizer, ArrayFeatureExtractor and
TreeEnsemble (each leaf selected by the product of the comparisons on its path, which the attributes fix); and
TfIdfVectorizer (ai.onnx), n-gram features of integer tokens."""
from __future__ import annotations

import numpy as np

from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes
from uopir.onnx.ops_shape import req, take_t
from uopir.onnx.registry import Node, onnx_op


@onnx_op("Binarizer", domain="ai.onnx.ml")
def binarizer(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    return (x > node.attr("threshold", 0.0)).cast(x.dtype)


@onnx_op("ArrayFeatureExtractor", domain="ai.onnx.ml")
def array_feature_extractor(node: Node, inputs: list) -> Tensor:
    """x[..., indices] along the last axis (a 1-D input gives (1, len(indices)), as the ml operator's reference)."""
    x, idx = req(node, inputs, 0), req(node, inputs, 1, "Y")
    out = take_t(x, x.ndim - 1, idx.reshape(-1))
    return out.reshape(1, -1) if x.ndim == 1 else out


@onnx_op("TreeEnsemble", since=5, domain="ai.onnx.ml")
def tree_ensemble(node: Node, inputs: list) -> Tensor:
    """The trees are attributes, so every leaf's path is known when the graph is built: a leaf is selected where all
    the comparisons on its path went its way (a product of boolean columns), and each tree's value is the sum of its
    leaves' weights times their indicators. No data is read while building."""
    x = req(node, inputs, 0)
    if node.attr("post_transform", 0) != 0:
        raise node.error("post_transform other than NONE is unsupported")
    agg = node.attr("aggregate_function", 1)
    splits = np.asarray(node.attr("nodes_splits")).reshape(-1)
    feats, modes = node.attr("nodes_featureids"), np.asarray(node.attr("nodes_modes")).reshape(-1)
    tnode, fnode = node.attr("nodes_truenodeids"), node.attr("nodes_falsenodeids")
    tleaf, fleaf = node.attr("nodes_trueleafs"), node.attr("nodes_falseleafs")
    lw, lt = np.asarray(node.attr("leaf_weights")).reshape(-1), node.attr("leaf_targetids")
    roots, nt = node.attr("tree_roots"), node.attr("n_targets")
    missing = node.attr("nodes_missing_value_tracks_true", None)
    members = np.asarray(node.attr("membership_values", np.zeros(0))).reshape(-1)
    sets: dict[int, list[float]] = {}
    it = iter(members.tolist())
    for i, m in enumerate(modes):
        if m == 6:
            vals = []
            for v in it:
                if np.isnan(v):
                    break
                vals.append(v)
            sets[i] = vals
    xf = x.cast(dtypes.float64) if x.dtype != dtypes.float64 else x
    conds: dict[int, Tensor] = {}

    def cond(i: int) -> Tensor:
        if i not in conds:
            col, s = xf[:, feats[i]], float(splits[i])
            m = int(modes[i])
            c = {0: lambda: col <= s, 1: lambda: col < s, 2: lambda: col >= s, 3: lambda: col > s,
                 4: lambda: col == s, 5: lambda: col != s}.get(m)
            if m == 6:
                r = Tensor.full(tuple(col.shape), False, dtype=dtypes.bool, device=x.device)
                for v in sets.get(i, []):
                    r = r | (col == v)
                res = r
            elif c is None:
                raise node.error(f"unknown node mode {m}")
            else:
                res = c()
            if missing is not None and missing[i]:
                res = res | col.isnan()
            conds[i] = res
        return conds[i]

    n = x.shape[0]
    vals, tids = [], []
    for root in roots:
        if tleaf[root] and fleaf[root] and tnode[root] == fnode[root]:
            paths = [(root, [])]
        else:
            paths, stack = [], [(root, [])]
            while stack:  # iterate (no recursion): (interior node, path of (node, went_true))
                i, path = stack.pop()
                for went, child, is_leaf in ((True, tnode[i], tleaf[i]), (False, fnode[i], fleaf[i])):
                    p = path + [(i, went)]
                    (paths if is_leaf else stack).append((child, p))
        val: Tensor | float = 0.0
        tid: Tensor | float = 0.0
        for leaf, path in paths:
            ind: Tensor | None = None
            for i, went in path:
                c = cond(i) if went else cond(i).logical_not()
                ind = c if ind is None else ind & c
            sel = ind.cast(dtypes.float64) if ind is not None else 1.0
            val = val + sel * float(lw[leaf])
            tid = tid + sel * float(lt[leaf])
        vals.append(val if isinstance(val, Tensor) else Tensor.full((n,), val, dtype=dtypes.float64, device=x.device))
        tids.append(tid if isinstance(tid, Tensor) else Tensor.full((n,), tid, dtype=dtypes.float64, device=x.device))
    targets = Tensor.arange(nt, dtype=dtypes.float64, device=x.device).reshape(1, nt)
    big = float(np.finfo(np.float64).max)
    out: Tensor | None = None
    for v, t in zip(vals, tids, strict=True):
        hit = t.reshape(n, 1) == targets
        vv = v.reshape(n, 1)
        if agg in (0, 1):
            contrib = hit.where(vv / (len(roots) if agg == 0 else 1), 0.0)
            out = contrib if out is None else out + contrib
        elif agg in (2, 3):
            init = Tensor.full((n, nt), big if agg == 2 else -big, dtype=dtypes.float64, device=x.device)
            cur = init if out is None else out
            out = hit.where(cur.minimum(vv) if agg == 2 else cur.maximum(vv), cur)
        else:
            raise node.error(f"unknown aggregate_function {agg}")
    if out is None:
        out = Tensor.zeros(n, nt, dtype=dtypes.float64, device=x.device)
    if agg in (2, 3):  # targets no tree reached keep the dtype's extreme (the reference starts from it)
        fin = np.finfo(np.float32 if x.dtype != dtypes.float64 else np.float64)
        out = (out == (big if agg == 2 else -big)).where(float(fin.max if agg == 2 else fin.min), out)
    return out.cast(x.dtype)


@onnx_op("TfIdfVectorizer", since=9)
def tfidf_vectorizer(node: Node, inputs: list) -> Tensor:
    """n-gram counts of integer tokens (strings are out: uopir has no string dtype). The pool's n-grams are attributes,
    so each (length, skip) is a static match: the tokens at i, i+d, ..., i+(n-1)d compared with every pool n-gram of
    that length (d = skip + 1; unigrams counted once, not per skip, as onnx's reference), summed over i, and the
    counts weighted (TF: the count, IDF: `weights[k]` where the count is > 0, TFIDF: count x `weights[k]`, each weight
    of the k-th pool n-gram as the spec and onnxruntime read it) and scattered to `ngram_indexes`' columns by a
    host-built one-hot matmul."""
    x = req(node, inputs, 0)
    if x.dtype not in (dtypes.int32, dtypes.int64) or x.ndim not in (1, 2):
        raise node.error(f"the input must be a 1-D or 2-D int32/int64 tensor, got {x.dtype} of shape {x.shape}")
    if node.has("pool_strings"):
        raise node.error("unsupported dtype string (pool_strings)")
    pool = list(node.attr("pool_int64s"))
    starts, cols = list(node.attr("ngram_counts")), list(node.attr("ngram_indexes"))
    lo, hi, skips = node.attr("min_gram_length"), node.attr("max_gram_length"), node.attr("max_skip_count")
    mode = node.attr("mode")
    if mode not in ("TF", "IDF", "TFIDF") or not 1 <= lo <= hi:
        raise node.error(f"mode {mode!r} (TF, IDF or TFIDF) with min/max_gram_length {lo}/{hi} is not valid")
    grams: dict[int, list[tuple[int, ...]]] = {}  # n -> its pool n-grams, in pool order
    for n, s in enumerate(starts, start=1):
        end = starts[n] if n < len(starts) else len(pool)
        if (end - s) % n:
            raise node.error(f"the pool's {n}-grams ({end - s} values) are not a multiple of {n}")
        grams[n] = [tuple(pool[j:j + n]) for j in range(s, end, n)]
    size = max(cols) + 1 if cols else 0
    w = node.attr("weights", None)
    if w is not None and len(w) != len(cols):
        raise node.error(f"{len(w)} weights for {len(cols)} n-grams")
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    b, length = rows.shape
    out = Tensor.zeros(b, size, dtype=dtypes.float32, device=node.device)
    k = 0  # the pool n-gram's number (its index into ngram_indexes)
    for n in sorted(grams):
        gs = grams[n]
        if gs and lo <= n <= hi:
            counts = None
            for d in range(1, (1 if n == 1 else skips + 1) + 1):
                span = (n - 1) * d
                if span >= length:
                    break
                hit = None
                for j in range(n):
                    tok = rows.shrink((None, (j * d, j * d + length - span))).reshape(b, length - span, 1)
                    want = Tensor(np.array([g[j] for g in gs], np.int64), device=node.device).cast(x.dtype)
                    eq = tok == want.reshape(1, 1, len(gs))
                    hit = eq if hit is None else hit & eq
                c = hit.cast(dtypes.float32).sum(1)  # (b, grams of length n)
                counts = c if counts is None else counts + c
            if counts is not None:
                if mode == "IDF":
                    counts = (counts > 0).cast(dtypes.float32)
                if mode != "TF" and w is not None:
                    counts = counts * Tensor(np.asarray(w[k:k + len(gs)], np.float32), device=node.device)
                onehot = np.zeros((len(gs), size), np.float32)
                onehot[np.arange(len(gs)), cols[k:k + len(gs)]] = 1.0
                out = out + counts @ Tensor(onehot, device=node.device)
        k += len(gs)
    return out.reshape(size) if x.ndim == 1 else out
