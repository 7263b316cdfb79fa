"""The dynamic-shape soak, for any target and device: one module with a dynamic batch called at a
few hundred mixed sizes (0, 1, primes, repeats), every answer checked against numpy, and the
device memory the runtime holds (buffers allocated and not yet released: in use or pooled)
kept within SLACK times what the largest size alone needed, called the same way. Shared by the
local-task test and the cuda one (tests/runtime/test_dynamic_soak.py)."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
from pyree.compiler import CompileOptions, compile_str
from pyree.runtime.hal.device import Buffer, Device

# exp(a + b) and its row sums: an elementwise kernel and a reduction, both over ?xN rows
SOURCE = """
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @f(%a: tensor<?x24xf32>, %b: tensor<?x24xf32>) -> (tensor<?x24xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x24xf32>
  %e = tensor.empty(%m) : tensor<?x24xf32>
  %s = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<?x24xf32>, tensor<?x24xf32>) outs(%e : tensor<?x24xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %z = arith.addf %x, %y : f32
    %w = math.exp %z : f32
    linalg.yield %w : f32
  } -> tensor<?x24xf32>
  %zero = arith.constant 0.0 : f32
  %r0 = tensor.empty(%m) : tensor<?xf32>
  %r1 = linalg.fill ins(%zero : f32) outs(%r0 : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]}
      ins(%s : tensor<?x24xf32>) outs(%r1 : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %z = arith.addf %x, %o : f32
    linalg.yield %z : f32
  } -> tensor<?xf32>
  return %s, %r : tensor<?x24xf32>, tensor<?xf32>
}
"""
PRIMES = [2, 3, 5, 7, 11, 13, 17, 31, 61, 127, 251, 509, 1021]
LARGEST = 1201  # a prime too; its inputs (115 KB) are uploaded, as every smaller one
QUEUED = 4      # calls queued before their results are read
# A call may be served by a free buffer of a larger size class than it needs
# (buffer_pool._larger), so the bytes in use at once can pass the largest size's by a few
# buffers' rounding. Before the pool reused buffers across classes and kept no more than were
# ever in use at once, this soak ended holding about three times the largest size's memory,
# and grew with every further round.
SLACK = 1.1


class DeviceMemory:
    """Bytes of the device buffers allocated from now on and not yet released, and the most
    there were, counted at the HAL (every driver's buffers go through Device.allocate* and
    Buffer.release; imported host memory is not the device's and is not counted)."""

    def __init__(self, monkeypatch):
        self.live = self.peak = 0
        self._sizes: dict[int, int] = {}  # id of each counted buffer not yet released -> size
        for name in ("allocate", "allocate_mapped"):
            monkeypatch.setattr(Device, name, self._counted(getattr(Device, name)))
        release = Buffer.release

        def counted_release(buffer):
            self.live -= self._sizes.pop(id(buffer), 0)
            release(buffer)

        monkeypatch.setattr(Buffer, "release", counted_release)

    def _counted(self, allocate):
        def counted(device, size):
            buffer = allocate(device, size)
            self._sizes[id(buffer)] = size
            self.live += size
            self.peak = max(self.peak, self.live)
            return buffer
        return counted

    def reset_peak(self) -> None:
        self.peak = self.live


def sizes(rng: np.random.Generator, count: int = 300) -> list[int]:
    """``count`` batch sizes in a random order: 0, 1, primes, each several times, and sizes
    between them, the largest among them."""
    picks = [0, 1, *PRIMES, LARGEST] * 3
    picks += [int(n) for n in rng.integers(0, LARGEST, count - len(picks))]
    rng.shuffle(picks)
    return picks


def _inputs(rng: np.random.Generator, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Fresh rows, with NaN, +-inf and -0 where there is room."""
    a = rng.uniform(-4, 4, (m, 24)).astype(np.float32)
    b = rng.uniform(-4, 4, (m, 24)).astype(np.float32)
    if m:  # (24 values a row: room for all four)
        a.flat[rng.choice(a.size, 4, replace=False)] = [np.nan, np.inf, -np.inf, -0.0]
    return a, b


def _run(function, rng: np.random.Generator, batch: list[int]) -> None:
    """Calls at each size of ``batch``, QUEUED at a time, then checks every answer."""
    for start in range(0, len(batch), QUEUED):
        calls = []
        for m in batch[start:start + QUEUED]:
            a, b = _inputs(rng, m)
            calls.append((a, b, function(a, b)))
        for a, b, (s, r) in calls:
            want = np.exp(a.astype(np.float64) + b)
            assert s.shape == a.shape and r.shape == (len(a),)
            with np.errstate(invalid="ignore"):  # inf - inf in a row sum: NaN, as pyree's
                sums = want.sum(1)
            np.testing.assert_allclose(s.to_host(), want, rtol=3e-6, atol=0)
            np.testing.assert_allclose(r.to_host(), sums, rtol=2e-5, atol=0)


def soak(target: str, device: str, monkeypatch, seed: int = 29) -> tuple[int, int]:
    """Runs the soak on ``device`` with the module compiled for ``target``; returns (the
    largest size's high-water mark, the soak's) in bytes, after asserting the one bounds the
    other within SLACK."""
    module = rt.load_module(compile_str(SOURCE, CompileOptions(target_backends=[target])),
                            device=device)
    function = module["f"]
    rng = np.random.default_rng(seed)
    memory = DeviceMemory(monkeypatch)
    _run(function, rng, [LARGEST] * 2 * QUEUED)  # the largest size alone, as the soak calls it
    largest = memory.peak
    memory.reset_peak()
    _run(function, rng, sizes(rng))
    assert memory.peak <= SLACK * largest, (memory.peak, largest)
    return largest, memory.peak
