# s21 call 7: K / V steps staged into shared memory before the wait (NS16 1 / NS8 2; ns1: NS8 1) vs 0b57bb9
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
ab_trees
L=$OUT/log.txt
{ machine_info; echo "variants: $VARIANTS"; } > $L 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py tests/kernels/test_attention_fp8.py -k "rd or decode or graph_replays" --tb=line 2>&1 | grep -v "^\.\.\.\." | tail -6 >> $L
mkdir -p /tmp/ab
for r in 1 2; do for v in $VARIANTS; do
  PYTHONPATH=$(path_of $v) timeout 150 python3 tools/gpu/decode_rd_ab.py --graphed --kernels rd --rows 0,1,3,5,6,8,10,11,16,17,20,26 \
    --json /tmp/ab/$v-$r.json > /tmp/ab/$v-$r.txt 2>&1 || echo "$v $r rc=$?" >> $L
done; done
python3 - >> $L <<'PY'
import json, glob, collections
acc = collections.defaultdict(list)
for f in sorted(glob.glob("/tmp/ab/*.json")):
    v = f.split("/")[-1].rsplit("-", 1)[0]
    for r in json.load(open(f))["rows"]:
        acc[(r["kv"], r["batch"], r["ctx"], r["heads"], r["d"], v)].append((r["us"], r["pct_copy"]))
rows = sorted({k[:5] for k in acc}, key=str)
vs = sorted({k[5] for k in acc})
print("row | " + " | ".join(vs))
for k in rows:
    print(f"{k[0]} b{k[1]} {k[2]} {k[3]} d{k[4]} | " + " | ".join(
        f"{sum(u for u, _ in acc[k + (v,)]) / len(acc[k + (v,)]):.2f} us {sum(p for _, p in acc[k + (v,)]) / len(acc[k + (v,)]):.1f}% ({'/'.join(f'{u:.2f}' for u, _ in acc[k + (v,)])})"
        if acc.get(k + (v,)) else "-" for v in vs))
PY
tar czf $OUT/ab.tgz -C /tmp ab
timeout 100 python3 tools/gpu/decode_trace.py --graphed e4m3:4:8192 f16:4:8192 > $OUT/trace-graphed-tree.txt 2>&1
timeout 100 python3 tools/gpu/engine_check.py --shape smollm2-135m 2>&1 | tail -2 >> $L
timeout 150 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 4 --max-tokens 16 2>&1 | tail -2 >> $L
cat $L; grep -v "^ *$" $OUT/trace-graphed-tree.txt | head -14
