#!/bin/sh
# tokenize and detokenize on files and standard input: the ids tokenize prints read back by
# detokenize --file give the text again, from a file, from a pipe, laid out as tokenize prints them
# or one per line with CRLF; ids that are not ids, or none, are the file's error (exit 1) naming it.
#   tokenize_test.sh FUSED
set -eu
fused=$1
tok=$(dirname "$0")/../../examples/models/kjv-qwen2-4m/tokenizer.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf 'In the beginning God created the heaven and the earth.\nAnd the earth was without form.' > "$tmp/text.txt"
"$fused" tokenize --tokenizer "$tok" --file "$tmp/text.txt" > "$tmp/ids.txt"
grep -q '^\[[0-9]' "$tmp/ids.txt" || fail "tokenize --file printed no ids: $(cat "$tmp/ids.txt")"
"$fused" tokenize --tokenizer "$tok" --file - < "$tmp/text.txt" > "$tmp/ids_stdin.txt"
cmp -s "$tmp/ids.txt" "$tmp/ids_stdin.txt" || fail "tokenize --file - differs from --file PATH"

# detokenize prints the text and a newline.
{ cat "$tmp/text.txt"; echo; } > "$tmp/want.txt"
"$fused" detokenize --tokenizer "$tok" --file "$tmp/ids.txt" > "$tmp/got.txt"
cmp -s "$tmp/want.txt" "$tmp/got.txt" || fail "detokenize --file: $(cat "$tmp/got.txt")"
"$fused" tokenize --tokenizer "$tok" --file "$tmp/text.txt" | "$fused" detokenize --tokenizer "$tok" --file - > "$tmp/got.txt"
cmp -s "$tmp/want.txt" "$tmp/got.txt" || fail "tokenize | detokenize --file -: $(cat "$tmp/got.txt")"
tr -d '[],' < "$tmp/ids.txt" | tr ' ' '\n' | sed 's/$/\r/' > "$tmp/ids_lines.txt"
"$fused" detokenize --tokenizer "$tok" --file "$tmp/ids_lines.txt" > "$tmp/got.txt"
cmp -s "$tmp/want.txt" "$tmp/got.txt" || fail "detokenize of one id per CRLF line: $(cat "$tmp/got.txt")"

# expect STATUS TEXT args...: the command fails with STATUS, one line on stderr holding TEXT.
expect() {
  status=$1 text=$2
  shift 2
  rc=0
  "$fused" "$@" > "$tmp/out" 2> "$tmp/err" < /dev/null || rc=$?
  [ "$rc" = "$status" ] || fail "$*: exit $rc, not $status: $(cat "$tmp/err")"
  grep -qF "$text" "$tmp/err" || fail "$*: '$text' not in: $(cat "$tmp/err")"
  [ "$(wc -l < "$tmp/err")" = 1 ] && [ ! -s "$tmp/out" ] || fail "$*: not one line on stderr alone: $(cat "$tmp/err")"
}
printf '1, 2,x\n' > "$tmp/bad.txt"
expect 1 "$tmp/bad.txt: '2,x' is not a list of token ids like 1,2,3" detokenize --tokenizer "$tok" --file "$tmp/bad.txt"
printf ' \n' > "$tmp/blank.txt"
expect 1 "$tmp/blank.txt: holds no token ids" detokenize --tokenizer "$tok" --file "$tmp/blank.txt"
expect 1 "standard input: holds no token ids" detokenize --tokenizer "$tok" --file -
expect 1 "$tmp/none.txt: cannot open the token ids" detokenize --tokenizer "$tok" --file "$tmp/none.txt"
expect 2 "give the token ids, e.g. 9707,11,1879, or --file PATH" detokenize --tokenizer "$tok"
expect 2 "excludes" detokenize --tokenizer "$tok" 1,2 --file "$tmp/ids.txt"
# One [ ... ] around the whole list, or none; no trailing comma. (CLI11 reads "[[1]]" on the
# command line as a list itself: the file shows it.)
expect 2 "'[1,2' has a '[' without its ']'" detokenize --tokenizer "$tok" "[1,2"
expect 2 "'1]' has a ']' that closes no '['" detokenize --tokenizer "$tok" "1]"
expect 2 "'[1],2' goes on after the list's ']'" detokenize --tokenizer "$tok" "[1],2"
printf '[[1]]\n' > "$tmp/nested.txt"
expect 1 "'[[1]]' has a '[' that does not open the list" detokenize --tokenizer "$tok" --file "$tmp/nested.txt"
expect 2 "'1,2,' ends with a comma" detokenize --tokenizer "$tok" "1,2,"
expect 2 "'[1, 2' has a '[' without its ']'" detokenize --tokenizer "$tok" "[1," "2"
# Empty text and back: tokenize prints [], which detokenizes to an empty line.
"$fused" tokenize --tokenizer "$tok" '' | "$fused" detokenize --tokenizer "$tok" --file - > "$tmp/empty" || fail "tokenize '' | detokenize --file - failed"
[ "$(wc -c < "$tmp/empty")" -eq 1 ] && [ -z "$(tr -d '\n' < "$tmp/empty")" ] || fail "tokenize '' | detokenize --file - is not an empty line"
printf '[1, 2,\n3]\n' > "$tmp/split.txt"
"$fused" detokenize --tokenizer "$tok" --file "$tmp/split.txt" > /dev/null || fail "a list over two lines, as [1, 2,\\n3]"
echo "tokenize / detokenize: files and standard input"
