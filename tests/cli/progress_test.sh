#!/bin/sh
# Progress lines appear on a terminal and never on a non-terminal stderr.
#   progress_test.sh FUSED
# A terminal: script(1) runs the command on a pseudo-terminal and copies what it wrote.
set -eu
fused=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$fused" run -p "In the beginning" -n 4 --temp 0 -m "$(dirname "$0")/../../examples/models/kjv-qwen2-4m" >"$tmp/out" 2>"$tmp/err"
if grep -q "loading weights\|prefill:" "$tmp/err" || grep -q "$(printf '\r')" "$tmp/err"; then
  echo "progress written to a non-terminal stderr:"; cat "$tmp/err"; exit 1
fi
# The terminal half needs script(1) and a pseudo-terminal (a chroot or container may have no /dev/pts).
if ! command -v script >/dev/null || ! script -qec true /dev/null >/dev/null 2>&1 </dev/null; then
  echo "no pseudo-terminal here (script(1) or /dev/pts missing): only the non-terminal half was checked"; exit 0
fi
script -qec "\"$fused\" run -p 'In the beginning' -n 4 --temp 0 -m \"$(dirname "$0")/../../examples/models/kjv-qwen2-4m\"" /dev/null >"$tmp/tty" </dev/null
for what in "loading weights" "prefill:"; do
  if ! grep -q "\[fused\] $what" "$tmp/tty"; then echo "no '$what' progress on a terminal:"; cat "$tmp/tty"; exit 1; fi
done
echo "progress: on a terminal only"
