# The controller and broker daemons: one image, `python -m controller` or `python -m broker`, configured
# only through KAFKA_* environment variables (see docker-compose.yml). No Java: ZooKeeper runs elsewhere.

# PYTHON_IMAGE: any Python 3.11 image with pip; the official one by default. Without a registry,
# `python -m deploy.images` builds a local stand-in whose pip installs from a wheelhouse (docs/docker.md).
ARG PYTHON_IMAGE=python:3.11-slim

# Build the project's wheel apart, so the sources and build tools stay out of the final image.
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY . .
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY --from=build /wheels /wheels
# With the cli extra: the secured compose variant makes its certificates (cryptography) in this image,
# and a secured cluster is administered from inside its network (python -m cluster ... --zk-config).
RUN pip install "$(ls /wheels/*.whl)[cli]" && rm -rf /wheels

# A non-root user owning /var/lib/kafka, where compose mounts each daemon's named volume (a new named
# volume takes the ownership of the directory it is mounted on).
RUN useradd --system --uid 10001 --create-home --home-dir /home/kafka kafka \
    && mkdir -p /var/lib/kafka \
    && chown kafka:kafka /var/lib/kafka
USER kafka
WORKDIR /home/kafka
VOLUME ["/var/lib/kafka"]

# Controller RPC 9091; broker client listeners 9092-9094, INTERNAL 19092, CONTROLLER 19093; metrics 7071.
EXPOSE 7071 9091 9092 9093 9094 19092 19093
CMD ["python", "-m", "broker"]
