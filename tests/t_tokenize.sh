#!/bin/sh
# t_tokenize.sh - `parley tokenize` on the shared vocab files and SmolLM2:
# ids, pieces, special-token parsing, BOS, stdin, usage errors.
. "${top_srcdir:-.}/tests/lib.sh"

V=${PARLEY_SHARED:-$top_srcdir/../shared}/testdata/vocab
[ -f "$V/ggml-vocab-qwen2.gguf" ] || skip_all "shared vocab files not found ($V)"
Q=$V/ggml-vocab-qwen2.gguf
S=$V/ggml-vocab-llama-spm.gguf
out=$(mktemp)
trap 'rm -f "$out"' EXIT

is() { # DESCRIPTION EXPECTED ACTUAL
	if [ "$2" = "$3" ]; then ok 0 "$1"; else ok 1 "$1"; diag "got '$3', want '$2'"; fi
}

is "--ids: Hello world (qwen2)" "9707 1879" "$("$PARLEY" tokenize -m "$Q" --ids "Hello world")"
is "user text is not parsed for specials" "27 91 318 6213 91 29" \
	"$("$PARLEY" tokenize -m "$Q" --ids -- "<|im_end|>")"
is "--parse-special makes <|im_end|> the control token" "151645" \
	"$("$PARLEY" tokenize -m "$Q" --ids --parse-special -- "<|im_end|>")"
is "no BOS by default (llama-spm)" "29871 15043 3186" \
	"$("$PARLEY" tokenize -m "$S" --ids -- " Hello world")"
is "--add-special adds BOS (llama-spm)" "1 29871 15043 3186" \
	"$("$PARLEY" tokenize -m "$S" --ids --add-special -- " Hello world")"
is "-- ends the options" "313 3365" "$("$PARLEY" tokenize -m "$Q" --ids -- --ids)"
is "text from standard input" "9707 1879" \
	"$(printf 'Hello world' | "$PARLEY" tokenize -m "$Q" --ids)"
is "empty text: an empty line" "" "$("$PARLEY" tokenize -m "$Q" --ids "")"
is "--pieces escapes bytes and quotes" '" Hello" " \"" " " "\xf0" "\x9f" "\x99" "\x82"' \
	"$("$PARLEY" tokenize -m "$S" --pieces -- 'Hello " 🙂')"
printf 'a\tb\n' | "$PARLEY" tokenize -m "$Q" >"$out"
is "default: one token a line, id TAB quoted piece" "$(printf '64\t"a"\n2233\t"\\tb"\n198\t"\\n"')" "$(cat "$out")"

"$PARLEY" tokenize --ids x >/dev/null 2>"$out"
ok $([ $? -eq 2 ] && grep -q -- "-m FILE is required" "$out"; echo $?) "no -m: usage error (exit 2)"
"$PARLEY" tokenize -m "$Q" --ids --pieces x >/dev/null 2>&1
ok $([ $? -eq 2 ]; echo $?) "--ids with --pieces: usage error"
"$PARLEY" tokenize -m /nonexistent/m.gguf x >/dev/null 2>"$out"
ok $([ $? -eq 1 ] && grep -q "/nonexistent/m.gguf" "$out"; echo $?) "missing file: exit 1, file named"
"$PARLEY" tokenize --help | grep -q "parse-special"
ok $? "--help describes the options"

model=$(test_model)
if [ -f "$model" ]; then
	is "SmolLM2: ChatML with --parse-special" "1 4093 198 26843 2" \
		"$("$PARLEY" tokenize -m "$model" --ids --parse-special -- "$(printf '<|im_start|>user\nHi<|im_end|>')")"
else
	diag "default model not fetched: SmolLM2 check skipped"
fi
done_testing
