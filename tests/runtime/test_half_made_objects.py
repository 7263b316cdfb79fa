"""Ctrl-C can land as an ``__init__`` begins (Python checks for signals there), leaving an object
with none of its attributes; its ``__del__`` still runs. A finalizer that then raised printed
"Exception ignored in ... AttributeError" after the tools' "error: interrupted" (CI saw it once
from pyree-benchmark-module). Every finalizer in the runtime and the drivers, found by walking
their packages, must collect such an object silently."""

from __future__ import annotations

import gc
import importlib
import inspect
import mmap
import pkgutil
import sys

import pytest

PACKAGES = ["pyree.runtime", "pyree.hal.cuda", "pyree.hal.vulkan", "pyree.hal.rocm"]


def _finalized_classes() -> list[type]:
    found = {}
    for name in PACKAGES:
        package = importlib.import_module(name)
        modules = [package] + [importlib.import_module(m.name) for m in
                               pkgutil.walk_packages(package.__path__, name + ".")
                               if not m.name.endswith("__main__")]
        for module in modules:
            for _, cls in inspect.getmembers(module, inspect.isclass):
                # (an mmap cannot exist without its arguments: never half made)
                if (cls.__module__ == module.__name__ and "__del__" in vars(cls)
                        and not issubclass(cls, mmap.mmap)):
                    found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return [found[k] for k in sorted(found)]


CLASSES = _finalized_classes()


def test_the_walk_finds_the_finalizers():
    names = {c.__qualname__ for c in CLASSES}
    assert {"DeviceArray", "CallResources", "LoadedModule", "CudaSemaphore"} <= names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__qualname__)
def test_a_half_made_object_is_collected_silently(cls, monkeypatch):
    obj = cls.__new__(cls)
    raised = []
    monkeypatch.setattr(sys, "unraisablehook", raised.append)
    del obj
    gc.collect()
    assert [f"{r.exc_type.__name__}: {r.exc_value}" for r in raised] == []
