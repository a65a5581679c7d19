#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
# "Did this change slow anything?" on the GPU the device tool lends, in one call: the suite
# rows of WORKLOADS at an older commit, promoted into a scratch baseline of this card, then
# the same rows at this checkout compared with them (`tirx-suite compare`). Committed
# baselines are per GPU model, so on a card without one this is the before/after. The older
# tree travels as a tarball of its core/ and packages/ (carry it with the site archive):
#   git archive OLD core packages | xz > .device/old.tar.xz
#   OLD_TAR=.device/old.tar.xz SUITE_ARGS="--rounds 3 --cooldown 0.5" \
#     scripts/h200-ab.sh <old sha> <sha of this checkout> scripts/suite-contract-v2.yaml
# Results under $OUT: suite-{before,after}.json (run documents), compare.json, logs; the
# suites' folders and the scratch baseline under AB_TMP (default /tmp).
set -uo pipefail
old_sha=${1:?usage: h200-ab.sh <old sha> <new sha> <workloads.yaml>}
new_sha=${2:?usage: h200-ab.sh <old sha> <new sha> <workloads.yaml>}
workloads=$(realpath "${3:?usage: h200-ab.sh <old sha> <new sha> <workloads.yaml>}")
out=${OUT:?OUT must name the results folder}
old_tar=${OLD_TAR:?OLD_TAR must name the older tree tarball}
scratch=${AB_TMP:-/tmp}
install_tree() {
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-deps --no-build-isolation \
    --no-index "$1/core" "$1"/packages/*/
}
# tag sha: one suite run of the installed tree; its run document goes to $out/suite-<tag>.json
run_suite() {
  TIRX_SUITE_GIT_COMMIT=$2 TIRX_SUITE_GIT_DIRTY=0 python3 -m tirx_kernels.core.suite \
    --workloads "$workloads" ${SUITE_ARGS:-} --out-dir "$scratch/ab-$1" --cache-dir "$scratch/ab-cache" \
    --no-compare --json > "$out/suite-$1.summary.json" 2> "$out/suite-$1.log"
  echo "suite $1 ($2): exit $?"
  cp "$(ls -t "$scratch/ab-$1"/runs/*.json | head -1)" "$out/suite-$1.json"
}
source scripts/h200-env.sh || exit 1  # TIRx, the reference bundle, this checkout's tools
old_tree=$(mktemp -d)
tar -C "$old_tree" -xJf "$old_tar" || exit 1
install_tree "$old_tree" || exit 1
run_suite before "$old_sha"
install_tree . || exit 1
run_suite after "$new_sha"
base=$scratch/ab-baselines
python3 -m tirx_kernels.core.suite promote --merge --baselines "$base" "$out/suite-before.json" \
  > "$out/promote.log" 2>&1
python3 -m tirx_kernels.core.suite compare --baselines "$base" "$out/suite-after.json" \
  > "$out/compare.md"
python3 -m tirx_kernels.core.suite compare --baselines "$base" --json "$out/suite-after.json" \
  > "$out/compare.json"
echo "tirx-suite compare: exit $?"
cat "$out/compare.md"
