import re, statistics, collections, sys
for f in sys.argv[1:]:
    d=collections.defaultdict(list)
    for line in open(f):
        m=re.match(r'(\d+) (\S+) \| payload (\S+ \S+)( as [^:]+)?: raw ping-pong / dinah echo \| ([\d.]+) us / ([\d.]+) us',line)
        if m:
            r,b,size,kind,raw,dn=m.groups(); kind=(kind or '').strip() or 'bytes'
            d[(size,kind,b)].append((float(raw),float(dn)))
    print('==',f)
    for k in sorted(d):
        v=d[k]; print('%-8s %-20s %-14s n=%d dinah %.1f us, raw %.1f, ratio %.3f'%(k[0],k[1],k[2],len(v), statistics.median(x[1] for x in v), statistics.median(x[0] for x in v), statistics.median(x[1]/x[0] for x in v)))
