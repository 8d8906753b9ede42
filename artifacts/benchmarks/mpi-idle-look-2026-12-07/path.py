import sys,collections,statistics
G=2.6
def load(r):
    ids=[];ts=[]
    for l in open(f'/tmp/marks.{r}'):
        a,b=l.split(); ids.append(int(a)); ts.append(int(b))
    return ids,ts
def paths(ids,ts,start,end,lo,hi):
    res=collections.defaultdict(list); tot=[]; seqs=collections.Counter()
    i=lo
    while i<hi:
        if ids[i]==start:
            j=i+1
            while j<hi and ids[j]!=end and j-i<60: j+=1
            if j<hi and ids[j]==end:
                seq=tuple(ids[i:j+1]); seqs[seq]+=1
                for k in range(i,j): res[(k-i,ids[k],ids[k+1])].append(ts[k+1]-ts[k])
                tot.append(ts[j]-ts[i])
            i=j
        else: i+=1
    return res,tot,seqs
for r,name in ((1,'server: found request -> answer Isend returned'),(0,'caller: found answer -> next request Isend returned')):
    ids,ts=load(r); n=len(ids); lo=n//3; hi=n-n//10
    res,tot,seqs=paths(ids,ts,1,7,lo,hi)
    seq,c=seqs.most_common(1)[0]
    print(name, 'n=',len(tot),'median total %.0f ns'%(statistics.median(tot)/G), 'most common seq (%d):'%c, seq)
    for k in range(len(seq)-1):
        v=res[(k,seq[k],seq[k+1])]
        print('   %2d->%-2d %6.0f ns'%(seq[k],seq[k+1],statistics.median(v)/G))
# transits: rank0 7 (request Isend) -> rank1 next 1 ; rank1 7 -> rank0 next 1
import bisect
def cross(a,b):
    ia,ta=load(a); ib,tb=load(b)
    na=len(ia); t7=[ta[i] for i in range(na//3,na-na//10) if ia[i]==7]
    t1=sorted(tb[i] for i in range(len(ib)) if ib[i]==1)
    d=[]
    for t in t7:
        k=bisect.bisect_left(t1,t)
        if k<len(t1) and t1[k]-t<20000: d.append(t1[k]-t)
    return statistics.median(d)/G, len(d)
print('transit caller Isend -> server found: %.0f ns (n=%d)'%cross(0,1))
print('transit server Isend -> caller found: %.0f ns (n=%d)'%cross(1,0))
