# recordsd in containers: build with the official Swift image, run on a slim Debian.
#   docker build -t recordsd .                 the runtime image (recordsd and records)
#   docker build --target test -t recordsd-test .   the integration suite (see docker-compose.yml)
ARG SWIFT_IMAGE=swift:6.3-bookworm

FROM ${SWIFT_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libpq-dev libedit-dev libssl-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY Package.swift ./
COPY Sources Sources
COPY Tests Tests
COPY migrations migrations
# The Swift runtime and Foundation linked in, so the runtime image needs only libpq, libedit and libssl.
RUN swift build -c release --static-swift-stdlib --product recordsd \
 && swift build -c release --static-swift-stdlib --product records

# The integration suite, run by `docker compose run --rm integration` against the stack.
# PostgreSQL's server binaries are here too: some tests start a cluster of their own.
FROM build AS test
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql \
 && rm -rf /var/lib/apt/lists/*
RUN swift build --build-tests
ENV RECORDSD_BIN=/build/.build/debug/recordsd RECORDS_BIN=/build/.build/debug/records RECORDS_IN_COMPOSE=1
CMD ["swift", "test", "--skip-build", "--filter", "IntegrationTests"]

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libpq5 libedit2 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 7878 --home-dir /srv/recordsd --create-home recordsd
COPY --from=build /build/.build/release/recordsd /build/.build/release/records /usr/local/bin/
COPY --chown=recordsd migrations /srv/recordsd/migrations
WORKDIR /srv/recordsd
USER recordsd
ENV RECORDSD_LISTEN=0.0.0.0:7878 RECORDSD_MIGRATIONS=/srv/recordsd/migrations
EXPOSE 7878
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=12 CMD ["records", "-H", "127.0.0.1", "-c", "PING"]
CMD ["recordsd", "serve"]
