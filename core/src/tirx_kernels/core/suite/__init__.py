# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
"""``tirx-suite``: the curated regression sweep, its baselines and reports.

Modules, one job each: ``config`` (suite YAML -> workloads), ``gpus`` (inventory, atomic
acquisition, interference monitor), ``lockfile`` (lock files safe on a shared host),
``scheduler`` (the pure scheduling loop), ``executor`` (workloads in child processes),
``results`` (run JSON and provenance), ``schema`` (checks of the JSON read back),
``baseline`` (promote / merge / compare), ``report`` + ``plot`` (markdown and PNG), ``cli``.
"""

# Row statuses of a suite run. INTERFERED is transient (requeued), never a final status.
PASS, FAIL, SKIP, TIMEOUT = "PASS", "FAIL", "SKIP", "TIMEOUT"
INTERFERED, BASELINE_ERROR = "INTERFERED", "BASELINE_ERROR"
STATUSES = (PASS, SKIP, FAIL, TIMEOUT, BASELINE_ERROR)
FAILED = frozenset({FAIL, TIMEOUT, BASELINE_ERROR})  # real failures: fail-fast, exit 1
