"""SPIR-V binaries, before vkCreateShaderModule: a whole module with the entry points it names,
each using only the bindings its pipeline layout will have.

Drivers parse SPIR-V trusting its structure; Mesa's lavapipe hangs on a module cut by one word
(the last OpFunctionEnd). Checked here: the header (magic, version 1.0-1.6, id bound, reserved
schema word), every instruction's word count inside the image, functions closed by
OpFunctionEnd with every block ended by a terminator, and an OpEntryPoint for the GLCompute
execution model per export. A shader that reaches a descriptor its pipeline layout lacks reads
through whatever pointer the driver finds there (lavapipe crashed or hung on an export table
shortened by one binding), so each entry point's descriptors -- the decorated variables its
functions, and those they call, name -- must be bindings 0..n-1 of set 0 for its n bindings.
An operand is taken for a variable's use wherever its position is not a literal: that errs
towards refusing.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from bisect import bisect_right
from itertools import compress

from pyree.runtime.hal.images import ImageError

MAGIC = 0x07230203
MAX_ID_BOUND = 0x3FFFFF   # SPIR-V's universal limit
OP_ENTRY_POINT, OP_FUNCTION, OP_FUNCTION_END, OP_LABEL = 15, 54, 56, 248
OP_DECORATE, OP_VARIABLE, OP_FUNCTION_CALL = 71, 59, 57
DECORATION_BINDING, DECORATION_DESCRIPTOR_SET = 33, 34
# opcode -> the operand words (from the opcode word) that may name a variable, where the rest are
# literals or never one: OpExtInst, OpLoad, OpStore, OpCopyMemory, OpVectorShuffle,
# OpCompositeExtract, OpCompositeInsert, OpLoopMerge, OpSelectionMerge, OpSwitch
_OPERANDS = {12: slice(5, None), 61: slice(3, 4), 62: slice(1, 3), 63: slice(1, 3),
             79: slice(3, 5), 81: slice(3, 4), 82: slice(3, 5), 246: slice(0, 0),
             247: slice(0, 0), 251: slice(1, 2)}
_ALL = slice(1, None)
# OpBranch, OpBranchConditional, OpSwitch, OpKill, OpReturn, OpReturnValue, OpUnreachable,
# OpTerminateInvocation
TERMINATORS = frozenset({249, 250, 251, 252, 253, 254, 255, 4416})
# the opcodes the structure and descriptor checks look at
_STRUCTURE = frozenset({OP_ENTRY_POINT, OP_FUNCTION, OP_FUNCTION_END, OP_LABEL, OP_DECORATE,
                        OP_VARIABLE, OP_FUNCTION_CALL, *TERMINATORS})
GL_COMPUTE = 5


# (SHA-256 of the code, entries) of the checks passed in this process, oldest first: the runtime
# checks a module's SPIR-V while its device starts (vm/executables.py, ``precheck``), and the
# driver's check of the same code at load is then a look-up. A few: a process loads few
# distinct executables at once.
_PASSED: dict[tuple[bytes, tuple], None] = {}
_REMEMBERED = 16
_PASSED_LOCK = threading.Lock()


def check_spirv(code: bytes, entries: list[tuple[str, int]]) -> None:
    """Raises ImageError unless ``code`` is a structurally whole SPIR-V module with a GLCompute
    entry point for each (name, n) of ``entries`` that reaches only descriptors 0..n-1 of set 0.
    Code and entries that passed before in this process pass at once."""
    key = hashlib.sha256(code).digest(), tuple(entries)
    if key in _PASSED:
        return
    _check(code, entries)
    with _PASSED_LOCK:  # loads on other threads insert and evict too
        _PASSED[key] = None
        if len(_PASSED) > _REMEMBERED:
            _PASSED.pop(next(iter(_PASSED)), None)


def _check(code: bytes, entries: list[tuple[str, int]]) -> None:
    if len(code) < 20 or len(code) % 4:
        raise ImageError(f"the SPIR-V is {len(code)} bytes: not a whole number of words after a "
                         f"5-word header")
    words = struct.unpack(f"<{len(code) // 4}I", code)
    magic, version, _generator, bound, schema = words[:5]
    if magic != MAGIC:
        raise ImageError(f"the SPIR-V magic is {magic:#010x}, not {MAGIC:#010x}")
    if version & 0xFF0000FF or (version >> 16) & 0xFF != 1 or (version >> 8) & 0xFF > 6:
        raise ImageError(f"the SPIR-V version word {version:#010x} is not 1.0-1.6")
    if not 0 < bound <= MAX_ID_BOUND or schema:
        raise ImageError(f"the SPIR-V header's id bound {bound} or schema word {schema} is invalid")
    starts = _starts(words)                     # every instruction's first word
    opcodes = [words[i] & 0xFFFF for i in starts]
    computes: dict[str, int] = {}               # entry point name -> its function
    decorations: dict[int, dict[int, int]] = {}  # id -> {Binding or DescriptorSet: value}
    variables: set[int] = set()
    calls: dict[int, set[int]] = {}             # function -> the functions it calls
    functions: list[tuple[int, int]] = []       # (first word, function id), in order
    function, in_block = None, False
    # only the instructions of _STRUCTURE: the others change nothing below
    for k in compress(range(len(starts)), map(_STRUCTURE.__contains__, opcodes)):
        i, opcode = starts[k], opcodes[k]
        count = words[i] >> 16
        if function is not None and opcode != OP_FUNCTION_END:
            if opcode == OP_LABEL:
                if in_block:
                    raise ImageError(f"the block at word {i} starts inside another block")
                in_block = True
            elif opcode in TERMINATORS:
                if not in_block:
                    raise ImageError(f"the terminator at word {i} ends no block")
                in_block = False
            elif opcode == OP_FUNCTION_CALL and count >= 4:
                calls.setdefault(function, set()).add(words[i + 3])
            elif opcode == OP_FUNCTION:
                raise ImageError(f"the function at word {i} starts inside another function")
        elif opcode == OP_FUNCTION:
            if count < 5:
                raise ImageError(f"the function at word {i} is malformed")
            function, in_block = words[i + 2], False
            functions.append((i, function))
        elif opcode == OP_FUNCTION_END:
            if function is None or in_block:
                raise ImageError(f"OpFunctionEnd at word {i} ends no function or an open block")
            function = None
        elif opcode == OP_ENTRY_POINT and count >= 4 and words[i + 1] == GL_COMPUTE:
            literal = bytes(code[4 * (i + 3):4 * (i + count)])
            if b"\0" not in literal:
                raise ImageError(f"the entry point name at word {i} is not terminated")
            computes[literal[:literal.index(b"\0")].decode("utf-8", "replace")] = words[i + 2]
        elif opcode == OP_DECORATE and count >= 4 and words[i + 2] in (DECORATION_BINDING,
                                                                       DECORATION_DESCRIPTOR_SET):
            decorations.setdefault(words[i + 1], {})[words[i + 2]] = words[i + 3]
        elif opcode == OP_VARIABLE and count >= 4:
            variables.add(words[i + 2])
        elif opcode in (OP_LABEL, *TERMINATORS):
            raise ImageError(f"the block instruction at word {i} lies outside a function")
    if function is not None:
        raise ImageError("the SPIR-V ends inside a function: it is cut short")
    missing = [name for name, _ in entries if name not in computes]
    if missing:
        raise ImageError(f"the SPIR-V has no GLCompute entry point named {', '.join(missing)}")
    descriptors = {v: decorations[v] for v in variables & decorations.keys()}
    named = _named(code, words, descriptors, starts, functions)
    for name, count in entries:
        for v in _reached(computes[name], named, calls):
            where = (descriptors[v].get(DECORATION_DESCRIPTOR_SET, 0),
                     descriptors[v].get(DECORATION_BINDING, 0))
            if where[0] != 0 or where[1] >= count:
                layout = f"bindings 0..{count - 1} of set 0" if count else "no bindings"
                raise ImageError(f"kernel '{name}' uses descriptor set {where[0]} binding "
                                 f"{where[1]}, but its pipeline layout has {layout}")


def _starts(words) -> list[int]:
    """The first word of every instruction after the header; raises ImageError for one whose
    word count is 0 or runs past the end (a module cut short). The walk is the loop's only
    work per instruction: the checks look at the few opcodes that matter, by list."""
    starts, end, i = [], len(words), 5
    add = starts.append
    try:
        while True:
            add(i)
            i += words[i] >> 16 or end   # a count of 0 leaves the module: named below
    except IndexError:  # the word after the last instruction, or past the end
        starts.pop()
    if starts:
        i = starts[-1]
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0 or i + count > end:
            raise ImageError(f"the SPIR-V instruction at word {i} (opcode {opcode}, {count} "
                             f"words) runs past the end of the {end}-word module: it is cut "
                             f"short")
    return starts


def _named(code: bytes, words, descriptors: dict, starts: list[int],
           functions: list[tuple[int, int]]) -> dict[int, set[int]]:
    """Function -> the descriptor variables its instructions name. Per function, a set
    intersection finds which variables' ids occur among its words at all (a few), then a byte
    search of its range finds an occurrence where an instruction takes an id (not a Python loop
    over every operand, nor a search of the whole image per variable)."""
    named: dict[int, set[int]] = {}
    if not functions or not descriptors:
        return named
    ids = set(descriptors)
    ends = [start for start, _ in functions[1:]] + [len(words)]
    for (first, function), end in zip(functions, ends):
        for variable in ids.intersection(words[first + 1:end]):
            needle = variable.to_bytes(4, "little")
            at = code.find(needle, 4 * (first + 1), 4 * end)
            while at >= 0:
                w = at // 4
                start = starts[bisect_right(starts, w) - 1]
                opcode, count = words[start] & 0xFFFF, words[start] >> 16
                if at % 4 == 0 and w - start in range(count)[_OPERANDS.get(opcode, _ALL)]:
                    named.setdefault(function, set()).add(variable)
                    break
                at = code.find(needle, at + 1, 4 * end)
    return named


def _reached(entry: int, named: dict[int, set[int]], calls: dict[int, set[int]]) -> set[int]:
    """The variables ``entry`` and the functions it calls, transitively, name."""
    seen, todo, out = {entry}, [entry], set()
    while todo:
        function = todo.pop()
        out |= named.get(function, set())
        for callee in calls.get(function, set()) - seen:
            seen.add(callee)
            todo.append(callee)
    return out
