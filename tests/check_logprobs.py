#!/usr/bin/env python3
"""check_logprobs.py FILE [--greedy] - validate `parley export --format json
--logprobs` against the OpenAI chat-completions logprobs shape:

  message.logprobs = {"content": [{"token": str, "logprob": number <= 0,
      "bytes": [int 0-255] | null, "top_logprobs": [{"token", "logprob",
      "bytes"}, ...]}, ...] | null}

(https://platform.openai.com/docs/api-reference/chat/object, choices[].
logprobs). Also: each entry's bytes spell its token when they are UTF-8,
the top_logprobs are sorted and their probabilities sum to at most 1, and
the content's bytes joined give the message's text (replies that ended on
their own: no stop string cut them). --greedy: each chosen token is the
first of its top_logprobs. Python standard library only. Prints one line per
problem and exits 1, or prints "ok N replies, T tokens" and exits 0.
"""
import json
import math
import sys

KEYS = {"token", "logprob", "bytes"}


def entry_problems(e, where):
    p = []
    if not isinstance(e, dict):
        return [f"{where}: not an object"]
    want = KEYS | ({"top_logprobs"} if "top_logprobs" in e else set())
    if set(e) != want:
        p.append(f"{where}: keys {sorted(e)}")
        return p
    if not isinstance(e["token"], str):
        p.append(f"{where}: token is not a string")
    lp = e["logprob"]
    if isinstance(lp, bool) or not isinstance(lp, (int, float)) or \
            not math.isfinite(lp) or lp > 0:
        p.append(f"{where}: logprob {lp!r}")
    b = e["bytes"]
    if b is not None:
        if not isinstance(b, list) or not all(
                isinstance(x, int) and not isinstance(x, bool) and
                0 <= x <= 255 for x in b):
            p.append(f"{where}: bytes {b!r}")
        else:
            try:
                if bytes(b).decode("utf-8") != e["token"]:
                    p.append(f"{where}: bytes do not spell the token")
            except UnicodeDecodeError:
                pass  # a piece of a character: token is a stand-in
    return p


def main():
    path = sys.argv[1]
    greedy = "--greedy" in sys.argv[2:]
    doc = json.load(open(path, encoding="utf-8"))
    problems, n_rep, n_tok = [], 0, 0
    for i, m in enumerate(doc.get("messages", [])):
        if m.get("role") != "assistant":
            if "logprobs" in m:
                problems.append(f"messages[{i}]: logprobs on a {m.get('role')}")
            continue
        lp = m.get("logprobs")
        if not isinstance(lp, dict) or set(lp) != {"content"}:
            problems.append(f"messages[{i}]: logprobs {lp!r:.60}")
            continue
        content = lp["content"]
        if content is None:
            continue
        if not isinstance(content, list) or not content:
            problems.append(f"messages[{i}]: content {content!r:.60}")
            continue
        n_rep += 1
        joined = b""
        for j, e in enumerate(content):
            where = f"messages[{i}].logprobs.content[{j}]"
            n_tok += 1
            problems += entry_problems(e, where)
            top = e.get("top_logprobs") if isinstance(e, dict) else None
            if not isinstance(top, list) or not 1 <= len(top) <= 20:
                problems.append(f"{where}: top_logprobs {top!r:.60}")
                continue
            for k, t in enumerate(top):
                pk = entry_problems(t, f"{where}.top_logprobs[{k}]")
                if "top_logprobs" in (t if isinstance(t, dict) else {}):
                    pk.append(f"{where}.top_logprobs[{k}]: nested")
                problems += pk
            if problems:
                continue
            lps = [t["logprob"] for t in top]
            if lps != sorted(lps, reverse=True):
                problems.append(f"{where}: top_logprobs not sorted")
            if sum(math.exp(x) for x in lps) > 1 + 1e-4:
                problems.append(f"{where}: top probabilities sum over 1")
            if greedy and (top[0]["token"] != e["token"] or
                           top[0]["logprob"] != e["logprob"]):
                problems.append(f"{where}: greedy, but not the top token")
            joined += bytes(e["bytes"] or b"")
        if not problems and joined != m["content"].encode("utf-8"):
            problems.append(f"messages[{i}]: the tokens spell {joined!r:.80}"
                            f", the content is {m['content']!r:.80}")
    for p in problems[:20]:
        print(p)
    if problems or n_rep == 0:
        if n_rep == 0:
            print("no reply has logprobs")
        return 1
    print(f"ok {n_rep} replies, {n_tok} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
