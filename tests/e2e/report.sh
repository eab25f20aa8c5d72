#!/usr/bin/env bash
# strata report on a run of every stage kind writes one self-contained page: curves per member,
# fitness per generation, the ensemble, transfer and hierarchy tables (a later stage's from its
# subdirectory) and the plan, with no network
# reference. A real headless browser (Debian's chromium) renders it without console errors into a
# screenshot that is not blank.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
CHROMIUM="$(command -v chromium || true)"
cd "$work"

cat > all.yaml <<YAML
run: {name: e2e_report, seed: 6, threads: 1}
data: {source: synthetic, synthetic: {train: 800, test: 200, classes: 4, channels: 1, height: 8, width: 8}}
model: {layers: [flatten, {dense: {units: \$units, init: glorot}}, relu, {dense: {units: 4, init: glorot}}]}
training: {epochs: 3, local_batch: 32, optimizer: {type: sgd, lr: \$lr}}
stages:
  - train
  - hpo: {algorithm: genetic, population: 4, generations: 2, keep_top: 2, space: {lr: {log_uniform: [0.01, 0.3]}, units: {int: [8, 32]}}}
  - ensemble: {from: hpo.top_k}
  - transfer: {pretrained: hpo.best, classes: [0, 1], samples_per_class: 20, compare_scratch: true}
  - transfer: {hierarchical: {low: [0, 1], high: [2, 3]}}
output: {dir: run, progress_seconds: 100}
YAML
expect_exit 0 '\[run\] done' -- "$MPIEXEC" -n 2 "$STRATA" run all.yaml
expect_exit 0 'wrote run/report.html' -- "$STRATA" report run
expect_exit 3 'not a directory' -- "$STRATA" report no_such_run
mkdir empty
expect_exit 3 'no results of a run in it' -- "$STRATA" report empty

page=run/report.html
for want in 'Fitness per generation' 'Trials: validation accuracy' '<th>combiner</th>' 'from scratch' \
            'Training: training loss' '<h2>Plan</h2>' 'world_rank = m' '<h2>Stage transfer2</h2>' \
            'Hierarchical against flat'; do
  grep -q "$want" "$page" || { echo "FAIL: the report lacks '$want'"; fails=$((fails + 1)); }
done
[ "$(grep -c '<svg' "$page")" -ge 11 ] || { echo "FAIL: fewer than 11 charts"; fails=$((fails + 1)); }
# A training's loss curve comes from its steps.jsonl (member 0 of the two the train stage runs): a
# point per step (66: 3 epochs of 22 steps of 32 of the 720 samples left after validation), not one
# per epoch.
"$PYTHON3" - "$page" run/members/0/steps.jsonl <<'PY' || fails=$((fails + 1))
import re, sys
page, steps = open(sys.argv[1]).read(), open(sys.argv[2]).read().splitlines()
assert len(steps) == 66, f"steps.jsonl has {len(steps)} rows, not 66"
chart = re.search(r"<svg(?:(?!</svg>).)*Training: training loss.*?</svg>", page, re.S).group(0)
points = re.search(r'points="([^"]*)"', chart).group(1).split()
assert len(points) == 66, f"the training loss has {len(points)} points, not 66"
print(f"ok: the training's loss curve has a point per step ({len(points)})")
PY
# Self-contained: no scripts, no fetched resources, no link out but the SVG namespace.
if grep -qE '<script|src=|<link|url\(' "$page" || grep -o 'http[s]*://[^"]*' "$page" | grep -vq 'www.w3.org/2000/svg'; then
  echo "FAIL: the report refers to something outside itself"; fails=$((fails + 1))
else
  echo "ok: the report is self-contained ($(wc -c < "$page") bytes, $(grep -c '<svg' "$page") charts)"
fi

if [ -z "$CHROMIUM" ]; then
  echo "FAIL: chromium is missing (jobs/install_deps.sh --with-browser installs it)"; fails=$((fails + 1))
else
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1600 \
    --enable-logging=stderr --v=0 --screenshot="$work/shot.png" "file://$work/$page" > browser.log 2>&1
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --dump-dom "file://$work/$page" > dom.html 2>/dev/null
  if grep -q 'CONSOLE' browser.log; then
    echo "FAIL: console messages:"; grep 'CONSOLE' browser.log | head -5; fails=$((fails + 1))
  else
    echo "ok: chromium rendered the page with no console message"
  fi
  grep -q '<svg' dom.html && grep -q 'Ensemble' dom.html || { echo "FAIL: the rendered DOM lacks the charts"; fails=$((fails + 1)); }
  "$PYTHON3" - shot.png <<'PY' || fails=$((fails + 1))
import struct, sys, zlib
import numpy as np
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, width, height = 8, b"", 0, 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        width, height, depth, color = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and color in (2, 6), (depth, color)
        channels = 3 if color == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + width * channels)
# Undo the PNG row filters to get the pixels.
stride, prev, rows = channels, np.zeros(width * channels, dtype=np.int32), []
for r in range(height):
    f, line = raw[r, 0], raw[r, 1:].astype(np.int32)
    out = np.zeros_like(line)
    for i in range(len(line)):
        a = out[i - stride] if i >= stride else 0
        b, c = prev[i], (prev[i - stride] if i >= stride else 0)
        if f == 0: p = 0
        elif f == 1: p = a
        elif f == 2: p = b
        elif f == 3: p = (a + b) // 2
        else:
            pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
            p = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
        out[i] = (line[i] + p) & 0xFF
    rows.append(out); prev = out
pixels = np.array(rows).reshape(height, width, channels)[:, :, :3]
non_white = (pixels.min(axis=2) < 200).mean()
colours = len({tuple(p) for p in pixels[::7, ::7].reshape(-1, 3)})
assert width == 1200 and non_white > 0.01 and colours > 20, (width, non_white, colours)
print(f"ok: screenshot {width}x{height}: {100 * non_white:.1f}% of pixels drawn, {colours} colours")
PY
fi
finish
