"""How much programmatic dependent launch (Hopper's griddepcontrol) saves on a chain of small
kernels in a CUDA graph: the same chain captured with plain launches and with each launch
allowed to start while the one before finishes (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_
SERIALIZATION), each kernel waiting (griddepcontrol.wait) before it reads.

    python3 bench/cuda/pdl_probe.py        # on the GPU host; prints microseconds per kernel
"""

from __future__ import annotations

import ctypes
import json
import sys

import numpy as np
from cuda.bindings import driver as cu

PTX = r"""
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 a, .param .u64 b, .param .u32 n) {
  .reg .pred p; .reg .b32 r<8>; .reg .b64 rd<8>; .reg .f32 f<4>;
  PROLOGUE
  mov.u32 r1, %ctaid.x; mov.u32 r2, %ntid.x; mov.u32 r3, %tid.x;
  mad.lo.s32 r4, r1, r2, r3;
  ld.param.u32 r5, [n];
  setp.ge.u32 p, r4, r5;
  @p bra DONE;
  ld.param.u64 rd1, [a]; ld.param.u64 rd2, [b];
  cvta.to.global.u64 rd1, rd1; cvta.to.global.u64 rd2, rd2;
  mul.wide.u32 rd3, r4, 4;
  add.s64 rd4, rd1, rd3; add.s64 rd5, rd2, rd3;
  ld.global.f32 f1, [rd4];
  add.f32 f2, f1, 0f3F800000;
  st.global.f32 [rd5], f2;
DONE:
  ret;
}
"""


def ok(result):
    err, *rest = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{err}")
    return rest[0] if len(rest) == 1 else rest


def main() -> None:
    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
    ok(cu.cuCtxSetCurrent(ctx))
    stream = ok(cu.cuStreamCreate(1))
    fns = {}
    for name, prologue in (("plain", ""), ("pdl", "griddepcontrol.launch_dependents; griddepcontrol.wait;")):
        mod = ok(cu.cuModuleLoadData(PTX.replace("PROLOGUE", prologue).encode() + b"\0"))
        fns[name] = ok(cu.cuModuleGetFunction(mod, b"k"))
    out = {}
    chain = 200
    for n in (768, 65536, 1 << 20):
        bufs = [ok(cu.cuMemAlloc(4 * n)) for _ in range(2)]
        ok(cu.cuMemsetD32(bufs[0], 0, n))
        for name, pdl in (("plain", False), ("pdl_kernels_plain_launch", False), ("pdl", True)):
            fn = fns["plain" if name == "plain" else "pdl"]
            ok(cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL))
            for i in range(chain):
                cfg = cu.CUlaunchConfig()
                cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = -(-n // 256), 1, 1
                cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 256, 1, 1
                cfg.sharedMemBytes = 0
                cfg.hStream = stream
                if pdl:
                    attr = cu.CUlaunchAttribute()
                    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
                    attr.value.programmaticStreamSerializationAllowed = 1
                    cfg.attrs = [attr]
                    cfg.numAttrs = 1
                else:
                    cfg.numAttrs = 0
                args = ((int(bufs[i % 2]), int(bufs[(i + 1) % 2]), n),
                        (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32))
                ok(cu.cuLaunchKernelEx(cfg, fn, args, 0))
            graph = ok(cu.cuStreamEndCapture(stream))
            exe = ok(cu.cuGraphInstantiate(graph, 0))
            start, stop = ok(cu.cuEventCreate(0)), ok(cu.cuEventCreate(0))
            times = []
            for _ in range(30):
                ok(cu.cuEventRecord(start, stream))
                ok(cu.cuGraphLaunch(exe, stream))
                ok(cu.cuEventRecord(stop, stream))
                ok(cu.cuEventSynchronize(stop))
                times.append(ok(cu.cuEventElapsedTime(start, stop)))
            host = np.zeros(n, np.float32)
            ok(cu.cuMemcpyDtoH(host.ctypes.data, bufs[chain % 2], 4 * n))
            want = float(np.median(times[5:])) * 1000 / chain
            right = bool(np.all(host == chain * len(times)))  # each kernel adds 1 to the last's
            out[f"{name} n={n}"] = {"us_per_kernel": round(want, 3), "right": right}
            print(f"{name:26s} n={n:8d}: {want:.3f} us per kernel, right={right}", flush=True)
            ok(cu.cuMemsetD32(bufs[0], 0, n))
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
