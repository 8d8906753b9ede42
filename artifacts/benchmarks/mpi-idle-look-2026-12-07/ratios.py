import sys, statistics, collections
# file rows: round bin name value(us); floor regex name
f=sys.argv[1]; floor=sys.argv[2]
rows=[l.split() for l in open(f)]
d=collections.defaultdict(dict)
for r,b,n,v in rows: d[(r,b)][n]=float(v)
bins=sorted(set(b for r,b,n,v in rows)); names=sorted(set(n for r,b,n,v in rows))
for n in names:
  out=[n]
  for b in bins:
    vals=[d[k][n] for k in d if k[1]==b and n in d[k]]
    rat=[d[k][n]/d[k][floor] for k in d if k[1]==b and n in d[k] and floor in d[k]]
    out.append("%s: %.2f (x%.3f n=%d)"%(b, statistics.median(vals), statistics.median(rat) if rat else 0, len(vals)))
  print("  ".join(out))
