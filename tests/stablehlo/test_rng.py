"""stablehlo.rng_bit_generator against XLA on CPU, bit for bit: JAX's ``rng_bit_generator``
for its 2-word states, XLA itself (the StableHLO text compiled by JAX's CPU client) for what
JAX cannot ask for (PHILOX's 3-word state, f32 and i32 outputs)."""

from __future__ import annotations

import functools

import numpy as np
import pyree.runtime as rt
import pytest
from compiled import compiled
from pyree.compiler import compile_str
from pyree.compiler.errors import CompileError
from pyree.compiler.options import CompileOptions
from tooling import require_module

jax = require_module("jax")
jax.config.update("jax_platforms", "cpu")
jnp, lax = jax.numpy, jax.lax

ALGORITHMS = {"THREE_FRY": lax.RandomAlgorithm.RNG_THREE_FRY,
              "PHILOX": lax.RandomAlgorithm.RNG_PHILOX,
              "DEFAULT": lax.RandomAlgorithm.RNG_DEFAULT}
SHAPES = [(7, 13), (1,), (5, 3, 2), (), (3, 1, 5)]
# Counters near 2**64 - 1 wrap inside the output (PHILOX carries into its high word).
KEYS = [np.array(k, np.uint32) for k in (
    [0, 0, 0, 0], [1, 2, 3, 4], [0x9E3779B9, 0x7F4A7C15, 0xFFFFFFF0, 0xFFFFFFFF],
    [0xDEADBEEF, 0x01234567, 0x89ABCDEF, 0x00000001])]
NO_DEMOTION = CompileOptions(target_backends=["llvm-cpu"], demote_i64_to_i32=False)


def tensor(dtype: str, shape) -> str:
    return f"tensor<{''.join(f'{n}x' for n in shape)}{dtype}>"


def program(algorithm: str, state: str, dtype: str, shape) -> str:
    out = tensor(dtype, shape)
    return f"""func.func @main(%s: {state}) -> ({state}, {out}) {{
  %a, %b = stablehlo.rng_bit_generator %s, algorithm = {algorithm} : ({state}) -> ({state}, {out})
  return %a, %b : {state}, {out}
}}"""


def run(text: str, state: np.ndarray, options=NO_DEMOTION) -> list[np.ndarray]:
    module = rt.load_module(compiled(text, options), device="local-task")
    return [np.asarray(o.to_host()) for o in module["main"](state)]


@functools.cache
def _jax_generator(algorithm: str, dtype, shape):
    """One jitted generator per (algorithm, dtype, shape): XLA compiles it once for every key
    (a fresh lambda each call was a fresh XLA compile: 160 of them in this file)."""
    return jax.jit(lambda k: lax.rng_bit_generator(k, shape, dtype=dtype,
                                                   algorithm=ALGORITHMS[algorithm]))


def jax_bits(key: np.ndarray, algorithm: str, dtype, shape) -> list[np.ndarray]:
    with jax.enable_x64(True):
        return [np.asarray(x) for x in _jax_generator(algorithm, np.dtype(dtype), tuple(shape))(key)]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("dtype", ["ui32", "ui64"])
def test_matches_jax(algorithm, dtype):
    """State ``tensor<2xui64>``, JAX's key viewed as two 64-bit words."""
    np_dtype = np.uint32 if dtype == "ui32" else np.uint64
    for shape in SHAPES:
        text = program(algorithm, "tensor<2xui64>", dtype, shape)
        module = rt.load_module(compiled(text, NO_DEMOTION), device="local-task")
        for key in KEYS:
            state, bits = (np.asarray(o.to_host()) for o in module["main"](key.view(np.uint64)))
            want_state, want_bits = jax_bits(key, algorithm, np_dtype, shape)
            assert bits.dtype == want_bits.dtype and bits.shape == want_bits.shape
            np.testing.assert_array_equal(bits, want_bits, err_msg=f"{shape} {key}")
            np.testing.assert_array_equal(state, want_state.view(np.uint64))


def pairs(words: np.ndarray) -> np.ndarray:
    """64-bit state words as the 32-bit pairs of a ``tensor<4xi32>`` state, as IREE's e2e tests
    lay them out: the key (low, high), each counter word (high, low)."""
    halves = np.ascontiguousarray(words, np.uint64).view(np.uint32).reshape(-1, 2).copy()
    halves[1:] = halves[1:, ::-1]
    return halves.reshape(-1)


def words(pairs32: np.ndarray) -> np.ndarray:
    """The inverse of ``pairs``."""
    halves = np.ascontiguousarray(pairs32).view(np.uint32).reshape(-1, 2).copy()
    halves[1:] = halves[1:, ::-1]
    return halves.reshape(-1).view(np.uint64)


@pytest.mark.parametrize("algorithm", ["THREE_FRY", "PHILOX"])
def test_32_bit_pairs_state_survives_i64_demotion(algorithm):
    """A ``tensor<4xui32>`` state, with the default options that demote i64 for StableHLO
    input: XLA's bits for the same key and counter, and the new state written back in the order
    it was read (so that it reads back as the next counter)."""
    text = program(algorithm, "tensor<4xui32>", "ui32", (5, 3))
    for key in KEYS:
        state, bits = run(text, pairs(key.view(np.uint64)),
                          CompileOptions(target_backends=["llvm-cpu"]))
        want_state, want_bits = jax_bits(key, algorithm, np.uint32, (5, 3))
        np.testing.assert_array_equal(bits, want_bits)
        np.testing.assert_array_equal(words(state), want_state.view(np.uint64))


def test_the_program_jax_prints():
    """JAX's own text: the key crosses bitcast_convert 2x2xui32 <-> 2xui64 (the same bytes, a
    View); compiled with i64 kept (--iree-input-demote-i64-to-i32=false), as the state needs."""
    key = KEYS[1]
    f = lambda k: lax.rng_bit_generator(k, (3, 5), dtype=np.uint32,  # noqa: E731
                                        algorithm=ALGORITHMS["THREE_FRY"])
    state, bits = run(jax.jit(f).lower(key).as_text(), key)
    want_state, want_bits = jax_bits(key, "THREE_FRY", np.uint32, (3, 5))
    np.testing.assert_array_equal(bits, want_bits)
    np.testing.assert_array_equal(state, want_state)


def xla_bits(text: str, state: np.ndarray) -> list[np.ndarray]:
    """``text`` compiled and run by XLA itself (JAX's CPU client)."""
    with jax.enable_x64(True):
        return [np.asarray(x) for x in _xla_executable(text).execute([jax.device_put(state)])]


@functools.cache
def _xla_executable(text: str):
    """XLA's executable of ``text``, compiled once for all the states a test runs it on."""
    import jax.extend.backend

    backend = jax.extend.backend.get_backend("cpu")
    with jax.enable_x64(True):
        return backend.compile_and_load(text, backend.devices()[:1])


@pytest.mark.parametrize("dtype", ["ui32", "ui64", "f32", "i32", "f64", "i64"])
@pytest.mark.parametrize("algorithm", ["THREE_FRY", "PHILOX"])
def test_matches_xla_other_states_and_types(algorithm, dtype):
    """PHILOX's 3-word state (128-bit counter, carried) and float / signed outputs: the same
    bits as the unsigned ones."""
    words = 3 if algorithm == "PHILOX" else 2
    states = [np.array([1, 2, 3][:words], np.uint64),
              np.array([5, 2**64 - 3, 7][:words], np.uint64),
              np.array([9, 2**64 - 1, 2**64 - 1][:words], np.uint64)]
    for shape in [(7, 13), (5,)]:
        text = "module @m {\n" + program(algorithm, f"tensor<{words}xui64>", dtype, shape) \
            .replace("func.func @main", "func.func public @main") + "\n}"
        for state in states:
            got, want = run(text, state), xla_bits(text, state)
            for g, w in zip(got, want):  # XLA hands f32 / i32 results back as ui32
                assert g.itemsize == w.itemsize and g.shape == w.shape
                np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))


NARROW_SHAPES = [(7, 13), (3, 5, 1), ()]


@pytest.mark.parametrize("dtype", ["ui8", "ui16"])
@pytest.mark.parametrize("algorithm", ["THREE_FRY", "PHILOX"])
def test_narrow_outputs_match_jax(algorithm, dtype):
    """8- and 16-bit outputs: the low bits of the 32-bit output of the same shape, the state
    moved as for that one (XLA's narrow generators), at shapes with odd or unit dims."""
    np_dtype = np.uint8 if dtype == "ui8" else np.uint16
    for shape in NARROW_SHAPES:
        module = rt.load_module(compiled(program(algorithm, "tensor<2xui64>", dtype, shape),
                                            NO_DEMOTION), device="local-task")
        for key in (KEYS[1], KEYS[2]):
            state, bits = (np.asarray(o.to_host()) for o in module["main"](key.view(np.uint64)))
            want_state, want_bits = jax_bits(key, algorithm, np_dtype, shape)
            assert bits.dtype == want_bits.dtype and bits.shape == want_bits.shape
            np.testing.assert_array_equal(bits, want_bits, err_msg=f"{shape} {key}")
            np.testing.assert_array_equal(state, want_state.view(np.uint64))


@pytest.mark.parametrize("dtype, algorithm", [("i8", "PHILOX"), ("i16", "THREE_FRY"),
                                               ("f16", "PHILOX"), ("bf16", "THREE_FRY")])
def test_signed_and_float_narrow_outputs_carry_the_unsigned_bits(dtype, algorithm):
    shape = (5, 3)
    unsigned = np.uint8 if dtype == "i8" else np.uint16
    _, bits = run(program(algorithm, "tensor<2xui64>", dtype, shape), KEYS[3].view(np.uint64))
    np.testing.assert_array_equal(bits.view(unsigned),
                                  jax_bits(KEYS[3], algorithm, unsigned, shape)[1])


@pytest.mark.parametrize("algorithm, state_type, count", [
    ("THREE_FRY", "tensor<2xi64>", 2), ("PHILOX", "tensor<3xi64>", 3),
    ("THREE_FRY", "tensor<4xi32>", 2), ("PHILOX", "tensor<6xi32>", 3),
    ("PHILOX", "tensor<6xui32>", 3), ("PHILOX", "tensor<2xi64>", 2),
])
def test_signed_and_32_bit_states_are_the_same_bits_as_ui64(algorithm, state_type, count):
    """XLA takes ui64 states only: an i64 state is read as its bits, a 32-bit one as pairs
    (``pairs``). Counters near 2**64 carry (PHILOX into its high word)."""
    ui64 = "module @m {\n" + program(algorithm, f"tensor<{count}xui64>", "ui32", (7, 3)) \
        .replace("func.func @main", "func.func public @main") + "\n}"
    text = program(algorithm, state_type, "ui32", (7, 3))
    dtype = {"i64": np.int64, "i32": np.int32, "ui32": np.uint32}[state_type[9:-1]]
    as_input, as_words = (lambda w: w.view(dtype), lambda s: s.view(np.uint64)) \
        if dtype == np.int64 else (lambda w: pairs(w).view(dtype), words)
    for state in (np.array([5, 2**64 - 3, 7][:count], np.uint64),
                  np.array([2**63 + 9, 2**64 - 1, 2**64 - 1][:count], np.uint64)):
        got_state, got = run(text, as_input(state))
        want_state, want = xla_bits(ui64, state)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(as_words(got_state), want_state)


def test_constant_state_folds_to_the_same_bits():
    """A constant key: the Generics are evaluated at compile time (``kernel.evaluate``)."""
    key = KEYS[2]
    words = ", ".join(str(int(w)) for w in key.view(np.uint64))
    for algorithm in ("THREE_FRY", "PHILOX"):
        text = f"""func.func @main() -> (tensor<2xui64>, tensor<3x3xui32>) {{
  %s = stablehlo.constant dense<[{words}]> : tensor<2xui64>
  %a, %b = stablehlo.rng_bit_generator %s, algorithm = {algorithm} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3x3xui32>)
  return %a, %b : tensor<2xui64>, tensor<3x3xui32>
}}"""
        module = rt.load_module(compiled(text, NO_DEMOTION), device="local-task")
        state, bits = (np.asarray(o.to_host()) for o in module["main"]())
        want_state, want_bits = jax_bits(key, algorithm, np.uint32, (3, 3))
        np.testing.assert_array_equal(bits, want_bits)
        np.testing.assert_array_equal(state, want_state.view(np.uint64))


def test_generic_form_parses():
    text = """func.func @main(%s: tensor<2xui64>) -> (tensor<2xui64>, tensor<6xui32>) {
  %a, %b = "stablehlo.rng_bit_generator"(%s) {rng_algorithm = #stablehlo<rng_algorithm PHILOX>} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<6xui32>)
  return %a, %b : tensor<2xui64>, tensor<6xui32>
}"""
    key = KEYS[1]
    state, bits = run(text, key.view(np.uint64))
    np.testing.assert_array_equal(bits, jax_bits(key, "PHILOX", np.uint32, (6,))[1])


@pytest.mark.parametrize("state, dtype, message", [
    ("tensor<3xui64>", "ui32", "THREE_FRY needs a state of 2 64-bit words, not 3"),
    ("tensor<2xui64>", "i1", "THREE_FRY with i1 outputs is not supported"),
    ("tensor<3xui32>", "ui32", "state must be a 1-D tensor of 64-bit integers"),
])
def test_refusals_name_the_problem(state, dtype, message):
    with pytest.raises(CompileError, match=message):
        compile_str(program("THREE_FRY", state, dtype, (4,)), NO_DEMOTION)


def test_rbg_keys_keep_their_64_bit_words():
    """JAX's ``rbg`` keys reach the generator as 64-bit words: the default i64 demotion would
    halve them into another key, so it is refused naming the flag; without it, JAX's numbers."""
    def f(x):
        return jax.random.uniform(jax.random.key(3, impl="rbg"), (4, 5)) + x
    x = np.zeros((4, 5), np.float32)
    text = jax.jit(f).lower(x).as_text()
    with pytest.raises(CompileError, match=r"reads its state tensor<2xui64> as 64-bit words.*"
                                           r"--iree-input-demote-i64-to-i32=false"):
        compile_str(text, CompileOptions(target_backends=["llvm-cpu"]))
    module = rt.load_module(compiled(text, NO_DEMOTION), device="local-task")
    np.testing.assert_array_equal(module["main"](x).to_host(), np.asarray(jax.jit(f)(x)))
