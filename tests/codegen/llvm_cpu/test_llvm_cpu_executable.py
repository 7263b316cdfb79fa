"""The exported entry point's contract (cpu_kernel.h) and the executable table it is listed in."""

import numpy as np
from llvmcpu_harness import Compiled, identity, random_array
from pyree.compiler._fb.BindingAccess import BindingAccess
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat
from pyree.compiler.kernel import Binary, Binding, Kernel, Load, Result

SHAPE = (301, 1037)


def add_kernel(name="add", shape=SHAPE):
    ix = identity(len(shape))
    return Kernel(name, shape, len(shape),
                  (Binding("f32", shape, "read"), Binding("f32", shape, "read"), Binding("f32", shape, "write")),
                  (Result(2, ix, Binary("add", Load(0, ix, "f32"), Load(1, ix, "f32"), "f32")),))


def buffers(rng):
    return [random_array("f32", SHAPE, rng), random_array("f32", SHAPE, rng), np.full(SHAPE, 7.0, np.float32)]


def test_short_binding_or_missing_binding_is_refused_untouched():
    compiled = Compiled([add_kernel()])
    bufs = buffers(np.random.default_rng(30))
    short = [b.nbytes for b in bufs]
    short[1] -= 4
    assert compiled.call(0, bufs, lengths=short) != 0
    assert compiled.call(0, bufs[:2]) != 0
    np.testing.assert_array_equal(bufs[2], 7.0)
    longer = [b.nbytes + 64 for b in bufs]  # longer bindings are fine
    assert compiled.call(0, bufs, lengths=longer) == 0
    np.testing.assert_array_equal(bufs[2], bufs[0] + bufs[1])


def test_workgroup_ranges_split_and_past_the_end():
    compiled = Compiled([add_kernel()])
    count = compiled.export(0).workgroupCount
    assert count >= 16, "a 300k-element op should be split for two cores"
    bufs = buffers(np.random.default_rng(31))
    assert compiled.call(0, bufs, begin=count, end=count + 100) == 0
    assert compiled.call(0, bufs, begin=2**64 - 2, end=2**64 - 1) == 0
    np.testing.assert_array_equal(bufs[2], 7.0)
    cut = count // 3
    assert compiled.call(0, bufs, begin=0, end=cut) == 0
    done = bufs[2].copy()
    assert np.any(done == 7.0) and np.any(done != 7.0)
    assert compiled.call(0, bufs, begin=cut, end=count + 5) == 0
    np.testing.assert_array_equal(bufs[2], bufs[0] + bufs[1])


def test_executable_table():
    kernels = [add_kernel("first"), add_kernel("first", (3, 5)), add_kernel("x.y-z", (7,))]
    compiled = Compiled(kernels)
    exe = compiled.executable
    assert exe.format == ExecutableFormat.cpu
    cpu = exe.cpu
    assert cpu.format == "elf-x86_64" and cpu.library.length > 0
    symbols = [e.symbol for e in cpu.exports]
    assert len(set(symbols)) == 3 and all(s.replace("_", "").isalnum() for s in symbols)
    for export, kernel in zip(cpu.exports, kernels):
        assert [b.access for b in export.bindings] == [BindingAccess.read, BindingAccess.read,
                                                       BindingAccess.write]
        assert [b.minLength for b in export.bindings] == [b.num_bytes for b in kernel.bindings]
        assert export.workgroupCount >= 1
    rng = np.random.default_rng(32)
    for k, shape in ((1, (3, 5)), (2, (7,))):
        bufs = [random_array("f32", shape, rng) for _ in range(3)]
        assert compiled.call(k, bufs) == 0
        np.testing.assert_array_equal(bufs[2], bufs[0] + bufs[1])


def test_empty_iteration_space_runs_no_workgroups():
    compiled = Compiled([add_kernel("empty", (0, 5))])
    assert compiled.export(0).workgroupCount == 0
    bufs = [np.zeros((0, 5), np.float32) for _ in range(3)]
    assert compiled.call(0, bufs, begin=0, end=4) == 0
