# tests/tui_lib.sh - drive parley's full-screen UI in tmux: a private tmux
# server, keys sent with send-keys, the screen read with capture-pane.
# Sourced after tests/lib.sh by tests/t_tui_*.sh.
#
# Every wait is "until the screen shows X, at most T seconds": tui_wait
# polls the screen and returns as soon as the pattern is there; the
# verdict is what the screen showed, never how long it took.

tui_sock= # the tmux socket, set by tui_start
tui_runs=0 # servers started: each gets its own socket (a server being
           # killed must not take the next one's clients with it)

# tui_need: skip the whole test (TAP skip) when tmux or the model is missing.
tui_need() {
	command -v tmux >/dev/null 2>&1 || skip_all "tmux not installed"
	[ -f "$(test_model)" ] || skip_all "default model not fetched ($(test_model))"
}

# tui_start DIR COLS ROWS ARGS...: run `parley ARGS` in a new tmux server
# whose socket and files live in DIR. The pane's shell records `stty -g`
# before and after (DIR/stty.before, DIR/stty.after) and prints
# "PARLEY-EXIT <status>" when parley ends, then stays.
tui_start() {
	tui_dir=$1 cols=$2 rows=$3
	shift 3
	# a check on these files must see this run's, or none
	rm -f "$tui_dir/stty.before" "$tui_dir/stty.after" "$tui_dir/stderr"
	tui_runs=$((tui_runs + 1))
	tui_sock=$tui_dir/tmux.$tui_runs.sock
	# the command line as one shell word list, quoted
	tui_args=
	for a in "$@"; do
		tui_args="$tui_args '$(printf '%s' "$a" | sed "s/'/'\\\\''/g")'"
	done
	cat >"$tui_dir/run.sh" <<SH
ulimit -c 0
stty -g >"$tui_dir/stty.before"
"$PARLEY" $tui_args 2>"$tui_dir/stderr"
st=\$?
stty -g >"$tui_dir/stty.after"
echo "PARLEY-EXIT \$st"
exec sleep 600
SH
	tmux -S "$tui_sock" -f /dev/null new-session -d -x "$cols" -y "$rows" \
		-e LANG=C.UTF-8 -e LC_ALL= -e TERM=screen \
		-e "PARLEY_DB=$PARLEY_DB" -e "XDG_STATE_HOME=$XDG_STATE_HOME" \
		-e "XDG_CONFIG_HOME=$XDG_CONFIG_HOME" -e "NO_COLOR=${NO_COLOR:-}" \
		"sh $tui_dir/run.sh"
	tmux -S "$tui_sock" set-option -g set-clipboard on >/dev/null 2>&1
}

# tui_start_shell DIR COLS ROWS: an interactive shell with job control
# (bash) in a new tmux server, its prompt "SHELL$" (capture-pane drops
# the space after it), the environment of
# tui_start; type a command line into it with tui_type. For what only a
# shell that keeps jobs shows: Ctrl-Z, `fg`.
tui_start_shell() {
	tui_dir=$1 cols=$2 rows=$3
	tui_runs=$((tui_runs + 1))
	tui_sock=$tui_dir/tmux.$tui_runs.sock
	echo "PS1='SHELL\$ '" >"$tui_dir/bashrc"
	tmux -S "$tui_sock" -f /dev/null new-session -d -x "$cols" -y "$rows" \
		-e LANG=C.UTF-8 -e LC_ALL= -e TERM=screen \
		-e "PARLEY_DB=$PARLEY_DB" -e "XDG_STATE_HOME=$XDG_STATE_HOME" \
		-e "XDG_CONFIG_HOME=$XDG_CONFIG_HOME" -e "NO_COLOR=${NO_COLOR:-}" \
		-e "PARLEY_BACKEND=$PARLEY_BACKEND" \
		"bash --rcfile $tui_dir/bashrc --noprofile -i"
}

# tui_flag NAME: the pane's tmux format variable NAME (alternate_on,
# cursor_flag, keypad_flag, ...): what the terminal's modes are now.
tui_flag() {
	tmux -S "$tui_sock" display-message -p "#{$1}"
}

# tui_stop: end the tmux server (and what runs in it).
tui_stop() {
	[ -n "$tui_sock" ] && tmux -S "$tui_sock" kill-server >/dev/null 2>&1
	tui_sock=
}

# tui_screen: the screen as text, one line a row.
tui_screen() {
	tmux -S "$tui_sock" capture-pane -p
}

# tui_keys KEYS...: send keys (tmux names: Enter, C-c, Up, F1, ...).
tui_keys() {
	tmux -S "$tui_sock" send-keys "$@"
}

# tui_type TEXT: send TEXT literally.
tui_type() {
	tmux -S "$tui_sock" send-keys -l -- "$1"
}

# tui_wait REGEX [SECONDS]: until the screen matches REGEX (grep -E), at
# most SECONDS (default 30). 0 when it did; 1 otherwise, with the screen
# as TAP comments.
tui_wait() {
	tw_n=$(((${2:-30}) * 10))
	while [ "$tw_n" -gt 0 ]; do
		tui_screen >"$tui_dir/screen" 2>/dev/null
		grep -Eq -- "$1" "$tui_dir/screen" && return 0
		sleep 0.1
		tw_n=$((tw_n - 1))
	done
	diag "the screen never showed /$1/:"
	sed 's/^/#   |/' "$tui_dir/screen"
	return 1
}

# tui_wait_gone REGEX [SECONDS]: until the screen no longer matches REGEX.
tui_wait_gone() {
	tw_n=$(((${2:-30}) * 10))
	while [ "$tw_n" -gt 0 ]; do
		tui_screen >"$tui_dir/screen" 2>/dev/null
		grep -Eq -- "$1" "$tui_dir/screen" || return 0
		sleep 0.1
		tw_n=$((tw_n - 1))
	done
	diag "the screen still shows /$1/:"
	sed 's/^/#   |/' "$tui_dir/screen"
	return 1
}

# tui_status: the status bar (the row holding "F1 help").
tui_status() {
	tui_screen | grep 'F1 help' | tail -n 1
}

# tui_pid: the pid of parley in the pane (the pane's shell's child),
# read from /proc (no procps needed).
tui_pid() {
	sh_pid=$(tmux -S "$tui_sock" display-message -p '#{pane_pid}')
	for st in /proc/[0-9]*/stat; do
		read -r tp_pid tp_comm tp_state tp_ppid tp_rest 2>/dev/null <"$st" || continue
		[ "$tp_ppid" = "$sh_pid" ] && [ "$tp_comm" = "(parley)" ] && echo "$tp_pid"
	done | head -n 1
}

# export_str FILE NAME / export_num FILE NAME: the last reply's NAME (a
# string's text, a number) in FILE, `parley export --format json`'s output,
# read with sed: the reply is the last assistant message.
export_str() {
	sed -n 's/.*"role":"assistant","content":"[^"]*","'"$2"'":"\([^"]*\)".*/\1/p' \
		"$1" | tail -n 1
}
export_num() {
	sed -n 's/.*"'"$2"'":\([0-9]*\).*/\1/p' "$1" | tail -n 1
}
