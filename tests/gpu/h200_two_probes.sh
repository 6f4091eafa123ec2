#!/usr/bin/env bash
# Harness on the lent H200 (README.md here): one matrix.yaml naming two probes (stale_replay and
# cumsum_64bit) over the machine's own torch, as a user's project would: `torchbisect probe --probe`,
# `matrix` (two runs of one build, a page per regression and an index), and a rerun from the store.
# carry: [".gpu-carry/setup"] (torchbisect's dependencies the machine lacks).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu-carry/setup/whl/*.whl 2>&1 | tail -1
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 UV_OFFLINE=1
mkdir -p /tmp/proj && cd /tmp/proj
cat > matrix.yaml <<'Y'
probes:
  stale_replay: {trials: 20}
  cumsum_64bit: {timeout: 600}
preinstalled: true
Y
python3 -m torchbisect probe --probe cumsum_64bit; echo "probe cumsum exit $?"
python3 -m torchbisect matrix --matrix matrix.yaml --store s.sqlite --out site --workdir w 2>&1 | tail -25; echo "matrix exit $?"
python3 -m torchbisect matrix --matrix matrix.yaml --store s.sqlite --out site --workdir w 2>&1 | tail -4; echo "rerun exit $?"
ls site site/*/ | head -30
tar -czf $OUT/site.tgz site; cp s.sqlite $OUT/
