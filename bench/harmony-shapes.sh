#!/bin/sh
# bench/harmony-shapes.sh - gpt-oss's real shapes chatting on the GPU with
# gpt-oss's own vocabulary and template: random-weight models of the
# shapes of bench/shapes.sh (gpt-oss-20b, gpt-oss-120b), written by
# parley's writer with the o200k vocabulary and the harmony control tokens
# (tests/o200k-gguf), each checked on the CUDA engine as a user meets it:
#   1. tests/cuda_parity: N tokens one at a time against the exact CPU;
#   2. `parley generate --verify`: every step against the CPU reference;
#   3. tests/t_tui_harmony.sh: the full-screen UI in tmux, the reply's
#      reasoning (the analysis channel) stored, folded and unfolded,
#      /reasoning high in the next prompt, the conversation resumed.
# Run on the GPU machine from a built tree (make check's programs built):
#
#   bench/harmony-shapes.sh BUILD_DIR SHAPE...
#
# Environment: MODELS_DIR (default /tmp/parley-harmony; gpt-oss-120b's
# file is 63 GB: /dev/shm where the disk is small), N_TOKENS
# (cuda_parity's, 4), N_VERIFY (the steps --verify checks, 16).
# Prints each check's verdict; exit status 1 when one failed.
set -u
B=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
. "$here/shapes.sh"
DIR=${MODELS_DIR:-/tmp/parley-harmony}
mkdir -p "$DIR"
status=0
. "$here/chat-checks.sh"

tok=$DIR/o200k.gguf
[ -f "$tok" ] || top_srcdir="$here/.." "$B/tests/o200k-gguf" "$tok" || {
	verdict 1 "tests/o200k-gguf: the vocabulary"
	exit 1
}
for s in "$@"; do
	f=$DIR/$s-harmony.gguf
	chat_model "$s" "$tok" "$f" || continue
	parity_verify "$f" "${N_TOKENS:-4}" "${N_VERIFY:-16}"
	ui_check "UI: reasoning folded, /reasoning high, resumed" \
		t_tui_harmony.sh PARLEY_TEST_HARMONY_MODEL="$f"
done
exit $status
