"""Runs Python code in a fresh process of the test's interpreter, with this checkout on the
path and extra environment variables: for what a process decides once at start-up (plugin
options, switches read at import, the disk cache across a restart)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, timeout=240, drop=(), **env):
    """The finished process (stdout and stderr as text); `drop` names variables to unset."""
    environment = dict(os.environ, PYTHONPATH=ROOT, **env)
    for name in drop:
        environment.pop(name, None)
    return subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
