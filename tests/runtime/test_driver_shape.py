"""Every driver reads the same way (issue 28): one file per role under the same names, the local
drivers' shared roles in drivers/local/, and one ``check(err, what)`` in each GPU driver's
symbols.py. Read from the sources, so no driver library is needed."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROLES = {"allocator", "command_buffer", "device", "executable", "instance", "semaphore", "symbols",
         "timing"}
GPU_DRIVERS = {name: ROOT / f"packages/hal-{name}/src/pyree/hal/{name}"
               for name in ("cuda", "rocm", "vulkan")}
LOCAL = ROOT / "packages/base-runtime/src/pyree/runtime/drivers"


def _files(folder: Path) -> set[str]:
    return {path.stem for path in folder.glob("*.py")}


def test_every_gpu_driver_has_a_file_per_role():
    for name, folder in GPU_DRIVERS.items():
        assert ROLES - _files(folder) == set(), name


def test_the_local_drivers_have_their_roles_under_the_same_names():
    """What both share is one floor below them; each adds its device and its driver. Neither
    has a semaphore.py: the driver kit's TimelineSemaphore serves both."""
    assert _files(LOCAL / "local") - {"__init__"} == ROLES - {"instance", "semaphore"}
    for driver in ("local_sync", "local_task"):
        assert {"__init__", "device", "instance"} <= _files(LOCAL / driver), driver
        assert _files(LOCAL / driver) & (ROLES - {"device", "instance"}) == set(), driver


def test_every_gpu_driver_has_one_check_of_the_same_signature():
    for name, folder in GPU_DRIVERS.items():
        tree = ast.parse((folder / "symbols.py").read_text())
        checks = [node for node in tree.body if isinstance(node, ast.FunctionDef)
                  and node.name == "check"]
        assert len(checks) == 1, name
        assert [arg.arg for arg in checks[0].args.args] == ["err", "what"], name
        doc = ast.get_docstring(checks[0])
        assert doc.startswith("Raises ") and "after ``what`` we did" in doc, name
