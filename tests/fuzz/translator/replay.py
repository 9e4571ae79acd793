"""Replay one translator fuzzer seed and print what differed, with minidynamo's traceback when it raised.

    .venv/bin/python tests/fuzz/translator/replay.py SEED MODE                 # the generated program
    GRAD=1 .venv/bin/python tests/fuzz/translator/replay.py SEED MODE PROG.py  # a hand-edited (shrunk) copy

MODE is one of ``eager``, ``aot``, ``full``, ``fullaot`` (see ``run.py``). With a program file, ``GRAD`` gives
which inputs require grad (0: none, the default; 1: x; 2: x and y), since it is not read back from the file.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.translator import run


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[2] not in run.MODES:
        sys.exit(__doc__)
    seed, mode = int(sys.argv[1]), sys.argv[2]
    if len(sys.argv) > 3:
        with open(sys.argv[3]) as fh:
            src = fh.read()
        run.generate = lambda _seed: (src, int(os.environ.get("GRAD", "0")))
    r = run.check(seed, mode)
    print("program:", os.path.join(run.PROGS, f"p{seed}.py"))
    for b in r["bad"]:
        print(json.dumps({k: v for k, v in b.items() if k != "tb"})[:3000])
        if b.get("tb"):
            print(b["tb"])
    print("breaks", r["breaks"], "fallbacks", r["fallbacks"], "bad", len(r["bad"]))


if __name__ == "__main__":
    main()
