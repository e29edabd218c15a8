"""`python -m moetune`: info, forwarding to the moetune CLI, and a clear
error when the CLI is absent."""
import os
import subprocess
import sys

import pytest

from moetune import __main__ as cli
from conftest import PKG_PARENT, REPO, needs_lib



def run(*argv, **env_extra):
    env = dict(os.environ, PYTHONPATH=PKG_PARENT)
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "moetune", *argv], env=env,
                          capture_output=True, text=True)


@needs_lib
def test_info_names_version_and_path():
    r = run("info")
    assert r.returncode == 0, r.stderr
    assert "libmoetune 0." in r.stdout and "loaded from /" in r.stdout
    assert "GPU" in r.stdout


def test_info_without_library_fails_clearly(tmp_path):
    r = run("info", MOETUNE_LIBRARY=str(tmp_path / "nope.so"))
    assert r.returncode == 1 and "not loaded" in r.stdout and "nope.so" in r.stdout


def test_usage():
    assert run().returncode == 2
    r = run("--help")
    assert r.returncode == 0 and "db show" not in r.stderr and "info" in r.stdout


def test_missing_cli_is_reported(tmp_path):
    r = run("db", "show", "x.db", MOETUNE_CLI=str(tmp_path / "missing"))
    assert r.returncode == 3
    assert "moetune command-line tool was not found" in r.stderr


def test_forwards_to_the_cli(tmp_path):
    fake = tmp_path / "moetune"
    fake.write_text("#!/bin/sh\necho \"fake cli: $*\"\nexit 7\n")
    fake.chmod(0o755)
    r = run("db", "show", "some file.db", MOETUNE_CLI=str(fake))
    assert r.returncode == 7 and r.stdout.strip() == "fake cli: db show some file.db"


@needs_lib
def test_db_show_with_the_real_cli():
    exe = cli.find_cli()
    db = os.path.join(REPO, "db", "tuned", "nvidia-h200.db")
    if exe is None or not os.path.isfile(db):
        pytest.skip("no moetune CLI next to the library or no shipped database")
    r = run("db", "show", db)
    assert r.returncode == 0, r.stderr
    assert "NVIDIA H200" in r.stdout
