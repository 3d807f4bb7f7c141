"""Start a module of this package as a process that imports this very ggrad (whatever the caller's cwd)."""

import os
import subprocess
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def spawn(module, args, **popen_kwargs):
    """`python -m module *args` with the directory holding this `ggrad` first on its path."""
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=_ROOT if not path else _ROOT + os.pathsep + path)
    return subprocess.Popen([sys.executable, "-m", module, *args], env=env, **popen_kwargs)
