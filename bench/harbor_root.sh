#!/usr/bin/env bash
# A Debian 13 (trixie) root with Harbor 0.25.0, for running `harbor` on a Debian 12 host whose
# python (3.11) is too old for it (Harbor needs >= 3.12 and Docker Compose v2).
#
#   bench/harbor_root.sh build                     # debootstrap the root, venv + harbor (idempotent)
#   bench/harbor_root.sh run -- harbor lint --select ALL /tmp/task
#   bench/harbor_root.sh run -- harbor run -p /tmp/task -a oracle -e docker -o /tmp/jobs
#   bench/harbor_root.sh shell                     # an interactive bash inside the root
#
# Env: HARBOR_ROOT (default /var/tmp/featdel-harbor-root), HARBOR_WORK (default $PWD): a folder
# bound read-write at its own path, as is /tmp; the command starts in $PWD (HARBOR_WORK if $PWD
# is neither). `run` builds the root first if it is missing. Needs root (debootstrap, bwrap).
# A fresh build takes about 70 s (debootstrap 45 s, pip 25 s); an up-to-date one about 1 s.
# Inside: the host's docker socket, the host CA bundle (HTTPS goes through an intercepting
# proxy), the host network and DNS; the environment is cleared but for PATH, HOME, TERM, LANG,
# the CA variables and LITELLM_LOCAL_MODEL_COST_MAP=True (else litellm fetches its cost map).
set -euo pipefail

ROOT=${HARBOR_ROOT:-/var/tmp/featdel-harbor-root}
WORK=$(realpath -m "${HARBOR_WORK:-$PWD}")
HARBOR_VERSION=0.25.0
MIRROR=http://deb.debian.org/debian
PACKAGES=python3.13,python3-venv,docker-cli,docker-compose,docker-buildx,ca-certificates
# harbor lint checks compose files with `docker compose config --no-env-resolution`, which trixie's
# compose 2.26 lacks; forky's 2.40 has it, and its `build` needs forky's buildx (>= 0.17).
NEWER="docker-compose docker-buildx"
CA=/etc/ssl/certs/ca-certificates.crt
SOCK=/var/run/docker.sock
VENV=/opt/harbor/venv

in_root() {  # in_root CMD...: run CMD inside the root under bwrap
    local cwd=$PWD
    case $cwd in "$WORK"|"$WORK"/*|/tmp|/tmp/*) ;; *) cwd=$WORK ;; esac
    mkdir -p "$WORK" "$ROOT$WORK"
    bwrap --bind "$ROOT" / --proc /proc --dev /dev \
        --bind /tmp /tmp --bind "$WORK" "$WORK" \
        --bind "$SOCK" /run/docker.sock \
        --ro-bind "$CA" /etc/ssl/certs/ca-certificates.crt \
        --ro-bind /etc/resolv.conf /etc/resolv.conf \
        --die-with-parent --chdir "$cwd" --clearenv \
        --setenv PATH "$VENV/bin:/usr/local/bin:/usr/bin:/bin" --setenv HOME /root \
        --setenv TERM "${TERM:-dumb}" --setenv LANG C.UTF-8 \
        --setenv SSL_CERT_FILE "$CA" --setenv REQUESTS_CA_BUNDLE "$CA" --setenv PIP_CERT "$CA" \
        --setenv LITELLM_LOCAL_MODEL_COST_MAP True \
        "$@"
}

build() {
    if [ ! -e "$ROOT/.debootstrap-done" ]; then
        rm -rf "$ROOT.partial"
        debootstrap --variant=minbase --include="$PACKAGES" trixie "$ROOT.partial" "$MIRROR"
        rm -rf "$ROOT" && mv "$ROOT.partial" "$ROOT" && touch "$ROOT/.debootstrap-done"
    fi
    if ! in_root docker compose config --help 2>/dev/null | grep -c -- --no-env-resolution >/dev/null; then
        in_root sh -c "echo 'deb [check-valid-until=no] $MIRROR forky main' >/etc/apt/sources.list.d/forky.list
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t forky $NEWER >/dev/null
            status=\$?; rm /etc/apt/sources.list.d/forky.list; apt-get update -qq; exit \$status"
    fi
    if [ "$(in_root "$VENV/bin/harbor" --version 2>/dev/null)" != "$HARBOR_VERSION" ]; then
        in_root python3.13 -m venv "$VENV"
        in_root "$VENV/bin/pip" install --no-cache-dir -q "harbor==$HARBOR_VERSION"
    fi
    echo "harbor $(in_root "$VENV/bin/harbor" --version) in $ROOT"
}

case ${1:-} in
    build) build ;;
    run) shift; [ "${1:-}" = -- ] && shift
         [ -e "$ROOT/.debootstrap-done" ] && [ -x "$ROOT$VENV/bin/harbor" ] || build >&2
         in_root "$@" ;;
    shell) in_root bash ;;
    *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
