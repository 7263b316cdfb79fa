"""The vendored FlatBuffer code must be what flatc makes from schemas/*.fbs today."""

import subprocess
import sys
from pathlib import Path

from tooling import require_tool

ROOT = Path(__file__).resolve().parents[2]


def test_vendored_schema_code_is_fresh():
    require_tool("flatc")  # Debian: flatbuffers-compiler
    result = subprocess.run([sys.executable, str(ROOT / "schemas/generate.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


RUNTIME_FB = ROOT / "packages/base-runtime/src/pyree/runtime/_fb.py"


def test_the_runtimes_readers_need_only_fb_runtime():
    """The runtime's copy reads through pyree.runtime.fb_runtime: no flatbuffers package,
    so no numpy (flatbuffers imports it at its own import) and no typing; one module, which
    imports no other of its package."""
    import re

    from pyree.runtime import fb_runtime

    assert not RUNTIME_FB.with_suffix("").exists()  # the folder of modules it replaced
    text = RUNTIME_FB.read_text()
    assert "pyree.runtime._fb" not in text
    names = set(re.findall(r"\bflatbuffers\.(\w+)", text))
    assert {"Table", "Get", "UOffsetTFlags"} <= names
    assert [n for n in sorted(names) if not hasattr(fb_runtime, n)] == []
    assert "import flatbuffers" not in text and "import_numpy" not in text and "typing" not in text


def _as_plain(value):
    """An object-API tree as nested lists and dicts: numpy vectors (the flatbuffers package's
    unpacking) and lists (fb_runtime's) compare equal."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_as_plain(v) for v in value]
    if hasattr(value, "__dict__"):
        return {k: _as_plain(v) for k, v in vars(value).items()}
    return value


def test_the_runtimes_readers_read_what_the_flatbuffers_package_reads():
    """The same module file unpacked by the compiler's copy (flatbuffers package) and the
    runtime's (fb_runtime): the same tree, field by field."""
    from pyree.compiler import compile_str
    from pyree.compiler._fb.Module import Module as PackageModule
    from pyree.compiler._fb.Module import ModuleT as PackageModuleT
    from pyree.runtime._fb import Module as RuntimeModule
    from pyree.runtime._fb import ModuleT as RuntimeModuleT
    from pyree.runtime.module.reader import read_trailer

    data = compile_str((ROOT / "tests/data/mlp.mlir").read_text())
    root = memoryview(data)[:read_trailer(data)[0]]
    theirs = PackageModuleT.InitFromObj(PackageModule.GetRootAs(root, 0))
    ours = RuntimeModuleT.InitFromObj(RuntimeModule.GetRootAs(root, 0))
    assert ours.functions and ours.executables
    assert _as_plain(ours) == _as_plain(theirs)
