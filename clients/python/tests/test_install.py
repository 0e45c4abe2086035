"""`pip install` from the checkout, offline, into a fresh venv: the installed package (not the
source tree) then talks to the daemon."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from conftest import CLIENT_DIR

# What an offline, no-build-isolation install needs from the interpreter's environment, and the
# Debian 12 package that provides it.
NEEDED = {"ensurepip": "python3-venv", "setuptools": "python3-setuptools", "wheel": "python3-wheel"}


def test_pip_installs_the_package_offline_from_a_checkout(daemon, tmp_path):
    missing = [f"{module} ({package})" for module, package in NEEDED.items()
               if importlib.util.find_spec(module) is None]
    if missing:
        pytest.skip(f"{sys.executable} cannot build a package offline without {', '.join(missing)}")
    source = tmp_path / "python"  # a copy: setuptools builds in the source folder
    shutil.copytree(CLIENT_DIR, source, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")}
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", "--no-cache-dir", str(source)],
        capture_output=True, text=True, env=env, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import sys, metaharness; print(metaharness.__file__); print(metaharness.Client(sys.argv[1]).status().pid)",
         daemon.socket],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert probe.returncode == 0, probe.stderr
    where, pid = probe.stdout.split()
    assert where.startswith(str(venv)), "imported from the venv, not the checkout"
    assert int(pid) == daemon.proc.pid
