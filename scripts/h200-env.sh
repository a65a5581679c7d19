# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright TIRx authors
# Source at the start of an H200 run (device tool), from the repository root:
#   source scripts/h200-env.sh && tirx-run test
# Unpacks TIRx (and a reference bundle, if one travelled) via .device/activate.sh, then
# installs every distribution of this checkout offline; the packed site carries hatchling.
# (The image's python is the only one there: the install goes into its site-packages.)
source .device/activate.sh || return 1
python3 -c "import hatchling" 2>/dev/null || {
  echo "h200-env: the site archive has no hatchling; rebuild it (README, 'On the H200'):" \
    "../shared/tools/h200-site.sh hatchling==1.33.0 pathspec==1.1.1 trove-classifiers==2026.9.21.13" >&2
  return 1
}
# plain (not editable) installs: an editable hatchling build would also need `editables`;
# once per checkout, so a script sourcing this beside running tests does not reinstall
if [ "${TIRX_H200_INSTALLED:-}" != "$PWD" ]; then
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-deps --no-build-isolation --no-index \
    ./core ./packages/*/ \
    || { echo "h200-env: install failed" >&2; return 1; }
  export TIRX_H200_INSTALLED=$PWD
fi
export PATH="$HOME/.local/bin:$PATH"
# compiled kernels shared by this run's processes (core/kernel_cache.py); set it empty: off
export TIRX_KERNELS_CACHE_DIR="${TIRX_KERNELS_CACHE_DIR-/tmp/tirx-kernel-cache}"
# kernels prebuilt on a CPU machine (README, "On the H200"), if the archive travelled; an
# entry of another TIRx or nvcc is never looked up (kernel_cache.entry names them)
if [ -n "$TIRX_KERNELS_CACHE_DIR" ] && [ -f .device/kernel-cache.tar.xz ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    .device/kernel-cache.tar.xz "$TIRX_KERNELS_CACHE_DIR"
  # whether this machine's TIRx and nvcc will load them (else every kernel compiles here)
  python3 -c "from tirx_kernels.core import toolchain; print(toolchain.check_kernel_cache())"
fi
