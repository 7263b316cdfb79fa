"""The driver kit checks every recorded command before a driver sees it, for every Python driver:
bindings inside the binding table, a dispatch's export present with as many and as long bindings
as it declares, copies of equal lengths, fills whose pattern tiles the range. A bad command
buffer is refused with the command, the kernel and the sizes named."""

from __future__ import annotations

import pyree.runtime as rt
import pytest
from pyree.runtime.hal.ffi import ffi

from .module_factory import N

DISPATCH, COPY, FILL = 0, 1, 2
LONG = N * 4  # what the test kernels declare they touch per binding


def _command(kind, bindings, executable=0, ordinal=0, pattern_length=4) -> dict:
    """A pyree_hal_command_t initializer; the dict keeps its bindings array alive."""
    array = ffi.new("pyree_hal_binding_t[]", [{"slot": s, "offset": 0, "length": n}
                                               for s, n in bindings] or 1)
    return {"kind": kind, "export_ordinal": ordinal, "executable": executable,
            "binding_count": len(bindings), "bindings": array,
            "fill_pattern": 0x01020304, "fill_pattern_length": pattern_length}


CASES = {
    "slot outside the table": (
        lambda exe: _command(COPY, [(0, 16), (7, 16)]),
        "INVALID_ARGUMENT: command 0 (copy): binding slot 7 is outside the 3-entry binding table"),
    "missing export": (
        lambda exe: _command(DISPATCH, [(0, LONG)] * 3, exe, ordinal=9),
        "command 0 (dispatch): export 9 does not exist (3 exports)"),
    "wrong binding count": (
        lambda exe: _command(DISPATCH, [(0, LONG)] * 2, exe),
        "command 0 (dispatch): kernel 'add_f32' takes 3 bindings, 2 given"),
    "binding too short": (
        lambda exe: _command(DISPATCH, [(0, LONG), (1, LONG), (2, LONG - 4)], exe),
        f"OUT_OF_RANGE: command 0 (dispatch): binding 2 of kernel 'add_f32' is {LONG - 4} "
        f"bytes, the kernel touches {LONG}"),
    "copy of unequal lengths": (
        lambda exe: _command(COPY, [(0, 16), (1, 8)]),
        "command 0 (copy): copies 16 bytes into 8"),
    "copy with one binding": (
        lambda exe: _command(COPY, [(0, 16)]),
        "command 0 (copy): needs 2 bindings, got 1"),
    "fill pattern that does not tile": (
        lambda exe: _command(FILL, [(0, 16)], pattern_length=3),
        "command 0 (fill): fill of 16 bytes with a 3-byte pattern"),
    "unknown kind": (
        lambda exe: _command(9, []),
        "command 0: unknown command kind 9"),
}


@pytest.mark.parametrize("device", ["local-sync", "local-task"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_commands_are_refused_by_name(arith_bytes, device, case):
    module = rt.load_module(arith_bytes, device=device)
    make, message = CASES[case]
    fields = make(module.executable.handle)
    commands = ffi.new("pyree_hal_command_t[]", [fields])
    with pytest.raises(rt.DriverError, match="record command buffer: ") as error:
        module.device.create_command_buffer(commands, 1, 3)
    assert message in str(error.value)


def test_a_good_command_buffer_still_records(arith_bytes):
    module = rt.load_module(arith_bytes, device="local-sync")
    fields = _command(DISPATCH, [(0, LONG), (1, LONG), (2, LONG)], module.executable.handle)
    commands = ffi.new("pyree_hal_command_t[]", [fields])
    assert module.device.create_command_buffer(commands, 1, 3).handle
