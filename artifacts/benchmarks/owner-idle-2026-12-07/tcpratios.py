import sys, statistics, collections
f=sys.argv[1]; floor=sys.argv[2]
d=collections.defaultdict(dict)
for l in open(f):
    p=l.split()
    if len(p)!=4: continue
    r,b,n,v=p
    try: v=float(v)
    except ValueError: continue
    d[(r,b)][n]=v
bins=sorted(set(k[1] for k in d)); names=sorted(set(n for k in d for n in d[k]))
for n in names:
    out=[n]
    for b in bins:
        vals=[d[k][n] for k in d if k[1]==b and n in d[k]]
        rat=[d[k][n]/d[k][floor] for k in d if k[1]==b and n in d[k] and floor in d[k]]
        out.append("%s: %.3f (x%.3f n=%d)"%(b, statistics.median(vals), statistics.median(rat) if rat else 0, len(vals)))
    print("  ".join(out))
