#!/bin/sh
# usage: ids_file_nul.sh FUSED TOKENIZER WORK_DIR
# An ids file with a NUL byte: the error quotes the word with the byte as \x00 and goes on past it
# (a message cut at the NUL had lost its reason).
set -u
fused=$1 tokenizer=$2 work=$3
mkdir -p "$work"
printf '1 2 3\0 4' > "$work/ids_nul.txt"
err=$("$fused" detokenize --tokenizer "$tokenizer" -f "$work/ids_nul.txt" 2>&1 >/dev/null)
rc=$?
expected="fused detokenize: error: $work/ids_nul.txt: '3\\x00' is not a list of token ids like 1,2,3"
if [ $rc -ne 1 ] || [ "$err" != "$expected" ]; then
  echo "exit $rc, stderr: $err"
  echo "expected exit 1, stderr: $expected"
  exit 1
fi
