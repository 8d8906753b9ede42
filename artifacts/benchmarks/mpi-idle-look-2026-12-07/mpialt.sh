#!/bin/bash
# usage: mpialt.sh ROUNDS FILTER OUT bins...
rounds=$1; f=$2; out=$3; shift 3; bins=("$@"); : > $out
for r in $(seq 1 $rounds); do
  if (( r % 2 == 0 )); then order=$(printf "%s\n" "${bins[@]}" | tac); else order=$(printf "%s\n" "${bins[@]}"); fi
  for b in $order; do
    mpirun --allow-run-as-root --oversubscribe -n 2 /tmp/bin/$b $f 2>&1 | awk -v b=$b -v r=$r -F'|' '
      /raw mpi 8 B ping-pong \(/ {gsub(/ us/,"",$3); print r, b, "raw", $3+0}
      /transport alone/ {gsub(/ us/,"",$3); print r, b, "transport", $3+0}
      /round trip, 1 in flight, inline/ {gsub(/ us/,"",$3); print r, b, "inline", $3+0}
      /round trip, 1 in flight, pooled/ {gsub(/ us/,"",$3); print r, b, "pooled", $3+0}
      /1024 in flight, inline/ {gsub(/ actions\/s/,"",$3); print r, b, "tp-inline", $3+0}
      /1024 in flight, pooled/ {gsub(/ actions\/s/,"",$3); print r, b, "tp-pooled", $3+0}' >> $out
  done
done
