# cgpu-extender image: gunicorn serving the extender with one worker (see extender/serving/).
# docker build -t cgpu-extender:0.1.0 .   (the tag manifests/base/kustomization.yaml sets)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY setup.cfg pyproject.toml README.md LICENSE constraints.txt ./
COPY policy ./policy
COPY extender ./extender
# the versions the tests passed with (constraints.txt); benchmarks/ is left out, and so is its command
RUN pip install -c constraints.txt . && rm -rf /src /usr/local/bin/cgpu-simulate

# Runs as a fixed non-root user; the root filesystem can be mounted read-only
# (give it a writable /tmp for Python's temporary files: mount an emptyDir there).
USER 65532:65532
WORKDIR /
EXPOSE 32766
ENTRYPOINT ["cgpu-extender"]
CMD ["serve", "--host", "0.0.0.0", "--port", "32766"]
