#!/bin/sh
# bench/session-shapes.sh - the chat on the GPU with real models' shapes:
# random-weight models of the shapes of bench/shapes.sh, written by
# parley's writer with the tokenizer and chat template of TOKSRC (the
# layers are the real model's, the vocabulary TOKSRC's: the random
# weights have no tokenizer of their own), each checked on the CUDA
# engine as a user meets it:
#   1. tests/cuda_parity: N tokens one at a time against the exact CPU;
#   2. `parley generate --verify`: every step against the CPU reference;
#   3. a model with recurrent layers: tests/t_session_rs (turns, regenerate,
#      edit, branch, resume with the saved state, on the session API);
#   4. tests/t_tui_recurrent.sh: ten turns in the full-screen UI in tmux,
#      each reply a fresh session's, /regen, a branch at a token.
# Run on the GPU machine from a built tree (make check's programs built):
#
#   bench/session-shapes.sh BUILD_DIR TOKSRC SHAPE...
#
# TOKSRC: a GGUF with tokenizer.* keys and a chat template (SmolLM2's, or
# a small file the writer made with --tokenizer-from it). Environment:
# MODELS_DIR (default /tmp/parley-chat), N_TOKENS (cuda_parity's, 8),
# N_VERIFY (the steps --verify checks, 32).
# Prints each check's verdict; exit status 1 when one failed.
set -u
B=$(cd "$1" && pwd)
T=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/shapes.sh"
DIR=${MODELS_DIR:-/tmp/parley-chat}
mkdir -p "$DIR"
status=0
. "$here/chat-checks.sh"

for s in "$@"; do
	f=$DIR/$s-chat.gguf
	chat_model "$s" "$T" "$f" || continue
	parity_verify "$f" "${N_TOKENS:-8}" "${N_VERIFY:-32}"
	recurrent=0
	case $s in qwen35* | qwen36*) recurrent=1 ;; esac
	if [ "$recurrent" = 1 ]; then
		(cd "$B" && PARLEY_TEST_RS_MODEL=$f PARLEY_TEST_BACKEND=cuda \
			top_builddir=. ./tests/t_session_rs) >"$DIR/session.out" 2>&1
		st=$?
		grep '^not ok' "$DIR/session.out"
		verdict $st "t_session_rs: $(grep -c '^ok' "$DIR/session.out") ok, $(grep -c '^not ok' "$DIR/session.out") not ok"
	fi
	ui_check "UI, 10 turns, /regen, branch" t_tui_recurrent.sh \
		PARLEY_TEST_RS_MODEL="$f" PARLEY_TEST_RS_RECURRENT=$recurrent
done
exit $status
