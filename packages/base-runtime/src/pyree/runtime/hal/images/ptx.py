"""PTX text, before the CUDA driver compiles it: whole text, with every kernel the module names.

The driver reads PTX up to its first NUL and parses it; a cut or binary image makes it fail in
ways that are not always an error code. The checks here are cheap and textual: no NUL inside,
the ``.version`` and ``.target`` directives first, braces that balance (a cut function leaves one
open; LLVM's PTX puts none in comments) and an ``.entry`` for each export.
"""

from __future__ import annotations

from pyree.runtime.hal.images import ImageError


def check_ptx(code: bytes, entries: list[str]) -> None:
    """Raises ImageError unless ``code`` is whole PTX text declaring each of ``entries``."""
    if b"\0" in code:
        raise ImageError("the PTX holds a NUL byte: it is not PTX text")
    try:
        text = code.decode("utf-8")
    except UnicodeDecodeError:
        raise ImageError("the PTX is not text (not UTF-8)") from None
    version, target = text.find(".version"), text.find(".target")
    first_entry = text.find(".entry")
    if version < 0 or target < 0 or (0 <= first_entry < max(version, target)):
        raise ImageError("the PTX lacks its .version and .target directives before its kernels")
    if text.count("{") != text.count("}"):
        raise ImageError("the PTX's braces do not balance: the text is cut short or damaged")
    for name in entries:
        at = text.find(f".entry {name}")
        after = text[at + 7 + len(name):at + 8 + len(name) + 16].lstrip() if at >= 0 else ""
        if not after.startswith("("):
            raise ImageError(f"the PTX declares no kernel '{name}' (.entry {name})")
