#!/bin/sh
# usage: input_edges.sh FUSED MODEL_DIR WORK_DIR
# Inputs that never end or cannot be read, outputs nobody reads and outputs that would destroy an
# input: each is an error that names it, within the test's timeout (a FIFO nobody writes or reads,
# /dev/zero or a directory on standard input, gen-c's graph.json over the graph it reads), while an
# empty pipe is empty text, /dev/stdout is the shell's descriptor and a link to a file not there yet is
# written through.
set -u
fused=$1 model=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
failed=0
# expect RC REGEX COMMAND...: the exit status, and stderr matching the (grep -E) regex unless it is empty.
expect() {
  want=$1 regex=$2
  shift 2
  "$@" > "$work/out" 2> "$work/err"
  rc=$?
  if [ $rc -ne "$want" ] || { [ -n "$regex" ] && ! grep -Eq -- "$regex" "$work/err"; }; then
    echo "FAIL: $*: exit $rc (expected $want), stderr: $(head -c 400 "$work/err")"
    failed=1
  fi
}
mkfifo "$work/fifo" || exit 1
mkdir "$work/fifo_model" && cp "$model/config.json" "$model/tokenizer.json" "$work/fifo_model/" && ln -s ../fifo "$work/fifo_model/model.safetensors"
expect 1 "fifo_model/model.safetensors: not a regular file" timeout 60 "$fused" run -m "$work/fifo_model" -p x -n 1
expect 1 "fifo: an empty FIFO" timeout 60 "$fused" tokenize --tokenizer "$work/fifo" x
expect 1 "fifo: is a FIFO that no process reads" timeout 60 "$fused" score -m "$model" --input-ids 1 --out "$work/fifo"
expect 1 "standard input: a line longer than 64 MiB" timeout 60 "$fused" chat -m "$model" --chat-template chatml -n 1 < /dev/zero
expect 1 "standard input: cannot read: Is a directory" "$fused" chat -m "$model" --chat-template chatml -n 1 < "$work"
expect 1 "standard input \(the text to tokenize\): cannot read: Is a directory" "$fused" tokenize --tokenizer "$model/tokenizer.json" -f - < "$work"
# an empty pipe (a process that wrote nothing) is empty text, not an "empty FIFO"
if ! printf '' | "$fused" tokenize --tokenizer "$model/tokenizer.json" -f /dev/stdin > "$work/out" 2> "$work/err" || [ "$(cat "$work/out")" != "[]" ]; then
  echo "FAIL: an empty pipe as -f /dev/stdin: $(cat "$work/out" "$work/err")"
  failed=1
fi
# --out /dev/stdout writes through the shell's descriptor: appended, the log's earlier lines stay
printf 'EARLIER LINE\n' > "$work/log"
"$fused" graph export -m "$model" --out /dev/stdout >> "$work/log" 2> "$work/err"
if ! grep -q "EARLIER LINE" "$work/log" || ! grep -q '"nodes"' "$work/log"; then
  echo "FAIL: graph export --out /dev/stdout >> log lost the log's earlier line: $(head -c 200 "$work/log") $(cat "$work/err")"
  failed=1
fi
mkdir "$work/g"
expect 0 "" "$fused" graph export -m "$model" --out "$work/g/graph.json"
expect 2 "--out: .*g/graph.json is the --graph file .*; write the C elsewhere" "$fused" gen-c --graph "$work/g/graph.json" --out "$work/g"
expect 0 "" "$fused" graph check "$work/g/graph.json"
# --out a link to a file not there yet: the file is made there and the link kept (the link had been
# replaced by the file), through a chain of links too
ln -s made/graph.json "$work/link.json" && ln -s link.json "$work/link2.json" && mkdir "$work/made" || exit 1
expect 0 "" "$fused" graph export -m "$model" --out "$work/link2.json"
if [ ! -L "$work/link.json" ] || [ ! -L "$work/link2.json" ] || [ ! -s "$work/made/graph.json" ]; then
  echo "FAIL: --out through links to a file not there yet: $(ls -l "$work" "$work/made")"
  failed=1
fi
exit $failed
