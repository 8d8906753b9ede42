#!/bin/bash
# usage: critalt.sh ROUNDS REGEX OUTFILE bin1 bin2 ...  (bins in /tmp/bin)
rounds=$1; re=$2; out=$3; shift 3
bins=("$@")
: > $out
for r in $(seq 1 $rounds); do
  if (( r % 2 == 0 )); then order=$(printf "%s\n" "${bins[@]}" | tac); else order=$(printf "%s\n" "${bins[@]}"); fi
  for b in $order; do
    /tmp/bin/$b --bench "$re" ${CRIT_ARGS:---warm-up-time 1 --measurement-time 2} 2>/dev/null | awk -v b=$b -v r=$r '
      /^[a-z_]+\/[^ ]+/ {name=$1}
      /time:/ { for(i=1;i<=NF;i++) if($i ~ /time:/) {v=$(i+3); u=$(i+4); if(u=="ns") v=v/1000; if(u=="ms") v=v*1000; print r, b, name, v} }' >> $out
  done
done
