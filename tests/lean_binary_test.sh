#!/bin/bash
# zeromem itself links neither MPI nor CUDA (cudart, cuBLAS, NCCL): it must
# start on a login node without them; only the zeromem-measure helper links
# them. Checked with ldd; exits 77 (skipped) when ldd is missing.
# Usage: lean_binary_test.sh ZEROMEM_BINARY
set -u
zm="$1"
command -v ldd >/dev/null || { echo "SKIP: ldd not found"; exit 77; }
[ -x "$zm" ] || { echo "FAIL: no $zm"; exit 1; }
libs="$(ldd "$zm" 2>&1)" || { echo "FAIL: ldd $zm: $libs"; exit 1; }
bad="$(echo "$libs" | grep -E 'lib(nccl|cublas|cublasLt|cudart|cuda|mpi|mpi_cxx|open-pal|open-rte)\.so' || true)"
[ -z "$bad" ] || { echo "FAIL: $zm links"; echo "$bad"; exit 1; }
echo "lean binary: $(echo "$libs" | wc -l) libraries, none of MPI or CUDA"
