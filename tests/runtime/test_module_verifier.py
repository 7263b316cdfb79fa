"""Semantic verification: every out-of-range field class gets a ModuleError naming the place."""

from __future__ import annotations

import pyree.runtime as rt
import pytest
from pyree.compiler._fb.Branch import BranchT
from pyree.compiler._fb.DataRef import DataRefT

from .module_factory import (
    ARG,
    BRANCH,
    CONST,
    EXPECT_ALMOST_EQ,
    EXPECT_TRUE,
    F32,
    I1,
    I32,
    READBACK,
    RESULT,
    N,
    arith_builder,
    check,
    command,
    cuda_executable,
    ref,
    tensor,
)


def _fn(module, name):
    return next(f for f in module.functions if f.name == name)


def _data_ref(offset, length):
    r = DataRefT()
    r.offset, r.length = offset, length
    return r


def _branch(condition=None, condition_type=I1, target=0):
    b = BranchT()
    b.condition, b.conditionType, b.target = condition, condition_type, target
    return command(BRANCH, branch=b)


def _set(obj, **fields):
    for name, value in fields.items():
        setattr(obj, name, value)


MUTATIONS = {
    "branch past the end": (
        lambda m: _fn(m, "add").commands.append(_branch(target=9)),
        r"function 'add' command 1 \(branch\): target 9 is past the function's 2 commands"),
    "branch on a float": (
        lambda m: _fn(m, "add").commands.append(_branch(ref(ARG, 0, 4), F32)),
        r"function 'add' command 1 \(branch\): condition type f32 is not an integer type"),
    "branch condition of the wrong size": (
        lambda m: _fn(m, "add").commands.append(_branch(ref(ARG, 0, 4), I1)),
        r"function 'add' command 1 \(branch\): condition is 4 bytes but a i1 needs 1"),
    "branch condition past the readback area": (
        lambda m: _fn(m, "add").commands.append(_branch(ref(READBACK, 0, 1, offset=8), I1)),
        r"function 'add' command 1 \(branch\) condition: bytes \[8, \+1\) lie outside readback "
        r"of 0 bytes"),
    "branch condition outside its buffer": (
        lambda m: _fn(m, "add").commands.append(_branch(ref(ARG, 0, 4, offset=4 * N), I32)),
        r"function 'add' command 1 \(branch\) condition: bytes \[\d+, \+4\) lie outside"),
    "library outside segment": (
        lambda m: _set(m.executables[0].cpu, library=_data_ref(64, 1 << 40)),
        r"executable 0 \('kernels'\) library: data \[64, \+1099511627776\) lies outside"),
    "misaligned data ref": (
        lambda m: _set(m.constants[0], data=_data_ref(m.constants[0].data.offset + 4, 4 * N)),
        "constant 0 data: data offset .* is not 64-byte aligned"),
    "constant size mismatch": (
        lambda m: _set(m.constants[0].type, dims=[37, 52]),
        r"constant 0: has 7844 bytes of data but its type 37x52xf32 needs 7696"),
    "kernel out of range": (
        lambda m: _set(_fn(m, "add").commands[0].dispatch, kernel=9),
        r"function 'add' command 0 \(dispatch\): kernel 9 is out of range: executable 0 has 3"),
    "binding count mismatch": (
        lambda m: _fn(m, "add").commands[0].dispatch.bindings.pop(),
        (r"function 'add' command 0 \(dispatch\): has 2 bindings but executable 0 export 0 "
         r"declares 3")),
    "binding shorter than min_length": (
        lambda m: _set(_fn(m, "add").commands[0].dispatch.bindings[1], length=100),
        r"function 'add' command 0 \(dispatch\) binding 1: length 100 is shorter than the 7844"),
    "binding offset off its elements' alignment": (
        lambda m: _set(_fn(m, "add").commands[0].dispatch.bindings[0], offset=2),
        r"function 'add' command 0 \(dispatch\) binding 0: offset 2 is not a multiple of the 4 "
        r"bytes the kernel aligns its elements to"),
    "alignment not a power of two": (
        lambda m: _set(m.executables[0].cpu.exports[0].bindings[1], alignment=12),
        r"executable 0 \('kernels'\) export 0 binding 1: alignment 12 is not a power of two"),
    "argument index out of range": (
        lambda m: _set(_fn(m, "add").commands[0].dispatch.bindings[1], index=5),
        r"function 'add' command 0 \(dispatch\) binding 1: argument 5 is out of range"),
    "offset past the buffer": (
        lambda m: _set(_fn(m, "add").commands[0].dispatch.bindings[2], offset=8),
        (r"function 'add' command 0 \(dispatch\) binding 2: bytes \[8, \+7844\) lie outside "
         r"result 0 of 7844 bytes")),
    "unknown buffer kind": (
        lambda m: _set(_fn(m, "add").commands[0].dispatch.bindings[0], kind=9),
        r"binding 0: unknown buffer kind 9"),
    "transient out of range": (
        lambda m: _set(_fn(m, "add_scaled"), transientSize=100),
        (r"function 'add_scaled' command 0 \(dispatch\) binding 2: bytes \[0, \+7844\) lie outside "
         r"transient of 100 bytes")),
    "constant index out of range": (
        lambda m: _set(_fn(m, "fill_copy").commands[1].copy.source, index=3),
        r"function 'fill_copy' command 1 \(copy\) source: constant 3 is out of range"),
    "copy lengths differ": (
        lambda m: _set(_fn(m, "fill_copy").commands[1].copy.target, length=8),
        (r"function 'fill_copy' command 1 \(copy\): source length 7844 differs from target "
         r"length 8")),
    "fill pattern length": (
        lambda m: _set(_fn(m, "fill_copy").commands[0].fill, patternLength=3),
        r"function 'fill_copy' command 0 \(fill\): pattern length 3 is not 1, 2, 4 or 8"),
    "fill does not tile": (
        lambda m: _set(_fn(m, "fill_copy").commands[0].fill, patternLength=8,
                       target=ref(RESULT, 0, 12)),
        r"target length 12 is not a multiple of the pattern length 8"),
    "check operand size": (
        lambda m: _set(_fn(m, "near").commands[0].check.lhs, length=12),
        r"function 'near' command 0 \(check\): lhs is 12 bytes but its type 4xf32 needs 16"),
    "check types differ": (
        lambda m: _set(_fn(m, "near").commands[0].check, rhsType=tensor(I32, 4)),
        r"compares 4xf32 with 4xi32"),
    "almost_eq on integers": (
        lambda m: _fn(m, "flags").commands.append(
            check(EXPECT_ALMOST_EQ, ref(ARG, 0, 4), tensor(I32), ref(ARG, 0, 4), tensor(I32))),
        r"function 'flags' command 2 \(check\): expect_almost_eq needs floats, got i32"),
    "expect_true on a vector": (
        lambda m: _fn(m, "near").commands.append(check(EXPECT_TRUE, ref(ARG, 0, 16),
                                                       tensor(F32, 4))),
        r"expect_true needs a single value, got 4xf32"),
    "unknown check kind": (
        lambda m: _set(_fn(m, "near").commands[0].check, kind=42),
        r"unknown check kind 42"),
    "unknown element type": (
        lambda m: _fn(m, "add").arguments.__setitem__(0, tensor(77, 4)),
        r"function 'add' argument 0: unknown element type 77"),
    "dynamic dimension without its SizeExpr": (
        lambda m: _fn(m, "add").arguments.__setitem__(1, tensor(F32, 37, -1)),
        r"function 'add': argument 1: has 1 dynamic dims but 0 SizeExprs for them"),
    "negative dimension": (
        lambda m: _fn(m, "add").results.__setitem__(0, tensor(F32, -5)),
        r"function 'add' result 0: invalid dimension -5"),
    "result sizes count": (
        lambda m: _set(_fn(m, "add"), resultSizes=[]),
        r"function 'add': has 1 results but 0 result sizes"),
    "result size too small": (
        lambda m: _set(_fn(m, "add"), resultSizes=[16]),
        r"function 'add' result 0: allocation of 16 bytes cannot hold its 7844-byte value"),
    "unknown command kind": (
        lambda m: _fn(m, "add").commands.append(command(17)),
        r"function 'add' command 1: unknown command kind 17"),
    "missing command member": (
        lambda m: _set(_fn(m, "add").commands[0], dispatch=None),
        r"function 'add' command 0: kind is dispatch but its dispatch table is missing"),
    "duplicate function": (
        lambda m: _set(_fn(m, "near"), name="add"),
        r"name 'add' is empty or repeated"),
    "unknown executable format": (
        lambda m: _set(m.executables[0], format=9),
        r"executable 0 \('kernels'\): unknown executable format 9"),
    "workgroup count too large": (
        lambda m: _set(m.executables[0].cpu.exports[0], workgroupCount=1 << 32),
        r"export 0: workgroup count 4294967296 exceeds 2\^32-1"),
    "binding access": (
        lambda m: _set(m.executables[0].cpu.exports[1].bindings[0], access=5),
        r"export 1 binding 0: unknown access 5"),
    "computed constant with data": (
        lambda m: _set(m.constants[0], computed=True),
        r"constant 0: is computed at load but has inline data or is mutable"),
    "computed constant without an initializer": (
        lambda m: _set(m.constants[0], computed=True, data=None),
        r"module: has computed constants but no initializer to compute them"),
    "tie to a missing argument": (
        lambda m: _set(_fn(m, "add"), tiedResults=[5]),
        r"function 'add' result 0: is tied to argument 5, which is not an argument of its own"),
    "ties of another count": (
        lambda m: _set(_fn(m, "add"), tiedResults=[0, 1]),
        r"function 'add': ties 2 results but has 1"),
    "tie to an argument of another type": (
        lambda m: (_fn(m, "add").arguments.__setitem__(1, tensor(I32, N)),
                   _set(_fn(m, "add"), tiedResults=[1])),
        r"function 'add' result 0: is tied to argument 1 of another type"),
    "initializer with arguments": (
        lambda m: _set(m, initializer=_fn(m, "add")),
        r"initializer: takes arguments, returns results or has run-time sizes"),
}


@pytest.mark.parametrize("name", MUTATIONS)
def test_invalid_module_is_refused(name, kernel_library, offset_constant):
    mutate, message = MUTATIONS[name]
    builder = arith_builder(kernel_library, offset_constant)
    mutate(builder.module)
    with pytest.raises(rt.ModuleError, match=message):
        rt.read_module(builder.finish())


def test_gpu_grid_needs_three_entries(kernel_library, offset_constant):
    builder = arith_builder(kernel_library, offset_constant)
    gpu = cuda_executable(builder)
    gpu.cuda.exports[2].gridSize = [4, 1]
    builder.module.executables.append(gpu)
    with pytest.raises(rt.ModuleError, match=r"executable 1 \('kernels_cuda'\) export 2: grid and "
                                             r"block sizes must have 3 entries, got 2 and 3"):
        rt.read_module(builder.finish())


def test_every_executable_is_checked_against_each_dispatch(kernel_library, offset_constant):
    builder = arith_builder(kernel_library, offset_constant)
    gpu = cuda_executable(builder)
    gpu.cuda.exports.pop()
    builder.module.executables.append(gpu)
    with pytest.raises(rt.ModuleError, match=r"function 'fail' command 0 \(dispatch\): kernel 2 "
                                             r"is out of range: executable 1 has 2 exports"):
        rt.read_module(builder.finish())


def test_invalid_utf8_name(kernel_library, offset_constant):
    builder = arith_builder(kernel_library, offset_constant)
    builder.module.name = b"\xff\xfe"
    with pytest.raises(rt.ModuleError, match="module name: a string is not valid UTF-8"):
        rt.read_module(builder.finish())


def test_constant_kind_reads_within_its_constant(kernel_library, offset_constant):
    builder = arith_builder(kernel_library, offset_constant)
    builder.module.functions[2].commands[1].copy.source = ref(CONST, 0, 4 * N, offset=64)
    with pytest.raises(rt.ModuleError, match=r"source: bytes \[64, \+7844\) lie outside constant 0"):
        rt.read_module(builder.finish())


def test_compiled_kernels_state_their_elements_alignment():
    """Each binding's alignment is its elements' size, and a dispatch bound off it is refused at
    load: a GPU kernel's misaligned access would fault and leave the context unusable (the
    module fuzz test's mutant 106 on the H200, twenty-eighth session)."""
    from pyree.compiler import CompileOptions, compile_str

    from runtime.module_mutations import _pack, _unpack

    text = """func.func @f(%a: tensor<5xi8>, %b: tensor<5xf16>) -> tensor<5xf32> {
  %e = tensor.empty() : tensor<5xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>,
      affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<5xi8>, tensor<5xf16>) outs(%e : tensor<5xf32>) {
  ^bb0(%x: i8, %y: f16, %o: f32):
    %xf = arith.sitofp %x : i8 to f32
    %yf = arith.extf %y : f16 to f32
    %s = arith.addf %xf, %yf : f32
    linalg.yield %s : f32
  } -> tensor<5xf32>
  return %r : tensor<5xf32>
}"""
    for backend in ("llvm-cpu", "cuda", "vulkan-spirv"):
        tree, segment = _unpack(compile_str(text, CompileOptions(target_backends=[backend])))
        member = next(getattr(e, k) for e in tree.executables for k in ("cpu", "cuda", "spirv")
                      if getattr(e, k, None) is not None)
        assert [b.alignment for b in member.exports[0].bindings] == [1, 2, 4], backend
        dispatch = next(c.dispatch for c in tree.functions[0].commands if c.kind == 0)
        dispatch.bindings[1].offset += 1   # (past its buffer too: refused for the alignment first)
        with pytest.raises(rt.ModuleError, match="binding 1: offset 1 is not a multiple of the 2 "
                                                 "bytes the kernel aligns its elements to"):
            rt.read_module(_pack(tree, segment))

