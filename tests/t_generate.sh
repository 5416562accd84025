#!/bin/sh
# t_generate.sh - `parley generate` end to end on the real SmolLM2 file:
# parley's tokenizer, the CPU engine and the streaming detokenizer give the
# same 64-token greedy continuation of the CJK/unicode golden prompt as
# llama-cpp-python (tests/data/engine/generate_unicode.txt, written from
# the engine goldens by tests/oracles/gen_engine.py); --trace writes one
# JSON line per step; speeds go to stderr.
. "${top_srcdir:-.}/tests/lib.sh"

model=$(test_model)
[ -f "$model" ] || skip_all "default model not fetched ($model): run ./setup.sh model"
data="$top_srcdir/tests/data/engine"
out=$(mktemp)
trap 'rm -f "$out" "$out.err" "$out.trace" "$out.want"' EXIT

"$PARLEY" generate -m "$model" -p "$(cat "$data/generate_unicode.prompt")" \
	-n 64 --ignore-eos --trace "$out.trace" >"$out" 2>"$out.err"
ok $? "parley generate exits 0"
printf '%s\n' "$(cat "$data/generate_unicode.txt")" >"$out.want"
cmp -s "$out" "$out.want"
ok $? "64 greedy tokens equal llama-cpp-python's continuation"
[ "$(wc -l <"$out.trace")" -eq 64 ]
ok $? "--trace: 64 JSON lines"
grep -q '^{"step":0,"pos":58,"n_tokens":59,"token":' "$out.trace"
ok $? "--trace: the prefill step (59 prompt tokens) comes first"
grep -Eq '^prefill: 59 tokens in [0-9.]+ s \([0-9.]+ tokens/s\); decode: 63 tokens' "$out.err"
ok $? "speeds on stderr: $(cat "$out.err")"
"$PARLEY" generate -m "$model" >/dev/null 2>&1
[ $? -eq 2 ]
ok $? "no prompt: usage error (exit 2)"
"$PARLEY" generate -m /nonexistent.gguf -p x 2>"$out.err" >/dev/null
[ $? -eq 1 ] && grep -q nonexistent "$out.err"
ok $? "missing model: error names the file"
done_testing
