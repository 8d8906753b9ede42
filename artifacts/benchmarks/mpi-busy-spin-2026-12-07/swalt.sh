#!/bin/bash
rounds=$1; out=$2; shift 2; bins=("$@"); : > $out
for r in $(seq 1 $rounds); do
  if (( r % 2 == 0 )); then order=$(printf "%s\n" "${bins[@]}" | tac); else order=$(printf "%s\n" "${bins[@]}"); fi
  for b in $order; do
    mpirun --allow-run-as-root --oversubscribe -n 2 /tmp/bin/$b sweep 2>&1 | grep -E "payload (64 KiB|256 KiB|1 MiB|4 MiB): " | awk -v b=$b -v r=$r -F'|' '{split($3,a,"/"); gsub(/ us/,"",a[1]); gsub(/ us/,"",a[2]); print r, b, $2, a[1]+0, a[2]+0, (a[2]+0)/(a[1]+0)}' >> $out
  done
done
