"""Ops torch-mlir refuses, imported with pyree's decompositions (importers/torch_missing_ops.py),
on local-task against PyTorch: embedding_bag in every mode, cdist and pdist, searchsorted,
median and nanmedian, erfc, hypot, copysign, signbit, histc, lgamma,
digamma and erfinv, the Bessel functions i0/i1 (scaled and not), polygamma and zeta, adaptive
max pooling of uneven windows, with NaN, infinities and -0 where the op takes them. Each failed
to import before ("failed to legalize operation")."""

from __future__ import annotations

import numpy as np
import pytest
import tooling
from importers.test_torch_less_common_forms import Fn
from pyree.compiler import CompileOptions, compile_str, import_torch

torch = tooling.require_module("torch")
F = torch.nn.functional
torch.manual_seed(11)
INF, NAN = float("inf"), float("nan")
SPECIAL = torch.tensor([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, INF, -INF, NAN, 3e38, 7.0, 100.0, 1e-3,
                        -30.0, 30.0, 1e-30])
X = torch.randn(5, 7)

CASES = {
    "embedding_bag_sum_with_weights_and_an_empty_bag": (
        lambda i, w, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
        (torch.randint(0, 10, (8,)), torch.randn(10, 4), torch.tensor([0, 3, 3, 5]), torch.rand(8))),
    "embedding_bag_max": (lambda i, w, o: F.embedding_bag(i, w, o, mode="max"),
                          (torch.randint(0, 10, (8,)), torch.randn(10, 4), torch.tensor([0, 3, 3, 5]))),
    "embedding_bag_mean_2d_padding": (
        lambda i, w: F.embedding_bag(i, w, mode="mean", padding_idx=2),
        (torch.tensor([[1, 2, 3], [2, 2, 2], [4, 5, 2]]), torch.randn(10, 4))),
    "embedding_bag_last_offset": (
        lambda i, w, o: F.embedding_bag(i, w, o, mode="sum", include_last_offset=True),
        (torch.randint(0, 10, (8,)), torch.randn(10, 4), torch.tensor([0, 2, 6, 8]))),
    "cdist_norms": (lambda a, b: (torch.cdist(a, b), torch.cdist(a, b, p=1), torch.cdist(a, b, p=0),
                                  torch.cdist(a, b, p=INF), torch.cdist(a, b, p=3)),
                    (torch.randn(2, 5, 3), torch.randn(2, 4, 3))),
    "cdist_as_a_product_past_25_rows": (lambda a, b: torch.cdist(a, b),
                                        (torch.randn(40, 16), torch.randn(33, 16))),
    "pdist": (lambda a: (F.pdist(a), F.pdist(a, 1)), (torch.randn(7, 4),)),
    "searchsorted": (lambda s, v: (torch.searchsorted(s, v), torch.searchsorted(s, v, side="right"),
                                   torch.searchsorted(s, v, right=True, out_int32=True)),
                     (torch.tensor([0.0, 1, 1, 1, 2, 3, INF]),
                      torch.tensor([1.0, 0, -1, 3, 5, INF, -INF, 1.5, NAN]))),
    # a NaN value past the end, NaN boundaries (sorted last) below everything; lengths 1, 6
    "searchsorted_with_nan_and_short_lines": (
        lambda s, v: (torch.searchsorted(s, v), torch.searchsorted(s, v, right=True),
                      torch.searchsorted(s[:1], v), torch.bucketize(v, s[:4])),
        (torch.tensor([-1.0, 0, 0, 2, NAN, NAN]), torch.tensor([NAN, 0.0, -0.0, 3, -INF, 2]))),
    "searchsorted_rows_and_sorter": (
        lambda s, v, u: (torch.searchsorted(s, v), torch.searchsorted(u, v[0], sorter=torch.argsort(u))),
        (torch.sort(torch.randn(3, 17), 1)[0], torch.randn(3, 9), torch.randn(17))),
    "median_and_nanmedian": (
        lambda a: (torch.median(a), *torch.median(a, 0), torch.median(a[1]), torch.nanmedian(a[:2]),
                   *torch.nanmedian(a[:2], 1, keepdim=True), *torch.median(X, 1)),
        (torch.tensor([[1.0, NAN, 3, 2], [4.0, 5, -1, 0], [NAN, 2, NAN, 7]]),)),
    "erfc": (torch.special.erfc, (torch.cat([SPECIAL, torch.linspace(-6, 12, 97)]),)),
    "hypot": (torch.hypot, (torch.tensor([3e38, 1e-30, 0.0, -4.0, INF, NAN, -INF, 0.0]),
                            torch.tensor([3e38, 1e-30, -0.0, 3.0, NAN, 1.0, 2.0, 5.0]))),
    "copysign_and_signbit": (
        lambda a, b, i: (torch.copysign(a, b), torch.copysign(a, -0.0), torch.copysign(i, b[:9]),
                         torch.signbit(a), torch.signbit(i)),
        (SPECIAL, SPECIAL.flip(0), torch.randint(-5, 5, (9,)))),
    "histc": (lambda a: (torch.histc(a, 10, -2, 2), torch.histc(a, 7)), (X,)),
    # NaN and infinities counted nowhere, both edges and bin boundaries; constant data's own
    # range widened; many values in few bins; f16
    "histc_edges_and_many_values": (
        lambda a, c, big, h: (torch.histc(a, 10, -2, 2), torch.histc(c, 4),
                              torch.histc(big, 100, -3, 3), torch.histc(h, 10, -1, 1)),
        (torch.tensor([NAN, INF, -INF, -2.0, 2.0, 0.0, 1.9999, -1.99999, 0.4, 0.39999, -0.0]),
         torch.full((5,), 3.0), torch.randn(100003), torch.randn(1001).half())),
    # CHLO's formulas (JAX's answers); at digamma's pole 0, PyTorch's -inf / inf
    "lgamma_digamma_erfinv": (
        lambda a, p: (torch.lgamma(a), torch.digamma(a), torch.erfinv(p)),
        (torch.cat([SPECIAL, torch.tensor([-3.7, 1.5, 2.0, -4.0]), torch.linspace(-10, 20, 151)]),
         torch.cat([torch.tensor([-1.0, 1, 0, -0.0, 0.5, -0.999, 2, NAN, -0.99999]),
                    torch.linspace(-0.999, 0.999, 101)]))),
    # series to 15, the asymptotic expansion past it; i0/i1 scaled back (inf past ~88)
    "bessel_i0_i1_and_scaled": (
        lambda a: (torch.i0(a), torch.special.i0e(a), torch.special.i1(a), torch.special.i1e(a)),
        (torch.cat([SPECIAL, torch.tensor([14.999, 15.0, 15.001, -15.001, 88.0, -90.0]),
                    torch.linspace(-40, 40, 161)]),)),
    # away from the poles (x a non-positive integer): see test_polygamma_and_zeta_at_the_edges
    "polygamma_and_zeta": (
        lambda a, s, q: (torch.polygamma(0, a), torch.polygamma(1, a), torch.polygamma(2, a),
                         torch.special.polygamma(4, a), torch.special.zeta(s, q),
                         torch.special.zeta(2.0, q)),
        (torch.cat([torch.tensor([0.5, 0.25, 1.0, 2.0, 7.5, 3.3, 1e3]),
                    torch.rand(40) * 10 + 0.1]),
         torch.tensor([1.5, 2.0, 3.0, 6.0, 1.0001, 2.5, 4.0, 11.0]),
         torch.tensor([0.25, 1.0, 7.5, 3.0, 1e3, 0.5, 2.0, 0.01]))),
    # uneven windows, overlapping and upsampled (and an even split, torch-mlir's own); NaN indexed by a window's last NaN
    "adaptive_max_pool_uneven": (
        lambda a, b, c, i: (*F.adaptive_max_pool2d(a, (5, 4), return_indices=True),
                            *F.adaptive_max_pool2d(a, (20, 17), return_indices=True),
                            *F.adaptive_max_pool1d(b, 5, return_indices=True),
                            *F.adaptive_max_pool3d(c, (2, 4, 3), return_indices=True),
                            F.adaptive_max_pool2d(a[0], (3, 2)), F.adaptive_max_pool1d(i, 4),
                            *F.adaptive_max_pool2d(a, (13, 1), return_indices=True)),
        (torch.where(torch.rand(2, 3, 13, 11) < 0.03, NAN, torch.randn(2, 3, 13, 11)),
         torch.randn(2, 3, 17), torch.randn(1, 2, 5, 6, 7),
         torch.randint(-9, 9, (2, 3, 10)).float())),
}


def _flat(values) -> list:
    if isinstance(values, (tuple, list)):
        return [v for value in values for v in _flat(value)]
    return [values]


@pytest.mark.parametrize("name", list(CASES))
def test_matches_pytorch(name):
    import pyree.runtime as rt
    fn, args = CASES[name]
    module = rt.load_module(compile_str(import_torch(Fn(fn), *args),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    got = _flat(module["main"](*[a.numpy() for a in args]))
    with torch.no_grad():
        want = [w.numpy() for w in _flat(fn(*args))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)
            zero = w == 0
            np.testing.assert_array_equal(np.signbit(g[zero]), np.signbit(w[zero]))
        else:
            np.testing.assert_array_equal(g, w)


class _Dlrm(torch.nn.Module):
    """DLRM's shape: a dense MLP, embedding bags per sparse feature, pairwise dot products of
    every feature vector (bmm, lower triangle), a top MLP."""

    def __init__(self, dense=13, tables=(100, 57, 31), dim=16):
        super().__init__()
        nn = torch.nn
        self.bottom = nn.Sequential(nn.Linear(dense, 64), nn.ReLU(), nn.Linear(64, dim), nn.ReLU())
        self.bags = nn.ModuleList([nn.EmbeddingBag(n, dim, mode="sum") for n in tables])
        self.features = len(tables) + 1
        pairs = self.features * (self.features - 1) // 2
        self.top = nn.Sequential(nn.Linear(dim + pairs, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, dense, indices, offsets):
        x = self.bottom(dense)
        t = torch.stack([x] + [bag(indices[k], offsets[k]) for k, bag in enumerate(self.bags)], 1)
        z = torch.bmm(t, t.transpose(1, 2))
        i, j = torch.tril_indices(self.features, self.features, -1)
        return torch.sigmoid(self.top(torch.cat([x, z[:, i, j]], 1)))


def test_a_dlrm_style_recommendation_model_matches_pytorch():
    import pyree.runtime as rt
    model = _Dlrm().eval()
    dense = torch.randn(6, 13)
    indices = torch.stack([torch.randint(0, 31, (20,)) for _ in range(3)])
    offsets = torch.tensor([[0, 3, 7, 7, 12, 15], [0, 2, 4, 8, 10, 19], [0, 1, 2, 3, 4, 5]])
    module = rt.load_module(compile_str(import_torch(model, dense, indices, offsets),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    got = np.asarray(module["main"](dense.numpy(), indices.numpy(), offsets.numpy()))
    with torch.no_grad():
        want = model(dense, indices, offsets).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_run_time_counts_of_indices_and_bags_serve_every_size():
    """One module for any number of indices and bags (torch.export's Dim), whose bags are a
    mask's product (pyree's scatters need static sizes); cdist, searchsorted and median on
    run-time rows too."""
    import pyree.runtime as rt
    from torch.export import Dim

    class Lookup(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = torch.nn.EmbeddingBag(50, 8, mode="mean")

        def forward(self, indices, offsets, q, k):
            return (self.bag(indices, offsets), torch.cdist(q, k),
                    torch.searchsorted(torch.sort(k[:, 0])[0], q[:, 0]), torch.median(q, 0)[0])

    model = Lookup().eval()
    dims = {"indices": {0: Dim("n", min=1, max=1000)}, "offsets": {0: Dim("b", min=1, max=100)},
            "q": {0: Dim("r", min=2, max=25)}, "k": {0: Dim("c", min=2, max=25)}}
    example = (torch.randint(0, 50, (12,)), torch.tensor([0, 4, 9]), torch.randn(5, 3),
               torch.randn(7, 3))
    module = rt.load_module(compile_str(import_torch(model, *example, dynamic_shapes=dims),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    for count, offsets, rows, cols in [(7, [0, 2, 2], 5, 7), (30, [0, 5, 9, 20, 29], 25, 20),
                                       (1, [0], 2, 13)]:
        args = (torch.randint(0, 50, (count,)), torch.tensor(offsets), torch.randn(rows, 3),
                torch.randn(cols, 3))
        got = module["main"](*[a.numpy() for a in args])
        with torch.no_grad():
            want = model(*args)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-5, atol=1e-6)


def test_polygamma_and_zeta_at_the_edges():
    """Where PyTorch's own f32 answers are the series' accidents (1.3e15 at the pole -1 for
    n = 1; NaN at +inf for n = 2 but 0 for n = 1), pyree gives the limits: inf (n odd) or -inf
    (n even) at a pole, 0 at +inf, NaN at -inf and NaN; zeta's CHLO domain: inf at x = 1 and at
    q a non-positive integer, NaN for x < 1 and for a negative q with a fractional x."""
    import pyree.runtime as rt

    def f(a, s, q):
        return torch.polygamma(1, a), torch.polygamma(2, a), torch.special.zeta(s, q)

    a = torch.tensor([0.0, -1.0, -3.0, INF, -INF, NAN])
    s = torch.tensor([1.0, 0.5, 2.0, 2.0, 3.5, 2.0, 3.0, 2.0])
    q = torch.tensor([1.0, 1.0, 0.0, -2.0, -1.5, INF, -1.5, NAN])
    module = rt.load_module(compile_str(import_torch(Fn(f), a, s, q),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    one, two, zeta = (np.asarray(r.to_host()) for r in module["main"](a.numpy(), s.numpy(),
                                                                       q.numpy()))
    np.testing.assert_array_equal(one, [INF, INF, INF, 0.0, NAN, NAN])
    np.testing.assert_array_equal(two, [-INF, -INF, -INF, -0.0, NAN, NAN])
    np.testing.assert_array_equal(zeta[[0, 1, 2, 3, 4, 5, 7]], [INF, NAN, INF, INF, NAN, 0.0, NAN])
    want = float(torch.special.zeta(torch.tensor(3.0, dtype=torch.float64),
                                    torch.tensor(-1.5, dtype=torch.float64)))
    np.testing.assert_allclose(zeta[6], want, rtol=1e-5)


def test_polygamma_of_negative_x_to_the_cancellation_of_its_terms():
    """Below 0 the series' terms alternate in sign and cancel (zeta(5, -2.5) sums +-32 to
    -0.0028): f32 keeps about 3 digits there, where PyTorch computes in double."""
    import pyree.runtime as rt

    a = torch.tensor([-0.5, -2.5, -3.7, -0.1, -6.25])
    fn = lambda v: (torch.polygamma(1, v), torch.polygamma(2, v), torch.special.polygamma(4, v))
    module = rt.load_module(compile_str(import_torch(Fn(fn), a),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    for got, want in zip(module["main"](a.numpy()), fn(a.double())):
        np.testing.assert_allclose(np.asarray(got.to_host()), want.numpy(), rtol=2e-3)
