"""Fuzzing the reader: damaged files give ModuleError; re-stamped mutations give ModuleError or
verify cleanly -- never another exception, a crash or a hang."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .module_factory import arith_builder, restamp

# A small module with every table kind; the "library" is never loaded, only verified.
MODULE = arith_builder(b"\x7fELF" + bytes(60), np.ones((37, 53), np.float32)).finish()
ROOT_SIZE = int.from_bytes(MODULE[-40:-32], "little")

flips = st.lists(st.tuples(st.integers(0, ROOT_SIZE - 1), st.integers(1, 255)), min_size=1,
                 max_size=8)


def _flip(data: bytes, changes) -> bytearray:
    out = bytearray(data)
    for position, mask in changes:
        out[position] ^= mask
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(position=st.integers(0, len(MODULE) - 1), mask=st.integers(1, 255))
def test_raw_mutation_is_refused(position, mask):
    with pytest.raises(rt.ModuleError):
        rt.read_module(bytes(_flip(MODULE, [(position, mask)])))


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(cut=st.integers(0, len(MODULE) - 1))
def test_truncation_is_refused(cut):
    with pytest.raises(rt.ModuleError):
        rt.read_module(MODULE[:cut])


def _read_or_refuse(data: bytes) -> None:
    try:
        rt.read_module(data)
    except rt.ModuleError:
        pass


@settings(max_examples=2500, deadline=None, suppress_health_check=list(HealthCheck))
@given(changes=flips)
def test_restamped_flips_verify_or_are_refused(changes):
    _read_or_refuse(restamp(_flip(MODULE, changes)))


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(start=st.integers(0, ROOT_SIZE - 1), length=st.integers(1, 64),
       fill=st.sampled_from([0x00, 0xFF, 0x7F, 0x80]))
def test_restamped_overwrites_verify_or_are_refused(start, length, fill):
    data = bytearray(MODULE)
    end = min(start + length, ROOT_SIZE)
    data[start:end] = bytes([fill]) * (end - start)
    _read_or_refuse(restamp(data))
