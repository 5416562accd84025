#!/bin/sh
# t_tui_gemma.sh - one chat turn with the real Gemma 3 270M (the base
# model, Q4_K_M: tests/fetch-gemma.sh; $PARLEY_TEST_GEMMA overrides) in
# the full-screen UI in tmux, on the engine $PARLEY_TEST_BACKEND names
# (default the CPU reference; cuda on a GPU machine), greedy: the UI starts
# on the gemma3 file (its built-in template: the file carries none), the
# reply streams in and ends, and the stored reply's tokens are llama.cpp's
# for the same turn (tests/data/engine/gemma3_270m_chat.golden, by
# tests/oracles/gen_gemma_chat.py) wherever llama.cpp's top-2 gap is clear
# (>= 1.5, as t_engine_gemma.c), which also checks the prompt the UI sent:
# a different template or system prompt changes the continuation.
. "${top_srcdir:-.}/tests/lib.sh"
. "${top_srcdir:-.}/tests/tui_lib.sh"
command -v tmux >/dev/null 2>&1 || skip_all "tmux not installed"
command -v python3 >/dev/null 2>&1 || skip_all "python3 not installed"
gemma=${PARLEY_TEST_GEMMA:-${XDG_CACHE_HOME:-$HOME/.cache}/parley/models/gemma-3-270m-q4_k_m.gguf}
[ -f "$gemma" ] || skip_all "$gemma not found (tests/fetch-gemma.sh fetches it)"
backend=${PARLEY_TEST_BACKEND:-cpu}
golden=${top_srcdir:-.}/tests/data/engine/gemma3_270m_chat.golden
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_tui_gemma.XXXXXX") || exit 1
trap 'tui_stop; rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
# the golden's system prompt and message
sys=$(sed -n 's/^system //p' "$golden" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read()))')
msg=$(sed -n 's/^user //p' "$golden" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read()))')

tui_start "$tmp" 100 30 -m "$gemma" --backend "$backend" --temp 0 \
	--threads 1 --ctx 1024 -n 24 --system "$sys"
tui_wait "gemma-3-270m-q4_k_m │ $backend.* │ ctx 0/1024 .* F1 help" 120
ok $? "the UI starts on the gemma3 file: status bar with backend $backend"
tui_type "$msg"
tui_keys Enter
tui_wait '^▍you' 10
ok $? "the message is in the transcript under the user's label"
tui_wait 'pp [0-9]+ tg [0-9.]+ t/s' 120
ok $? "the reply streams and ends: the status bar shows its speeds"
diag "status: $(tui_status)"
tui_screen | grep -Fq 'You are a helpful assistant.'
ok $? "the reply's text is on the screen"
tui_keys C-d
tui_wait 'PARLEY-EXIT 0' 30
ok $? "Ctrl-D quits with status 0"
tui_stop

"$PARLEY" export --format json --logprobs 1 >"$tmp/export.json" 2>"$tmp/export.err"
ok $? "the turn is stored and exports with its token reports"
python3 - "$golden" "$tmp/export.json" >"$tmp/cmp.txt" 2>&1 <<'PY'
import json, sys
golden, export = sys.argv[1], sys.argv[2]
gen = [l.split()[1:] for l in open(golden) if l.startswith("gen ")]
reply = [m for m in json.load(open(export))["messages"]
         if m["role"] == "assistant"][-1]
got = [bytes(t["bytes"]).hex() or "-" for t in reply["logprobs"]["content"]]
clear = 0
for k, (tid, hexb, gap) in enumerate(gen):
    if float(gap) < 1.5:
        break
    if k >= len(got) or got[k] != hexb:
        print("step %d: parley %s, llama.cpp %s (token %s, gap %s)" %
              (k, got[k] if k < len(got) else "none", hexb, tid, gap))
        sys.exit(1)
    clear += 1
print("%d clear steps equal llama.cpp's (the first unclear: %s)" %
      (clear, gen[clear][2] if clear < len(gen) else "none"))
sys.exit(0 if clear >= 4 else 1)
PY
ok $? "the reply's tokens are llama.cpp's on the clear-margin prefix: $(cat "$tmp/cmp.txt")"

done_testing
