"""CPU-only: the rocm compiler target (AMDGPU via llvmlite, linked by ld.lld) on several chips.

Nothing here runs on an AMD GPU: there is none on the machines this project is built and tested
on, and pyree has no HIP driver yet. The code objects (hsaco) are checked structurally by the small
ELF and MessagePack readers below: ELF machine EM_AMDGPU, the chip in e_flags, one kernel symbol and
one ``.kd`` kernel descriptor per export, and the AMDGPU metadata note naming each kernel with its
kernarg size, wavefront size and work-group size.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cuda"))
import kernel_zoo as zoo  # noqa: E402
from tooling import missing, require_module  # noqa: E402

require_module("xdsl")  # the compiler

from pyree.compiler import CompileError, CompileOptions, compile_str  # noqa: E402
from pyree.compiler import kernel as K  # noqa: E402
from pyree.compiler._fb.ExecutableFormat import ExecutableFormat  # noqa: E402
from pyree.compiler._fb.Module import Module, ModuleT  # noqa: E402
from pyree.compiler.codegen.rocm import generate_hsaco, generate_ir, resolve_target  # noqa: E402
from pyree.compiler.codegen.rocm.hsaco import lld_command  # noqa: E402
from pyree.compiler.codegen.rocm.targets import CHIPS, PRODUCTS  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "data"
CHIPS_TESTED = ["gfx908", "gfx942", "gfx1100"]
EM_AMDGPU = 224


@pytest.fixture(autouse=True)
def lld():
    """ld.lld links every code object: missing, these tests skip (fail under CI=true)."""
    try:
        return lld_command()
    except CompileError as e:
        missing(str(e))


# ---- a minimal ELF64 + MessagePack reader ------------------------------------------------------
def _unpack(buf: bytes, i: int = 0):
    """One MessagePack value at ``buf[i:]``: (value, next offset). Enough for AMDGPU metadata."""
    b = buf[i]
    i += 1
    if b <= 0x7F:
        return b, i
    if b >= 0xE0:
        return b - 0x100, i
    if 0x80 <= b <= 0x8F or b in (0xDE, 0xDF):
        n, i = (b & 0x0F, i) if b <= 0x8F else _length(buf, i, 2 if b == 0xDE else 4)
        out = {}
        for _ in range(n):
            k, i = _unpack(buf, i)
            v, i = _unpack(buf, i)
            out[k] = v
        return out, i
    if 0x90 <= b <= 0x9F or b in (0xDC, 0xDD):
        n, i = (b & 0x0F, i) if b <= 0x9F else _length(buf, i, 2 if b == 0xDC else 4)
        out = []
        for _ in range(n):
            v, i = _unpack(buf, i)
            out.append(v)
        return out, i
    if 0xA0 <= b <= 0xBF or b in (0xD9, 0xDA, 0xDB):
        n, i = (b & 0x1F, i) if b <= 0xBF else _length(buf, i, {0xD9: 1, 0xDA: 2, 0xDB: 4}[b])
        return buf[i:i + n].decode(), i + n
    if b in (0xC4, 0xC5, 0xC6):
        n, i = _length(buf, i, {0xC4: 1, 0xC5: 2, 0xC6: 4}[b])
        return buf[i:i + n], i + n
    fixed = {0xC0: None, 0xC2: False, 0xC3: True}
    if b in fixed:
        return fixed[b], i
    fmt = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i",
           0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}[b]
    return struct.unpack_from(fmt, buf, i)[0], i + struct.calcsize(fmt)


def _length(buf: bytes, i: int, size: int):
    return int.from_bytes(buf[i:i + size], "big"), i + size


def read_hsaco(data: bytes) -> dict:
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not a little-endian ELF64"
    osabi, abiversion = data[7], data[8]
    e_type, e_machine, _, _, _, e_shoff, e_flags, _, _, _, e_shentsize, e_shnum, e_shstrndx = \
        struct.unpack_from("<HHIQQQIHHHHHH", data, 16)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + k * e_shentsize)
                for k in range(e_shnum)]
    symbols, notes = [], []
    for _, kind, _, _, off, size, link, _, _, entsize in sections:
        if kind in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
            strtab = sections[link]
            for at in range(off + entsize, off + size, entsize):
                st_name, st_info = struct.unpack_from("<IB", data, at)
                end = data.index(b"\0", strtab[4] + st_name)
                symbols.append((data[strtab[4] + st_name:end].decode(), st_info & 0xF))
        if kind == 7:  # SHT_NOTE
            at = off
            while at < off + size:
                namesz, descsz, ntype = struct.unpack_from("<III", data, at)
                at += 12
                owner = data[at:at + namesz].rstrip(b"\0").decode()
                at += (namesz + 3) & ~3
                notes.append((owner, ntype, data[at:at + descsz]))
                at += (descsz + 3) & ~3
    metadata = [_unpack(desc)[0] for owner, ntype, desc in notes
                if owner == "AMDGPU" and ntype == 32]  # NT_AMDGPU_METADATA
    assert len(metadata) == 1, notes
    return {"osabi": osabi, "abiversion": abiversion, "type": e_type, "machine": e_machine,
            "flags": e_flags, "symbols": symbols, "metadata": metadata[0]}


def check_hsaco(hsaco: bytes, chip: str, launches, kernels) -> dict:
    elf = read_hsaco(hsaco)
    assert elf["machine"] == EM_AMDGPU and elf["type"] == 3  # ET_DYN, as ld.lld -shared makes
    assert elf["osabi"] == 64 and elf["abiversion"] == 3  # ELFOSABI_AMDGPU_HSA, code object v5
    assert elf["flags"] & 0xFF == CHIPS[chip][0], hex(elf["flags"])
    meta = elf["metadata"]
    assert meta["amdhsa.version"] == [1, 2] and meta["amdhsa.target"].startswith(
        f"amdgcn-amd-amdhsa--{chip}")
    names = [name for name, _ in launches]
    funcs = sorted(n for n, kind in elf["symbols"] if kind == 2)     # STT_FUNC
    objects = sorted(n for n, kind in elf["symbols"] if kind == 1)   # STT_OBJECT
    assert sorted(set(funcs)) == sorted(names)
    assert sorted(set(objects)) == sorted(f"{n}.kd" for n in names)
    by_name = {k[".name"]: k for k in meta["amdhsa.kernels"]}
    assert sorted(by_name) == sorted(names)
    for (name, launch), kernel in zip(launches, kernels):
        k = by_name[name]
        assert k[".symbol"] == f"{name}.kd"
        assert k[".wavefront_size"] == CHIPS[chip][1]
        assert k[".max_flat_workgroup_size"] == launch.block[0]
        assert k[".kernarg_segment_size"] >= 8 * len(kernel.bindings)
        globals_ = [a for a in k[".args"] if a[".value_kind"] == "global_buffer"]
        assert len(globals_) == len(kernel.bindings)
        assert all(a[".address_space"] == "global" and a[".size"] == 8 for a in globals_)
    return meta


# ---- kernel templates --------------------------------------------------------------------------
TEMPLATES = {"elementwise": [zoo.add, lambda: zoo.add((64, 1024)), lambda: zoo.add(dtype="f16"),
                             zoo.chain],
             "reduction": [zoo.row_sum, lambda: zoo.row_sum(op="max"), zoo.col_sum],
             "matmul": [zoo.matmul, lambda: zoo.matmul(dtype="f16", acc_dtype="f32")]}


@pytest.mark.parametrize("chip", CHIPS_TESTED)
@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_templates_link_into_a_code_object(chip, template):
    kernels = [make() for make in TEMPLATES[template]]
    hsaco, launches = generate_hsaco(kernels, resolve_target(chip))
    check_hsaco(hsaco, chip, launches, kernels)


@pytest.mark.parametrize("chip", CHIPS_TESTED)
def test_ir_is_amdgpu_shaped(chip):
    kernels = [zoo.add(), zoo.row_sum()]
    ir, launches = generate_ir(kernels, resolve_target(chip))
    assert 'target triple = "amdgcn-amd-amdhsa"' in ir
    assert '!"amdhsa_code_object_version", i32 500' in ir
    assert ir.count("define amdgpu_kernel void") == 2
    for name, _ in launches:
        assert f"@{name}(ptr addrspace(1)" in ir
    for block in {launch.block[0] for _, launch in launches}:
        assert f'"amdgpu-flat-work-group-size"="1,{block}"' in ir
    assert "llvm.amdgcn.workgroup.id.x" in ir and "llvm.amdgcn.workitem.id.x" in ir
    assert "llvm.amdgcn.s.barrier" in ir and 'fence syncscope("workgroup")' in ir
    assert "addrspace(3) global" in ir and "nvvm" not in ir
    wave = CHIPS[chip][1]
    assert "and i32 %t" in ir and f", {wave - 1}\n" in ir  # lane within the wave
    assert ("llvm.amdgcn.mbcnt.hi" in ir) == (wave == 64)


# ---- whole programs through compile_str ----------------------------------------------------------
def _rocm(vmfb: bytes):
    module = ModuleT.InitFromObj(Module.GetRootAs(vmfb, 0))
    execs = module.executables
    assert execs and all(e.format == ExecutableFormat.rocm for e in execs)
    return vmfb, execs


def _check_module(vmfb: bytes, chip: str) -> int:
    _, execs = _rocm(vmfb)
    # every DataRef is relative to the data segment, named by the module's 48-byte trailer
    (data, ) = struct.unpack_from("<Q", vmfb, len(vmfb) - 48 + 8)
    n = 0
    for e in execs:
        rocm = e.rocm
        assert rocm.targetArch.decode().startswith(chip)
        start = data + rocm.codeObject.offset
        hsaco = vmfb[start:start + rocm.codeObject.length]
        elf = read_hsaco(hsaco)
        assert elf["machine"] == EM_AMDGPU and elf["flags"] & 0xFF == CHIPS[chip][0]
        kernels = {k[".name"]: k for k in elf["metadata"]["amdhsa.kernels"]}
        for export in rocm.exports:
            name = export.name.decode()
            assert len(export.gridSize) == 3 and len(export.blockSize) == 3
            assert kernels[name][".max_flat_workgroup_size"] == export.blockSize[0]
            assert kernels[name][".kernarg_segment_size"] >= 8 * len(export.bindings)
            assert (f"{name}.kd", 1) in elf["symbols"] and (name, 2) in elf["symbols"]
            n += 1
    return n




@pytest.mark.parametrize("chip", CHIPS_TESTED)
def test_mlp_module(chip):
    vmfb = compile_str((DATA / "mlp.mlir").read_text(),
                       CompileOptions(target_backends=["rocm"], rocm_target=chip))
    assert _check_module(vmfb, chip) >= 2
    # the runtime's reader accepts the module (it verifies every DataRef and export)
    require_module("pyree.runtime.module.reader").read_module(vmfb)


@pytest.mark.parametrize("chip", CHIPS_TESTED)
def test_jax_mlp_module(chip):
    require_module("jax")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "frontends"))
    from programs import jax_programs
    (program,) = [p for p in jax_programs() if p.name == "jax_mlp"]
    vmfb = compile_str(program.mlir, CompileOptions(target_backends=["rocm"], rocm_target=chip))
    assert _check_module(vmfb, chip) >= 3


# ---- target names --------------------------------------------------------------------------------
@pytest.mark.parametrize("name, arch, wave", [
    ("gfx908", "gfx908", 64), ("MI300X", "gfx942", 64), ("mi250", "gfx90a", 64),
    ("gfx90a:xnack+", "gfx90a:xnack+", 64), ("gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-", 64),
    ("rx7900xtx", "gfx1100", 32), ("gfx1201", "gfx1201", 32), ("mi355x", "gfx950", 64),
])
def test_target_names_resolve(name, arch, wave):
    target = resolve_target(name)
    assert target.arch == arch and target.wave_size == wave


@pytest.mark.parametrize("chip", sorted(CHIPS))
def test_every_accepted_chip_links(chip):
    kernels = [zoo.row_sum()]
    hsaco, launches = generate_hsaco(kernels, resolve_target(chip))
    check_hsaco(hsaco, chip, launches, kernels)


def test_features_reach_the_code_object():
    target = resolve_target("gfx90a:xnack+:sramecc-")
    elf = read_hsaco(generate_hsaco([zoo.add()], target)[0])
    assert elf["flags"] & 0x300 == 0x300 and elf["flags"] & 0xC00 == 0x800  # xnack on, sramecc off
    assert "gfx90a:sramecc-:xnack+" in elf["metadata"]["amdhsa.target"]


@pytest.mark.parametrize("name", ["gfx803", "gfx1150", "mi400", "gfx908:wave32+",
                                  "gfx1100:xnack+", "sm_80"])
def test_unknown_chips_are_refused_with_the_list(name):
    with pytest.raises(CompileError) as e:
        resolve_target(name)
    assert name in str(e.value) and "gfx942" in str(e.value) and "mi300x" in str(e.value)


def test_products_name_known_chips():
    assert set(PRODUCTS.values()) <= set(CHIPS)


def test_f64_transcendental_is_refused_by_name():
    x = K.Load(0, (K.AffineExpr((1,)),), "f64")
    b = K.Binding("f64", (7,), "read")
    kernel = K.Kernel("exp64", (7,), 1, (b, K.Binding("f64", (7,), "write")),
                      (K.Result(1, (K.AffineExpr((1,)),), K.Unary("exp", x, "f64")),))
    with pytest.raises(CompileError, match="'exp' on f64 is not supported by the rocm backend"):
        generate_hsaco([kernel], resolve_target("gfx942"))


# ---- the real CLI --------------------------------------------------------------------------------
def _cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", *args, "-o",
                           "-"], capture_output=True, input=stdin)


@pytest.mark.parametrize("flag", ["--pyree-rocm-target-chip", "--iree-rocm-target-chip",
                                  "--iree-rocm-target", "--iree-hip-target"])
def test_cli_unknown_chip_fails_without_a_traceback(flag):
    proc = _cli(str(DATA / "add.mlir"), "--iree-hal-target-backends=rocm", f"{flag}=gfx803")
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "Traceback" not in err
    assert "gfx803" in err and "gfx942" in err


@pytest.mark.parametrize("backend", ["rocm", "hip"])
def test_cli_compiles_for_rocm(backend):
    proc = _cli(str(DATA / "add.mlir"), f"--iree-hal-target-backends={backend}",
                "--iree-hip-target=mi300x")
    assert proc.returncode == 0, proc.stderr.decode()
    assert _check_module(proc.stdout, "gfx942") == 1


def test_cli_non_lowerable_op_fails_by_name():
    src = ("func.func @f(%x: tensor<4xf64>) -> tensor<4xf64> {\n"
           "  %y = math.exp %x : tensor<4xf64>\n  return %y : tensor<4xf64>\n}\n")
    proc = _cli("-", "--iree-hal-target-backends=rocm", stdin=src.encode())
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "Traceback" not in err
    assert "'exp' on f64" in err and "rocm" in err


_SWEEP = '''
import sys
from pyree.compiler import kernel as K
from pyree.compiler.codegen.math_expansion import EXACT, GPU_EXPANDED
from pyree.compiler.codegen.rocm import generate_hsaco, resolve_target
from pyree.compiler.errors import CompileError
ix = (K.AffineExpr((1,)),)
BINARY = ("add", "sub", "mul", "div", "rem", "max", "min", "copysign", "pow", "atan2")
UNARY = sorted((GPU_EXPANDED | EXACT | {"floor", "ceil", "sqrt", "rsqrt", "abs", "neg",
                                        "roundeven", "trunc"}) - set(BINARY))
target = resolve_target(sys.argv[1])
for dt in ("f32", "f16", "bf16", "f64"):
    for op in UNARY + list(BINARY):
        x = K.Load(0, ix, dt)
        e = K.Binary(op, x, x, dt) if op in BINARY else K.Unary(op, x, dt)
        k = K.Kernel(op, (7,), 1, (K.Binding(dt, (7,), "read"), K.Binding(dt, (7,), "write")),
                     (K.Result(1, ix, e),))
        try:
            generate_hsaco([k], target)
        except CompileError as err:
            print("refused", dt, op, err)
    for src in ("f32", "f16", "bf16", "f64", "i8", "i32", "i64", "ui32"):
        if src == dt or {src, dt} == {"f16", "bf16"}:
            continue
        if K.is_float(src):
            op = "fpext" if K.itemsize(src) < K.itemsize(dt) else "fptrunc"
            pairs = [(src, dt, op)]
        else:
            unsigned = src.startswith("u")
            pairs = [(src, dt, "uitofp" if unsigned else "sitofp"),
                     (dt, src, "fptoui" if unsigned else "fptosi")]
        for a, b, op in pairs:
            k = K.Kernel("cast", (7,), 1, (K.Binding(a, (7,), "read"), K.Binding(b, (7,), "write")),
                         (K.Result(1, ix, K.Cast(op, K.Load(0, ix, a), b)),))
            generate_hsaco([k], target)
print("done")
'''


@pytest.mark.parametrize("chip", ["gfx942", "gfx1100"])
def test_math_reaches_llvm_only_as_arithmetic(chip):
    """Every float op compiles or is refused by name; none reaches LLVM's AMDGPU backend as math
    it would abort the process on (run in a child process, which such an abort would kill)."""
    proc = subprocess.run([sys.executable, "-c", _SWEEP, chip], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.endswith("done\n"), proc.stderr[-2000:]
    refused = [line.split()[1:3] for line in proc.stdout.splitlines() if line.startswith("refused")]
    assert refused and all(dt == "f64" for dt, _ in refused), refused
    assert ["f64", "exp"] in refused and ["f64", "tanh"] in refused


def test_without_ld_lld_the_error_says_what_to_install(monkeypatch):
    import pyree.compiler.codegen.rocm.hsaco as hsaco
    monkeypatch.delenv("PYREE_LLD", raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(hsaco.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CompileError, match="ld.lld.*apt-get install lld-22.*ziglang.*PYREE_LLD"):
        compile_str((DATA / "add.mlir").read_text(), CompileOptions(target_backends=["rocm"]))
