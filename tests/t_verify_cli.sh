#!/bin/sh
# t_verify_cli.sh - live verification from the command line, on the real
# SmolLM2 file and the CPU engine (int8 dots) checked against the CPU
# reference (exact dots): `parley generate --verify` writes one line per
# step and a summary on stderr, the same text on stdout as without
# --verify, and the comparison in each --trace JSON line; `parley -p
# --verify` ends with a summary; /verify in the REPL turns it on and off.
# That a real divergence is caught, and at which layer, is t_verify.c's.
. "${top_srcdir:-.}/tests/lib.sh"

model=$(test_model)
[ -f "$model" ] || skip_all "default model not fetched ($model): run ./setup.sh model"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_verify.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
prompt="The capital of France is"

"$PARLEY" generate -m "$model" -p "$prompt" -n 12 --ignore-eos \
	>"$tmp/plain" 2>/dev/null
"$PARLEY" generate -m "$model" -p "$prompt" -n 12 --ignore-eos --verify \
	--trace "$tmp/trace" >"$tmp/out" 2>"$tmp/err"
ok $? "generate --verify exits 0 (no step over tolerance)"
cmp -s "$tmp/plain" "$tmp/out"
ok $? "the same text with and without --verify"
# 5 prompt ids in one eval, then 11 one-id evals: 12 steps
n=$(grep -Ec '^verify: pos [0-9]+ token [0-9]+ \([0-9]+ ids\): worst layer [0-9]+ diff [0-9.e+-]+; logit nmse [0-9.e+-]+$' "$tmp/err")
[ "$n" -eq 12 ]
ok $? "one line per step on stderr ($n of 12)"
grep -q '^verify: pos 4 token [0-9]* (5 ids): ' "$tmp/err"
ok $? "the first step is the prompt (5 ids, last at position 4)"
grep -Eq '^verify: 12 steps; worst layer [0-9]+ diff [0-9.e+-]+ \(position [0-9]+\); max logit NMSE [0-9.e+-]+; all within tolerance \(0.25 per layer, 0.1 logits\)$' "$tmp/err"
ok $? "summary: $(tail -n 1 "$tmp/err")"
grep -q '^prefill: 5 tokens' "$tmp/err"
ok $? "speeds still reported"
n=$(grep -c '"verify":{"worst_layer":[0-9]*,"worst_diff":[0-9.e+-]*,"first_bad":null,"logit_nmse":[0-9.e+-]*,"logits_bad":false,"diff":\[' "$tmp/trace")
[ "$n" -eq 12 ] && [ "$(wc -l <"$tmp/trace")" -eq 12 ]
ok $? "--trace: 12 JSON lines, each with the comparison ($n)"
# the largest per-layer difference in the trace is the summary's (to the
# summary's 3 digits), and it is not zero: two arithmetics were compared
worst=$(sed -n 's/^verify: 12 steps; worst layer [0-9]* diff \([0-9.e+-]*\) .*/\1/p' "$tmp/err")
awk -v w="$worst" '{
	s = $0; sub(/.*"diff":\[/, "", s); sub(/\].*/, "", s)
	n = split(s, d, ","); for (i = 1; i <= n; i++) if (d[i] + 0 > m) m = d[i] + 0
} END { exit !(m > 0 && (m - w) * (m - w) < 1e-4 * m * m) }' "$tmp/trace"
ok $? "the trace's largest layer difference is the summary's ($worst), > 0"

"$PARLEY" -m "$model" --no-store --temp 0 -n 8 --verify -p "Hi" \
	>"$tmp/out" 2>"$tmp/err"
ok $? "chat one-shot --verify exits 0"
grep -Eq '^\[verify: [0-9]+ steps; .*all within tolerance' "$tmp/err"
ok $? "one-shot: summary after the reply: $(cat "$tmp/err")"

# a q8_0 cache on top of int8 activations: the step that went over the
# bounds before they were measured for the pair (verify.h: this reply's
# position 48, logit NMSE 0.169 against 0.1015), within them now
"$PARLEY" -m "$model" --no-store --temp 0 -n 96 --verify --kv-type q8_0 \
	-p "What is the capital of France?" >"$tmp/out" 2>"$tmp/err"
ok $? "q8_0 cache: chat one-shot --verify exits 0"
grep -Eq '^\[verify: 9[0-9] steps; .*all within tolerance \(0.325 per layer, 0.25 logits\)' "$tmp/err"
ok $? "q8_0 cache: within the pair's bounds: $(grep verify: "$tmp/err")"

printf 'Hello\n/verify\nHi\n/verify\nBye\n' |
	"$PARLEY" -m "$model" --no-store --temp 0 -n 6 --plain \
		>"$tmp/out" 2>"$tmp/err"
ok $? "REPL with /verify exits 0"
grep -q '^\[verification on: a summary after each reply\]$' "$tmp/err" &&
	grep -q '^\[verification off\]$' "$tmp/err"
ok $? "/verify toggles: on, then off"
n=$(grep -c '^\[verify: [0-9]* steps; ' "$tmp/err")
[ "$n" -eq 1 ]
ok $? "one summary: only the reply while on is verified ($n)"
# the second reply catches the reference up with the whole cache first
grep -Eq '^\[verify: [0-9]+ steps; .*all within tolerance' "$tmp/err"
ok $? "REPL summary within tolerance"
done_testing
