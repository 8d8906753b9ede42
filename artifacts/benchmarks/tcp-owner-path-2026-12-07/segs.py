import sys, statistics
rows=[tuple(map(int,l.split())) for l in open(sys.argv[1])]
rows.sort(key=lambda r:r[2])
def seg(th, a, b, label):
    mine=[r for r in rows if r[1]==th]
    res=[]; cnt=[]
    for i,r in enumerate(mine):
        if r[0]!=a: continue
        j=i+1
        while j<len(mine) and mine[j][0]!=b and mine[j][0]!=a: j+=1
        if j<len(mine) and mine[j][0]==b: res.append(mine[j][2]-r[2]); cnt.append(j-i-1)
    if res: print("%-28s n=%6d median %6.0f ns  (%.0f stamps between)"%(label,len(res),statistics.median(res),statistics.median(cnt)))
th_client=1; th_server=2
seg(1,10,1,"client pre 10->1")
seg(1,1,2,"client send 1->2")
seg(2,3,1,"server look->send 3->1") ; seg(2,4,1,"server read->send 4->1")
seg(2,1,2,"server send 1->2")
seg(1,3,11,"client look->done 3->11"); seg(1,4,11,"client read->done 4->11")
t10=[r[2] for r in rows if r[0]==10 and r[1]==1]
print("median round trip", statistics.median([b-a for a,b in zip(t10,t10[1:])]))
