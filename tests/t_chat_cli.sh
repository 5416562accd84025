#!/bin/sh
# t_chat_cli.sh - the chat's command line with the real SmolLM2 model
# (greedy, short replies): one-shot -p (argument and stdin), --no-store,
# the config file and its precedence, resume -p, list / show / search /
# rename / rm, export (JSON and Markdown) and the import round trip, a
# saved KV state that does not load (a notice), export --logprobs checked
# against the OpenAI shape (tests/check_logprobs.py), --no-reports, show
# --branches and branch after a /regen, a thinking template's reasoning
# (-p, --thinking, --think, export), and that --help and the man page
# name every chat option.
. "${top_srcdir:-.}/tests/lib.sh"
model=$(test_model)
[ -f "$model" ] || skip_all "default model not fetched ($model)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t_chat_cli.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
export XDG_CONFIG_HOME=$tmp/config XDG_STATE_HOME=$tmp/state
export PARLEY_DB=$tmp/chat.db
sys="You are a helpful assistant."
opts="-m $model --threads 1 --temp 0 -n 12"

# greedy reply of SmolLM2 to this question (same as tests/data/chat/
# repl.golden's first turn)
want="The capital of France is Paris."

"$PARLEY" $opts --system "$sys" -p "What is the capital of France?" >"$tmp/o1"
ok $? "one shot exits 0"
[ "$(cat "$tmp/o1")" = "$want" ]
ok $? "one-shot reply on stdout: $(cat "$tmp/o1")"

echo "What is the capital of France?" |
	"$PARLEY" $opts --system "$sys" -p - >"$tmp/o2"
cmp -s "$tmp/o1" "$tmp/o2"
ok $? "-p - reads the message from stdin, same reply"

"$PARLEY" $opts --system "$sys" --no-store --stop " Paris" \
	-p "What is the capital of France?" >"$tmp/o6"
[ "$(cat "$tmp/o6")" = "The capital of France is" ]
ok $? "--stop ends the reply before the stop string: $(cat "$tmp/o6")"

"$PARLEY" $opts --system "$sys" --no-store -p "Hello" >/dev/null
n=$("$PARLEY" list | tail -n +2 | wc -l)
[ "$n" -eq 2 ]
ok $? "--no-store stores nothing (2 conversations listed, got $n)"

mkdir -p "$XDG_CONFIG_HOME/parley"
printf '# test config\ntemp = 0\nn-predict 12\nsystem = %s\nthreads=1\n' \
	"$sys" >"$XDG_CONFIG_HOME/parley/config"
"$PARLEY" -m "$model" -p "What is the capital of France?" --no-store >"$tmp/o3"
cmp -s "$tmp/o1" "$tmp/o3"
ok $? "options from \$XDG_CONFIG_HOME/parley/config"
"$PARLEY" -m "$model" -n 3 -p "What is the capital of France?" --no-store >"$tmp/o4"
[ "$(cat "$tmp/o4")" = "The capital of" ]
ok $? "the command line wins over the config file (-n 3: $(cat "$tmp/o4"))"
printf 'temp = hot\n' >"$XDG_CONFIG_HOME/parley/config"
"$PARLEY" -m "$model" -p x 2>"$tmp/err" >/dev/null
st=$?
[ $st -eq 2 ] && grep -q 'config:1: temp:' "$tmp/err"
ok $? "a bad config value is refused with file and line: $(cat "$tmp/err")"
rm -f "$XDG_CONFIG_HOME/parley/config"

"$PARLEY" resume 1 $opts -p "And of Germany?" >"$tmp/o5"
ok $? "resume ID -p continues a conversation: $(cat "$tmp/o5")"
"$PARLEY" show 1 >"$tmp/show"
grep -q '^And of Germany?$' "$tmp/show" && grep -qxF "$want" "$tmp/show" &&
	grep -qxF "$(cat "$tmp/o5")" "$tmp/show"
ok $? "show prints the whole conversation"

"$PARLEY" search Germany >"$tmp/search"
grep -q '\[Germany\]' "$tmp/search"
ok $? "search finds the message with the match marked"

"$PARLEY" rename 1 "Capitals"
ok $? "rename exits 0"
"$PARLEY" list >"$tmp/list"
grep -q ' Capitals$' "$tmp/list"
ok $? "list shows the new title"

"$PARLEY" export 1 --format json >"$tmp/e1.json"
ok $? "export --format json"
grep -q '"messages":\[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is the capital of France?"}' "$tmp/e1.json"
ok $? "JSON export in the OpenAI messages shape"
id=$("$PARLEY" import "$tmp/e1.json")
ok $? "import prints the new id ($id)"
"$PARLEY" export "$id" --format json -o "$tmp/e2.json"
cmp -s "$tmp/e1.json" "$tmp/e2.json"
ok $? "export -> import -> export gives the same JSON"
"$PARLEY" export "$id" --format md >"$tmp/e.md"
grep -q '^## Assistant' "$tmp/e.md" && grep -qxF "$want" "$tmp/e.md"
ok $? "Markdown export"
printf '[{"role":"user","content":"hi"},{"role":"wizard","content":"x"}]' >"$tmp/bad.json"
"$PARLEY" import "$tmp/bad.json" >/dev/null 2>&1
[ $? -eq 1 ]
ok $? "a malformed import is refused"

"$PARLEY" rm "$id"
ok $? "rm exits 0"
"$PARLEY" show "$id" >/dev/null 2>&1
[ $? -eq 1 ]
ok $? "the removed conversation is gone"
"$PARLEY" show abc >/dev/null 2>&1
[ $? -eq 2 ]
ok $? "a bad id is a usage error"

# a KV state saved with another context size does not load: parley says so
# on stderr, evaluates the conversation again and gives the same reply
"$PARLEY" $opts --system "$sys" --save-kv \
	-p "What is the capital of France?" >/dev/null
"$PARLEY" resume $opts --save-kv --ctx 2048 -p "And of Germany?" \
	>"$tmp/o7" 2>"$tmp/err7"
[ $? -eq 0 ] && cmp -s "$tmp/o5" "$tmp/o7" &&
	grep -q '^parley: the saved KV cache was not loaded: ' "$tmp/err7"
ok $? "resume with a KV state of another --ctx: a notice, the same reply ($(cat "$tmp/err7"))"

# token reports: every reply's tokens in OpenAI's logprobs shape, their
# bytes spelling the reply (greedy: each token the first candidate)
"$PARLEY" export 1 --format json --logprobs >"$tmp/lp.json"
ok $? "export --format json --logprobs"
python3 "${top_srcdir:-.}/tests/check_logprobs.py" "$tmp/lp.json" --greedy \
	>"$tmp/lp.out" 2>&1
ok $? "logprobs validate against the OpenAI shape: $(head -3 "$tmp/lp.out")"
"$PARLEY" export 1 --format md --logprobs >/dev/null 2>&1
[ $? -eq 2 ]
ok $? "--logprobs without --format json is a usage error"
"$PARLEY" $opts --no-reports -p "Hello" >/dev/null
nid=$("$PARLEY" list | sed -n 2p | awk '{print $1}')
"$PARLEY" export "$nid" --format json --logprobs |
	grep -q '"role":"assistant","content":"[^"]*","logprobs":{"content":null}'
ok $? "--no-reports: the reply has no reports (content null)"

# a /regen makes a sibling; show --branches lists both, branch switches
printf 'Name a color.\n/regen\n' | "$PARLEY" --plain $opts >/dev/null 2>&1
bid=$("$PARLEY" list | sed -n 2p | awk '{print $1}')
"$PARLEY" show "$bid" --branches >"$tmp/tree"
first=$(sed -n 's/^  *#\([0-9]*\) assistant \[1\/2\]:.*/\1/p' "$tmp/tree")
grep -q '^\* *#[0-9]* assistant \[2/2\]: ' "$tmp/tree" && [ -n "$first" ]
ok $? "show --branches: both replies, the newest active ($(tr '\n' '|' <"$tmp/tree"))"
leaf=$("$PARLEY" branch "$bid" "$first")
"$PARLEY" show "$bid" --branches >"$tmp/tree2"
[ "$leaf" = "$first" ] &&
	grep -q "^\* *#$first assistant \[1/2\]: " "$tmp/tree2" &&
	grep -q '^  *#[0-9]* assistant \[2/2\]: ' "$tmp/tree2"
ok $? "branch ID MSG_ID makes the first reply active ($leaf)"
"$PARLEY" show "$bid" | grep -q 'branch 1/2'
ok $? "show follows the selected branch"
"$PARLEY" branch "$bid" 999999 >/dev/null 2>&1
[ $? -eq 1 ]
ok $? "branch to a message of no such id fails"

# a thinking model's habits (tests/data/think/think.jinja opens <think>
# in the generation prompt): -p prints only the answer, --thinking the
# reasoning between <think> and </think>; a block never closed is said on
# stderr and kept; --think=off closes the block in the prompt; export
# gives reasoning_content and a <details> block
tpl=${top_srcdir:-.}/tests/data/think/think.jinja
"$PARLEY" $opts -n 20 --template "$tpl" -p "What is 2+2?" \
	>"$tmp/t1" 2>"$tmp/t1.err"
[ $? -eq 0 ] && [ ! -s "$tmp/t1" ] &&
	grep -q "ended inside its reasoning (7 tokens, unfinished" "$tmp/t1.err"
ok $? "-p prints only the answer (none: the reasoning never ended): $(cat "$tmp/t1.err")"
tid=$("$PARLEY" list | awk 'NR == 2 {print $1}')
"$PARLEY" $opts -n 20 --template "$tpl" --thinking -p "What is 2+2?" \
	>"$tmp/t2" 2>/dev/null
[ "$(head -n 1 "$tmp/t2")" = "<think>" ] &&
	[ "$(tail -n 1 "$tmp/t2")" = "</think>" ] && [ "$(wc -l <"$tmp/t2")" -eq 3 ]
ok $? "--thinking prints the reasoning between <think> and </think>: $(tr '\n' '|' <"$tmp/t2")"
"$PARLEY" $opts -n 20 --template "$tpl" --think=off --no-store \
	-p "What is 2+2?" >"$tmp/t3" 2>"$tmp/t3.err"
[ -s "$tmp/t3" ] && [ ! -s "$tmp/t3.err" ] && ! grep -q think "$tmp/t3"
ok $? "--think=off: enable_thinking false, the reply is the answer: $(cat "$tmp/t3")"
"$PARLEY" $opts --think=maybe -p x >/dev/null 2>&1
[ $? -eq 2 ]
ok $? "--think takes on or off"
# the same as config keys (a file given by --config: the test's own
# config stays as it is); the command line wins
printf 'thinking = true\n' >"$tmp/think.conf"
"$PARLEY" --config "$tmp/think.conf" $opts -n 20 --template "$tpl" \
	--no-store -p "What is 2+2?" >"$tmp/t4" 2>/dev/null
cmp -s "$tmp/t2" "$tmp/t4"
ok $? "config thinking = true prints the reasoning as --thinking does"
printf 'think = off\n' >"$tmp/think.conf"
"$PARLEY" --config "$tmp/think.conf" $opts -n 20 --template "$tpl" \
	--no-store -p "What is 2+2?" >"$tmp/t5" 2>/dev/null
cmp -s "$tmp/t3" "$tmp/t5"
ok $? "config think = off is --think=off"
"$PARLEY" --config "$tmp/think.conf" $opts -n 20 --template "$tpl" \
	--think=on --no-store -p "What is 2+2?" >"$tmp/t6" 2>/dev/null
! cmp -s "$tmp/t3" "$tmp/t6"
ok $? "--think=on wins over the config's think = off"
printf 'think = maybe\n' >"$tmp/think.conf"
"$PARLEY" --config "$tmp/think.conf" $opts -p x >/dev/null 2>"$tmp/t7.err"
[ $? -eq 2 ] && grep -q "think: 'maybe' is not on or off" "$tmp/t7.err"
ok $? "config think takes on or off: $(cat "$tmp/t7.err")"
"$PARLEY" export "$tid" --format json >"$tmp/t.json" &&
	python3 - "$tmp/t.json" "$(sed -n 2p "$tmp/t2")" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
a = d["messages"][-1]
assert a["role"] == "assistant" and a["content"] == "", a
assert a["reasoning_content"] == sys.argv[2], (a, sys.argv[2])
assert d["parley"]["messages"][-1]["reasoning_unfinished"] is True
PY
ok $? "export JSON: reasoning_content apart from the content"
"$PARLEY" export "$tid" --format md >"$tmp/t.md"
grep -q '^<summary>Reasoning, unfinished (7 tokens)</summary>$' "$tmp/t.md" &&
	grep -q '^</details>$' "$tmp/t.md"
ok $? "export Markdown: the reasoning folded in <details>"

# --help and the man page name every long option of the chat
"$PARLEY" chat --help >"$tmp/help"
ok $? "parley chat --help exits 0"
man=${top_srcdir:-.}/man/parley.1
missing=
for o in $(grep -o -- '--[a-z][a-z-]*' "$tmp/help" | sort -u); do
	grep -q -- "Fl -${o#--}" "$man" || missing="$missing $o"
done
[ -z "$missing" ]
ok $? "man/parley.1 documents every option of --help${missing:+ (missing:$missing)}"
missing=
for c in chat resume list show branch search rename rm export import; do
	"$PARLEY" --help | grep -q "^  $c " || missing="$missing $c"
	grep -q "^\.It Cm $c" "$man" || missing="$missing man:$c"
done
[ -z "$missing" ]
ok $? "parley --help and the man page list every command${missing:+ (missing:$missing)}"
done_testing
