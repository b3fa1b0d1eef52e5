#!/bin/bash
# Installs the build into a scratch prefix and checks the installed zeromem:
# it finds its data relative to itself (not through the source tree), a
# missing data folder is an error, the bash completion completes flags, and
# measure finds the installed zeromem-measure helper.
# Usage: install_test.sh BUILD_DIR
set -u
build="$1"
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cmake --install "$build" --prefix "$prefix" >/dev/null || fail "cmake --install"
zm="$prefix/bin/zeromem"
[ -x "$zm" ] || fail "no $zm"
[ -f "$prefix/share/zeromem/data/models/llama-2-7b.json" ] || fail "data not installed"
[ -f "$prefix/share/bash-completion/completions/zeromem" ] || fail "bash completion not installed"
[ -f "$prefix/share/zsh/vendor-completions/_zeromem" ] || fail "zsh completion not installed"
if command -v help2man >/dev/null; then
  [ -f "$prefix/share/man/man1/zeromem.1" ] || fail "man page not installed"
  grep -q "estimate" "$prefix/share/man/man1/zeromem.1" || fail "man page lacks the subcommands"
  grep -q "SS zeromem estimate" "$prefix/share/man/man1/zeromem.1" || fail "man page lacks the estimate section"
  grep -q -- 'gpu.*memory SIZE' "$prefix/share/man/man1/zeromem.1" || fail "man page lacks the estimate options"
fi
# The Python helper: its package where python3 imports it, and the pip project beside the data.
pydir="$(find "$prefix/lib" -path '*dist-packages/zeromem/__init__.py' 2>/dev/null | head -1)"
[ -n "$pydir" ] || fail "python package zeromem not installed under $prefix/lib/*/dist-packages"
[ -f "$(dirname "$pydir")/callback.py" ] || fail "python package lacks callback.py"
[ -f "$prefix/share/zeromem/python/pyproject.toml" ] || fail "pip project not installed in share/zeromem/python"
[ -f "$prefix/share/zeromem/python/build_backend/zeromem_build.py" ] || fail "pip project lacks its build backend"
if command -v python3 >/dev/null; then
  out="$(cd / && PYTHONPATH="$(dirname "$(dirname "$pydir")")" python3 -c 'import zeromem; print(zeromem.dump_module_tree.__name__)' 2>&1)" \
    || fail "installed python package does not import: $out"
  [ "$out" = dump_module_tree ] || fail "installed python package: $out"
fi
# Its own data, even with ZEROMEM_DATA_DIR pointing elsewhere.
out="$(ZEROMEM_DATA_DIR=/nonexistent "$zm" models)" || fail "installed zeromem models: $out"
echo "$out" | grep -q "^llama-2-7b " || fail "models list lacks llama-2-7b: $out"
"$zm" estimate --model llama-2-7b --gpus 8 --stage 3 --gpu A100-80GB >/dev/null || fail "installed estimate"
# A missing data folder is an error (exit 2), not an empty list.
rm -rf "$prefix/share/zeromem/data/gpus"
err="$("$zm" gpus 2>&1)"; rc=$?
[ $rc -eq 2 ] || fail "gpus with no data folder exited $rc: $err"
echo "$err" | grep -q "data folder missing" || fail "message: $err"
mkdir -p "$prefix/share/zeromem/data/gpus"
err="$("$zm" gpus 2>&1)"; rc=$?
[ $rc -eq 2 ] || fail "gpus with an empty data folder exited $rc: $err"
echo "$err" | grep -q "no presets" || fail "message: $err"
# bash completion: flags of the subcommand and preset names.
reply="$(PATH="$prefix/bin:$PATH" bash -c '
  source "'"$prefix"'/share/bash-completion/completions/zeromem"
  COMP_WORDS=(zeromem estimate --gpu-m); COMP_CWORD=2; _zeromem; echo "${COMPREPLY[*]}"
  COMP_WORDS=(zeromem estimate --model llama-2-7); COMP_CWORD=3; _zeromem; echo "${COMPREPLY[*]}"')"
echo "$reply" | grep -q -- "--gpu-memory" || fail "bash completion of --gpu-m: $reply"
echo "$reply" | grep -q "llama-2-7b" || fail "bash completion of --model: $reply"
# measure runs in the helper: installed in libexec/zeromem/ and found from
# bin/zeromem (a bad --backend is refused by the helper, after MPI starts);
# without it, one line naming the package and exit 2.
if [ -x "$build/zeromem-measure" ]; then
  helper="$prefix/libexec/zeromem/zeromem-measure"
  [ -x "$helper" ] || fail "no $helper"
  err="$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$zm" measure --backend nope --model llama-2-7b --layers 1 2>&1)"; rc=$?
  [ $rc -eq 2 ] || fail "installed measure --backend nope exited $rc: $err"
  echo "$err" | grep -q -- "--backend: 'nope'" || fail "installed measure did not reach the helper: $err"
  rm -f "$helper"
  err="$("$zm" measure --model llama-2-7b --layers 1 2>&1)"; rc=$?
  [ $rc -eq 2 ] || fail "measure without the helper exited $rc: $err"
  [ "$(echo "$err" | wc -l)" -eq 1 ] && echo "$err" | grep -q "install the zeromem-measure package" \
    || fail "measure without the helper: $err"
fi
echo "install test passed"
