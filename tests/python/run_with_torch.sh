#!/usr/bin/env bash
# Runs the Python test $1 with the first interpreter of $2... that imports
# torch (Debian's python3-torch is /usr/bin/python3's; a virtual environment's
# python3 may not see it), else exits 77, which ctest reports as skipped.
set -u
test="$1"
shift
for py in "$@"; do
  [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 || continue
  if "$py" -c 'import torch' >/dev/null 2>&1; then
    exec "$py" "$test"
  fi
done
echo "SKIPPED: torch is not importable by any of: $* (Debian: apt-get install python3-torch; scripts/install-deps.sh installs it)"
exit 77
