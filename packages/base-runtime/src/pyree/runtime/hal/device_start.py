"""A device started on a thread of its own: a GPU driver's start (cuInit and a context, ~220 ms on
the H100 host; a Vulkan instance) waits in C without the GIL, so ``load_module`` reads and
verifies the module file meanwhile (issue 13)."""

from __future__ import annotations

import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pyree.runtime.hal.device import Device


class DeviceStart(threading.Thread):
    """``get_device(uri)`` running; ``result()`` waits for the device or raises its error."""

    def __init__(self, uri: str):
        super().__init__(name=f"pyree-device-start {uri}", daemon=True)
        self.uri, self._device, self._error = uri, None, None
        self.start()

    def run(self) -> None:
        try:
            from pyree.runtime.hal.registry import get_device

            self._device = get_device(self.uri)
        except BaseException as e:  # noqa: BLE001 - raised again on the caller's thread
            self._error = e

    def result(self) -> Device:
        self.join()
        if self._error is not None:
            raise self._error
        return self._device
