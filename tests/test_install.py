"""The developer install (``pip install -e .``) and the regular one (``pip install .``) give a
working ``twistd rsocket``, in a fresh virtual environment.

twistd finds its plugins by scanning ``sys.path`` for ``twisted/plugins/`` directories: the
repository's ``twisted/plugins/rsocket_tx_plugin.py`` must be found from the install alone
(setup.cfg ``package_dir``: the editable install puts the repository root on ``sys.path`` with a
path ``.pth``; the regular install copies the plugin into ``site-packages/twisted/plugins/``).

Cheap and offline: the fresh venv has no pip and no packages of its own (no
``--system-site-packages``); one ``.pth`` line puts this test environment's site-packages on its
``sys.path`` as a plain directory (so Twisted and the build backend import, while that
directory's own ``.pth`` files, among them this checkout's install, are not run); this
environment's pip installs the project (``--python``, ``--no-deps --no-index
--no-build-isolation``) from a copy of the project's files, so the checkout stays untouched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: what a build of the project reads
PROJECT_FILES = ("setup.cfg", "setup.py", "mypyc.ini", "pyproject.toml", "README.rst", "LICENSE",
                 "rsocket_tx", "pyspark_rsocket", "twisted")
#: seconds any one step may take (the machine may be loaded)
STEP_TIMEOUT = 300
#: ``twistd`` itself, run with ``python -c``
TWISTD = "import sys; sys.argv[0] = 'twistd'; from twisted.scripts.twistd import run; run()"


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run ``argv`` in ``cwd`` without PYTHONPATH (nothing but the venv decides what is
    importable); stdout and stderr captured as text. Builds are pure Python
    (``RSOCKET_TX_PURE=1``): these tests check the packaging, not the compile (a minute or more
    each; ``make test`` runs on the compiled build, checked by ``tests/test_compiled.py``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["RSOCKET_TX_PURE"] = "1"
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=STEP_TIMEOUT)


def fresh_venv(directory: Path) -> Path:
    """A new venv without pip whose ``sys.path`` ends with this environment's site-packages
    (as plain directories); returns its python."""
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(directory)
    python = directory / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                   "['purelib'])"], cwd=directory).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    Path(purelib, "zz-test-environment.pth").write_text("\n".join(ours) + "\n")
    return python


def copy_project(project: Path) -> Path:
    """Copy what a build reads into ``project``; returns it."""
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, project / name,
                            ignore=shutil.ignore_patterns("__pycache__", "dropin.cache", "*.so",
                                                          "*.pyd"))
        else:
            project.mkdir(exist_ok=True)
            shutil.copy2(source, project / name)
    return project


@pytest.mark.parametrize("editable", [True, False], ids=["pip-install-e", "pip-install"])
def test_twistd_finds_the_rsocket_plugin_after_pip_install(tmp_path: Path, editable: bool):
    project = copy_project(tmp_path / "project")
    python = fresh_venv(tmp_path / "venv")
    elsewhere = tmp_path / "elsewhere"  # not the project: nothing found through the cwd
    elsewhere.mkdir()
    before = run([str(python), "-c", "import rsocket_tx"], cwd=elsewhere)
    assert before.returncode != 0, "rsocket_tx importable before the install: not a fresh venv"

    install = run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                   "--no-deps", "--no-index", "--no-build-isolation",
                   *(["-e"] if editable else []), str(project)], cwd=elsewhere)
    assert install.returncode == 0, install.stdout + install.stderr

    where = run([str(python), "-c", "import rsocket_tx; print(rsocket_tx.__file__)"],
                cwd=elsewhere)
    location = Path(where.stdout.strip()).resolve()
    if editable:
        assert location.is_relative_to(project.resolve()), where
    else:
        assert location.is_relative_to((tmp_path / "venv").resolve()), where
    # each plugin of twisted/plugins is found, with its own options
    for plugin, option in (("rsocket", "--responder"), ("jini-mux", "--dispatcher"),
                           ("mux", "--protocol"), ("rs2015", "--responder")):
        twistd = run([str(python), "-c", TWISTD, plugin, "--help"], cwd=elsewhere)
        assert twistd.returncode == 0, twistd.stdout + twistd.stderr
        assert f"Usage: twistd [options] {plugin} [options]" in twistd.stdout
        assert option in twistd.stdout
    # PEP 561: the package says it is typed
    assert (location.parent / "py.typed").is_file()


def test_the_wheel_ships_license_typing_marker_and_metadata(tmp_path: Path):
    """A wheel built from the checkout (offline) carries the Apache-2.0 LICENSE, the PEP 561
    ``py.typed`` marker, the version of ``rsocket_tx.__version__`` (its one source) and the
    classifiers and project URLs of setup.cfg."""
    import email
    import zipfile

    import rsocket_tx

    project = copy_project(tmp_path / "project")
    wheels = tmp_path / "wheels"
    build = run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
                 "--no-build-isolation", "--wheel-dir", str(wheels), str(project)], cwd=tmp_path)
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = wheels.glob("rsocket_tx-*.whl")
    assert wheel.name.startswith(f"rsocket_tx-{rsocket_tx.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        dist_info = f"rsocket_tx-{rsocket_tx.__version__}.dist-info"
        (license_name,) = [n for n in names
                           if n.startswith(dist_info + "/") and n.endswith("LICENSE")]
        license_text = archive.read(license_name).decode()
        metadata = email.message_from_bytes(archive.read(f"{dist_info}/METADATA"))
    assert "rsocket_tx/py.typed" in names
    assert "twisted/plugins/rsocket_tx_plugin.py" in names
    assert license_text == (REPO / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    assert metadata["Version"] == rsocket_tx.__version__
    classifiers = metadata.get_all("Classifier")
    for expected in ("Typing :: Typed", "Framework :: Twisted",
                     "License :: OSI Approved :: Apache Software License",
                     "Intended Audience :: Developers",
                     *(f"Programming Language :: Python :: 3.{n}" for n in (10, 11, 12, 13))):
        assert expected in classifiers
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert metadata.get_all("Project-URL")
    assert metadata["Requires-Python"] == ">=3.10"


def test_make_demo_installs_the_package_alone():
    """``make demo`` needs twistd and rsocket-tx only: its install has no extras (not the
    dev tools, not Spark) and it builds no interop peers."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    plan = run(["make", "--dry-run", "--always-make", "demo"], cwd=REPO)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    installs = [line for line in plan.stdout.splitlines() if "pip install" in line]
    assert installs and all(line.rstrip().endswith("install --quiet -e .")
                            for line in installs), plan.stdout
    assert "install_peers" not in plan.stdout and "[dev]" not in plan.stdout
    assert "scripts/demo.sh" in plan.stdout
