# bench/chat-checks.sh - what bench/session-shapes.sh and
# bench/harmony-shapes.sh do alike for a real shape on the GPU machine:
# write its random-weight model with another file's vocabulary, then
# cuda_parity and `parley generate --verify` on it. Sourced (after
# bench/shapes.sh) by those scripts, which set B (the build), DIR (the
# models' folder) and status (0; 1 once a check failed).

# verdict STATUS WHAT: one check's line; a failure sets status.
verdict() {
	if [ "$1" -eq 0 ]; then echo "  ok: $2"; else echo "  FAILED: $2"; status=1; fi
}

# chat_model SHAPE TOKSRC FILE: FILE, written unless it exists: SHAPE's
# layers and the mix of its downloads, TOKSRC's vocabulary (and template).
# 0, or 1 with a verdict.
chat_model() {
	[ -f "$3" ] && return 0
	# shellcheck disable=SC2046
	"$B/parley" dev-mkmodel $(shape "$1" | sed 's/--n-vocab [0-9]*//') $(writer_mix "$1") \
		--tokenizer-from "$2" --n-ctx 4096 -o "$3.tmp" >/dev/null || {
		verdict 1 "$1: the writer"
		return 1
	}
	mv "$3.tmp" "$3"
}

# parity_verify FILE N_TOKENS N_VERIFY: cuda_parity over N_TOKENS tokens,
# then --verify over N_VERIFY generated ones; a verdict each.
parity_verify() {
	echo "=== $(basename "$1" .gguf) ($(du -h "$1" | cut -f1))"
	"$B/tests/cuda_parity" "$1" "$2" >"$DIR/parity.out" 2>&1
	verdict $? "cuda_parity: $(tail -n 1 "$DIR/parity.out")"
	"$B/parley" generate -m "$1" --backend cuda -p "The capital of France is" \
		-n "$3" --ignore-eos --verify >/dev/null 2>"$DIR/verify.out"
	verdict $? "generate --verify: $(grep -c '^verify' "$DIR/verify.out") steps, $(tail -n 1 "$DIR/verify.out")"
}

# ui_check WHAT SCRIPT VAR=VALUE...: tests/SCRIPT (a full-screen UI test
# in tmux) on the CUDA engine with the environment VAR=VALUE... naming
# the model; its checks' lines, then a verdict saying WHAT.
ui_check() {
	uc_what=$1 uc_script=$2
	shift 2
	(cd "$B" && env "$@" PARLEY_TEST_BACKEND=cuda top_builddir=. \
		top_srcdir="$here/.." sh "$here/../tests/$uc_script") >"$DIR/tui.out" 2>&1
	uc_st=$?
	grep -aE '^(not )?ok' "$DIR/tui.out" | sed 's/^/    /'
	! grep -aq '^not ok' "$DIR/tui.out" && [ "$uc_st" -eq 0 ]
	verdict $? "$uc_script ($uc_what)"
}
