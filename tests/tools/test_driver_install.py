"""The driver packages install from this repository, the two ways the READMEs say, without a
pyree distribution being looked up on a public index (none is published there): pip's own
resolution (``--dry-run --report``) must take every ``pyree-*`` distribution from the repository's
folders or from the local wheel folder. Third-party dependencies come from the configured index,
as they would for a user."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DRIVERS = ["hal-cuda", "hal-rocm", "hal-vulkan"]


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=300, check=False)


def _dry_run(tmp_path: Path, *requirements: str) -> dict[str, dict]:
    """distribution name -> pip's report entry (where it would come from, its metadata)."""
    report = tmp_path / "report.json"
    proc = _pip("install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
                *requirements)
    assert proc.returncode == 0, proc.stderr
    return {item["metadata"]["name"]: item for item in json.loads(report.read_text())["install"]}


def _pyree(resolved: dict[str, dict]) -> dict[str, str]:
    """The pyree distributions pip chose -> where from; each driver asks for runtime 0.1 (the
    driver ABI it was written against), so a runtime of another minor version is refused."""
    pyree = {name: item["download_info"]["url"] for name, item in resolved.items()
             if name.startswith("pyree-")}
    assert set(pyree) == {"pyree-base-runtime", *(f"pyree-{d}" for d in DRIVERS)}
    for driver in DRIVERS:
        requires = resolved[f"pyree-{driver}"]["metadata"]["requires_dist"]
        assert "pyree-base-runtime~=0.1.0" in requires, requires
    return pyree


def test_from_the_repository_folders(tmp_path):
    folders = [str(ROOT / "packages" / p) for p in ["base-runtime", *DRIVERS]]
    for name, url in _pyree(_dry_run(tmp_path, *folders)).items():
        assert url == (ROOT / "packages" / name.removeprefix("pyree-")).as_uri(), (name, url)


def test_from_a_local_wheel_folder_with_no_index(tmp_path):
    """`pip wheel -w dist` the packages (their dependencies' wheels come along), then install
    from that folder alone, as on a deploy host without network."""
    dist = tmp_path / "dist"
    folders = [str(ROOT / "packages" / p) for p in ["base-runtime", *DRIVERS]]
    built = _pip("wheel", "--quiet", "--wheel-dir", str(dist), *folders)
    assert built.returncode == 0, built.stderr
    resolved = _dry_run(tmp_path, "--no-index", "--find-links", str(dist),
                        *(f"pyree-{d}" for d in DRIVERS))
    assert all(item["download_info"]["url"].startswith(dist.as_uri() + "/")
               for item in resolved.values())
    for name, url in _pyree(resolved).items():
        assert url.startswith(dist.as_uri() + "/"), (name, url)
