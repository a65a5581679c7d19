#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
# One H200 validation run (device tool): every kernel config through `tirx-run test`, the
# GPU pytest paths (PYTEST_ARGS: each in its own process, in parallel), FlashInfer's own
# tests on our functions beside them (UPSTREAM_ARGS, e.g. "--shards 6"; prepared files in
# .device/fi-tests must travel), a `tirx-run bench` per kernel of BENCH_KERNELS (each at
# most BENCH_T seconds, default 300), the per-call cost of public ops (OVERHEAD_ARGS) and a
# suite sweep; results under $OUT. A step whose variable is set to "skip" is skipped.
# Kernels this run compiled come back as $OUT/kernel-cache-new.tar.xz (the cache entries
# written after its start): merge them into .device/kernel-cache.tar.xz for the next call.
# TIRX_TEST_TIMEOUT=<s> ends a pytest process whose test runs longer (a hung kernel), naming
# the test in $OUT/pytest-i.failures (scripts/failures_now.py). tirx-run runs its configs in
# warm workers (--reuse-workers); REUSE= (empty) gives each config its own process again.
# Usage, from the repository root:
#   TEST_ARGS="--family basic" BENCH_KERNELS="rmsnorm fp16_bf16_gemm" BENCH_ARGS="--rounds 3" \
#   SUITE_ARGS="--family basic" PYTEST_ARGS="packages" OVERHEAD_ARGS="--batch 1 4" \
#     scripts/h200-validate.sh <git-sha>
set -uo pipefail
sha=${1:?usage: h200-validate.sh <git commit of this checkout>}
started=$(mktemp)  # unpacked cache entries keep their archive's (earlier) times
source scripts/h200-env.sh || exit 1
out=${OUT:?OUT must name the results folder}
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv > "$out/gpu.csv"
if [ "${UPSTREAM_ARGS:-skip}" != skip ]; then  # compile-bound like the tests: run beside them
  ( timeout "${UPSTREAM_T:-430}" python3 packages/tirx-kernels-flashinfer/scripts/upstream_tests.py \
      run ${UPSTREAM_ARGS} --junit "$out/fi-upstream.xml" > "$out/fi-upstream.log" 2>&1
    echo "upstream tests: exit $?" >> "$out/fi-upstream.log"
    cp .device/fi-tests/shard-*.log .device/fi-tests/failures*.txt "$out/" 2>/dev/null ) &
  upstream=$!
fi
if [ "${TEST_ARGS:-}" != skip ]; then
  python3 -m tirx_kernels.core.cli test ${TEST_ARGS:-} -j "${JOBS:-12}" --timeout 300 --json \
    ${REUSE---reuse-workers} > "$out/test.json" 2> "$out/test.log"; echo "tirx-run test: exit $?"
fi
if [ "${PYTEST_ARGS:-skip}" != skip ]; then
  # one process per path, all at once: kernel compiles dominate, and one serial process
  # overran 170 s on 2026-12-05 where ten parallel ones took 190 s
  i=0
  for path in ${PYTEST_ARGS}; do
    i=$((i + 1))
    # failures_now: each failure's reason on record at once (a timeout may come first)
    ( TIRX_FAILURES_LOG="$out/pytest-$i.failures" PYTHONPATH="$PWD/scripts:${PYTHONPATH:-}" \
      timeout "${PYTEST_T:-400}" python3 -m pytest -q -p no:cacheprovider -p failures_now \
        -o addopts="" "$path" > "$out/pytest-$i.log" 2>&1
      echo "pytest $path: exit $?" >> "$out/pytest-$i.log" ) &
  done
  wait
  for j in $(seq 1 "$i"); do tail -2 "$out/pytest-$j.log"; done
fi
if [ "${OVERHEAD_ARGS:-skip}" != skip ]; then
  python3 scripts/op_overhead.py ${OVERHEAD_ARGS} --json "$out/overhead.json" \
    > "$out/overhead.md" 2> "$out/overhead.log"; echo "op_overhead: exit $?"
fi
if [ -n "${upstream:-}" ]; then wait "$upstream"; tail -3 "$out/fi-upstream.log"; fi
for kernel in ${BENCH_KERNELS:-}; do
  # the child logs survive a timeout (the JSON is written at the end)
  timeout "${BENCH_T:-300}" python3 -m tirx_kernels.core.cli bench --kernel "$kernel" ${BENCH_ARGS:-} \
    --log-dir "$out/logs-$kernel" --json ${REUSE---reuse-workers} > "$out/bench_$kernel.json" 2> "$out/bench_$kernel.log"
  echo "tirx-run bench $kernel: exit $?"
  python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    us = {k: round(v, 2) for k, v in (r.get("impls_us") or {}).items()}
    print(r["config"], r["status"], us, r.get("ratio"))' "$out/bench_$kernel.json" 2>/dev/null
done
if [ "${SUITE_ARGS:-}" != skip ]; then
  TIRX_SUITE_GIT_COMMIT=$sha TIRX_SUITE_GIT_DIRTY=0 python3 -m tirx_kernels.core.suite \
    ${SUITE_ARGS:-} --out-dir /tmp/bench-suite --cache-dir /tmp/tirx-bench-cache --timeout 240 \
    --baselines "$PWD/baselines" \
    --json > "$out/suite.json" 2> "$out/suite.log"; echo "tirx-suite: exit $?"
  tar -C /tmp -czf "$out/bench-suite.tgz" bench-suite
fi
cache=${TIRX_KERNELS_CACHE_DIR:-}
if [ -n "$cache" ] && [ -d "$cache" ]; then
  ( cd "$cache" && find . -type f -newer "$started" ! -name '*.partial' ! -name '.*' > "$started.new"
    [ -s "$started.new" ] && tar -cJf "$out/kernel-cache-new.tar.xz" -T "$started.new"
    echo "kernels compiled here: $(wc -l < "$started.new") cache file(s)" )
fi
rm -f "$started" "$started.new"
