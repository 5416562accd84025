#!/bin/sh
# t_models.sh - `parley models` and -m NAME (issue 35): fake stores on
# disk (parley's cache, a models-dir, the Hugging Face hub cache with its
# symlinks, ollama's manifests and blobs, LM Studio's folder) holding small
# GGUF files written now by `parley dev-mkmodel`; the listing (text and
# --json), names resolved by `parley info NAME` and the chat's -m, and
# everything half-written or broken listed with its reason, never used.
# Nothing reaches the network.
. "${top_srcdir:-.}/tests/lib.sh"

command -v python3 >/dev/null 2>&1 || skip_all "python3 is needed"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
HOME=$tmp/home
XDG_CONFIG_HOME=$tmp/config
HF_HOME=$tmp/hf
OLLAMA_MODELS=$tmp/ollama
export HOME XDG_CONFIG_HOME HF_HOME OLLAMA_MODELS
unset XDG_CACHE_HOME HF_HUB_CACHE
tokf="${top_srcdir:-.}/tests/data/tok/llama2-hf.gguf"

# mk FILE ARCH SEED [options]: a small random model with a real tokenizer
mk() {
	f=$1 a=$2 s=$3
	shift 3
	mkdir -p "$(dirname "$f")"
	"$PARLEY" dev-mkmodel -o "$f" --arch "$a" --seed "$s" --type Q8_0 \
		--tokenizer-from "$tokf" "$@" >/dev/null 2>&1
}
sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { wc -c <"$1" | tr -d ' '; }

# --- parley's cache and a models-dir -----------------------------------------
cache=$HOME/.cache/parley/models
mk "$cache/mine-Q8_0.gguf" llama 1
cp "$cache/mine-Q8_0.gguf" "$cache/half.gguf.incomplete"
cp "$cache/mine-Q8_0.gguf" "$cache/half.gguf.part"
head -c $(($(size "$cache/mine-Q8_0.gguf") - 1000)) "$cache/mine-Q8_0.gguf" \
	>"$cache/trunc.gguf"
extra=$tmp/extra
mk "$extra/sub/extra-llama.gguf" llama 2
mk "$tmp/big.gguf" llama 3
split=$top_builddir/tests/t_gguf_split
have_split=0
if [ -x "$split" ] && "$split" --write "$tmp/big.gguf" "$extra" big 2 >/dev/null 2>&1; then
	have_split=1
fi
other=$tmp/other
mk "$other/second.gguf" llama 4

# --- the Hugging Face hub cache ----------------------------------------------
repo=$HF_HOME/hub/models--acme--Tiny-GGUF
commit=0123456789abcdef0123456789abcdef01234567
mkdir -p "$repo/refs" "$repo/blobs" "$repo/snapshots/$commit/F16" \
	"$repo/snapshots/fedcba9876543210fedcba9876543210fedcba98"
printf '%s' "$commit" >"$repo/refs/main"
mk "$tmp/tf16.gguf" qwen3 6
b16=$(sha "$tmp/tf16.gguf")
mv "$tmp/tf16.gguf" "$repo/blobs/$b16"
ln -s "../../blobs/$(sha "$cache/mine-Q8_0.gguf")" "$repo/snapshots/$commit/Tiny-Q8_0.gguf"
cp "$cache/mine-Q8_0.gguf" "$repo/blobs/$(sha "$cache/mine-Q8_0.gguf")"
ln -s "../../../blobs/$b16" "$repo/snapshots/$commit/F16/Tiny-F16.gguf"
ln -s ../../blobs/0000deadbeef "$repo/snapshots/$commit/Tiny-Q4_0.gguf"
cp "$cache/mine-Q8_0.gguf" "$repo/blobs/1111.incomplete"
# a snapshot refs/main does not name: not listed
cp "$cache/mine-Q8_0.gguf" \
	"$repo/snapshots/fedcba9876543210fedcba9876543210fedcba98/Old-Q5_0.gguf"

# --- ollama --------------------------------------------------------------------
man=$OLLAMA_MODELS/manifests/registry.ollama.ai
blobs=$OLLAMA_MODELS/blobs
mkdir -p "$blobs"
# blob FILE: move FILE into the store, print its hex digest
blob() {
	h=$(sha "$1")
	mv "$1" "$blobs/sha256-$h"
	echo "$h"
}
# manifest PATH HEX SIZE: a manifest whose model layer is blob HEX
manifest() {
	mkdir -p "$(dirname "$1")"
	cat >"$1" <<EOF
{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
 "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:$(printf '%064d' 0)","size":10},
 "layers":[{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:$(printf '%064d' 1)","size":5},
  {"mediaType":"application/vnd.ollama.image.model","digest":"sha256:$2","size":$3}]}
EOF
}
mk "$tmp/q8b.gguf" qwen3 7
q8b_size=$(size "$tmp/q8b.gguf")
q8b=$(blob "$tmp/q8b.gguf")
manifest "$man/library/qwen3/8b" "$q8b" "$q8b_size"
mk "$tmp/qlatest.gguf" qwen3 8
qlatest=$(blob "$tmp/qlatest.gguf")
manifest "$man/library/qwen3/latest" "$qlatest" "$(size "$blobs/sha256-$qlatest")"
mk "$tmp/hfo.gguf" llama 9
hfo=$(blob "$tmp/hfo.gguf")
manifest "$OLLAMA_MODELS/manifests/hf.co/acme/Other-GGUF/Q8_0" "$hfo" \
	"$(size "$blobs/sha256-$hfo")"
mk "$tmp/user.gguf" llama 10
user=$(blob "$tmp/user.gguf")
manifest "$man/someone/mymodel/v1" "$user" "$(size "$blobs/sha256-$user")"
mkdir -p "$man/library/broken"
printf '{"layers": [' >"$man/library/broken/json"
manifest "$man/library/gone/1b" "$(printf '%064d' 7)" 100
# a digest that would lead out of blobs/ (hostile input)
manifest "$man/library/evil/1b" "../../../home/.cache/parley/models/mine-Q8_0.gguf" 100
# a blob shorter than its manifest says
mk "$tmp/short.gguf" llama 11
short=$(blob "$tmp/short.gguf")
manifest "$man/library/short/1b" "$short" $(($(size "$blobs/sha256-$short") + 4096))
# a download in progress: no manifest, and the name is not a blob's
cp "$blobs/sha256-$q8b" "$blobs/sha256-$(printf '%064d' 9)-partial"
# an architecture parley does not run: "llama" renamed in the header
mk "$tmp/mamba.gguf" llama 12
python3 - "$tmp/mamba.gguf" <<'PY'
import sys
p = sys.argv[1]
b = open(p, "rb").read()
open(p, "wb").write(b.replace(b"llama.", b"mamba.").replace(
    b"\x05\x00\x00\x00\x00\x00\x00\x00llama", b"\x05\x00\x00\x00\x00\x00\x00\x00mamba"))
PY
mamba=$(blob "$tmp/mamba.gguf")
manifest "$man/library/mamba/1b" "$mamba" "$(size "$blobs/sha256-$mamba")"

# --- LM Studio -----------------------------------------------------------------
mk "$HOME/.lmstudio/models/lmstudio-community/Small-GGUF/Small-Q8_0.gguf" llama 13

# === the listing ================================================================
"$PARLEY" models --models-dir "$extra" --models-dir "$other" \
	>"$tmp/list" 2>"$tmp/list.err"
ok $? "parley models exits 0: $(head -c 300 "$tmp/list.err")"
diag "$(cat "$tmp/list")"
line() { grep -E "^$1 " "$tmp/list"; }
head -n 1 "$tmp/list" | grep -Eq '^NAME +ARCH +PARAMS +QUANT +SIZE +CONTEXT +RUNS +SOURCE +PATH$'
ok $? "a header names the columns"
line 'qwen3:8b' | grep -Eq "^qwen3:8b +qwen3 +[0-9.]+M +Q8_0 +[0-9.]+ [KMG]B +2048 +yes +ollama +.*/blobs/sha256-$q8b$"
ok $? "qwen3:8b: architecture, parameters, quantization, size, context, source"
line 'acme/Tiny-GGUF:Q8_0' | grep -q " hf "
ok $? "the hub cache's file named org/repo:QUANT"
line 'acme/Tiny-GGUF:F16' | grep -q "F16/Tiny-F16.gguf"
ok $? "a quantization's subfolder in the hub cache"
line 'lmstudio-community/Small-GGUF:Q8_0' | grep -q " lmstudio "
ok $? "LM Studio's model named publisher/repo:QUANT"
line 'hf.co/acme/Other-GGUF:Q8_0' | grep -q " ollama "
ok $? "an ollama model of another host keeps the host"
line 'someone/mymodel:v1' | grep -q " ollama "
ok $? "an ollama model of another namespace: ns/name:tag"
line 'mine-Q8_0' | grep -q " parley "
ok $? "parley's cache"
line 'sub/extra-llama' | grep -q " dir "
ok $? "a models-dir, walked into its subfolders"
line 'second' | grep -q " dir "
ok $? "a second models-dir"
! grep -Eq 'half|incomplete|\.part|partial|Old-Q5_0|1111' "$tmp/list"
ok $? "downloads in progress and old snapshots are not listed"
line 'trunc' | grep -Eq ' no .*\(.+\)$'
ok $? "a truncated GGUF: listed, runs no, with the reason"
line 'acme/Tiny-GGUF:Q4_0' | grep -q 'broken symbolic link'
ok $? "a broken hub symlink: listed with the reason"
line 'mamba:1b' | grep -q 'unsupported architecture "mamba"'
ok $? "an unsupported architecture shown with the reason"
line 'broken:json' | grep -q 'not JSON'
ok $? "a manifest that is not JSON: its reason"
line 'gone:1b' | grep -q 'missing'
ok $? "a manifest naming a missing blob: its reason"
line 'evil:1b' | grep -q 'digest is not sha256:<64 hex digits>'
ok $? "a digest that is not 64 hex digits is refused, never followed"
line 'short:1b' | grep -q 'unfinished download'
ok $? "a blob shorter than its manifest: its reason"
if [ $have_split -eq 1 ]; then
	[ "$(grep -c '^big' "$tmp/list")" -eq 1 ] && ! grep -q -- '-00002-of' "$tmp/list"
	ok $? "a split model is one line"
fi

"$PARLEY" models --json --models-dir "$extra:$other" >"$tmp/json"
ok $? "parley models --json exits 0"
python3 - "$tmp/json" "$q8b_size" "$have_split" "$OLLAMA_MODELS" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
d = {e["name"]: e for e in v}
want = {"mine-Q8_0", "trunc", "sub/extra-llama", "second",
        "acme/Tiny-GGUF:Q8_0", "acme/Tiny-GGUF:F16", "acme/Tiny-GGUF:Q4_0",
        "qwen3:8b", "qwen3:latest", "hf.co/acme/Other-GGUF:Q8_0",
        "someone/mymodel:v1", "broken:json", "gone:1b", "evil:1b", "short:1b",
        "mamba:1b", "lmstudio-community/Small-GGUF:Q8_0"}
if sys.argv[3] == "1":
    want.add("big")
assert set(d) == want, sorted(set(d) ^ want)
q = d["qwen3:8b"]
assert q["source"] == "ollama" and q["architecture"] == "qwen3", q
assert q["quantization"] == "Q8_0" and q["context_length"] == 2048, q
assert q["size"] == int(sys.argv[2]) and q["parameters"] > 0, q
assert q["runnable"] is True and q["why"] is None, q
assert q["path"].startswith(sys.argv[4] + "/blobs/sha256-"), q
assert d["acme/Tiny-GGUF:Q8_0"]["source"] == "hf"
assert d["lmstudio-community/Small-GGUF:Q8_0"]["source"] == "lmstudio"
for n in ("trunc", "acme/Tiny-GGUF:Q4_0", "broken:json", "gone:1b",
          "evil:1b", "short:1b", "mamba:1b"):
    assert d[n]["runnable"] is False and d[n]["why"], d[n]
assert "unsupported architecture" in d["mamba:1b"]["why"]
assert d["mamba:1b"]["architecture"] == "mamba"
if sys.argv[3] == "1":
    assert d["big"]["shards"] == 2 and d["big"]["runnable"], d["big"]
PY
ok $? "--json: every model once, the facts of the table"

# models-dir from the config file, with a colon list
mkdir -p "$XDG_CONFIG_HOME/parley"
printf 'models-dir = %s:%s\n' "$extra" "$other" >"$XDG_CONFIG_HOME/parley/config"
"$PARLEY" models >"$tmp/list2"
grep -q '^sub/extra-llama ' "$tmp/list2" && grep -q '^second ' "$tmp/list2"
ok $? "models-dir from the config file"

# === names ========================================================================
# resolves NAME FILE: `parley info NAME` reads FILE
resolves() {
	"$PARLEY" info "$1" >"$tmp/info" 2>"$tmp/info.err" &&
		[ "$(sed -n 's/^file  *//p' "$tmp/info")" = "$2" ]
}
resolves qwen3:8b "$blobs/sha256-$q8b"
ok $? "qwen3:8b: the blob its manifest names $(cat "$tmp/info.err")"
resolves library/qwen3:8b "$blobs/sha256-$q8b"
ok $? "library/qwen3:8b"
resolves registry.ollama.ai/library/qwen3:8b "$blobs/sha256-$q8b"
ok $? "registry.ollama.ai/library/qwen3:8b"
resolves qwen3 "$blobs/sha256-$qlatest"
ok $? "qwen3: the tag latest"
resolves acme/Tiny-GGUF:q8_0 "$repo/snapshots/$commit/Tiny-Q8_0.gguf"
ok $? "org/repo:quant in the hub cache (case folded)"
resolves hf.co/acme/Oth "$blobs/sha256-$hfo"
ok $? "a unique prefix"
resolves sub/extra "$extra/sub/extra-llama.gguf"
ok $? "a models-dir file by its name"
resolves mamba:1b "$blobs/sha256-$mamba"
ok $? "a model parley cannot run still resolves for parley info"
resolves "$other/second.gguf" "$other/second.gguf"
ok $? "a path is a path"

"$PARLEY" info acme/Tiny >/dev/null 2>"$tmp/e1"
st=$?
[ $st -eq 1 ] && grep -q "'acme/Tiny' matches 3 models: acme/Tiny-GGUF:F16, acme/Tiny-GGUF:Q4_0, acme/Tiny-GGUF:Q8_0" "$tmp/e1" &&
	[ "$(wc -l <"$tmp/e1")" -eq 1 ]
ok $? "an ambiguous name: one line listing the matches: $(cat "$tmp/e1")"
"$PARLEY" info qwen4:8b >/dev/null 2>"$tmp/e2"
st=$?
[ $st -eq 1 ] && grep -q "no model 'qwen4:8b'; the nearest: qwen3:8b, qwen3:latest, " "$tmp/e2"
ok $? "an unknown name: the nearest names first: $(cat "$tmp/e2")"
"$PARLEY" info trunc >"$tmp/o3" 2>"$tmp/e3"
st=$?
[ $st -eq 1 ] && [ ! -s "$tmp/o3" ] && grep -q "^parley: trunc (.*trunc.gguf): " "$tmp/e3"
ok $? "a truncated GGUF is never opened as a model: $(cat "$tmp/e3")"
"$PARLEY" info acme/Tiny-GGUF:Q4_0 >/dev/null 2>"$tmp/e4"
[ $? -eq 1 ] && grep -q "broken symbolic link" "$tmp/e4"
ok $? "a broken symlink: its reason"
"$PARLEY" info gone:1b >/dev/null 2>"$tmp/e5"
[ $? -eq 1 ] && grep -q "missing" "$tmp/e5"
ok $? "a manifest naming a missing blob: its reason"
"$PARLEY" info half >/dev/null 2>"$tmp/e6"
[ $? -eq 1 ] && grep -q "no model 'half'" "$tmp/e6"
ok $? "a *.incomplete file is no model"

# the chat's -m: the one-shot runs qwen3:8b from ollama's store
"$PARLEY" -m qwen3:8b -p hi -n 2 --temp 0 --no-store >"$tmp/o7" 2>"$tmp/e7"
ok $? "parley -m qwen3:8b -p hi: $(head -c 300 "$tmp/e7")"
"$PARLEY" -m qwen4:8b -p hi --no-store >/dev/null 2>"$tmp/e8"
[ $? -ne 0 ] && grep -q "no model 'qwen4:8b'; the nearest: qwen3:8b" "$tmp/e8"
ok $? "parley -m with an unknown name: the nearest names"
printf 'model = acme/Tiny-GGUF:F16\n' >"$XDG_CONFIG_HOME/parley/config"
"$PARLEY" -p hi -n 2 --temp 0 --no-store >/dev/null 2>"$tmp/e9"
ok $? "the config's model takes a name: $(head -c 300 "$tmp/e9")"
printf 'model = acme/Tiny\n' >"$XDG_CONFIG_HOME/parley/config"
"$PARLEY" -p hi --no-store >/dev/null 2>"$tmp/e10"
[ $? -ne 0 ] && grep -q "'acme/Tiny' matches 3 models" "$tmp/e10"
ok $? "the config's model, ambiguous: the matches"
printf 'models-dir =\n' >"$XDG_CONFIG_HOME/parley/config"
"$PARLEY" models >/dev/null 2>"$tmp/e11"
[ $? -eq 2 ] && grep -q "config:1: models-dir: an empty folder name" "$tmp/e11"
ok $? "an empty models-dir: the file and line named"
rm -f "$XDG_CONFIG_HOME/parley/config"

# nothing found at all: a clear message, exit 0
HOME=$tmp/empty HF_HOME=$tmp/empty OLLAMA_MODELS=$tmp/empty \
	"$PARLEY" models >"$tmp/o12" 2>"$tmp/e12"
[ $? -eq 0 ] && [ ! -s "$tmp/o12" ] && grep -q "no local models" "$tmp/e12"
ok $? "no stores: no table, one line on stderr"

done_testing
