#!/bin/sh
# t_tui_experts.sh - the debug pane's experts in tmux, on a random-weight
# qwen3moe model written at test time with the real SmolLM2's tokenizer
# and template (CPU, greedy, one thread): under each layer's row the pane
# lists the experts the layer chose for the token, best first, with their
# weights ("  e ID:W ..."), the same as `parley generate --trace` records
# for the same prompt ids (the trace's JSON "experts"); a dense model's
# pane has no such rows.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tui_need
model=$(test_model)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_experts.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
moe=$tmp/moe.gguf
n=5
"$PARLEY" dev-mkmodel --arch qwen3moe --tokenizer-from "$model" \
	--n-embd 64 --n-head 4 --n-head-kv 2 --head-dim 16 --n-ff 96 \
	--n-expert 8 --n-expert-used 3 --n-ff-exp 32 --n-layer 3 --seed 5 \
	-o "$moe" >"$tmp/mk.out" 2>&1
ok $? "a qwen3moe model with SmolLM2's tokenizer"
opts="-m $moe --temp 0 --seed 42 --threads 1 --ctx 512 -n $n"
q1="Hello there"

# --- the reference: the same prompt ids through parley generate ---------
printf '[{"role":"user","content":"%s"}]' "$q1" >"$tmp/msgs.json"
"$PARLEY" render -m "$moe" -M "$tmp/msgs.json" >"$tmp/prompt.txt" &&
	"$PARLEY" tokenize -m "$moe" --ids --parse-special --add-special \
		<"$tmp/prompt.txt" >"$tmp/ids" &&
	"$PARLEY" generate -m "$moe" --ids "$(cat "$tmp/ids")" -n $n -t 1 \
		--trace "$tmp/trace.jsonl" >"$tmp/gen.out" 2>"$tmp/gen.err"
ok $? "reference: render, tokenize and generate --trace"
nt=$(wc -l <"$tmp/trace.jsonl")
# trace_experts STEP: "L ID:W ID:W ..." per layer (weights %.2f)
trace_experts() {
	sed -n "$(($1 + 1))p" "$tmp/trace.jsonl" | sed 's/.*"layers":\[//' |
		tr '{' '\n' | sed -n 's/.*"experts":\[\(.*\)\]}.*/\1/p' |
		sed 's/\],\[/ /g; s/\[//g; s/\]//g' |
		awk '{ printf "e"; for (i = 1; i <= NF; i++) {
		         split($i, a, ","); printf " %d:%.2f", a[1], a[2] }
		       printf "\n" }'
}
trace_experts $((nt - 1)) >"$tmp/want"
[ "$(wc -l <"$tmp/want")" -eq 3 ] &&
	[ "$(awk '{ print NF }' "$tmp/want" | sort -u)" = 4 ]
ok $? "the trace records 3 experts in each of the 3 layers"
diag "trace: $(tr '\n' '|' <"$tmp/want")"

pane() { tui_screen | sed -n 's/^.*│ //p'; }
tui_start "$tmp" 160 60 $opts
tui_wait 'F1 help' 60
tui_keys F2
tui_wait '│ no reply yet' 10
ok $? "F2 opens the pane"
tui_type "$q1"
tui_keys Enter
tui_wait 'pp [0-9]+ tg' 60 && tui_wait "│ token $nt of $nt *\$" 10
ok $? "the reply ends; the pane shows its last token ($nt of $nt)"
pane | awk '/^L[0-9]+ / { print substr($1, 2) }' >"$tmp/layers"
seq 0 2 | cmp -s - "$tmp/layers"
ok $? "the layer column: L0 to L2"
pane | sed -n 's/^ *\(e [0-9].*[0-9]\) *$/\1/p' >"$tmp/got"
paste -d '|' "$tmp/got" "$tmp/want" | sed 's/^/#   pane|trace: /'
cmp -s "$tmp/got" "$tmp/want"
ok $? "each layer's experts and weights are the trace's (generate's last step)"
# the expert rows sit under their layer rows
pane | awk '/^L[0-9]+ / { l = 1; next } l && /^ *e [0-9]/ { n++ } { l = 0 }
            END { exit n != 3 }'
ok $? "one experts row right under each layer row"
tui_stop

# --- a dense model: no experts rows --------------------------------------
tui_start "$tmp" 160 60 -m "$model" --temp 0 --seed 42 --threads 1 \
	--ctx 512 -n 3
tui_wait 'F1 help' 60
tui_keys F2
tui_type "$q1"
tui_keys Enter
tui_wait 'pp [0-9]+ tg' 60 && tui_wait '│ L29 ' 10
ok $? "SmolLM2: the reply and its layer rows"
! pane | grep -Eq '^ *e [0-9]+:'
ok $? "a dense model's pane has no experts rows"
done_testing
