import bisect, statistics, sys
G=2.6
def load(r):
    tags=[];ts=[]
    for l in open(f'/tmp/marks.{r}'):
        t,c=l.split(); tags.append(int(t)); ts.append(int(c))
    return tags,ts
t0,c0=load(0); t1,c1=load(1)
def med(x): return statistics.median(x)/G if x else float('nan')
# rank 1: each event push (10) -> preceding 1 and following 9
def path(tags,ts,anchor,before,after_seq):
    res={}
    n=len(tags)
    for i,t in enumerate(tags):
        if t!=anchor: continue
        # find preceding 'before' tag
        j=i
        while j>=0 and tags[j]!=before: j-=1
        if j<0 or i-j>40: continue
        # path from j: first occurrence of each in after_seq in order
        k=j; pts=[(before,ts[j])]
        ok=True
        for want in after_seq:
            k+=1
            while k<n and tags[k]!=want and k-j<80: k+=1
            if k>=n or tags[k]!=want: ok=False;break
            pts.append((want,ts[k]))
        if not ok: continue
        for (a,ta),(b,tb) in zip(pts,pts[1:]):
            res.setdefault(f'{a}->{b}',[]).append(tb-ta)
        res.setdefault('total',[]).append(pts[-1][1]-pts[0][1])
    return res
print("rank 1 (serving): arrival seen(1) .. Isend returned(9)")
r=path(t1,c1,10,1,[2,3,12,10,4,5,20,6,8,9])
for k,v in r.items(): print(f'  {k:8s} {med(v):7.0f} ns  n={len(v)}')
print("rank 0 (calling): arrival seen(1) .. next request's Isend returned(9)")
r=path(t0,c0,10,1,[2,3,12,10,4,5,20,2,8,9])
for k,v in r.items(): print(f'  {k:8s} {med(v):7.0f} ns  n={len(v)}')
# cross: rank1 9 -> rank0 next 1 ; rank0 9 -> rank1 next 1
def cross(ta,ca,tb,cb):
    ones=[c for t,c in zip(tb,cb) if t==1]
    d=[]
    for t,c in zip(ta,ca):
        if t==9:
            k=bisect.bisect_left(ones,c)
            if k<len(ones): d.append(ones[k]-c)
    return d
print("wire+detect r1 Isend -> r0 seen: %.0f ns"%(med(cross(t1,c1,t0,c0))))
print("wire+detect r0 Isend -> r1 seen: %.0f ns"%(med(cross(t0,c0,t1,c1))))
