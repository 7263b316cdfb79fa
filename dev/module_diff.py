"""Where two builds of the same modules differ: for each file of FOLDER_A with a namesake in
FOLDER_B, whether the bytes, the data segments (kernel code, constants) and the flatbuffer trees
are the same, and which tree fields differ (list indices folded to ``[]``). For a change that
is meant to alter the module format only where it says (a refactor shows no difference at all):

    python dev/module_diff.py FOLDER_A FOLDER_B
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from runtime.module_mutations import _unpack  # noqa: E402


def differences(a, b, path: str = "") -> set[str]:
    """The field paths where two object-API trees differ."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return {f"{path} (length)"}
        return set().union(*(differences(x, y, f"{path}[]") for x, y in zip(a, b)))
    if hasattr(a, "__dict__") and type(a) is type(b):
        return set().union(*(differences(v, getattr(b, k), f"{path}.{k}")
                             for k, v in vars(a).items()))
    return set() if a == b else {path}


def main() -> None:
    a, b = Path(sys.argv[1]), Path(sys.argv[2])
    for f in sorted(a.glob("*.vmfb")):
        other = b / f.name
        if not other.exists():
            continue
        (ta, sa), (tb, sb) = _unpack(f.read_bytes()), _unpack(other.read_bytes())
        same = f.read_bytes() == other.read_bytes()
        fields = sorted(differences(ta, tb))
        print(f"{f.name}: bytes {'same' if same else 'differ'}, data segment "
              f"{'same' if sa == sb else 'differs'}, tree fields that differ: {fields or 'none'}")


if __name__ == "__main__":
    main()
