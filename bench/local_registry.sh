#!/usr/bin/env bash
# A throwaway Docker registry on 127.0.0.1:5000 (Debian's docker-registry, unpacked, not installed),
# so `featdel export --format harbor --registry 127.0.0.1:5000` can pin every FROM by a digest on a
# machine with no registry. The engine trusts 127.0.0.0/8 without TLS by default.
#
#   bench/local_registry.sh start    # idempotent; prints the address
#   bench/local_registry.sh stop
#
# Env: REGISTRY_DIR (default /var/tmp/featdel-registry): the unpacked binary, config and storage.
set -euo pipefail

DIR=${REGISTRY_DIR:-/var/tmp/featdel-registry}
ADDR=127.0.0.1:5000
BIN=$DIR/pkg/usr/bin/docker-registry

start() {
    if [ ! -x "$BIN" ]; then
        mkdir -p "$DIR/pkg"
        (cd "$DIR" && apt-get download -q docker-registry >/dev/null && dpkg-deb -x docker-registry_*.deb pkg)
    fi
    if curl -fsS "http://$ADDR/v2/" >/dev/null 2>&1; then echo "$ADDR"; return; fi
    printf 'version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s/data\nhttp:\n  addr: %s\n' \
        "$DIR" "$ADDR" > "$DIR/config.yml"
    nohup "$BIN" serve "$DIR/config.yml" > "$DIR/registry.log" 2>&1 &
    echo $! > "$DIR/registry.pid"
    for _ in $(seq 50); do
        curl -fsS "http://$ADDR/v2/" >/dev/null 2>&1 && { echo "$ADDR"; return; }
        sleep 0.1
    done
    echo "the registry did not start: see $DIR/registry.log" >&2
    exit 1
}

stop() {
    [ -f "$DIR/registry.pid" ] && kill "$(cat "$DIR/registry.pid")" 2>/dev/null || true
    rm -f "$DIR/registry.pid"
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
