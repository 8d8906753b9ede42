#!/usr/bin/env python3
"""Median of per-round ratios new/base for every column of a raw/*.tsv.

usage: paired.py raw/n3.tsv base new
"""
import statistics
import sys

path, base, new = sys.argv[1:4]
lines = [l.rstrip("\n").split("\t") for l in open(path) if not l.startswith("#")]
header, rows = lines[0], lines[1:]
by = {}
for row in rows:
    by.setdefault(row[1], {})[row[0]] = row
for column in range(2, len(header)):
    pairs = [
        (float(by[base][r][column]), float(by[new][r][column]))
        for r in by[base]
        if r in by[new] and by[base][r][column] and by[new][r][column]
    ]
    if not pairs:
        continue
    ratios = sorted(n / b for b, n in pairs)
    k = len(ratios)
    print(
        f"{header[column]:18} {base} {statistics.median(b for b, _ in pairs):9.3f}  "
        f"{new} {statistics.median(n for _, n in pairs):9.3f}  "
        f"per-round ratio median {statistics.median(ratios):.3f} "
        f"(quartiles {ratios[k // 4]:.3f}-{ratios[3 * k // 4]:.3f}, {k} rounds)"
    )
