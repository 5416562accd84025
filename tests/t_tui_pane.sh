#!/bin/sh
# t_tui_pane.sh - the debug pane in tmux with the real SmolLM2 model (CPU,
# greedy, one thread): F2 shows it live while a reply streams; its ten
# candidates are probabilities, sorted, summing to at most 1, and equal to
# those `parley generate --trace` writes for the same prompt ids (to the
# printed precision), as are the layer rows (one per layer); cursor mode
# (F4) moves to an earlier token and the pane follows it; n jumps to a
# token under the chosen probability; shading (F5) puts colour escapes on
# the reply, underlines under NO_COLOR; the prompt view (F6) lists the
# prompt's ids (the same as render + tokenize) and where the cache reuse
# ended. A NaN injected into layer 12 by the test build's trace hook
# (tests/parley-hook, PARLEY_TEST_TRACE_NAN) raises the flag in the status
# bar with the pane closed and in the pane (below, on a narrow terminal);
# parley itself ignores the variable.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tui_need
model=$(test_model)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_pane.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
opts="-m $model --temp 0 --seed 42 --threads 1 --ctx 2048"
sys="You are a helpful assistant."
q1="What is the capital of France?"
n=24
parley_main=$PARLEY

# --- the reference: the same prompt ids through parley generate ---------
printf '[{"role":"system","content":"%s"},{"role":"user","content":"%s"}]' \
	"$sys" "$q1" >"$tmp/msgs.json"
"$PARLEY" render -m "$model" -M "$tmp/msgs.json" >"$tmp/prompt.txt" &&
	"$PARLEY" tokenize -m "$model" --ids --parse-special --add-special \
		<"$tmp/prompt.txt" >"$tmp/ids" &&
	"$PARLEY" generate -m "$model" --ids "$(cat "$tmp/ids")" -n $n -t 1 \
		--trace "$tmp/trace.jsonl" >"$tmp/gen.out" 2>"$tmp/gen.err"
ok $? "reference: render, tokenize and generate --trace for the same prompt"
diag "prompt ids: $(cat "$tmp/ids")"
# generate stops at the end of turn: one trace line per reply token
# (step 0 the prompt's eval, step i the eval of token i), the last one
# the end of turn itself
nt=$(wc -l <"$tmp/trace.jsonl")
np=$(wc -w <"$tmp/ids")

# trace_top STEP: "ID PROB LOGIT" per line, the step's top 10.
trace_top() {
	sed -n "$(($1 + 1))p" "$tmp/trace.jsonl" |
		sed 's/.*"top":\[//; s/\],"layers".*//' | tr '{' '\n' |
		sed -n 's/^"id":\([0-9]*\),"logit":\([-0-9.e+]*\),"prob":\([-0-9.e+]*\)}.*/\1 \3 \2/p'
}
# trace_rms STEP: the rms of each layer, one a line (%.3g).
trace_rms() {
	sed -n "$(($1 + 1))p" "$tmp/trace.jsonl" | sed 's/.*"layers":\[//' |
		tr '{' '\n' | sed -n 's/.*"rms":\([-0-9.e+]*\)}.*/\1/p' |
		awk '{ printf "%.3g\n", $1 }'
}
# pane: the pane's column of the screen (right of the divider).
pane() { tui_screen | sed -n 's/^.*│ //p'; }
# pane_top: "ID PROB LOGIT" per candidate row of the pane.
pane_top() { pane | awk '/^#[0-9]+ / { print $2, $4, $3 }'; }
# same_top STEP: the pane's candidates are the trace step's (ids equal,
# probabilities within half a unit of the pane's 4 decimals, logits of
# its 2).
same_top() {
	trace_top "$1" >"$tmp/want"
	pane_top >"$tmp/got"
	paste -d ' ' "$tmp/got" "$tmp/want" >"$tmp/both"
	[ "$(wc -l <"$tmp/want")" -eq 10 ] && [ "$(wc -l <"$tmp/got")" -eq 10 ] &&
		awk '{ dp = $2 - $5; dl = $3 - $6
		       if ($1 != $4 || dp > 0.000051 || -dp > 0.000051 ||
		           dl > 0.0051 || -dl > 0.0051) bad = 1 }
		     END { exit bad }' "$tmp/both"
	st=$?
	[ $st -eq 0 ] || sed 's/^/#   pane|trace: /' "$tmp/both"
	return $st
}

# --- the pane, live, at the side of a wide terminal ----------------------
# parley has no trace hook: the variable must change nothing
PARLEY_TEST_TRACE_NAN=12
export PARLEY_TEST_TRACE_NAN
tui_start "$tmp" 160 60 $opts -n $n --system "$sys"
unset PARLEY_TEST_TRACE_NAN
tui_wait 'F1 help' 60
tui_keys F2
tui_wait '│ no reply yet' 10
ok $? "F2 opens the pane at the side (160 columns): no reply yet"
tui_type "$q1"
tui_keys Enter
tui_wait 'The capital of France is Paris\.' 60 && tui_wait 'pp [0-9]+ tg' 30
ok $? "the reply streams in with the pane open"
tui_wait "│ token $nt of $nt *\$" 10
ok $? "the pane shows the reply's last token ($nt of $nt)"
pane_top >"$tmp/rows"
awk 'BEGIN { prev = 2 }
     { if ($2 < 0 || $2 > 1 || $2 > prev) bad = 1; prev = $2; s += $2 }
     END { exit bad || NR != 10 || s > 1 + 10 * 0.00005 }' "$tmp/rows"
ok $? "10 candidates, probabilities in [0, 1], sorted, sum <= 1"
same_top $((nt - 1))
ok $? "the candidates equal generate --trace's last step (ids, p, logits)"
pane | grep -Eq '^chosen "<\|im_end\|>" id 2 \(control\) *$'
ok $? "the chosen token: the end of turn, marked as a control token"
pane | grep -Eq '^raw p 0\.[0-9]{4} rank 1 · final p 1\.0000 rank 1 *$' &&
	pane | grep -q '^sampling greedy (temp 0) *$'
ok $? "probability and rank raw and final; the sampling settings"
pane | awk '/^L[0-9]+ / { print substr($1, 2) }' >"$tmp/layers"
seq 0 29 | cmp -s - "$tmp/layers"
ok $? "the layer column: one row per layer, L0 to L29"
pane | awk '/^L[0-9]+ / { printf "%.3g\n", $4 }' >"$tmp/rms_got"
trace_rms $((nt - 1)) >"$tmp/rms_want"
cmp -s "$tmp/rms_got" "$tmp/rms_want"
ok $? "each layer's rms equals the trace's (3 significant digits)"
! tui_status | grep -q '⚑'
ok $? "no flag on a healthy reply (PARLEY_TEST_TRACE_NAN ignored by parley)"

# --- cursor mode ----------------------------------------------------------
# tok_is K: the pane shows token K of the reply in cursor mode
tok_is() { tui_wait "│ token $1 of $nt \\(cursor\\) *\$" 10; }
# chosen_p: the raw probability of each reply token, 1 to nt, a line each
for i in $(seq 0 $((nt - 1))); do trace_top $i | head -n 1; done |
	cut -d ' ' -f 2 >"$tmp/chosen_p"
# under P FROM DIR: the next token after FROM (DIR 1) or before (-1)
# whose raw p is under P, or nothing
under() {
	awk -v p="$1" -v from="$2" -v dir="$3" '
	{ v[NR] = $1 }
	END { for (i = from + dir; i >= 1 && i <= NR; i += dir)
	        if (v[i] < p) { print i; exit } }' "$tmp/chosen_p"
}
tui_keys F4
tok_is $nt
ok $? "F4: cursor mode on the last token"
k=$((nt - 3))
tui_keys Left Left Left
tok_is $k
ok $? "three times Left: token $k"
want=$(trace_top $((k - 1)) | head -n 1 | cut -d ' ' -f 1)
pane | grep -q "^chosen \".*\" id $want *\$" && same_top $((k - 1))
ok $? "the pane shows token $k's report: chosen id $want, generate's step $((k - 1))"
tui_keys k
tok_is $((k - 1)) && same_top $((k - 2)) && tui_keys j && tok_is $k
ok $? "k and j move one token back and forth, the pane with them"
tui_keys End
tok_is $nt
j1=$(under 0.5 $nt -1)
tui_keys N
[ -n "$j1" ] && tok_is $j1
ok $? "N jumps back to the last token under p 0.50: token $j1"
tui_keys + + + + +
tui_wait 'n jumps to tokens under p 0\.75' 10
j2=$(under 0.75 $j1 1)
tui_keys n
[ -n "$j2" ] && tok_is $j2
ok $? "+ raises the bound to 0.75; n jumps forward to token $j2"
p=$(pane | sed -n 's/^raw p \([0-9.]*\) .*/\1/p')
awk -v p="$p" 'BEGIN { exit !(p != "" && p < 0.75) }'
ok $? "the token's raw p ($p) is under 0.75"
tui_keys Escape
tui_wait_gone '\(cursor\)' 10
ok $? "Esc leaves cursor mode"

# --- shading ---------------------------------------------------------------
# an SGR sequence as tmux writes it, up to the attribute ("\033[0;4m")
sgr="$(printf '\033')\\[([0-9]+;)*"
# reply_e: the reply's line with its escapes (tmux's own SGR codes)
reply_e() {
	tmux -S "$tui_sock" capture-pane -p -e | sed 's/│.*//' |
		grep 'capital' | grep -v 'What'
}
reply_e >"$tmp/plain_e"
tui_keys F5
tui_wait 'reply tokens shaded' 10
reply_e >"$tmp/shade_e"
grep -Eq "$sgr(3[13])m" "$tmp/shade_e" && ! grep -Eq "$sgr(3[13])m" "$tmp/plain_e"
ok $? "F5 shades the reply's tokens (red/yellow escapes appear)"
tui_keys F5
tui_wait 'shading off' 10
reply_e >"$tmp/off_e"
cmp -s "$tmp/plain_e" "$tmp/off_e"
ok $? "F5 again: the reply as before"

# --- the prompt view ---------------------------------------------------------
tui_keys F6
tui_wait '^prompt of the last turn: [0-9]+ tokens, 0 reused' 10
ok $? "F6: the prompt view, nothing reused on the first turn"
tui_screen | grep -o '\[[0-9]*\]' | tr -d '[]' | tr '\n' ' ' |
	sed 's/ $//' >"$tmp/view_ids"
printf '%s' "$(cat "$tmp/ids")" | cmp -s - "$tmp/view_ids"
ok $? "its ids are render + tokenize's, in order"
tui_screen | grep -q "^── evaluated anew from token 0 (of $np) ──\$" &&
	tui_screen | grep -q '^<|im_start|>\[1\]user\[4093\]↵\[198\]$'
ok $? "special tokens and newlines marked; evaluated anew from token 0"
tui_keys q
tui_wait_gone '^prompt of the last turn' 10
tui_type "And of Germany?"
tui_keys Enter
tui_wait 'Berlin' 60 && tui_wait 'pp [0-9]+ tg' 30
reused=$(tui_status | sed -n 's/.*reused \([0-9]*\) .*/\1/p')
tui_type "/prompt"
tui_keys Enter
tui_wait "^── evaluated anew from token $reused \\(of [0-9]+\\) ──\$" 10 &&
	tui_wait "^prompt of the last turn: [0-9]+ tokens, $reused reused" 10
ok $? "second turn: the view's reuse boundary is the status bar's ($reused)"
tui_keys q
tui_wait_gone '^prompt of the last turn' 10

# --- live: the pane follows a long reply token by token --------------------
# live_k K: until a screen shows the status bar's "gen N tok" (a reply
# streaming) and the pane's "token J of J" with J > K; prints J.
live_k() {
	lk_n=600
	while [ $lk_n -gt 0 ]; do
		tui_screen >"$tmp/live" 2>/dev/null
		lk_g=$(sed -n 's/.*│ gen \([0-9]*\) tok .*/\1/p' "$tmp/live")
		lk_j=$(sed -n 's/.*│ token \([0-9]*\) of \1 *$/\1/p' "$tmp/live")
		if [ -n "$lk_g" ] && [ -n "$lk_j" ] && [ "$lk_j" -gt "$1" ]; then
			echo "$lk_j"
			return 0
		fi
		lk_n=$((lk_n - 1))
		sleep 0.1
	done
	return 1
}
tui_type "/set n 200"
tui_keys Enter
tui_wait 'n-predict = 200' 10
tui_type "Write a long poem about the sea."
tui_keys Enter
j1=$(live_k 1) && j2=$(live_k "$j1")
ok $? "while the reply streams the pane shows its newest token (token $j1, then $j2)"
tui_wait 'pp [0-9]+ tg' 120
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
ok $? "quit"
tui_stop

# --- a forced anomaly: NaN in layer 12, narrow terminal, NO_COLOR ---------
PARLEY=$top_builddir/tests/parley-hook
PARLEY_TEST_TRACE_NAN=12 NO_COLOR=1
export PARLEY_TEST_TRACE_NAN NO_COLOR
rm -f "$PARLEY_DB"
tui_start "$tmp" 100 40 $opts -n $n --system "$sys"
unset PARLEY_TEST_TRACE_NAN NO_COLOR
PARLEY=$parley_main
tui_wait 'F1 help' 60
tui_type "$q1"
tui_keys Enter
tui_wait 'pp [0-9]+ tg' 60
tui_status | grep -q '⚑ NaN L12 tok 1'
ok $? "pane closed: the status bar flags NaN in layer 12 from token 1"
diag "status: $(tui_status)"
tui_keys F2
tui_wait '^⚑ NaN/Inf in layer 12' 10
ok $? "F2: the pane (below, 100 columns) names the flag"
tui_screen | grep -q '^─────' &&
	tui_screen | grep -Eq '^#[0-9]+ .* L12 +-?[0-9.e+]+ +-?[0-9.e+]+ +nan +!$'
ok $? "below the transcript: candidates and layers side by side, L12 nan !"
tui_screen | sed 's/[▁▂▃▄▅▆▇█]/./g' | grep -Eq '^rms by layer \.{12}!\.{17}( |$)'
ok $? "the rms sparkline: 30 layers, layer 12 marked !"
reply_e >"$tmp/nc_plain"
tui_keys F5
tui_wait 'reply tokens shaded' 10
reply_e >"$tmp/nc_shade"
grep -Eq "${sgr}4m" "$tmp/nc_shade" && ! grep -Eq "${sgr}4m" "$tmp/nc_plain" &&
	! grep -Eq "$sgr(3[0-7])m" "$tmp/nc_shade"
ok $? "NO_COLOR: shading underlines low-probability tokens, no colours"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 20
ok $? "quit"

done_testing
