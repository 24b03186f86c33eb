source scripts/device/env.sh
trap 'cd $OUT && tar czf all_logs.tgz --exclude=all_logs.tgz . 2>/dev/null' EXIT
M=/tmp/mixtral-nvfp4; ls $M/config.json || exit 1
run() {  # tree prompts tag
  local root=$PWD; [ $1 = base ] && root=$PWD/.ab/main
  PYTHONPATH=/tmp/site:$root/src timeout 90 python3 -m quickmoe bench generate $M --num-prompts $2 --input-len 1000 \
    --output-len 500 --json $OUT/gen_$3_$1.json > $OUT/gen_$3_$1.log 2>&1
  echo "generate $3 $1 rc $? ($SECONDS s): $(grep -A1 'output tok/s' $OUT/gen_$3_$1.log | tail -1)"
}
run new 48 48b; run base 48 48b; run base 56 56a; run new 56 56a; run new 48 48c; run base 48 48c
