"""ONNX Attention (opset 23+) and RotaryEmbedding on the Tensor API, following onnx's reference implementation:
the scale's square root multiplies Q and K, causal masking is bottom-right aligned (offset by the past length or
nonpad_kv_seqlen - q_len), a fully masked row gives zeros, and the four outputs are Y, present_key, present_value and
the qk_matmul_output selected by qk_matmul_output_mode."""
from __future__ import annotations

import math

from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes
from uopir.onnx.ops_elementwise import _req
from uopir.onnx.ops_shape import opt, req
from uopir.onnx.registry import Node, OnnxImportError, onnx_op
from uopir.onnx.types import onnx_dtype


def _opt(inputs: list, i: int) -> Tensor | None:
    return inputs[i] if len(inputs) > i else None


def _heads_4d(t: Tensor, heads: int) -> Tensor:
    """(batch, seq, heads * size) -> (batch, heads, seq, size)."""
    b, s, h = t.shape
    return t.reshape(b, s, heads, h // heads).permute(0, 2, 1, 3)


def _masked_softmax(x: Tensor) -> Tensor:
    """Softmax over the last axis; an all -inf row gives zeros (not NaN)."""
    m = x.max(-1, keepdim=True)
    safe = (m == -math.inf).where(0.0, m).cast(x.dtype)
    e = (x - safe).exp()
    s = e.sum(-1, keepdim=True)
    return e / (s == 0).where(1.0, s).cast(x.dtype)


@onnx_op("Attention", since=23)
def attention(node: Node, inputs: list) -> list[Tensor | None]:
    q, k, v = _req(node, inputs, 0), _req(node, inputs, 1), _req(node, inputs, 2)
    mask, past_k, past_v = _opt(inputs, 3), _opt(inputs, 4), _opt(inputs, 5)
    nonpad = _opt(inputs, 6)
    if (past_k is None) != (past_v is None):
        raise node.error("past_key and past_value must be given together")
    if nonpad is not None and past_k is not None:
        raise node.error("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    left, right = node.attr("left_window_size", -1), node.attr("right_window_size", -1)
    softcap = node.attr("softcap", 0.0)
    mode = node.attr("qk_matmul_output_mode", 0)
    rank3 = q.ndim == 3
    if rank3:
        qh, kvh = node.attr("q_num_heads", None), node.attr("kv_num_heads", None)
        if qh is None or kvh is None:
            raise node.error("3-D inputs need the q_num_heads and kv_num_heads attributes")
        q, k, v = _heads_4d(q, qh), _heads_4d(k, kvh), _heads_4d(v, kvh)
    elif q.ndim != 4:
        raise node.error(f"Q must be 3-D or 4-D, got shape {tuple(q.shape)}")
    out_dt = q.dtype
    scale = node.attr("scale", None)
    if scale is None:
        scale = 1 / math.sqrt(q.shape[3])
    sq = float(dt_round(math.sqrt(scale), out_dt))
    if out_dt in (dtypes.float16, dtypes.bfloat16):  # half floats: computed in float32, rounded at the end
        q, k, v = q.cast(dtypes.float32), k.cast(dtypes.float32), v.cast(dtypes.float32)
        past_k = None if past_k is None else past_k.cast(dtypes.float32)
        past_v = None if past_v is None else past_v.cast(dtypes.float32)
        if mask is not None and mask.dtype != dtypes.bool:
            mask = mask.cast(dtypes.float32)
    dt = q.dtype
    if past_k is not None:
        k, v = past_k.cat(k, dim=2), past_v.cat(v, dim=2)
    present_k, present_v = k.cast(out_dt), v.cast(out_dt)
    lq, lkv = q.shape[2], k.shape[2]
    dev = q.device
    bias = Tensor.zeros(lq, lkv, dtype=dt, device=dev)
    if mask is not None and mask.shape[-1] < lkv:
        pad = [(0, 0)] * (mask.ndim - 1) + [(0, lkv - mask.shape[-1])]
        mask = mask.pad(tuple(pad), value=False if mask.dtype == dtypes.bool else -math.inf)
    if mask is not None and mask.dtype == dtypes.bool:
        mask = mask.where(0.0, -math.inf).cast(dt)
    batch = q.shape[0]
    if nonpad is not None:
        offset: Tensor | int = (nonpad.reshape(-1) - lq).reshape(-1, 1, 1, 1)
    else:
        offset = past_k.shape[2] if past_k is not None else 0
    i_idx = Tensor.arange(lq, device=dev).reshape(lq, 1)
    j_idx = Tensor.arange(lkv, device=dev).reshape(1, lkv)
    if node.attr("is_causal", 0):
        bias = bias if mask is None else bias + mask
        bias = bias + (j_idx <= i_idx + offset).where(0.0, -math.inf).cast(dt)
    elif mask is not None:
        bias = bias + mask
    if left >= 0 or right >= 0:
        diff = (i_idx + offset) - j_idx
        allowed = Tensor.ones(*diff.shape, dtype=dtypes.bool, device=dev)
        if left >= 0:
            allowed = allowed & (diff <= left)
        if right >= 0:
            allowed = allowed & (-diff <= right)
        bias = bias + allowed.where(0.0, -math.inf).cast(dt)
    if nonpad is not None:
        pm = (Tensor.arange(lkv, device=dev).reshape(1, lkv) < nonpad.reshape(-1, 1)).reshape(batch, 1, 1, lkv)
        bias = bias + pm.where(0.0, -math.inf).cast(dt)
    hq, hk = q.shape[1], k.shape[1]
    if hq != hk:
        if hq % hk:
            raise node.error(f"q heads ({hq}) must be a multiple of kv heads ({hk})")
        k, v = k.repeat_interleave(hq // hk, dim=1), v.repeat_interleave(hq // hk, dim=1)
    qk = (q * sq) @ (k * sq).transpose(-1, -2)
    if softcap:
        qk = (qk / softcap).tanh() * softcap
    qk_bias = qk + bias
    qk_out = qk_bias if mode == 2 else qk
    prec = node.attr("softmax_precision", None)
    x = qk_bias if prec is None else qk_bias.cast(_dtype(node, prec))
    probs = _masked_softmax(x)
    all_masked = bias.max(-1, keepdim=True) == -math.inf
    probs = all_masked.where(0.0, probs).cast(probs.dtype)
    if mode == 3:
        qk_out = probs
    y = probs.cast(out_dt).cast(dt) @ v
    if rank3:
        y = y.permute(0, 2, 1, 3)
        y = y.reshape(y.shape[0], y.shape[1], -1)
    return [y.cast(out_dt), present_k, present_v, qk_out.cast(out_dt)]


def _dtype(node: Node, code: int):  # noqa: ANN202
    try:
        return onnx_dtype(int(code))
    except OnnxImportError as e:
        raise node.error(str(e)) from None


def dt_round(x: float, d) -> float:  # noqa: ANN001
    """x rounded to dtype d (the reference casts the scale to Q's dtype)."""
    import numpy as np

    from uopir.frontend.dtype_promotion import to_np
    if d == dtypes.bfloat16:
        import ml_dtypes
        return float(np.array(x, dtype=ml_dtypes.bfloat16))
    return float(np.array(x, dtype=to_np(d)))


@onnx_op("RotaryEmbedding", since=23)
def rotary_embedding(node: Node, inputs: list) -> Tensor:
    x, cos, sin = _req(node, inputs, 0), _req(node, inputs, 1), _req(node, inputs, 2)
    pos = _opt(inputs, 3)
    shape = tuple(x.shape)
    if x.ndim == 4:
        x = x.permute(0, 2, 1, 3)  # (batch, seq, heads, head_size)
    elif x.ndim == 3:
        heads = node.attr("num_heads", 0)
        if not heads:
            raise node.error("a 3-D input needs the num_heads attribute")
        x = x.reshape(shape[0], shape[1], heads, shape[2] // heads)
    else:
        raise node.error(f"the input must be 3-D or 4-D, got shape {shape}")
    hs = x.shape[3]
    rd = node.attr("rotary_embedding_dim", 0) or hs
    half = rd // 2
    if pos is not None:
        cos, sin = cos[pos], sin[pos]
    if cos.shape[-1] != half or sin.shape[-1] != half:
        raise node.error(f"the caches' last dim must be rotary_embedding_dim / 2 = {half}, got {cos.shape[-1]}")
    cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
    rot, keep = x[:, :, :, :rd], x[:, :, :, rd:]
    interleaved = bool(node.attr("interleaved", 0))
    if interleaved:
        pairs = rot.reshape(*rot.shape[:3], half, 2)
        x1, x2 = pairs[..., 0], pairs[..., 1]
    else:
        x1, x2 = rot[..., :half], rot[..., half:]
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if interleaved:
        rot = real.unsqueeze(-1).cat(imag.unsqueeze(-1), dim=-1).reshape(*rot.shape)
    else:
        rot = real.cat(imag, dim=-1)
    out = rot.cat(keep, dim=-1) if rd < hs else rot
    out = out.reshape(shape) if len(shape) == 3 else out.permute(0, 2, 1, 3)
    return out.cast(x.dtype) if out.dtype != x.dtype else out


@onnx_op("LinearAttention", since=27)
def linear_attention(node: Node, inputs: list) -> list[Tensor]:
    """The reference's recurrence, one step per position (unrolled: T is the sequence length of the call)."""
    q, k, v = req(node, inputs, 0), req(node, inputs, 1, "key"), req(node, inputs, 2, "value")
    past, decay, beta = opt(inputs, 3), opt(inputs, 4), opt(inputs, 5)
    rule = node.attr("update_rule", "gated_delta")
    hq, hk = node.attr("q_num_heads"), node.attr("kv_num_heads")
    if rule not in ("linear", "gated", "delta", "gated_delta") or hq % hk:
        raise node.error(f"update_rule {rule!r} with q_num_heads {hq}, kv_num_heads {hk} is not supported")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gating != (decay is not None) or delta != (beta is not None):
        raise node.error(f"update_rule {rule!r} needs {'decay ' if gating else ''}{'beta' if delta else ''} inputs "
                         "(and no others)")
    b, t, _ = q.shape
    dk, dv = q.shape[-1] // hq, v.shape[-1] // hk
    f32 = dtypes.float32

    def heads(x: Tensor, h: int) -> Tensor:
        return x.reshape(b, t, h, -1).transpose(1, 2).cast(f32)

    q4, k4, v4 = heads(q, hq), heads(k, hk), heads(v, hk)
    d4 = (decay.reshape(b, t, hk, 1).transpose(1, 2) if decay.shape[-1] == hk else heads(decay, hk)).cast(f32) \
        if decay is not None else None
    b4 = beta.reshape(b, t, beta.shape[-1], 1).transpose(1, 2).cast(f32) if beta is not None else None
    state = past.cast(f32) if past is not None else Tensor.zeros(b, hk, dk, dv, dtype=f32, device=q.device)
    scale = node.attr("scale", 0.0) or 1 / math.sqrt(dk)
    outs = []
    for i in range(t):
        qt, kt, vt = q4[:, :, i, :], k4[:, :, i, :], v4[:, :, i, :]
        if d4 is not None:
            state = state * d4[:, :, i, :].exp().unsqueeze(-1)
        if b4 is not None:
            retrieved = (state * kt.unsqueeze(-1)).sum(2)
            vt = b4[:, :, i, :] * (vt - retrieved)
        state = state + kt.unsqueeze(-1) * vt.unsqueeze(-2)
        read = state.repeat_interleave(hq // hk, 1) if hq != hk else state
        outs.append((qt.unsqueeze(-1) * read).sum(2) * scale)
    out = Tensor.stack(*outs, dim=2) if len(outs) > 1 else outs[0].unsqueeze(2)
    y = out.transpose(1, 2).reshape(b, t, hq * dv).cast(q.dtype)
    return [y, state.cast(past.dtype if past is not None else q.dtype)]


@onnx_op("FlexAttention", domain="ai.onnx.preview")
def flex_attention(node: Node, inputs: list) -> Tensor:
    """scores = Q K^T * scale (in softmax_precision: float32, or float64 for float64 inputs), the score_mod subgraph,
    softmax, the prob_mod subgraph, then @ V; K/V heads shared by contiguous groups of query heads."""
    q, k, v = req(node, inputs, 0), req(node, inputs, 1, "K"), req(node, inputs, 2, "V")
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise node.error(f"Q, K, V must be rank 4, got {q.shape}, {k.shape}, {v.shape}")
    hq, hk = q.shape[1], k.shape[1]
    if hq % hk:
        raise node.error(f"{hq} query heads are not a multiple of {hk} key/value heads")
    if hq != hk:
        k, v = k.repeat_interleave(hq // hk, 1), v.repeat_interleave(hq // hk, 1)
    prec = node.attr("softmax_precision", None)
    cd = onnx_dtype(prec) if prec is not None else (dtypes.float64 if q.dtype == dtypes.float64 else dtypes.float32)
    scale = node.attr("scale", None)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q.cast(cd) @ k.cast(cd).transpose(-1, -2)) * scale
    if node.has("score_mod"):
        s = node.run_subgraph("score_mod", [s])[0]
    p = s.softmax(-1)
    if node.has("prob_mod"):
        p = node.run_subgraph("prob_mod", [p])[0]
    return (p @ v.cast(cd)).cast(q.dtype)
