"""A device started on a thread of its own: a GPU driver's start (cuInit and a context; a Vulkan
instance) waits in C without the GIL, so ``load_module`` imports the VM and reads and verifies the
module file meanwhile (issue 13).

The caller waits first for the thread to import its driver (``wait_imported``): until then the thread
runs Python only, and sharing the GIL with the caller's imports would delay the driver's start by
as much as those imports take. A driver may begin its slow work as its entry point is called
(hal-cuda starts cuInit there), so what the caller does next runs beside it.

The registry calls ``driver_imported`` and the caller hands in the registry's ``get_device``: this
file sits below the registry and imports nothing of it. ``Background`` is the thread without the
driver's part: a GPU executable's load runs on one beside the constants' upload
(vm/loaded_module.py)."""

from __future__ import annotations

import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from pyree.runtime.hal.device import Device


class Background(threading.Thread):
    """``work()`` running on a thread of its own; ``result()`` waits for its value or raises its
    error on the caller's thread."""

    def __init__(self, name: str, work: Callable[[], object]):
        super().__init__(name=name, daemon=True)
        self._work, self._value, self._error = work, None, None
        self.start()

    def run(self) -> None:
        try:
            self._value = self._work()
        except BaseException as e:  # noqa: BLE001 - raised again on the caller's thread
            self._error = e

    def result(self):
        self.join()
        if self._error is not None:
            raise self._error
        return self._value


class DeviceStart(Background):
    """``get_device(uri)`` running; ``result()`` waits for the device or raises its error."""

    def __init__(self, uri: str, get_device: Callable[[str], Device]):
        self.uri = uri
        self._imported = threading.Event()
        super().__init__(f"pyree-device-start {uri}", lambda: get_device(uri))

    def run(self) -> None:
        try:
            super().run()
        finally:
            self._imported.set()

    def wait_imported(self) -> None:
        """Returns once the driver is imported (or the start has ended, either way)."""
        self._imported.wait()


def driver_imported() -> None:
    """Called by the registry once a driver's entry point has returned: a caller waiting in
    ``wait_imported`` on this thread's start may go on."""
    thread = threading.current_thread()
    if isinstance(thread, DeviceStart):
        thread._imported.set()
