import sys, statistics
# usage: stampafter.py file thread anchor kinds... : for each anchor event of thread, the delta between successive first occurrences of kinds after it
path,th,anchor=sys.argv[1],int(sys.argv[2]),int(sys.argv[3]); kinds=list(map(int,sys.argv[4:]))
rows=[tuple(map(int,l.split())) for l in open(path)]
rows.sort(key=lambda r:r[2])
mine=[r for r in rows if r[1]==th]
res=[]
for i,r in enumerate(mine):
    if r[0]!=anchor: continue
    t=[r[2]]; j=i+1; ok=True
    for k in kinds:
        while j<len(mine) and mine[j][0]!=k: j+=1
        if j>=len(mine): ok=False; break
        t.append(mine[j][2]); j+=1
    if ok: res.append([b-a for a,b in zip(t,t[1:])])
prev=anchor
for idx,k in enumerate(kinds):
    print("%2d -> %2d  median %6.0f"%(prev,k,statistics.median([x[idx] for x in res]))); prev=k
