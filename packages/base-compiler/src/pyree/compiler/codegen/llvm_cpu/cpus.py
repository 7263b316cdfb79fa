"""The x86-64 CPUs the llvm-cpu backend knows by name, and the ISA extensions each one has.

A named CPU is compiled with exactly this feature set (everything else explicitly off), so the
``cpu_features`` recorded in the module are, by construction, all the extensions the code may use.
Names are LLVM's ``-mcpu`` spellings.
"""

from __future__ import annotations

# LLVM feature name -> Linux /proc/cpuinfo flag, for the extensions code generation may use.
CPUINFO_FLAGS: dict[str, str] = {
    "sse": "sse", "sse2": "sse2", "sse3": "pni", "ssse3": "ssse3", "sse4.1": "sse4_1",
    "sse4.2": "sse4_2", "popcnt": "popcnt", "cx16": "cx16", "sahf": "lahf_lm",
    "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c", "bmi": "bmi1", "bmi2": "bmi2",
    "lzcnt": "abm", "movbe": "movbe", "adx": "adx", "aes": "aes", "pclmul": "pclmulqdq",
    "gfni": "gfni", "vaes": "vaes", "vpclmulqdq": "vpclmulqdq", "sha": "sha_ni",
    "avx512f": "avx512f", "avx512bw": "avx512bw", "avx512cd": "avx512cd", "avx512dq": "avx512dq",
    "avx512vl": "avx512vl", "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16",
    "avx512fp16": "avx512_fp16", "avx512ifma": "avx512ifma", "avx512vbmi": "avx512vbmi",
    "avx512vbmi2": "avx512_vbmi2", "avx512bitalg": "avx512_bitalg",
    "avx512vpopcntdq": "avx512_vpopcntdq", "avxvnni": "avx_vnni",
    "amx-tile": "amx_tile", "amx-bf16": "amx_bf16", "amx-int8": "amx_int8",
}

# Always on for x86-64; not extensions, so not reported.
BASELINE = ("64bit", "cmov", "cx8", "fxsr", "mmx", "sse", "sse2")

_V2 = BASELINE + ("cx16", "sahf", "popcnt", "sse3", "ssse3", "sse4.1", "sse4.2")
_WESTMERE = _V2 + ("aes", "pclmul")
_SANDYBRIDGE = _WESTMERE + ("avx",)
_IVYBRIDGE = _SANDYBRIDGE + ("f16c",)
_V3 = _V2 + ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe")
_HASWELL = _V3 + ("aes", "pclmul")
_BROADWELL = _HASWELL + ("adx",)
_V4 = _V3 + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
_SKX = _V4 + ("aes", "pclmul", "adx")
_ICELAKE = _SKX + ("avx512vnni", "avx512ifma", "avx512vbmi", "avx512vbmi2", "avx512bitalg",
                   "avx512vpopcntdq", "gfni", "vaes", "vpclmulqdq", "sha")
_SAPPHIRERAPIDS = _ICELAKE + ("avx512bf16", "avx512fp16", "avxvnni", "amx-tile", "amx-bf16",
                                "amx-int8")
_ZNVER1 = _HASWELL + ("adx", "sha")
_ZNVER3 = _ZNVER1 + ("vaes", "vpclmulqdq")
_ZNVER4 = _ZNVER3 + _ICELAKE[len(_SKX):] + ("avx512bf16",)

CPUS: dict[str, tuple[str, ...]] = {
    "x86-64": BASELINE, "x86-64-v2": _V2, "x86-64-v3": _V3, "x86-64-v4": _V4,
    "nehalem": _V2, "westmere": _WESTMERE, "sandybridge": _SANDYBRIDGE, "ivybridge": _IVYBRIDGE,
    "haswell": _HASWELL, "broadwell": _BROADWELL, "skylake": _BROADWELL,
    "alderlake": _BROADWELL + ("gfni", "vaes", "vpclmulqdq", "sha", "avxvnni"),
    "skylake-avx512": _SKX, "cascadelake": _SKX + ("avx512vnni",),
    "cooperlake": _SKX + ("avx512vnni", "avx512bf16"),
    "icelake-client": _ICELAKE, "icelake-server": _ICELAKE, "tigerlake": _ICELAKE,
    "sapphirerapids": _SAPPHIRERAPIDS, "emeraldrapids": _SAPPHIRERAPIDS,
    "graniterapids": _SAPPHIRERAPIDS,
    "znver1": _ZNVER1, "znver2": _ZNVER1, "znver3": _ZNVER3, "znver4": _ZNVER4,
    "znver5": _ZNVER4,
}
