#!/bin/sh
# t_info.sh - `parley info` on the real SmolLM2 file, text and JSON.
. "${top_srcdir:-.}/tests/lib.sh"

model=$(test_model)
[ -f "$model" ] || skip_all "default model not fetched ($model): run ./setup.sh model"
out=$(mktemp)
trap 'rm -f "$out" "$out.json" "$out.err"' EXIT

"$PARLEY" info "$model" >"$out" 2>"$out.err"
ok $? "parley info exits 0"
has() { grep -Eq "$1" "$out"; }
check "architecture llama" has '^architecture +llama$'
check "30 layers" has '^  layers +30$'
check "n_embd 576" has '^  n_embd +576$'
check "n_ff 1536" has '^  n_ff +1536$'
check "9 heads" has '^  n_head +9$'
check "3 KV heads" has '^  n_head_kv +3$'
check "rope base 100000" has '^  rope_base +100000$'
check "vocab 49152" has 'vocab 49152, 48900 merges'
check "tokenizer gpt2 / smollm" has '^tokenizer +model gpt2, pre-tokenizer smollm'
check "bos token 1 <|im_start|>" has '^  bos +1 "<\|im_start\|>"$'
check "eos token 2 <|im_end|>" has '^  eos +2 "<\|im_end\|>"$'
check "chat template present" has '^chat template present \([0-9]+ bytes\)$'
check "272 tensors" has '^tensors +272 tensors, 134515008 parameters'
check "token_embd Q8_0 row" has '^  token_embd.weight +Q8_0 +\[576, 49152\] +30081024$'
check "Q4_1 totals" has '^  Q4_1 +210 tensors'
check "F32 totals" has '^  F32 +61 tensors'
check "Q8_0 totals" has '^  Q8_0 +1 tensors'

"$PARLEY" info --json "$model" >"$out.json"
ok $? "parley info --json exits 0"
if command -v python3 >/dev/null 2>&1; then
	python3 - "$out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["metadata"]["llama.block_count"] == 30
assert d["metadata"]["llama.attention.head_count"] == 9
assert d["metadata"]["tokenizer.ggml.tokens"] == {"array_of": "string", "length": 49152}
assert d["special_tokens"]["eos"] == {"id": 2, "text": "<|im_end|>"}
assert d["n_tensors"] == 272 and len(d["tensors"]) == 272
assert d["totals"]["Q4_1"]["tensors"] == 210
PY
	ok $? "JSON parses and holds the same facts"
fi

"$PARLEY" info /nonexistent.gguf 2>"$out.err"
[ $? -eq 1 ] && grep -q '/nonexistent.gguf: No such file' "$out.err"
ok $? "missing file: exit 1 and the file named"

printf 'GGUF\003\000\000\000' >"$out.json"
"$PARLEY" info "$out.json" 2>"$out.err"
[ $? -eq 1 ] && grep -q 'file ends inside the header' "$out.err"
ok $? "truncated file: a clear error"

bad_utf8="${top_srcdir:-.}/tests/data/gguf/invalid_utf8_value.gguf"
"$PARLEY" info "$bad_utf8" >"$out" 2>"$out.err"
[ $? -eq 1 ] && [ ! -s "$out" ] &&
	grep -q "key 'general.name': string value is not valid UTF-8 (byte 0xc0" "$out.err"
ok $? "a string that is not UTF-8: refused, the key named: $(cat "$out.err")"

"$PARLEY" info 2>/dev/null
[ $? -eq 2 ]
ok $? "no file: usage error (exit 2)"

done_testing
