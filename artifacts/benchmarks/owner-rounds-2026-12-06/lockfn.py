import sys,collections
locked=set(int(a,16) for a in open('/tmp/locked-addrs.txt'))
def load(p):
    d=collections.Counter(); fn=None; ob=None
    for l in open(p):
        if l.startswith('fn='): fn=l[3:].strip(); continue
        if l.startswith('ob='): ob=l[3:].strip(); continue
        if l.startswith('c') or l.startswith('j') : continue
        if l.startswith('0x') and ob and 'instructions-' in ob:
            parts=l.split()
            a=int(parts[0],16)
            if a in locked:
                d[fn]+=int(parts[-1]) if len(parts)>=3 else 0
    return d
a=load(sys.argv[1]); b=load(sys.argv[2]); n=int(sys.argv[3])
rows=sorted(((b[k]-a.get(k,0))/n,k) for k in b); rows.reverse()
print('total %.1f'%sum(r[0] for r in rows))
for v,k in rows:
    if v>=0.5: print(f'{v:6.2f}  {k[:140]}')
