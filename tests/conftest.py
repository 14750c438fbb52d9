import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def cmake_exe() -> str:
    exe = shutil.which("cmake")
    if exe is None:
        pytest.skip("cmake not on PATH")
    return exe


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def python_exe() -> str:
    return sys.executable
