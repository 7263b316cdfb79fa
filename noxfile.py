"""Project sessions. `nox -l` lists them; README.md names the two that matter first.

    nox -s demo                     install both packages, compile the examples, run them on local-task
    nox -s "tests(driver='local')"  the test suite on the CPU drivers (what CI runs)
    nox -s "tests(driver='cuda')"   GPU tests: only on a host with an NVIDIA GPU
    nox -s "tests(driver='vulkan')" Vulkan device tests (Mesa's lavapipe is enough)
    nox -s vulkan_after_local       the Vulkan tests in the local session's environment (CI)
    nox -s pypi                     resolve the tests' requirements from PyPI alone (no pip config)
    nox -s schemas                  regenerate the vendored FlatBuffer code; fail if it was stale
    nox -s lint                     ruff
    nox -s wheels                   build every distribution's wheel into dist/
"""

import os

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests(driver='local')", "lint"]

PACKAGES = ["packages/base-compiler", "packages/base-runtime"]
DRIVER_PACKAGES = {"cuda": ["packages/hal-cuda"], "vulkan": ["packages/hal-vulkan"],
                   "rocm": ["packages/hal-rocm"]}
# The pytest markers of tests that need a device; the local session runs everything else. (rocm's
# GPU tests run its driver on an NVIDIA GPU through a HIP-on-CUDA shim: they carry ``cuda``.)
DEVICE_MARKERS = ("cuda", "vulkan")
# cuda-bindings: the cuda driver no longer uses it, but tests/drivers/cuda checks the driver's C table of
# entry points, constants and structs against cuda-python's own declarations.
# pytest-xdist: the tests run in a process per core the machine gives this one, two at least, at
# most eight and one per 3 GiB of memory (each holds torch, JAX and a compiler); a test file stays
# in one process (--dist loadfile), so its module-scoped compiles are made once.
MEMORY_GIB = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2
WORKERS = max(2, min(8, CORES, int(MEMORY_GIB // 3)))
TEST_DEPS = ["pytest>=8", "pytest-timeout", "pytest-xdist>=3", "hypothesis>=6", "cuda-bindings>=12.4"]
# The importer extras, so that tests/importers and tests/models run end to end (a missing one
# fails them). torch 2.13.0, the release torch-mlir's FX importer is tested with here: where pip
# can find PyTorch's CPU build of it (PyTorch's CPU index, or a wheel folder in pip's find-links)
# it takes that one, whose local version "+cpu" sorts above the plain release; on a machine that
# reaches only PyPI it takes PyPI's, the CUDA build (several GB with its NVIDIA libraries; README.md
# says how to keep the download small). onnxruntime is the ONNX tests' reference; transformers
# gives tests/importers the Hugging Face architectures users bring (tiny random configurations).
IMPORTER_DEPS = ["torch==2.13.0", "onnxruntime", "pillow", "transformers==4.57.1"]
# torchvision's MobileNet/ResNet (tests/models). Its PyPI wheel is a CUDA build whose torch
# requirement must not be resolved again: installed alone, without dependencies (pillow is
# above, numpy comes with pyree).
TORCHVISION = "torchvision==0.28.0"
# JAX (CPU), whose StableHLO the tests compile and whose results they compare against.
JAX_DEPS = ["jax==0.10.2", "jaxlib==0.10.2"]
EXAMPLES = [
    ("tests/data/add.mlir", "add", ['--input=4xf32=[1 2 3 4]', "--input=4xf32=[2 2 2 2]"]),
    ("tests/data/mlp.mlir", "mlp", ["--input=37x53xf32=0.5"]),
]


def test_requirements(driver: str) -> list[str]:
    """What the tests session installs for ``driver`` (TORCHVISION comes after, alone)."""
    # Every driver package, so that every test module imports (under CI a missing import fails
    # collection); the cuda session runs on a GPU host that needs only its own (and rocm's, whose
    # GPU tests run there through the HIP-on-CUDA shim).
    drivers = DRIVER_PACKAGES["cuda"] + DRIVER_PACKAGES["rocm"] if driver == "cuda" \
        else [p for ps in DRIVER_PACKAGES.values() for p in ps]
    packages = [p + "[onnx,torch,tosa]" if p == "packages/base-compiler" else p for p in PACKAGES]
    # pyree-serve brings ray[serve] (~80 MB) for tests/serve, which only the local session runs.
    serve = ["packages/serve"] if driver == "local" else []
    return [*packages, *drivers, *serve, *TEST_DEPS, *IMPORTER_DEPS, *JAX_DEPS]


@nox.session
@nox.parametrize("driver", ["local", "cuda", "vulkan"])
def tests(session, driver):
    """local: everything that needs no device (the GPU drivers are installed too: their CPU-side
    tests, e.g. --list_drivers on a host without libcuda, run here). cuda/vulkan: the tests that
    need that device (vulkan runs on Mesa's lavapipe in CI)."""
    session.install(*test_requirements(driver))
    session.install("--no-deps", TORCHVISION)
    marker = " and ".join(f"not {d}" for d in DEVICE_MARKERS) if driver == "local" else driver
    workers = ["-n", str(WORKERS), "--dist", "loadfile"] if driver != "cuda" else []
    # --durations: CI's log names the slowest tests, where its time goes
    session.run("pytest", "-m", marker, *workers, "--durations=40", *session.posargs)


@nox.session(python=False)
def vulkan_after_local(session):
    """The Vulkan tests (on Mesa's lavapipe in CI) in the environment tests(driver='local')
    installed, whose requirements include the vulkan session's: CI runs this after that session
    instead of installing the same packages (torch among them) a second time."""
    python = os.path.join(".nox", "tests-driver-local", "bin", "python")
    session.run(python, "-m", "pytest", "-m", "vulkan", "-n", str(WORKERS), "--dist", "loadfile",
                *session.posargs, external=True)


@nox.session
def pypi(session):
    """The tests session's requirements resolve on a machine that reaches only PyPI: pip's
    configuration and find-links switched off, a dry run that reads the packages' metadata."""
    plain = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    plain["PIP_CONFIG_FILE"] = os.devnull  # pip then reads no configuration file at all
    for args in (test_requirements("local"), ["--no-deps", TORCHVISION]):
        session.run("python", "-m", "pip", "install", "--dry-run", "--ignore-installed",
                    "--quiet", *args, env=plain, include_outer_env=False)


@nox.session
def demo(session):
    session.install(*PACKAGES)
    tmp = session.create_tmp()
    for source, function, inputs in EXAMPLES:
        module = f"{tmp}/{function}.vmfb"
        session.run("pyree-compile", source, "-o", module, "--pyree-hal-target-backends=llvm-cpu")
        session.run("pyree-run-module", "--device=local-task", f"--module={module}",
                    f"--function={function}", *inputs)


@nox.session(python=False)
def schemas(session):
    """Regenerates the vendored FlatBuffer code; fails when what was committed was stale."""
    session.run("python3", "schemas/generate.py")


@nox.session
def lint(session):
    session.install("ruff")
    session.run("ruff", "check", "packages", "tests", "bench", "dev", "noxfile.py", "schemas")


@nox.session
def wheels(session):
    session.install("build")
    for package in PACKAGES + ["packages/serve"] + [p for ps in DRIVER_PACKAGES.values() for p in ps]:
        session.run("python", "-m", "build", "--wheel", "--outdir", "dist", package)
