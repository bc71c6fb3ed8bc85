# s21 call 8: the Volta kernels' softmax (visible-key range, ex2.approx): GPU tests, prefill + decode A/B vs 0b57bb9
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
ab_trees
L=$OUT/log.txt
{ machine_info; echo "variants: $VARIANTS"; } > $L 2>&1
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py tests/kernels/test_attention_fp8.py --tb=line 2>&1 | grep -v "^\.\.\.\." | tail -5 >> $L
mkdir -p /tmp/ab
for r in 1 2; do for v in $VARIANTS; do
  PYTHONPATH=$(path_of $v) timeout 120 python3 tools/gpu/prefill_volta_ab.py --json /tmp/ab/pre-$v-$r.json > /tmp/ab/pre-$v-$r.txt 2>&1 || echo "pre $v $r rc=$?" >> $L
  PYTHONPATH=$(path_of $v) timeout 100 python3 tools/gpu/decode_rd_ab.py --graphed --kernels volta --rows 0,5,3,15 --json /tmp/ab/dec-$v-$r.json > /tmp/ab/dec-$v-$r.txt 2>&1 || echo "dec $v $r rc=$?" >> $L
done; done
tar czf $OUT/ab.tgz -C /tmp ab
python3 - >> $L <<'PY'
import json, glob, collections
for kind, key, val in (("pre", lambda r: (r["batch"], r["tokens"], r["heads"], r["d"], r["kv"], r["window"]), "tflops"),
                       ("dec", lambda r: (r["kv"], r["batch"], r["ctx"], r["heads"], r["d"]), "us")):
    acc = collections.defaultdict(list)
    for f in sorted(glob.glob(f"/tmp/ab/{kind}-*.json")):
        v = f.split("/")[-1][len(kind) + 1:].rsplit("-", 1)[0]
        for r in json.load(open(f))["rows"]:
            acc[(key(r), v)].append(r[val])
    vs = sorted({k[1] for k in acc})
    print(f"{kind} ({val}) | " + " | ".join(vs))
    for k in sorted({k[0] for k in acc}, key=str):
        print(k, "|", " | ".join(f"{sum(acc[(k, v)]) / len(acc[(k, v)]):.2f} ({'/'.join(f'{x:.2f}' for x in acc[(k, v)])})" for v in vs))
PY
cat $L; cat /tmp/ab/pre-tree-1.txt
