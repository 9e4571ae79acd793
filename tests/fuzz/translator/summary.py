"""Summarise translator fuzzer results: ``summary.py OUT.jsonl [...] [--width N]``.

Prints a line per file whose last seed started but never finished (the runner crashed or hung there), then the
count of seeds per mode and of bad results, then each bad result (seed, mode, and its JSON cut to N characters,
700 by default). See ``run.py`` for what counts as bad.
"""
import argparse
import collections
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--width", type=int, default=700)
    args = ap.parse_args()
    total = collections.Counter()
    bad = []
    for fn in args.files:
        last_start = None
        done = set()
        with open(fn) as fh:
            for line in fh:
                r = json.loads(line)
                if "start" in r:
                    last_start = r
                    continue
                done.add(r["seed"])
                total[r["mode"]] += 1
                bad.extend((r["seed"], r["mode"], b) for b in r["bad"])
        if last_start and last_start["start"] not in done:
            print("CRASH/HANG at", fn, last_start)
    print(dict(total), "bad:", len(bad))
    for seed, mode, b in bad:
        print(seed, mode, json.dumps(b)[:args.width])


if __name__ == "__main__":
    main()
