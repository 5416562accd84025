#!/bin/sh
# t_tui_harmony.sh - gpt-oss's harmony replies in the full-screen UI, in
# tmux, greedy, on the engine $PARLEY_TEST_BACKEND names (default the CPU).
# The model: a random-weight gpt-oss (tests/parley-mkmodel: attention
# sinks, sliding-window layers, YaRN, MXFP4 experts) with gpt-oss's own
# vocabulary (o200k_base and the harmony control tokens, written by
# tests/o200k-gguf), or the model PARLEY_TEST_HARMONY_MODEL names (the
# real shapes on the GPU machine: bench/harmony-shapes.sh). The template:
# gpt-oss's own with the analysis channel opened in the generation prompt
# (made from tests/data/template/llamacpp/templates/openai-gpt-oss-120b.jinja
# here: a random model writes no channel header of its own, so its whole
# reply is reasoning, cut by -n).
# Checked: the reply is stored as unfinished reasoning (reasoning_content,
# its token count) and shown as one folded line with that count; F7
# unfolds it (the text under the line) and folds it again; the prompt view
# has the template's "Reasoning: medium", and after /reasoning high the
# next turn's has "Reasoning: high"; a resumed conversation shows both
# replies folded.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
command -v tmux >/dev/null 2>&1 || skip_all "tmux not installed"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_harmony.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
backend=${PARLEY_TEST_BACKEND:-cpu}
model=${PARLEY_TEST_HARMONY_MODEL:-}
if [ -n "$model" ]; then
	ok 0 "the model $model"
else
	model=$tmp/gpt-oss.gguf
	"${top_builddir:-.}/tests/o200k-gguf" "$tmp/o200k.gguf" &&
		"${top_builddir:-.}/tests/parley-mkmodel" --arch gpt-oss \
			--tokenizer-from "$tmp/o200k.gguf" --type Q8_0 \
			--embd-type Q8_0 --expert-type MXFP4 --n-embd 64 --n-head 4 \
			--n-head-kv 1 --head-dim 32 --n-ff 64 --n-expert 8 \
			--n-expert-used 2 --n-ff-exp 32 --n-layer 2 \
			--sliding-window 8 --rope-scaling yarn \
			--rope-scale-factor 32 --yarn-orig-ctx 16 \
			--rope-base 150000 --out-norm-scale 4 --seed 30 \
			-o "$model" >/dev/null
	ok $? "a gpt-oss model with gpt-oss's vocabulary"
fi
# gpt-oss's template with the analysis channel opened in the generation
# prompt (its one line "<|start|>assistant" there)
tpl=$tmp/harmony-analysis.jinja
sed 's/^<|start|>assistant$/<|start|>assistant<|channel|>analysis<|message|>/' \
	"${top_srcdir:-.}/tests/data/template/llamacpp/templates/openai-gpt-oss-120b.jinja" >"$tpl" &&
	[ "$(grep -c '^<|start|>assistant<|channel|>analysis<|message|>$' "$tpl")" = 1 ]
ok $? "gpt-oss's template, the analysis channel opened by its generation prompt"
name=$(basename "$model" .gguf)
opts="-m $model --backend $backend --temp 0 --seed 42 --threads 1 --ctx 2048 -n 24 --template $tpl"


tui_start "$tmp" 120 40 $opts
tui_wait "$name │ $backend[^│]* │ ctx 0/2048 .* F1 help" 120
ok $? "the UI starts on $backend"
tui_type "What is 2+2?"
tui_keys Enter
tui_wait 'pp [0-9]+ tg [0-9.]+ t/s' 120
ok $? "the reply ends"
"$PARLEY" export --format json 1 >"$tmp/export.json" 2>"$tmp/export.err"
reason=$(export_str "$tmp/export.json" reasoning_content)
nr=$(export_num "$tmp/export.json" reasoning_tokens)
diag "stored: $nr reasoning tokens, unfinished: $(grep -c '"reasoning_unfinished":true' "$tmp/export.json")"
[ -n "$reason" ] && [ -n "$nr" ] && [ "$nr" -gt 0 ] &&
	grep -q '"reasoning_unfinished":true' "$tmp/export.json" &&
	grep -q '"role":"assistant","content":"",' "$tmp/export.json"
ok $? "stored as unfinished reasoning, no answer (the template opened the analysis channel)"
tui_wait "^▸ reasoning \\($nr tokens\\) … unfinished\$" 10
ok $? "folded: one line with the stored token count, marked unfinished"
# a word of the reasoning to look for once unfolded (its text is random
# tokens): the first run of 4 or more ASCII letters and digits, the
# export's escapes taken out, that the folded screen does not show
tui_screen >"$tmp/folded"
word=
for w in $(printf '%s' "$reason" | sed 's/\\u[0-9a-fA-F]\{4\}/ /g; s/\\./ /g' |
	grep -ao '[A-Za-z0-9]\{4,\}'); do
	grep -aqF -- "$w" "$tmp/folded" || { word=$w; break; }
done
diag "a word of the reasoning, not on the folded screen: \"$word\""
tui_keys F7
tui_wait "^▾ reasoning \\($nr tokens\\) … unfinished\$" 10
ok $? "F7 unfolds: the line's marker turns"
[ -n "$word" ] && tui_screen | grep -aqF -- "$word"
ok $? "unfolded: the reasoning's text is on the screen"
tui_keys F7
tui_wait "^▸ reasoning \\($nr tokens\\)" 10 && [ -n "$word" ] &&
	! tui_screen | grep -aqF -- "$word"
ok $? "F7 again folds it: the text is gone"

# --- reasoning effort through the template ------------------------------
tui_type "/prompt"
tui_keys Enter
tui_wait '^prompt of the last turn: [0-9]+ tokens' 10 &&
	tui_wait ':\[[0-9]+\]·medium\[[0-9]+\]' 10
ok $? "the prompt view: the template's default \"Reasoning: medium\""
tui_keys q
tui_wait_gone '^prompt of the last turn' 10
tui_type "/reasoning high"
tui_keys Enter
tui_wait 'high: reasoning_effort "high", from the next turn' 10 &&
	! tui_screen | grep -aq 'does not read it'
ok $? "/reasoning high: the template reads it"
tui_type "And 3+3?"
tui_keys Enter
tui_wait '^▸ reasoning \([0-9]+ tokens\) … unfinished$' 120 &&
	tui_wait 'pp [0-9]+ tg [0-9.]+ t/s.*' 120
n2=$(tui_screen | grep -ac '^▸ reasoning ([0-9]* tokens) … unfinished$')
[ "$n2" -ge 2 ]
ok $? "the second reply folded too ($n2 folded lines)"
tui_type "/prompt"
tui_keys Enter
# (the view may part "Reasoning:" and " high" at the reuse boundary)
tui_wait '^prompt of the last turn: [0-9]+ tokens, [1-9][0-9]* reused' 10 &&
	tui_wait '·high\[[0-9]+\]' 10 && ! tui_screen | grep -aq '·medium\['
ok $? "the second prompt has \"Reasoning: high\", not medium (and reuses the first turn's cache)"
tui_keys q
tui_wait_gone '^prompt of the last turn' 10
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 30
ok $? "Ctrl-D quits"
tui_stop

# --- resumed: both replies folded with their stored counts ----------------
"$PARLEY" export --format json 1 >"$tmp/export.json" 2>"$tmp/export.err"
nr2=$(export_num "$tmp/export.json" reasoning_tokens)
tui_start "$tmp" 120 40 resume --last $opts
tui_wait "^▸ reasoning \\($nr tokens\\) … unfinished\$" 120 &&
	tui_wait "^▸ reasoning \\($nr2 tokens\\) … unfinished\$" 10
ok $? "resumed: both stored replies folded ($nr and $nr2 tokens)"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 30
tui_stop
done_testing
