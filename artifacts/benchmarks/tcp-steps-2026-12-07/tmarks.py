import statistics, bisect
G=2.6
def load(r):
    tags=[];ts=[]
    for l in open(f'/tmp/tmarks.{r}'):
        t,c=l.split(); tags.append(int(t)); ts.append(int(c))
    return tags,ts
def path(tags,ts,start,seq,maxspan=60):
    res={}
    n=len(tags)
    for j,t in enumerate(tags):
        if t!=start: continue
        k=j; pts=[(start,ts[j])]; ok=True
        for want in seq:
            k+=1
            while k<n and tags[k]!=want and k-j<maxspan: k+=1
            if k>=n or tags[k]!=want: ok=False;break
            pts.append((want,ts[k]))
        if not ok: continue
        for (a,ta),(b,tb) in zip(pts,pts[1:]):
            res.setdefault(f'{a}->{b}',[]).append(tb-ta)
        res.setdefault('total',[]).append(pts[-1][1]-pts[0][1])
    for k,v in res.items(): print(f'  {k:8s} {statistics.median(v)/G:7.0f} ns  n={len(v)}')
t1,c1=load(1); t0,c0=load(0)
print("rank 1 serving: look found(1) poll(2) frame(10) poll end(5) events(30) events done(31) (32) sendmsg(8) sent(9)")
path(t1,c1,1,[2,10,5,30,31,32,8,9])
print("rank 0 calling: look found(1) poll(2) frame(10) poll end(5) events(30) done(31) ... block_on returned(41) next block_on(40) poll(2) sendmsg(8) sent(9)")
path(t0,c0,1,[2,10,5,30,31,41,40,2,8,9])
def cross(ta,ca,tb,cb):
    ones=[c for t,c in zip(tb,cb) if t==1]
    d=[]
    for t,c in zip(ta,ca):
        if t==9:
            k=bisect.bisect_left(ones,c)
            if k<len(ones): d.append(ones[k]-c)
    return statistics.median(d)/G
print("r1 sent -> r0 look found: %.0f ns"%cross(t1,c1,t0,c0))
print("r0 sent -> r1 look found: %.0f ns"%cross(t0,c0,t1,c1))
