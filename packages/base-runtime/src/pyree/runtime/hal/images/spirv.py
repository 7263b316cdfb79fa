"""SPIR-V binaries, before vkCreateShaderModule: a whole module with the entry points it names.

Drivers parse SPIR-V trusting its structure; Mesa's lavapipe hangs on a module cut by one word
(the last OpFunctionEnd). Checked here: the header (magic, version 1.0-1.6, id bound, reserved
schema word), every instruction's word count inside the image, functions closed by
OpFunctionEnd with every block ended by a terminator, and an OpEntryPoint for the GLCompute
execution model per export.
"""

from __future__ import annotations

import struct

from pyree.runtime.hal.images import ImageError

MAGIC = 0x07230203
MAX_ID_BOUND = 0x3FFFFF   # SPIR-V's universal limit
OP_ENTRY_POINT, OP_FUNCTION, OP_FUNCTION_END, OP_LABEL = 15, 54, 56, 248
# OpBranch, OpBranchConditional, OpSwitch, OpKill, OpReturn, OpReturnValue, OpUnreachable,
# OpTerminateInvocation
TERMINATORS = frozenset({249, 250, 251, 252, 253, 254, 255, 4416})
GL_COMPUTE = 5


def check_spirv(code: bytes, entries: list[str]) -> None:
    """Raises ImageError unless ``code`` is a structurally whole SPIR-V module with a GLCompute
    entry point for each of ``entries``."""
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
    computes, in_function, in_block, i = set(), False, False, 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0 or i + count > len(words):
            raise ImageError(f"the SPIR-V instruction at word {i} (opcode {opcode}, {count} words) "
                             f"runs past the end of the {len(words)}-word module: it is cut short")
        if opcode == OP_ENTRY_POINT and count >= 4 and words[i + 1] == GL_COMPUTE:
            literal = struct.pack(f"<{count - 3}I", *words[i + 3:i + count])
            if b"\0" not in literal:
                raise ImageError(f"the entry point name at word {i} is not terminated")
            computes.add(literal[:literal.index(b"\0")].decode("utf-8", "replace"))
        elif opcode == OP_FUNCTION:
            if in_function:
                raise ImageError(f"the function at word {i} starts inside another function")
            in_function, in_block = True, False
        elif opcode == OP_FUNCTION_END:
            if not in_function or in_block:
                raise ImageError(f"OpFunctionEnd at word {i} ends no function or an open block")
            in_function = False
        elif opcode == OP_LABEL:
            if not in_function or in_block:
                raise ImageError(f"the block at word {i} starts outside a function or in a block")
            in_block = True
        elif opcode in TERMINATORS:
            if not in_block:
                raise ImageError(f"the terminator at word {i} ends no block")
            in_block = False
        i += count
    if in_function:
        raise ImageError("the SPIR-V ends inside a function: it is cut short")
    missing = [name for name in entries if name not in computes]
    if missing:
        raise ImageError(f"the SPIR-V has no GLCompute entry point named {', '.join(missing)}")
