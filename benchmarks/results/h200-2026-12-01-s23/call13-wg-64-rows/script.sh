set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
timeout 300 python3 tools/gpu/_wg64.py > $OUT/log.txt 2>&1; echo "rc=$?" >> $OUT/log.txt; cat $OUT/log.txt
