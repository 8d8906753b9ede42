#!/bin/bash
# usage: mpialt.sh ROUNDS FILTER PREFIX name... (binaries /tmp/mpi-NAME); balanced order
R=$1; F=$2; P=$3; shift 3
for r in $(seq 1 $R); do
  names=("$@"); if [ $((r%2)) = 0 ]; then names=($(printf '%s\n' "$@" | tac)); fi
  for n in "${names[@]}"; do timeout 300 /tmp/mpirun.sh /tmp/mpi-$n -- $F 2>&1 | grep "^|" > $P-$n-$r.txt; done
done
