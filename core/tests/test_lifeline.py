# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""A worker dies with its parent, even when the parent died before the worker asked."""

import os
import signal
import subprocess
import sys

from tirx_kernels.core.lifeline import ENV_PARENT

CHILD = "from tirx_kernels.core.lifeline import die_with_parent; die_with_parent(); print('ran')"


def run_child(env):
    return subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60
    )


def test_a_child_whose_parent_is_already_gone_dies_at_once():
    # a parent pid that is not the child's parent: the parent died before the request
    p = run_child({**os.environ, ENV_PARENT: str(os.getpid() + 10**6)})
    assert p.returncode == -signal.SIGKILL and "ran" not in p.stdout


def test_a_child_of_a_living_parent_runs():
    p = run_child({**os.environ, ENV_PARENT: str(os.getpid())})
    assert p.returncode == 0 and p.stdout == "ran\n", p.stderr
    p = run_child({k: v for k, v in os.environ.items() if k != ENV_PARENT})  # started by hand
    assert p.returncode == 0 and p.stdout == "ran\n", p.stderr
