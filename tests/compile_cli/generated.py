"""Generated inputs for the compiler's tool tests."""


def matmul_chain(n: int) -> str:
    """MLIR of ``n`` chained matmuls (each followed by tanh) of different widths: ``n`` distinct
    kernels, so that code generation takes time in proportion to ``n``."""
    widths = [8 + i for i in range(n + 1)]
    args = [f"%x: tensor<4x{widths[0]}xf32>"] + [
        f"%w{i}: tensor<{widths[i]}x{widths[i + 1]}xf32>" for i in range(n)]
    lines = [f"func.func @chain({', '.join(args)}) -> tensor<4x{widths[n]}xf32> {{",
             "  %zero = arith.constant 0.0 : f32"]
    value = "%x"
    for i in range(n):
        a, b = widths[i], widths[i + 1]
        lines += [f"  %e{i} = tensor.empty() : tensor<4x{b}xf32>",
                  f"  %f{i} = linalg.fill ins(%zero : f32) outs(%e{i} : tensor<4x{b}xf32>) "
                  f"-> tensor<4x{b}xf32>",
                  f"  %m{i} = linalg.matmul ins({value}, %w{i} : tensor<4x{a}xf32>, "
                  f"tensor<{a}x{b}xf32>) outs(%f{i} : tensor<4x{b}xf32>) -> tensor<4x{b}xf32>",
                  f"  %t{i} = math.tanh %m{i} : tensor<4x{b}xf32>"]
        value = f"%t{i}"
    lines += [f"  return {value} : tensor<4x{widths[n]}xf32>", "}"]
    return "\n".join(lines) + "\n"
