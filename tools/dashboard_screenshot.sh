#!/usr/bin/env bash
# Screenshot of the published asv dashboard with networking disabled: inside a network namespace
# that has only the loopback device (`unshare -n`, needs root), a local HTTP server serves
# reports/asv/html and headless Chromium renders one page. Usage:
#   tools/dashboard_screenshot.sh OUT.png 'BENCHMARK?param=value&...'
set -euo pipefail
out=$(realpath -m "${1:-reports/asv/dashboard.png}")
page=${2:-}
html=$(realpath "$(dirname "$0")/../reports/asv/html")
unshare -n bash -s "$out" "$page" "$html" <<'INNER'
set -euo pipefail
out=$1 page=$2 html=$3
ip link set lo up
python3 -m http.server 8765 --bind 127.0.0.1 --directory "$html" >/dev/null 2>&1 &
server=$!
trap 'kill $server' EXIT
sleep 1
if curl -s -m 3 -o /dev/null https://cdn.jsdelivr.net/ 2>/dev/null; then
    echo "network is reachable: refusing to take the screenshot" >&2; exit 1
fi
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1500,1000 \
    --virtual-time-budget=20000 --screenshot="$out" "http://127.0.0.1:8765/index.html#$page" \
    2>/dev/null
echo "wrote $out (network namespace: loopback only)"
INNER
