import sys, statistics, collections
# file rows: round bin name value(us); floor regex name. Rows whose value
# is not a number (criterion's change lines, as critalt.sh collects them)
# are left out.
f=sys.argv[1]; floor=sys.argv[2]
def number(v):
  try: float(v); return True
  except ValueError: return False
rows=[p for p in (l.split() for l in open(f)) if len(p)==4 and number(p[3])]
d=collections.defaultdict(dict)
for r,b,n,v in rows: d[(r,b)][n]=float(v)
bins=sorted(set(b for r,b,n,v in rows)); names=sorted(set(n for r,b,n,v in rows))
for n in names:
  out=[n]
  for b in bins:
    vals=[d[k][n] for k in d if k[1]==b and n in d[k]]
    rat=[d[k][n]/d[k][floor] for k in d if k[1]==b and n in d[k] and floor in d[k]]
    out.append("%s: %.3f (x%.3f n=%d)"%(b, statistics.median(vals), statistics.median(rat) if rat else 0, len(vals)))
  print("  ".join(out))
