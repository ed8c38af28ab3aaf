# featdel's own image, built with no registry and no network: the base is the local image that
# `featdel sandbox build --base-only` debootstraps (or python:3.11-slim where a registry exists),
# and every Python package comes from a wheelhouse made on the host.
#
#   featdel sandbox build                  # does all of the below
# or by hand, with a small build context:
#   featdel sandbox build --base-only
#   pip wheel . -w /tmp/ctx/wheels
#   docker build -f Dockerfile --build-arg BASE=featdel-base:bookworm -t featdel /tmp/ctx
#   docker run --rm featdel --help
ARG BASE=featdel-base:bookworm
FROM ${BASE}

COPY wheels /opt/featdel/wheels
RUN python3 -m venv /opt/featdel/venv \
 && /opt/featdel/venv/bin/pip install --no-cache-dir --no-index --find-links /opt/featdel/wheels featdel \
 && rm -rf /opt/featdel/wheels

ENV PATH=/opt/featdel/venv/bin:/usr/local/bin:/usr/bin:/bin \
    LANG=C.UTF-8
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["featdel"]
CMD ["--help"]
