"""JAX's linear algebra as it lowers for the CPU (LAPACK's potrf, getrf and trsm as custom
calls, the rest in StableHLO around them: stablehlo/lapack.py), and as jax.export writes it for
CUDA (cuSOLVER's calls, stablehlo.triangular_solve) and TPU, against JAX: Cholesky, QR, eigh,
SVD, LU
with partial pivoting (rectangular and batched), every triangular solve (sides, triangles,
transposes, unit diagonals), solve, inv, det and slogdet (singular included), and a Gaussian
log-density. On local-task; on Vulkan and cuda under their markers."""

from __future__ import annotations

import itertools

import numpy as np
import pyree.runtime as rt
import pytest
from jax_runs import DEVICES, run_both
from pyree.compiler import CompileOptions, compile_str
from tooling import require_module

jax = require_module("jax")
jnp, scipy_linalg, lax_linalg = jax.numpy, jax.scipy.linalg, jax.lax.linalg
jax.config.update("jax_platforms", "cpu")

RNG = np.random.default_rng(17)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


EYE5 = 5 * np.eye(5, dtype=np.float32)
A, B = normal(5, 5) + EYE5, normal(5, 3)
SPD = (lambda m: (m @ m.T + EYE5).astype(np.float32))(normal(5, 5))
BATCH_A, BATCH_B = normal(3, 6, 6) + 2 * np.eye(6, dtype=np.float32), normal(3, 6, 2)
# Positive definite, not (its third leading minor), NaN on the diagonal, zero past the first:
# LAPACK's info says which, and JAX NaN-fills each factor whose info is not 0.
NOT_ALL_PD = np.stack([SPD, SPD - 40 * np.diag(np.eye(5, dtype=np.float32)[2]),
                       np.where(np.eye(5, dtype=bool) & (np.arange(5) == 4), np.nan, SPD),
                       np.diag(np.array([1, 0, 1, 1, 1], np.float32))])

CASES = {
    "cholesky": (jnp.linalg.cholesky, (SPD,)),
    "cholesky_upper": (lambda a: scipy_linalg.cholesky(a, lower=False), (SPD,)),
    "cholesky_of_matrices_not_positive_definite": (jnp.linalg.cholesky, (NOT_ALL_PD,)),
    "cholesky_of_empty_matrices": (jnp.linalg.cholesky, (np.zeros((3, 0, 0), np.float32),)),
    "cho_solve": (lambda a, b: scipy_linalg.cho_solve(scipy_linalg.cho_factor(a), b), (SPD, B)),
    **{f"solve_triangular_{'lower' if lo else 'upper'}_trans{t}{'_unit' if u else ''}": (
        lambda a, b, lo=lo, t=t, u=u: scipy_linalg.solve_triangular(a, b, lower=lo, trans=t,
                                                                     unit_diagonal=u), (A, B))
       for lo, t, u in itertools.product([True, False], [0, 1], [False, True])},
    "solve_triangular_batched": (lambda a, b: scipy_linalg.solve_triangular(a, b, lower=True),
                                 (BATCH_A, BATCH_B)),
    "triangular_solve_right": (lambda a, b: lax_linalg.triangular_solve(
        a, b, left_side=False, lower=True), (A, normal(3, 5))),
    "triangular_solve_right_transposed": (lambda a, b: lax_linalg.triangular_solve(
        a, b, left_side=False, lower=False, transpose_a=True), (A, normal(3, 5))),
    "solve": (jnp.linalg.solve, (A, B)),
    "solve_batched": (jnp.linalg.solve, (BATCH_A, BATCH_B)),
    "inv_with_pivoting": (jnp.linalg.inv, (normal(6, 6),)),
    "det_and_slogdet": (lambda a: (jnp.linalg.det(a), *jnp.linalg.slogdet(a)), (normal(5, 5),)),
    "det_batched": (jnp.linalg.det, (normal(4, 3, 3),)),
    "det_of_a_singular_matrix": (jnp.linalg.det, (np.array([[1, 2], [2, 4]], np.float32),)),
    "lu": (lambda a: scipy_linalg.lu(a), (normal(5, 5),)),
    "lu_of_a_tall_matrix": (lambda a: lax_linalg.lu(a), (normal(6, 4),)),
    "lu_solve": (lambda a, b: scipy_linalg.lu_solve(scipy_linalg.lu_factor(a), b), (A, B)),
    "qr": (jnp.linalg.qr, (normal(5, 4),)),
    "qr_of_a_wide_matrix_complete": (lambda a: jnp.linalg.qr(a, mode="complete"), (normal(3, 5),)),
    "qr_r_batched_with_a_zero_column": (lambda a: jnp.linalg.qr(a, mode="r"), (
        np.concatenate([normal(2, 6, 6), np.zeros((1, 6, 6), np.float32)], 0),)),
    "gaussian_log_density": (lambda x, m, c: jax.scipy.stats.multivariate_normal.logpdf(x, m, c),
                             (normal(4, 5), normal(5), SPD)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_matches_jax(name, device):
    f, args = CASES[name]
    got, want = run_both(jax, device, f, *args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)


def test_past_64_rows_the_factorization_is_refused_by_name():
    text = jax.jit(jnp.linalg.solve).lower(np.eye(65, dtype=np.float32),
                                           np.ones((65, 1), np.float32)).as_text()
    with pytest.raises(Exception, match="lapack_sgetrf_ffi of 65x65 matrices is not supported"):
        compile_str(text, CompileOptions(target_backends=["llvm-cpu"]))


EXPORTED = {
    "solve_with_pivoting": (jnp.linalg.solve, (normal(6, 6), normal(6, 2))),
    "inv": (jnp.linalg.inv, (normal(6, 6),)),
    "det_batched": (jnp.linalg.det, (normal(3, 5, 5),)),
    "cholesky": (jnp.linalg.cholesky, (SPD,)),
    "solve_triangular_transposed": (lambda a, b: scipy_linalg.solve_triangular(
        a, b, trans=1, lower=True), (A, B)),
    "lu": (lambda a: lax_linalg.lu(a), (normal(5, 5),)),
    "qr": (jnp.linalg.qr, (normal(5, 4),)),
}


@pytest.mark.parametrize("platform", ["cuda", "tpu"])
@pytest.mark.parametrize("name", list(EXPORTED))
def test_programs_jax_exports_for_other_platforms_run_here(name, platform):
    """``jax.export(..., platforms=[...])``: for CUDA cuSOLVER's getrf, potrf, geqrf and orgqr,
    cu_lu_pivots_to_permutation and stablehlo.triangular_solve; for TPU XLA's LuDecomposition
    and Qr.
    Compiled for llvm-cpu and run on local-task."""
    f, args = EXPORTED[name]
    text = jax.export.export(jax.jit(f), platforms=[platform])(*args).mlir_module()
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    got = module["main"](*args)
    got = got if isinstance(got, tuple) else (got,)
    want = jax.jit(f)(*args)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-3, atol=1e-4)


def _symmetric(*shape):
    m = normal(*shape)
    return (m + np.swapaxes(m, -1, -2)).astype(np.float32)


@pytest.mark.parametrize("platform", ["cpu", "cuda", "tpu"])
@pytest.mark.parametrize("a", [_symmetric(5, 5), _symmetric(3, 7, 7), _symmetric(12, 12),
                               _symmetric(1, 1), np.diag([2.0, 1, 2, 3]).astype(np.float32)],
                         ids=["5x5", "batched", "12x12", "1x1", "repeated"])
def test_eigh_values_match_jax_and_its_vectors_do_up_to_sign(a, platform):
    """LAPACK's syevd, cuSOLVER's and XLA's Eigh, as cyclic Jacobi. Eigenvectors are unique
    only up to sign (and within a repeated eigenvalue's space), as LAPACK's own: checked as
    an orthonormal basis that rebuilds the matrix, and against JAX's where values are apart."""
    text = jax.export.export(jax.jit(jnp.linalg.eigh), platforms=[platform])(a).mlir_module()
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    w, v = (np.asarray(r) for r in module["main"](a))
    want_w, want_v = (np.asarray(r) for r in jax.jit(jnp.linalg.eigh)(a))
    scale = np.abs(a).max()
    np.testing.assert_allclose(w, want_w, atol=1e-5 * scale)
    np.testing.assert_allclose(v @ (w[..., None] * np.swapaxes(v, -1, -2)), a, atol=1e-5 * scale)
    np.testing.assert_allclose(np.swapaxes(v, -1, -2) @ v, np.broadcast_to(
        np.eye(a.shape[-1]), v.shape), atol=1e-5)
    if len(np.unique(want_w.round(4))) == want_w.size:  # apart: each vector is JAX's, or minus
        np.testing.assert_allclose(np.abs(np.einsum("...ij,...ij->...j", v, want_v)), 1.0,
                                   atol=1e-4)


@pytest.mark.parametrize("case", ["square", "tall", "wide", "batched", "full_tall", "full_wide",
                                  "full_batched"])
def test_svd_values_match_jax_and_its_vectors_do_up_to_sign(case):
    """LAPACK's gesdd as one-sided Jacobi (of A^T when A is wide; a full U or V^T of a
    non-square matrix completed by a Householder QR): singular values against JAX, orthonormal
    U and V^T rebuilding A, and U's first columns JAX's up to sign."""
    a = {"square": normal(5, 5), "tall": normal(6, 4), "wide": normal(3, 7),
         "batched": normal(2, 5, 3), "full_tall": normal(5, 3), "full_wide": normal(3, 5),
         "full_batched": normal(2, 6, 4)}[case]
    full = case == "square" or case.startswith("full")
    f = jnp.linalg.svd if full else (lambda x: jnp.linalg.svd(x, full_matrices=False))
    module = rt.load_module(compile_str(jax.jit(f).lower(a).as_text(),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    u, s, vt = (np.asarray(r) for r in module["main"](a))
    want_u, want_s, want_vt = (np.asarray(r) for r in jax.jit(f)(a))
    assert (u.shape, s.shape, vt.shape) == (want_u.shape, want_s.shape, want_vt.shape)
    k = s.shape[-1]
    np.testing.assert_allclose(s, want_s, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vt[..., :k, :], a,
                               atol=2e-6 * np.abs(a).max())
    for basis in (np.swapaxes(u, -1, -2) @ u, vt @ np.swapaxes(vt, -1, -2)):
        np.testing.assert_allclose(basis, np.broadcast_to(np.eye(basis.shape[-1]), basis.shape),
                                   atol=2e-6)
    np.testing.assert_allclose(np.abs(np.einsum("...ij,...ij->...j", u[..., :k],
                                                want_u[..., :k])), 1.0, atol=1e-5)


SVD_USERS = {
    "singular_values": lambda a: jnp.linalg.svd(a, compute_uv=False),
    "pinv": jnp.linalg.pinv,
    "lstsq": lambda a: jnp.linalg.lstsq(a, jnp.ones((a.shape[0], 2)))[0],
    "rank_norms_cond": lambda a: (jnp.linalg.matrix_rank(a), jnp.linalg.norm(a, 2),
                                  jnp.linalg.norm(a, "nuc"), jnp.linalg.cond(a)),
}


@pytest.mark.parametrize("name", list(SVD_USERS))
@pytest.mark.parametrize("shape", [(6, 4), (3, 5)], ids=["tall", "wide"])
def test_what_builds_on_the_svd_matches_jax(name, shape):
    f = SVD_USERS[name]
    a = normal(*shape)
    module = rt.load_module(compile_str(jax.jit(f).lower(a).as_text(),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    got = module["main"](a)
    got = got if isinstance(got, tuple) else (got,)
    want = jax.jit(f)(a)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)
