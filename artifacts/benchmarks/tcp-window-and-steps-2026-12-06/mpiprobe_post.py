import sys, statistics as st
n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
srv = [list(map(int, l.split())) for l in open('/tmp/mpiprobe-1.txt')]
# server rows: ..., pooled warm 2000, pooled n, inline warm 2000, inline n, Stop
assert len(srv) >= 2 * n + 4001, len(srv)
srv_inline = srv[-1 - n:-1]
srv_pooled = srv[-1 - n - 2000 - n:-1 - n - 2000]
steps = [('c', 13, 'caller: spawn_on to just before MPI_Isend'), ('c', 1, 'caller: MPI_Isend returns'),
         ('s', 2, 'server: request frame taken from a completed receive'), ('s', 12, 'server: on_request begins'),
         ('s', 3, 'server: job submitted'), ('s', 4, 'handler starts'), ('s', 5, 'worker: completion pushed'),
         ('s', 11, 'worker: owner woken'), ('s', 15, 'server: idle spin sees the wake'), ('s', 6, 'server: completion popped'),
         ('s', 14, 'server: just before MPI_Isend of the result'), ('s', 7, 'server: MPI_Isend returns'),
         ('c', 8, 'caller: result frame taken'), ('c', 9, 'caller: Calls::complete begins'), ('c', 31, 'caller: block_on returns')]
for name, srows in [('pooled', srv_pooled), ('inline', srv_inline)]:
    cli = [list(map(int, l.split())) for l in open(f'/tmp/mpiprobe-0-{name}.txt')]
    assert len(cli) == n
    gaps = {k: [] for k in range(len(steps))}
    totals = []
    for c, s in zip(cli, srv_inline if name == 'inline' else srv_pooled):
        prev = c[0]
        for k, (side, slot, _) in enumerate(steps):
            t = (c if side == 'c' else s)[slot]
            if t == 0:
                continue
            gaps[k].append(t - prev)
            prev = t
        totals.append(c[31] - c[0])
    print(f'== {name}: total median {st.median(totals):.0f} ns (p25 {sorted(totals)[n//4]}, p75 {sorted(totals)[3*n//4]})')
    for k, (_, _, label) in enumerate(steps):
        v = gaps[k]
        if v:
            v.sort()
            print(f'  {label:50} n={len(v):6} p25 {v[len(v)//4]:7} p50 {v[len(v)//2]:7} p75 {v[3*len(v)//4]:7}')
