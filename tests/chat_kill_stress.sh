#!/bin/sh
# chat_kill_stress.sh - the kill -9 test of the chat, many more times
# (default 200): CHAT_KILL_RUNS=N tests/chat_kill_stress.sh, from the build
# directory (top_srcdir and top_builddir as make check sets them).
CHAT_KILL_RUNS=${CHAT_KILL_RUNS:-200}
export CHAT_KILL_RUNS
exec "${top_srcdir:-.}/tests/t_chat_kill.sh"
