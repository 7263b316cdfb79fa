"""The module fuzz test on the CPU drivers: hostile rewrites of real compiled modules (their
FlatBuffer: bindings, exports, symbols, library references, commands, workgroup counts, push
constants, constants, signatures; re-stamped) are loaded and run on local-task and local-sync in
child processes. None may crash, hang (beyond a host-program loop it rewrote) or return a byte
the call did not write; each is refused or runs to a result or a clean error
(hostile_runs.py)."""

from __future__ import annotations

import pytest
from pyree.compiler import CompileOptions

from .hostile_runs import MUTANTS, compile_bases, fuzz


@pytest.fixture(scope="module")
def bases() -> dict[str, bytes]:
    return compile_bases(CompileOptions(target_backends=["llvm-cpu"]))


@pytest.mark.parametrize("device", ["local-task", "local-sync"])
def test_hostile_modules_neither_crash_hang_nor_leak(bases, device, tmp_path):
    failed, counts = fuzz(device, bases, tmp_path)
    assert not failed, "\n".join(failed)
    # the sweep means something only if many mutants load and run, and many are refused
    assert counts.get("ok", 0) > MUTANTS // 10 and counts.get("refused", 0) > MUTANTS // 10, counts
