import re,sys,glob,statistics
rows=[]
for f in sorted(glob.glob(sys.argv[1] + '/tune-*.log')):
    prob=f.split('tune-')[1][:-4]
    t={}
    for line in open(f):
        m=re.match(r'\s+M=(\d+)\s+ok\s+([\d.]+) us .*gemm1=(\S+);gemm2=(\S+)',line)
        if not m: continue
        M,us,g1,g2=int(m[1]),float(m[2]),m[3],m[4]
        t.setdefault((M,g1,g2),[]).append(us)
    for (M,g1,g2),v in t.items():
        if '_sum_' in g2 and 'grouped_gemv' not in g2:
            st=g2.replace('_sum_','_store_')
            if (M,g1,st) in t:
                rows.append((prob,M,min(t[(M,g1,st)]),min(v),g2))
for r in sorted(rows): print("%-20s M=%-5d store %8.1f  sum %8.1f  sum/store %.3f  %s"%(r[0],r[1],r[2],r[3],r[3]/r[2],r[4].replace('mtk_grouped_gemm','')[:70]))
print(len(rows),"pairs; sum faster in",sum(1 for r in rows if r[3]<r[2]))
