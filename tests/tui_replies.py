#!/usr/bin/env python3
"""tui_replies.py - compare stored replies token by token (tests/t_tui_recurrent.sh).

    tui_replies.py fresh DB CONV TIE TMP PARLEY MODEL BACKEND
        the 10 replies of conversation CONV of the store DB against those
        of the fresh sessions TMP/fresh1.db .. fresh10.db
    tui_replies.py same DB REF NEW TIE PROMPT_DB PARLEY MODEL BACKEND
        reply NEW (a regenerated or branched one) against reply REF of
        the same prompt, whose ids the newest reply of PROMPT_DB's store
        was answered from
    tui_replies.py newest DB CONV
        the id of conversation CONV's newest reply

The replies are read from the stored token reports (store_report.c's
BLOB: the chosen ids and their top logits). A reply equal to its
reference token for token is "the same". With TIE > 0 (a GPU: a one-token
decode step and a batched prefill round differently) a reply may part
from its reference where the reference's logits of the two tokens are
within TIE (a near tie); the rest of the reply is then compared too: a
fresh engine (`parley generate --ids`) is given the prompt's ids and the
reply's tokens up to the one it chose, and must continue as the reply
did, again up to near ties. So every token of every reply is checked
against a fresh evaluation. Prints "yes: ..." or "no: ..." (what parted
where, how far apart).
"""
import json
import os
import sqlite3
import struct
import subprocess
import sys


def connect(path):
    return sqlite3.connect("file:%s?mode=ro" % path, uri=True)


def tokens(c, mid):
    """a reply's tokens: (chosen id, {id: logit} of its top)"""
    toks = []
    for (blob,) in c.execute("SELECT data FROM token_reports WHERE "
                             "message_id = ? ORDER BY first_pos", (mid,)):
        _, _, _, n, nt = struct.unpack_from("<BBHII", blob, 0)
        o = 12
        for _ in range(nt):
            _, ln = struct.unpack_from("<IH", blob, o)
            o += 6 + ln
        for _ in range(n):
            _, ntop, key = struct.unpack_from("<BBI", blob, o)
            o += 26
            top = {}
            for _ in range(ntop):
                k, lg, _ = struct.unpack_from("<Iff", blob, o)
                o += 12
                top[k] = lg
            toks.append((key, top))
    return toks


def newest(c, conv):
    """the newest reply of conversation CONV (the newest one, if 0)"""
    q = ("SELECT id FROM messages WHERE role = 'assistant'" +
         (" AND conversation_id = %d" % conv if conv else "") +
         " ORDER BY id DESC LIMIT 1")
    r = c.execute(q).fetchone()
    return r[0] if r else None


def prompt_ids(c, mid):
    """the ids of the prompt reply MID answered: its session's saved ids
    (its prompt and reply) up to the reply's prompt length"""
    conv, n = c.execute("SELECT conversation_id, n_prompt_tokens FROM "
                        "messages WHERE id = ?", (mid,)).fetchone()
    r = c.execute("SELECT tokens FROM kv_states WHERE conversation_id = ?",
                  (conv,)).fetchone()
    if r is None or len(r[0]) < 4 * n or n == 0:
        return None
    return list(struct.unpack_from("<%di" % n, r[0], 0))


class Engine:
    """a fresh engine's greedy steps (parley generate --ids --trace)"""

    def __init__(self, parley, model, backend, tmp):
        self.argv = [parley, "generate", "-m", model, "--backend", backend]
        self.trace = os.path.join(tmp, "forced.jsonl")
        self.runs = 0

    def steps(self, ids, n):
        """N greedy steps after IDS: (chosen id, top) each, or None"""
        self.runs += 1
        r = subprocess.run(self.argv + ["--ids", " ".join(map(str, ids)),
                                        "-n", str(n), "--ignore-eos",
                                        "--trace", self.trace],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            return None
        out = []
        with open(self.trace) as f:
            for line in f:
                top = json.loads(line)["top"]
                out.append((top[0]["id"], {t["id"]: t["logit"] for t in top}))
        return out


def compare(name, a, b, pid, tie, engine):
    """reply A (its tokens) against reference B: (same, ties, bad), the
    ties and faults as strings naming NAME and the token"""
    ties, bad = [], []
    if not a:
        return False, ties, ["%s: no tokens" % name]
    start = 0  # where B's tokens begin in A
    while True:
        j, gap = None, 0.0
        for i, ((x, _), (y, yt)) in enumerate(zip(a[start:], b)):
            if x != y:
                j = start + i
                gap = abs(yt.get(x, float("-inf")) - yt.get(y, float("inf")))
                break
        if j is None:
            if start == 0 and len(a) != len(b):
                bad.append("%s: %d and %d tokens" % (name, len(a), len(b)))
            return start == 0 and not bad, ties, bad
        what = "%s token %d (%.4f apart)" % (name, j, gap)
        if gap > tie:
            return False, ties, bad + [what]
        ties.append(what)
        if j + 1 == len(a):
            return False, ties, bad
        if pid is None:
            return False, ties, bad + ["%s: no saved ids of its prompt" % name]
        # a fresh engine from A's choice at j on
        b = engine.steps(pid + [x for x, _ in a[:j + 1]], len(a) - j - 1)
        if b is None or len(b) != len(a) - j - 1:
            return False, ties, bad + [
                "%s: the forced run after token %d failed" % (name, j)]
        start = j + 1


def verdict(n, same, ties, bad, engine):
    return "%s: %d of %d the same token for token%s%s" % (
        "no" if bad else "yes", same, n,
        "; parting at a near tie, the rest compared by %d forced runs: %s" %
        (engine.runs, ", ".join(ties)) if ties else "",
        "; otherwise: " + ", ".join(bad) if bad else "")


def fresh(db, conv, tie, tmp, engine):
    c = connect(db)
    u = [r[0] for r in c.execute("SELECT id FROM messages WHERE "
                                 "conversation_id = ? AND role = "
                                 "'assistant' ORDER BY id", (conv,))]
    same, ties, bad = 0, [], []
    for t in range(10):
        p = "%s/fresh%d.db" % (tmp, t + 1)
        f = connect(p) if os.path.exists(p) else None
        m = newest(f, 0 if t == 0 else conv) if f else None
        if t >= len(u) or m is None or (t > 0 and m <= u[-1]):
            bad.append("reply %d: no fresh reply" % (t + 1))
            continue
        s, ti, ba = compare("reply %d" % (t + 1), tokens(c, u[t]),
                            tokens(f, m), prompt_ids(f, m), tie, engine)
        same += s
        ties += ti
        bad += ba
    return verdict(10, same, ties, bad, engine)


def main(argv):
    if len(argv) == 4 and argv[1] == "newest":
        print(newest(connect(argv[2]), int(argv[3])) or "")
        return 0
    if len(argv) == 9 and argv[1] == "fresh":
        db, conv, tie, tmp = argv[2], int(argv[3]), float(argv[4]), argv[5]
        print(fresh(db, conv, tie, tmp, Engine(argv[6], argv[7], argv[8], tmp)))
        return 0
    if len(argv) == 10 and argv[1] == "same":
        db, ref, new, tie, pdb = (argv[2], int(argv[3]), int(argv[4]),
                                  float(argv[5]), argv[6])
        c, p = connect(db), connect(pdb)
        engine = Engine(argv[7], argv[8], argv[9], os.path.dirname(pdb))
        s, ti, ba = compare("the reply", tokens(c, new), tokens(c, ref),
                            prompt_ids(p, newest(p, 0)), tie, engine)
        print(verdict(1, s, ti, ba, engine))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
