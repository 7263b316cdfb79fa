"""PyTorch ops torch-mlir refuses ("failed to legalize operation"), written as ops it lowers.

Found by importing single ops and layers (BENCHMARKS.md, thirty-first session); each is
applied while torch-mlir retraces the exported program, as ``torch_semantics`` is, and keeps
PyTorch's answer, special values included:

- ``embedding_bag`` (sum, mean, max; offsets, ``include_last_offset``, ``per_sample_weights``,
  ``padding_idx``): each index's bag counted from the offsets, rows added (or folded by max)
  into their bag; an empty bag is zeros, as in PyTorch. Recommendation models (DLRM) are built
  on it. With run-time counts (torch.export's ``Dim``) the bags are a mask's product instead:
  pyree's scatters need static sizes.
- ``cdist`` and ``pdist``: differences of every pair, normed; for p = 2 on more than 25 rows
  ``cdist`` takes PyTorch's own matrix-product form (``|a|^2 + |b|^2 - 2 a.b``, clamped at 0),
  as PyTorch does by default, so the answers round alike.
- ``searchsorted`` (left or right, ``sorter``, int32 or int64): a binary search, log2(n)
  gathers per value (a count of every boundary below each value was n steps: 16 times
  PyTorch's time for 1M values in 1024 bins on the H200), with PyTorch's comparisons.
- ``median`` and ``nanmedian`` (all values, or along a dim with indices): the lower middle of a
  sort; ``median`` is NaN where a NaN is present (its index the first NaN's), ``nanmedian``
  skips them.
- ``erfc``: Numerical Recipes' ``erfcc`` (relative error below 1.2e-7 everywhere, where
  ``1 - erf`` loses every digit past x = 4); floats up to 32 bits.
- ``hypot``: scaled by the larger magnitude, so that 3e38 does not overflow; inf with a NaN is
  inf, as C's. ``copysign`` and ``signbit``: -0.0 is negative (read through ``1 / x``; a NaN's
  sign bit is not read: it counts as positive).
- ``histc``: each value's bin from its offset in [min, max] (the data's own range where both
  are 0), counted in integers by a scatter-add into counters per run of 1024 values, which are
  then added (a compare of every value with every bin was 17 times PyTorch's time for 4M values
  in 100 bins on the H200, one set of counters for all values 23 times).
- ``lgamma``, ``digamma`` and ``erfinv``: the formulas pyree computes CHLO's with
  (``special_functions``) over PyTorch's tensors, and PyTorch's own answers at digamma's pole 0
  (-inf for +0, inf for -0, where CHLO answers NaN); floats up to 32 bits. So are
  ``special_i0e``/``i1e``, ``i0``/``special_i1`` (scaled back), ``polygamma`` and
  ``special_zeta`` (below 0 the zeta series' terms cancel: about 3 digits in f32, where PyTorch
  computes in double).
- ``adaptive_max_pool1d/2d/3d`` of static sizes: PyTorch's overlapping windows gathered into a
  table per dim where an output size does not divide the input's (torch-mlir refused it), so
  the op count does not grow with the output (upsampling included); indices as PyTorch's where
  a window holds NaN (torch-mlir's even split answered -1).
"""

from __future__ import annotations

import math

from pyree.compiler import special_functions


def decompositions() -> dict:
    import torch

    aten = torch.ops.aten
    table = {aten.erfc.default: _erfc, aten.hypot.default: _hypot,
             aten.copysign.Tensor: _copysign, aten.copysign.Scalar: _copysign,
             aten.signbit.default: _signbit,
             aten.searchsorted.Tensor: _searchsorted, aten.searchsorted.Scalar: _searchsorted,
             aten.median.default: _median_all(skip_nan=False),
             aten.nanmedian.default: _median_all(skip_nan=True),
             aten.median.dim: _median_dim(skip_nan=False),
             aten.nanmedian.dim: _median_dim(skip_nan=True),
             aten._cdist_forward.default: _cdist, aten._pdist_forward.default: _pdist,
             aten.histc.default: _histc,
             aten.lgamma.default: _special("lgamma"), aten.digamma.default: _special("digamma"),
             aten.erfinv.default: _special("erf_inv"),
             aten.special_i0e.default: _bessel("bessel_i0e"),
             aten.special_i1e.default: _bessel("bessel_i1e"),
             aten.i0.default: _bessel("bessel_i0e", scaled=False),
             aten.special_i1.default: _bessel("bessel_i1e", scaled=False),
             aten.polygamma.default: _polygamma,
             aten.special_zeta.default: _zeta, aten.special_zeta.self_scalar: _zeta,
             aten.special_zeta.other_scalar: _zeta,
             aten.embedding_bag.default: _embedding_bag,
             aten.embedding_bag.padding_idx: _embedding_bag,
             aten._embedding_bag.default: _embedding_bag,
             aten.adaptive_max_pool1d.default: _adaptive_max_pool(1),
             aten.adaptive_max_pool2d.default: _adaptive_max_pool(2),
             aten.adaptive_max_pool3d.default: _adaptive_max_pool(3)}
    return table


def _adaptive_max_pool(k: int):
    """``adaptive_max_pool{k}d`` of static sizes. torch-mlir lowers only the even split (an
    uneven one is an invalid tensor.cast), and indexes a window holding NaN -1. Each dim's
    windows, rows ``floor(i * n / out)`` to ``ceil((i + 1) * n / out)`` as PyTorch's, are
    gathered into a (out, longest window) table, a short window padded with its own last row (which changes
    neither the max nor, mapped back through the table, its index); the max is then over each
    cell's flattened window, its index a window's first max (with NaN its last NaN, as
    PyTorch's kernel) mapped to the flattened plane. A fixed number of ops at any size."""
    def pool(x, output_size):
        import torch
        sizes, outs = list(x.shape[-k:]), list(output_size)
        if not all(isinstance(d, int) and d for d in (*x.shape, *outs)):
            return NotImplemented
        lead, tables = x.dim() - k, []
        for d, (n, o) in enumerate(zip(sizes, outs)):
            longest = max(-(-(c + 1) * n // o) - c * n // o for c in range(o))
            cell = torch.arange(o).unsqueeze(1)
            table = torch.minimum(cell * n // o + torch.arange(longest),
                                  ((cell + 1) * n + o - 1) // o - 1)
            tables.append(table)
            if n % o:  # an even split is the dim itself, reshaped
                x = torch.index_select(x, lead + 2 * d, table.reshape(-1))
            x = x.unflatten(lead + 2 * d, (o, longest))
        order = [*range(lead), *(lead + 2 * d for d in range(k)), *(lead + 2 * d + 1 for d in range(k))]
        windows = x.permute(order).flatten(-k)
        value, at = torch.max(windows, -1)
        if _float(windows):
            nan = torch.isnan(windows)
            last = windows.shape[-1] - 1 - torch.argmax(nan.flip(-1).to(torch.int32), -1)
            at = torch.where(nan.any(-1), last, at)
        place, stride = torch.zeros_like(at), 1
        for d in reversed(range(k)):  # window position -> plane index, through each table
            longest = tables[d].shape[1]
            shape = [1] * k
            shape[d] = outs[d]
            row = tables[d][torch.arange(outs[d]).reshape(shape), at % longest]
            place, at, stride = place + row * stride, at // longest, stride * sizes[d]
        return value, place
    return pool


def _float(x) -> bool:
    return getattr(x, "dtype", None) is not None and x.dtype.is_floating_point


# ---- elementwise ---------------------------------------------------------------------------

_ERFCC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
          -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def _erfc(x):
    import torch
    if not _float(x) or x.dtype == torch.float64:
        return NotImplemented
    z = torch.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = torch.full_like(t, _ERFCC[-1])
    for c in reversed(_ERFCC[:-1]):
        poly = poly * t + c
    tail = t * torch.exp(-z * z + poly)
    tail = torch.where(torch.isinf(z), torch.zeros_like(t), tail)
    return torch.where(x < 0, 2.0 - tail, tail)


def _hypot(a, b):
    import torch
    if not (_float(a) and _float(b)):
        return NotImplemented
    a, b = torch.abs(a), torch.abs(b)
    big, small = torch.maximum(a, b), torch.minimum(a, b)
    ratio = torch.where(big > 0, small / torch.where(big > 0, big, torch.ones_like(big)),
                        torch.zeros_like(big))
    value = big * torch.sqrt(1.0 + ratio * ratio)
    value = torch.where(torch.isnan(a) | torch.isnan(b), a + b, value)
    return torch.where(torch.isinf(a) | torch.isinf(b), torch.full_like(value, math.inf), value)


def _negative(x):
    """The sign bit of a float tensor, -0.0 included (NaN: positive)."""
    import torch
    return (x < 0) | ((x == 0) & (torch.reciprocal(x) < 0))


def _signbit(x):
    import torch
    if x.dtype == torch.bool:
        return torch.zeros_like(x)
    if not _float(x):
        return x < 0
    return _negative(x)


def _copysign(a, b):
    import torch
    result_type = torch.result_type(a, b)
    if not result_type.is_floating_point:
        result_type = torch.get_default_dtype()
    a = a.to(result_type) if isinstance(a, torch.Tensor) else torch.scalar_tensor(a, dtype=result_type)
    magnitude = torch.abs(a)
    if not isinstance(b, torch.Tensor):
        return -magnitude if math.copysign(1.0, b) < 0 else magnitude
    return torch.where(_negative(b if _float(b) else b.to(result_type)), -magnitude, magnitude)


class _TorchOps:
    """PyTorch's arithmetic as ``special_functions.Ops``."""

    def __init__(self, like):
        self.like = like

    def c(self, v: float):
        import torch
        return torch.full_like(self.like, v)

    def bin(self, op: str, a, b):
        import torch
        return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
                "pow": torch.pow}[op](a, b)

    def un(self, op: str, a):
        import torch
        return getattr(torch, op)(a)

    def cmp(self, op: str, a, b):
        import torch
        return getattr(torch, op)(a, b)

    def both(self, a, b):
        import torch
        return torch.logical_and(a, b)

    def pick(self, cond, a, b):
        import torch
        return torch.where(cond, a, b)


def _special(name: str):
    def special(x):
        import torch
        if not _float(x) or x.dtype == torch.float64:
            return NotImplemented
        value = getattr(special_functions, name)(_TorchOps(x), x)
        if name == "digamma":  # PyTorch's pole at 0: -inf for +0, inf for -0
            value = torch.where(x == 0, torch.where(_negative(x), math.inf, -math.inf), value)
        return value
    return special


def _bessel(name: str, scaled: bool = True):
    """``special_i0e``/``i1e``, and (not ``scaled``) ``i0``/``i1``: the exponentially scaled
    function times ``exp(|x|)`` (inf past ~88, as PyTorch's f32); +0 at -0, as PyTorch's."""
    def bessel(x):
        import torch
        value = _special(name)(x)
        if value is NotImplemented:
            return value
        if not scaled:
            value = value * torch.exp(torch.abs(x))
        return torch.where(x == 0, torch.zeros_like(value), value) if name == "bessel_i1e" else value
    return bessel


def _polygamma(n: int, x):
    import torch
    if not _float(x) or x.dtype == torch.float64:
        return NotImplemented
    if n == 0:  # PyTorch's digamma, poles included
        return _special("digamma")(x)
    return special_functions.polygamma(_TorchOps(x), torch.full_like(x, float(n)), x)


def _zeta(x, q):
    import torch
    tensor = x if isinstance(x, torch.Tensor) else q
    if not _float(tensor) or tensor.dtype == torch.float64:
        return NotImplemented
    x, q = (v if isinstance(v, torch.Tensor) else torch.full_like(tensor, float(v)) for v in (x, q))
    x, q = torch.broadcast_tensors(x, q)
    return special_functions.zeta(_TorchOps(x), x, q)


# ---- searching and order -------------------------------------------------------------------

def _searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None,
                  sorter=None):
    import torch
    seq = sorted_sequence
    if sorter is not None:
        seq = torch.gather(seq, -1, sorter)
    if not isinstance(values, torch.Tensor):
        values = torch.scalar_tensor(values, dtype=seq.dtype)
    right = right or side == "right"
    n = seq.shape[-1]
    if not isinstance(n, int):  # a run-time length: count the boundaries below each value
        below = (lambda b, v: ~torch.gt(b, v)) if right else (lambda b, v: ~torch.ge(b, v))
        pairs = below(seq, values.unsqueeze(-1)) if seq.dim() == 1 else below(
            seq.unsqueeze(-2), values.unsqueeze(-1))
        return pairs.sum(-1).to(torch.int32 if out_int32 else torch.int64)
    # ``below``: PyTorch's step right (``!(mid >= v)``; ``!(mid > v)`` for right), so that a
    # NaN value lands past the end and NaN boundaries (sorted last) count as below, as there
    passes = torch.ge if not right else torch.gt
    found = torch.zeros(values.shape, dtype=torch.int64, device=values.device)
    step = 1 << max(n.bit_length() - 1, 0)
    while step and n:  # the largest count whose last element is below, bit by bit
        candidate = found + step
        place = (candidate - 1).clamp(max=n - 1)
        boundary = seq[place] if seq.dim() == 1 else torch.gather(seq, -1, place)
        found = torch.where((candidate <= n) & ~passes(boundary, values), candidate, found)
        step >>= 1
    return found.to(torch.int32 if out_int32 else torch.int64)


def _median_all(skip_nan: bool):
    def median(x):
        if not _float(x):
            return NotImplemented
        values, _ = _median_along(x.reshape(-1), 0, skip_nan)
        return values.reshape(())
    return median


def _median_dim(skip_nan: bool):
    def median(x, dim=-1, keepdim=False):
        if not _float(x):
            return NotImplemented
        values, indices = _median_along(x, dim, skip_nan)
        if not keepdim:
            values, indices = values.squeeze(dim), indices.squeeze(dim)
        return values, indices
    return median


def _median_along(x, dim: int, skip_nan: bool):
    """(values, indices) of the lower median along ``dim``, that dim kept with size 1."""
    import torch
    n = x.shape[dim]
    ordered, order = torch.sort(x, dim=dim, stable=True)  # NaN last, in their order
    nans = torch.isnan(x).sum(dim, keepdim=True)
    numbers = torch.neg(nans) + n  # (tensor first: torch-mlir takes no int - tensor)
    if skip_nan:  # the middle of the values that are not NaN (all NaN: a NaN)
        position = torch.clamp(torch.div(numbers - 1, 2, rounding_mode="floor"), min=0)
    else:  # a NaN present: the first NaN
        middle = torch.div(torch.zeros_like(nans) + (n - 1), 2, rounding_mode="floor")
        position = torch.where(nans > 0, numbers, middle)
    return torch.gather(ordered, dim, position), torch.gather(order, dim, position)


# ---- distances -----------------------------------------------------------------------------

def _norm_last(d, p: float):
    import torch
    if p == 0:
        return (d != 0).to(d.dtype).sum(-1)
    if math.isinf(p):
        return torch.abs(d).amax(-1)
    if p == 1:
        return torch.abs(d).sum(-1)
    if p == 2:
        return torch.sqrt((d * d).sum(-1))
    return torch.pow(torch.pow(torch.abs(d), p).sum(-1), 1.0 / p)


def _cdist(x1, x2, p, compute_mode=None):
    import torch
    if not (_float(x1) and _float(x2)):
        return NotImplemented
    rows, cols = x1.shape[-2], x2.shape[-2]
    # PyTorch's choice (aten/src/ATen/native/Distance.cpp): 0/None use the product past 25 rows;
    # with run-time rows (torch.export's Dim) the differences, not a guard on the size
    static = not any(isinstance(d, torch.SymInt) for d in (rows, cols))
    past_25 = static and (rows > 25 or cols > 25)
    if p == 2 and (compute_mode == 1 or (compute_mode in (None, 0) and past_25)):
        n1 = (x1 * x1).sum(-1, keepdim=True)
        n2 = (x2 * x2).sum(-1, keepdim=True)
        left = torch.cat([-2 * x1, n1, torch.ones_like(n1)], -1)
        right = torch.cat([x2, torch.ones_like(n2), n2], -1)
        return torch.sqrt(torch.clamp_min(torch.matmul(left, right.transpose(-1, -2)), 0))
    return _norm_last(x1.unsqueeze(-2) - x2.unsqueeze(-3), p)


def _pdist(x, p=2.0):
    import torch
    if not _float(x):
        return NotImplemented
    first, second = torch.triu_indices(x.shape[0], x.shape[0], 1, device=x.device)
    return _norm_last(x[first] - x[second], p)


# ---- counting ------------------------------------------------------------------------------

HISTOGRAM_RUN = 1024


def _histc(x, bins=100, min=0, max=0):  # noqa: A002 - aten's argument names
    import torch
    if not _float(x):
        return NotImplemented
    flat = x.reshape(-1)
    low, high = float(min), float(max)
    if low == high:  # the data's own range (PyTorch: then widened by 1 if still empty)
        lo, hi = flat.amin(), flat.amax()
        same = lo == hi
        lo, hi = torch.where(same, lo - 1, lo), torch.where(same, hi + 1, hi)
    else:
        lo, hi = torch.scalar_tensor(low, dtype=x.dtype), torch.scalar_tensor(high, dtype=x.dtype)
    inside = (flat >= lo) & (flat <= hi)
    if x.dtype in (torch.float16, torch.bfloat16):  # each step rounded, as PyTorch's Half
        def step(t):
            return t.to(x.dtype).float()
        ratio = step(step(step(flat.float() - lo.float()) * bins) / step(hi.float() - lo.float()))
    else:
        ratio = (flat - lo) * bins / (hi - lo)
    position = torch.clamp(torch.trunc(ratio), max=bins - 1)
    # outside the range (NaN too): a bin past the last, dropped
    position = torch.where(inside, position, torch.full_like(position, bins)).to(torch.int64)
    # counted per run of HISTOGRAM_RUN values, then the runs' counts added: one set of counters
    # for every value made 4M GPU atomics meet on 101 addresses, and a run is one CPU thread's
    # (its row is the scatter's own loop, so no two threads share a counter)
    n = flat.shape[0]
    runs = -(-n // HISTOGRAM_RUN) or 1  # (max is the argument here)
    run = torch.arange(n, device=x.device) // HISTOGRAM_RUN
    count = torch.int32 if n < 2**31 else torch.int64
    hits = torch.zeros(runs * (bins + 1), dtype=count, device=x.device)
    hits = hits.scatter_add(0, run * (bins + 1) + position, torch.ones_like(position, dtype=count))
    return hits.reshape(runs, bins + 1).sum(0, dtype=count)[:bins].to(x.dtype)


def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=None):
    import torch
    if indices.dim() != 1 or mode not in (0, 1, 2):
        return NotImplemented
    count = indices.shape[0]
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    width = weight.shape[1]
    positions = torch.arange(count, device=indices.device)
    bag = (offsets.unsqueeze(0) <= positions.unsqueeze(1)).sum(1) - 1
    bag = torch.clamp(bag, 0, max(bags - 1, 0))
    valid = torch.ones_like(indices, dtype=torch.bool) if padding_idx is None or padding_idx < 0 \
        else indices != padding_idx
    rows = weight[indices]
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1).to(rows.dtype)
    if any(isinstance(d, torch.SymInt) for d in (count, bags)):
        return _embedding_bag_by_masks(weight, rows, bag, valid, bags, mode)
    sizes = torch.zeros(bags, dtype=torch.int64, device=weight.device).index_add(
        0, bag, valid.to(torch.int64))
    if mode == 2:  # max
        rows = torch.where(valid.unsqueeze(1), rows, torch.full_like(rows, -math.inf))
        out = torch.full((bags, width), -math.inf, dtype=weight.dtype, device=weight.device)
        out = out.scatter_reduce(0, bag.unsqueeze(1).expand(count, width), rows, "amax")
        out = torch.where(sizes.unsqueeze(1) > 0, out, torch.zeros_like(out))
        max_indices = torch.zeros(bags, width, dtype=torch.int64, device=weight.device)
    else:
        rows = torch.where(valid.unsqueeze(1), rows, torch.zeros_like(rows))
        out = torch.zeros(bags, width, dtype=weight.dtype, device=weight.device).index_add(
            0, bag, rows)
        if mode == 1:  # mean (an empty bag stays zeros)
            divisor = torch.clamp(sizes, min=1).to(out.dtype).unsqueeze(1)
            out = out / divisor
        max_indices = torch.zeros(bags, dtype=torch.int64, device=weight.device)
    return out, bag, sizes, max_indices


def _embedding_bag_by_masks(weight, rows, bag, valid, bags, mode):
    """embedding_bag with run-time counts of indices or bags (torch.export's ``Dim``), where
    pyree's scatters need static sizes: each bag's rows picked by a (bags x indices) mask, summed
    by a product with it or folded by a masked max."""
    import torch
    member = (bag.unsqueeze(0) == torch.arange(bags, device=bag.device).unsqueeze(1)) \
        & valid.unsqueeze(0)
    sizes = member.to(torch.int64).sum(1)
    if mode == 2:
        picked = torch.where(member.unsqueeze(2), rows.unsqueeze(0),
                             torch.full_like(rows, -math.inf).unsqueeze(0))
        out = torch.where(sizes.unsqueeze(1) > 0, picked.amax(1), torch.zeros_like(picked[:, 0]))
        max_indices = torch.zeros_like(out, dtype=torch.int64)
    else:
        out = torch.matmul(member.to(rows.dtype), rows)
        if mode == 1:
            out = out / torch.clamp(sizes, min=1).to(out.dtype).unsqueeze(1)
        max_indices = torch.zeros_like(sizes)
    return out, bag, sizes, max_indices
