import sys, re, collections
def load(path):
    names={}
    def name(tok):
        m=re.match(r'\((\d+)\)(?:\s+(.*))?',tok)
        if m:
            if m.group(2): names[m.group(1)]=m.group(2)
            return names.get(m.group(1),tok)
        return tok
    fn=None; cfn=None; pending=None
    calls=collections.Counter(); incl=collections.Counter(); selfc=collections.Counter()
    for line in open(path):
        line=line.rstrip('\n')
        if line.startswith('fn='): fn=name(line[3:]); continue
        if line.startswith('cfn='): cfn=name(line[4:]); continue
        if line.startswith(('cfi=','cfl=','fi=','fe=','fl=','ob=','cob=')): continue
        if line.startswith('calls='): pending=int(line[6:].split()[0]); continue
        if line and (line[0].isdigit() or line[0] in '+-*'):
            parts=line.split(); ir=int(parts[1]) if len(parts)>1 else 0
            if pending is not None: calls[cfn]+=pending; incl[cfn]+=ir
            elif fn: selfc[fn]+=ir
            pending=None
    return calls, incl, selfc
a=load(sys.argv[1]); b=load(sys.argv[2]); n=int(sys.argv[3]); pats=sys.argv[4:]
rows=[]
for k in b[2]:
    s=(b[2][k]-a[2].get(k,0))/n
    c=(b[0][k]-a[0].get(k,0))/n
    i=(b[1][k]-a[1].get(k,0))/n
    if s>15: rows.append((s,c,i,k))
for s,c,i,k in sorted(rows,reverse=True)[:60]:
    if any(p in k for p in ['memory::','SimNet','SimDriver','instructions::','crossbeam','ManualClock','SimClock']): continue
    print("self %6.0f  calls %5.2f  self/call %6.1f  incl %6.0f  %s"%(s,c,s/c if c else 0,i,k[:110]))
