#!/bin/sh
# t_render.sh - `parley render` and `parley templates`: the CLI prints the
# rendered prompt byte for byte as jinja2 did (goldens of t_template, made
# by tests/oracles/gen_templates.py), with the model's template, bos and eos
# as defaults; --count, --system-preset and the error paths.
. "${top_srcdir:-.}/tests/lib.sh"

data=$top_srcdir/tests/data/template
model=$(test_model)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$PARLEY" templates >"$tmp/list"
ok $? "parley templates exits 0"
check "lists the six built-in templates" \
	grep -q '^templates  *chatml, gemma, gemma3, llama2, llama3, mistral, zephyr$' "$tmp/list"
check "lists the system presets" grep -q '^system presets  *coder, concise, default, translator$' "$tmp/list"

# Built-in templates by name: every case whose golden is not an error.
for t in chatml llama3 zephyr; do
	for c in 01-one-turn 03-system 04-many-turns 07-jinja-looking 08-unicode; do
		golden=$data/golden/${t}__$c.out
		[ -f "$golden" ] || continue
		case $t in
		llama3) bos='<|begin_of_text|>' eos='<|eot_id|>' ;;
		zephyr) bos='<s>' eos='</s>' ;;
		*) bos='' eos='<|im_end|>' ;;
		esac
		# (bos and eos as tests/data/template/manifest.json gives them)
		"$PARLEY" render --template "$t" --bos "$bos" --eos "$eos" \
			--messages "$data/cases/$c.json" >"$tmp/out" 2>"$tmp/err"
		cmp -s "$tmp/out" "$golden"
		ok $? "render --template $t, $c: byte-exact with jinja2"
	done
done

if [ -f "$model" ]; then
	# The model's own template, bos and eos are the defaults with -m.
	for c in 01-one-turn 04-many-turns 07-jinja-looking 08-unicode; do
		"$PARLEY" render -m "$model" --messages "$data/cases/$c.json" \
			>"$tmp/out" 2>"$tmp/err"
		cmp -s "$tmp/out" "$data/golden/smollm2-135m-gguf__$c.out"
		ok $? "render -m SmolLM2, $c: the GGUF's template, byte-exact"
	done
	# stdin and --count: 01-one-turn is "<|im_start|>system\n...": the
	# count must equal `parley tokenize --parse-special` of the same text.
	"$PARLEY" render -m "$model" --count <"$data/cases/01-one-turn.json" \
		>"$tmp/out" 2>"$tmp/err"
	n=$(sed -n 's/^\([0-9][0-9]*\) tokens$/\1/p' "$tmp/err")
	m=$("$PARLEY" tokenize -m "$model" --ids --parse-special <"$tmp/out" | wc -w)
	[ -n "$n" ] && [ "$n" -eq "$m" ]
	ok $? "render --count = tokens of the rendered text ($n vs $m)"
	# A user typing a control token's text gets plain-text tokens: more
	# tokens than the same prompt with the control token parsed.
	printf '[{"role":"user","content":"<|im_end|>"}]' >"$tmp/typed.json"
	"$PARLEY" render -m "$model" --count --messages "$tmp/typed.json" \
		>"$tmp/out" 2>"$tmp/err"
	n=$(sed -n 's/^\([0-9][0-9]*\) tokens$/\1/p' "$tmp/err")
	m=$("$PARLEY" tokenize -m "$model" --ids --parse-special <"$tmp/out" | wc -w)
	[ -n "$n" ] && [ "$n" -gt "$m" ]
	ok $? "typed <|im_end|> in content stays plain text ($n > $m tokens)"
	"$PARLEY" render -m "$model" --no-generation-prompt \
		--messages "$data/cases/02-one-turn-nogen.json" >"$tmp/out"
	cmp -s "$tmp/out" "$data/golden/smollm2-135m-gguf__02-one-turn-nogen.out"
	ok $? "--no-generation-prompt"
else
	diag "default model absent: -m checks skipped"
fi

"$PARLEY" render --template nosuch </dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "no chat template named 'nosuch' (built in: chatml," "$tmp/err"
ok $? "unknown template: exit 1, the built-ins listed"

printf '[{"role":"user"' | "$PARLEY" render -t chatml 2>"$tmp/err"
[ $? -eq 1 ] && grep -q '^parley: stdin: line 1, column 16:' "$tmp/err"
ok $? "malformed messages: line and column"

printf '[{"role":"system","content":"x"},{"role":"system","content":"y"},{"role":"user","content":"a"}]' |
	"$PARLEY" render -t gemma 2>"$tmp/err"
[ $? -eq 1 ] && grep -q 'Conversation roles must alternate' "$tmp/err"
ok $? "raise_exception reaches the user as the error"

printf '%s' '{% for %}' >"$tmp/bad.jinja"
printf '[]' | "$PARLEY" render -t "$tmp/bad.jinja" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q 'line 1, column' "$tmp/err"
ok $? "template syntax error: line and column"

"$PARLEY" render --count -t chatml </dev/null 2>/dev/null
[ $? -eq 2 ]
ok $? "--count without -m is a usage error"

"$PARLEY" chat --system-preset nope -p hi 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "no system preset named 'nope' (built in: coder, concise, default, translator)" "$tmp/err"
ok $? "unknown --system-preset: the presets listed"

done_testing
