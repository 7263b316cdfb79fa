"""A pytest plugin that runs the CPU drivers' command buffers as a driver that honours only
barriers may: every run of commands between two barriers last first. CUDA and ROCm run a
stream's commands in order and the CPU drivers one after another, so a barrier the compiler or
the runtime left out shows only on Vulkan, and there only sometimes (the per-call clears' missing
barrier: 5-25% of a convolution's calls on NVIDIA's driver). Under this plugin two commands
that touch the same bytes with no barrier between them run in the wrong order on every call.

    pytest -p reordered_commands tests/e2e ...
"""

from __future__ import annotations

import pytest
from pyree.runtime.drivers.local import command_buffer as local


def _reordered(self, split: bool) -> tuple:
    steps, unordered = [], []

    def close() -> None:
        for index, command in reversed(unordered):
            steps.append(local.DispatchRun([(index, command)]) if command.kind == "dispatch"
                         else (index, command))
        unordered.clear()

    for index, command in enumerate(self.commands):
        if command.kind == "barrier":
            close()
        else:
            unordered.append((index, command))
    close()
    return tuple(steps)


@pytest.fixture(autouse=True, scope="session")
def _commands_last_first():
    patch = pytest.MonkeyPatch()
    patch.setattr(local.HostCommandBuffer, "_steps", _reordered)
    yield
    patch.undo()
