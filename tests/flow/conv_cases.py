"""Convolutions written as linalg.generic with window maps (the form the front end gives the named
conv ops), optionally behind a tensor.pad, a bias init and a relu, with a float64 numpy reference:
the flow tests (test_convolution.py, test_implicit_gemm.py) and the GPU cases (tests/codegen/cuda) share
them. No compiler import here: the GPU host runs its cases from prebuilt modules."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NP = {"f32": np.float32, "f16": np.float16}


@dataclass(frozen=True)
class Conv:
    layout: str = "nchw"       # nchw (filter fchw), nhwc (filter hwcf), ngchw (filter gfchw)
    n: int = 1
    c: int = 3
    h: int = 9
    w: int = 11
    f: int = 5
    kh: int = 3
    kw: int = 2
    stride: tuple = (1, 1)
    dilation: tuple = (1, 1)
    pad: tuple = (0, 0)        # symmetric, on h and w
    groups: int = 1
    dtype: str = "f32"         # inputs; the accumulator is f32
    bias_relu: bool = False

    @property
    def out_hw(self):
        hp, wp = self.h + 2 * self.pad[0], self.w + 2 * self.pad[1]
        oh = (hp - self.dilation[0] * (self.kh - 1) - 1) // self.stride[0] + 1
        ow = (wp - self.dilation[1] * (self.kw - 1) - 1) // self.stride[1] + 1
        return oh, ow

    def shapes(self):
        n, c, h, w, f, kh, kw, g = self.n, self.c, self.h, self.w, self.f, self.kh, self.kw, self.groups
        oh, ow = self.out_hw
        ph, pw = h + 2 * self.pad[0], w + 2 * self.pad[1]
        if self.layout == "nchw":
            return (n, c, h, w), (n, c, ph, pw), (f, c, kh, kw), (n, f, oh, ow)
        if self.layout == "nhwc":
            return (n, h, w, c), (n, ph, pw, c), (kh, kw, c, f), (n, oh, ow, f)
        return (n, g, c, h, w), (n, g, c, ph, pw), (g, f, c, kh, kw), (n, g, f, oh, ow)

    def reference(self, x, wt, bias):
        """float64 convolution in the layout's own terms."""
        x, wt = x.astype(np.float64), wt.astype(np.float64)
        if self.layout == "nhwc":
            x, wt = x.transpose(0, 3, 1, 2), wt.transpose(3, 2, 0, 1)
        if self.layout != "ngchw":
            x, wt = x[:, None], wt[None]
        (sh, sw), (dh, dw), (ph, pw) = self.stride, self.dilation, self.pad
        x = np.pad(x, ((0, 0), (0, 0), (0, 0), (ph, ph), (pw, pw)))
        oh, ow = self.out_hw
        out = np.zeros(x.shape[:2] + (wt.shape[1], oh, ow))
        for i in range(self.kh):
            for j in range(self.kw):
                win = x[:, :, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                        j * dw: j * dw + sw * (ow - 1) + 1: sw]
                out += np.einsum("ngchw,gfc->ngfhw", win, wt[:, :, :, i, j])
        if self.layout == "nhwc":
            out = out[:, 0].transpose(0, 2, 3, 1)
        elif self.layout == "nchw":
            out = out[:, 0]
        if self.bias_relu:
            bshape = [1] * out.ndim
            bshape[-1 if self.layout == "nhwc" else -3] = -1
            out = np.maximum(out + bias.astype(np.float64).reshape(bshape), 0)
        return out

    def mlir(self) -> str:
        xs, ps, ws, os_ = self.shapes()
        t = lambda s, dt: f"tensor<{'x'.join(map(str, s))}x{dt}>"
        (sh, sw), (dh, dw) = self.stride, self.dilation
        hi, wi = f"oh * {sh} + kh * {dh}", f"ow * {sw} + kw * {dw}"
        if self.layout == "nchw":
            loops = "n, f, oh, ow, c, kh, kw"
            imap, wmap, omap = f"n, c, {hi}, {wi}", "f, c, kh, kw", "n, f, oh, ow"
            bias_dim, n_par = "f", 4
        elif self.layout == "nhwc":
            loops = "n, oh, ow, f, kh, kw, c"
            imap, wmap, omap = f"n, {hi}, {wi}, c", "kh, kw, c, f", "n, oh, ow, f"
            bias_dim, n_par = "f", 4
        else:
            loops = "n, g, f, oh, ow, c, kh, kw"
            imap, wmap, omap = f"n, g, c, {hi}, {wi}", "g, f, c, kh, kw", "n, g, f, oh, ow"
            bias_dim, n_par = "f", 5
        par = ", ".join(['"parallel"'] * n_par)
        its = par + ", " + ", ".join(['"reduction"'] * 3)
        out_loops = omap
        dt = self.dtype
        lines = [f"func.func @conv(%x: {t(xs, dt)}, %w: {t(ws, dt)}, %b: tensor<{self.f}xf32>) -> {t(os_, 'f32')} {{",
                 "  %z = arith.constant 0.0 : f32",
                 f"  %zi = arith.constant 0.0 : {dt}"]
        src = "%x"
        if any(self.pad):
            pads = [0] * len(xs)
            hdim = 1 if self.layout == "nhwc" else len(xs) - 2
            pads[hdim], pads[hdim + 1] = self.pad
            low = ", ".join(map(str, pads))
            args = ", ".join(f"%i{k}: index" for k in range(len(xs)))
            lines += [f"  %p = tensor.pad %x low[{low}] high[{low}] {{",
                      f"  ^bb0({args}):",
                      f"    tensor.yield %zi : {dt}",
                      f"  }} : {t(xs, dt)} to {t(ps, dt)}"]
            src = "%p"
        lines.append(f"  %e = tensor.empty() : {t(os_, 'f32')}")
        if self.bias_relu:
            lines += [f"  %i = linalg.generic {{indexing_maps = [affine_map<({out_loops}) -> ({bias_dim})>, "
                      f"affine_map<({out_loops}) -> ({out_loops})>], iterator_types = [{par}]}}"
                      f" ins(%b : tensor<{self.f}xf32>) outs(%e : {t(os_, 'f32')}) {{",
                      "  ^bb0(%v: f32, %o: f32):",
                      "    linalg.yield %v : f32",
                      f"  }} -> {t(os_, 'f32')}"]
        else:
            lines.append(f"  %i = linalg.fill ins(%z : f32) outs(%e : {t(os_, 'f32')}) -> {t(os_, 'f32')}")
        body = [f"  ^bb0(%a: {dt}, %bb: {dt}, %acc: f32):"]
        if dt != "f32":
            body += [f"    %ae = arith.extf %a : {dt} to f32", f"    %be = arith.extf %bb : {dt} to f32",
                     "    %m = arith.mulf %ae, %be : f32"]
        else:
            body += ["    %m = arith.mulf %a, %bb : f32"]
        body += ["    %s = arith.addf %acc, %m : f32", "    linalg.yield %s : f32"]
        lines += [f"  %r = linalg.generic {{indexing_maps = [affine_map<({loops}) -> ({imap})>, "
                  f"affine_map<({loops}) -> ({wmap})>, affine_map<({loops}) -> ({omap})>], "
                  f"iterator_types = [{its}]}} ins({src}, %w : {t(ps, dt)}, {t(ws, dt)}) "
                  f"outs(%i : {t(os_, 'f32')}) {{"] + body + [f"  }} -> {t(os_, 'f32')}"]
        res = "%r"
        if self.bias_relu:
            ident = f"affine_map<({out_loops}) -> ({out_loops})>"
            lines += [f"  %y = linalg.generic {{indexing_maps = [{ident}, {ident}], iterator_types = "
                      f"[{par}]}} ins(%r : {t(os_, 'f32')}) outs(%e : {t(os_, 'f32')}) {{",
                      "  ^bb0(%v: f32, %o: f32):",
                      "    %q = arith.maximumf %v, %z : f32",
                      "    linalg.yield %q : f32",
                      f"  }} -> {t(os_, 'f32')}"]
            res = "%y"
        lines += [f"  return {res} : {t(os_, 'f32')}", "}"]
        return "\n".join(lines)

    def inputs(self, rng):
        xs, _, ws, _ = self.shapes()
        dt = NP[self.dtype]
        return [rng.standard_normal(xs).astype(dt), rng.standard_normal(ws).astype(dt),
                rng.standard_normal(self.f).astype(np.float32)]


CASES = {
    "nchw": Conv(),
    "nchw_stride2_pad": Conv(h=10, w=9, stride=(2, 2), pad=(1, 1), kh=3, kw=3),
    "nchw_stride3_batch2": Conv(n=2, c=5, h=13, w=11, f=7, stride=(3, 3), kh=3, kw=3),
    "nchw_dilation2_pad": Conv(h=11, w=10, dilation=(2, 2), pad=(2, 1), kh=3, kw=3, bias_relu=True),
    "nchw_1x1": Conv(c=7, f=6, kh=1, kw=1, bias_relu=True),
    "nchw_1x1_stride2": Conv(n=2, c=7, f=6, kh=1, kw=1, stride=(2, 2)),
    "nchw_mixed_stride": Conv(stride=(2, 1), dilation=(1, 2), pad=(1, 0)),
    "nchw_1x3": Conv(n=2, kh=1, kw=3, pad=(0, 1)),
    "nhwc": Conv(layout="nhwc"),
    "nhwc_stride2_pad_batch2": Conv(layout="nhwc", n=2, c=5, h=10, w=9, f=3, stride=(2, 2),
                                    pad=(1, 1), kh=3, kw=3, bias_relu=True),
    "nhwc_dilation2": Conv(layout="nhwc", h=11, w=12, dilation=(2, 2), kh=3, kw=3),
    "nhwc_1x1": Conv(layout="nhwc", n=2, c=7, f=9, kh=1, kw=1),
    "grouped": Conv(layout="ngchw", n=2, groups=3, c=3, f=5, pad=(1, 1), kh=3, kw=3),
    "f16": Conv(dtype="f16", c=5, f=7, pad=(1, 1), kh=3, kw=3, bias_relu=True),
    "f16_nhwc": Conv(layout="nhwc", dtype="f16", c=5, f=7, stride=(2, 2), kh=3, kw=3),
}
