import sys, collections, statistics
G = 2.6
def load(r):
    m = []
    for l in open(f'/tmp/marks.{r}'):
        a, b, t = l.split(); m.append((int(b), int(a), int(t)))
    m.sort()
    return m
def collapse(seq):
    out = []
    for x in seq:
        if out and out[-1][0] == x[0] and x[0] in (44,):
            out[-1] = (x[0], x[1], out[-1][2] + 1, out[-1][3])
        else:
            out.append((x[0], x[1], 1, x[1]))
    return out  # (id, first ts, count, last ts)
for r, start, end, name in ((1, 1, 7, 'server: found request -> answer Isend returned'),
                            (0, 1, 7, 'caller: found answer -> next request Isend returned')):
    m = load(r); n = len(m); lo, hi = n // 3, n - n // 10
    seqs = collections.Counter(); res = collections.defaultdict(list); tot = []; yields = []
    i = lo
    while i < hi:
        if m[i][1] == start and m[i][2] == 0:
            j = i + 1
            while j < hi and not (m[j][1] == end and m[j][2] == 0) and j - i < 400: j += 1
            if j < hi and m[j][1] == end:
                seg = [(x[1], x[0]) for x in m[i:j + 1]]
                c = collapse(seg)
                key = tuple(x[0] for x in c)
                seqs[key] += 1
                for k in range(len(c) - 1):
                    # from the last of a run to the first of the next
                    res[(key, k)].append(c[k + 1][1] - c[k][3])
                yields.append(sum(x[2] for x in c if x[0] == 44))
                tot.append(m[j][0] - m[i][0])
            i = j
        else:
            i += 1
    print(name, 'n=', len(tot), 'median total %.0f ns' % (statistics.median(tot) / G), 'median yields', statistics.median(yields))
    for key, c in seqs.most_common(3):
        print('  seq (%d):' % c, key)
    key = seqs.most_common(1)[0][0]
    for k in range(len(key) - 1):
        v = res[(key, k)]
        print('   %3d->%-3d %7.0f ns' % (key[k], key[k + 1], statistics.median(v) / G))
