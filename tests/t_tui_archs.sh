#!/bin/sh
# t_tui_archs.sh - tests/t_tui_recurrent.sh's chat in the full-screen UI
# (ten turns each a fresh session's, /regen, a branch at a token) on small
# random-weight models of the other new architectures, with SmolLM2's
# tokenizer and chat template: qwen3moe (a mixture), gpt-oss (sinks,
# biases, sliding layers, YaRN), gemma4 dense (keys as values, KV
# sharing, sliding and global heads of two sizes) and gemma4's E model
# (per-layer embeddings). Their caches are cut back, not rolled back to a
# snapshot (PARLEY_TEST_RS_RECURRENT=0). One TAP line a model: its run's
# checks all passed. On the engine $PARLEY_TEST_BACKEND names (the CPU
# by default).
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
tui_need
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_archs.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# name|the writer's options (each Q8_0, SmolLM2's vocabulary)
for spec in \
	"qwen3moe|--arch qwen3moe --n-embd 64 --n-head 4 --n-head-kv 1 --head-dim 32 --n-ff 64 --n-expert 8 --n-expert-used 2 --n-ff-exp 32 --n-layer 3 --seed 56" \
	"gpt-oss|--arch gpt-oss --n-embd 64 --n-head 4 --n-head-kv 1 --head-dim 32 --n-ff 64 --n-expert 8 --n-expert-used 2 --n-ff-exp 32 --n-layer 2 --sliding-window 8 --rope-scaling yarn --rope-scale-factor 32 --yarn-orig-ctx 16 --rope-base 150000 --seed 30" \
	"gemma4|--arch gemma4 --n-embd 64 --n-head 4 --n-head-kv 1 --n-head-kv-swa 2 --head-dim 32 --head-dim-swa 16 --n-ff 96 --n-layer 6 --sliding-window 8 --sliding-window-pattern 3 --attn-k-eq-v --kv-shared-layers 3 --rope-base 1000000 --final-logit-softcap 30 --seed 60" \
	"gemma4-e|--arch gemma4 --n-embd 64 --n-head 4 --n-head-kv 1 --head-dim 32 --head-dim-swa 16 --n-ff 64 --n-layer 5 --sliding-window 8 --sliding-window-pattern 2 --kv-shared-layers 3 --double-wide-mlp --n-embd-per-layer 32 --final-logit-softcap 30 --seed 62"; do
	name=${spec%%|*}
	m=$tmp/$name.gguf
	# shellcheck disable=SC2086
	"${top_builddir:-.}/tests/parley-mkmodel" ${spec#*|} \
		--tokenizer-from "$(test_model)" --type Q8_0 --embd-type Q8_0 \
		--out-norm-scale 4 -o "$m" >/dev/null &&
		PARLEY_TEST_RS_MODEL=$m PARLEY_TEST_RS_RECURRENT=0 \
			sh "${top_srcdir:-.}/tests/t_tui_recurrent.sh" >"$tmp/$name.out" 2>&1
	st=$?
	grep -E '^(not )?ok|^# turn' "$tmp/$name.out" | sed 's/^/  /' | while read -r l; do diag "$l"; done
	[ "$st" -eq 0 ] && grep -q '^ok 8 ' "$tmp/$name.out" && ! grep -q '^not ok' "$tmp/$name.out"
	ok $? "$name: the UI's ten turns, /regen and a branch ($(grep -c '^ok' "$tmp/$name.out") of 8 checks)"
done
done_testing
