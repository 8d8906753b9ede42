#!/usr/bin/env python3
"""Medians of the MPI round-trip rows over mpi-run-*.txt, each with the
median and range of its ratio to the raw ping-pong of the same run."""
import glob
import re
import statistics as st

ROWS = {
    "raw": r"raw mpi 8 B ping-pong \(",
    "received as the driver does": "received as the driver does",
    "transport alone": "transport alone",
    "inline": "round trip, 1 in flight, inline",
    "pool-hop reference": "pool-hop reference",
    "pooled": "round trip, 1 in flight, pooled",
}
data = {k: [] for k in ROWS}
for path in sorted(glob.glob("mpi-run-*.txt")):
    values = {}
    for line in open(path):
        for key, pattern in ROWS.items():
            if re.search(pattern, line):
                values[key] = float(re.findall(r"\| ([0-9.]+) us", line)[0])
    for key, value in values.items():
        data[key].append((value, value / values["raw"]))
for key, runs in data.items():
    times = [t for t, _ in runs]
    ratios = [r for _, r in runs]
    print(f"{key:30} {st.median(times):6.2f} us  {st.median(ratios):5.2f}x "
          f"({min(ratios):.2f} to {max(ratios):.2f}), {len(runs)} runs")
