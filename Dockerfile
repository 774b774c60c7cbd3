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
# The manifest names the test targets: empty stand-ins here, so editing a test never
# invalidates the runtime image's build (the test stage copies the real ones).
RUN for target in RecordsTests RecordsServerTests RecordsClientTests IntegrationTests; do \
      mkdir -p Tests/$target && touch Tests/$target/Placeholder.swift; done
COPY Sources Sources
COPY migrations migrations
# The Swift runtime and Foundation linked in, so the runtime image needs only libpq, libedit and
# libssl; symbols stripped (-s) for a small image.
RUN swift build -c release --static-swift-stdlib -Xlinker -s --product recordsd \
 && swift build -c release --static-swift-stdlib -Xlinker -s --product records

# The integration suite, run by `docker compose run --rm integration` against the stack.
# PostgreSQL's server binaries are here too: some tests start a cluster of their own; HAProxy and
# PgBouncer for BalancerTests, which run the deployment's shape on loopback.
FROM build AS test
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql haproxy pgbouncer \
 && rm -rf /var/lib/apt/lists/*
COPY Tests Tests
COPY Examples Examples
RUN rm -f Tests/*/Placeholder.swift \
 && swift build --build-tests \
 && swift build --package-path Examples/DepartmentApp
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
# The admin listener on loopback: the health check asks /ready (PostgreSQL reachable, not
# stopping) at whatever port RECORDSD_ADMIN_LISTEN names.
ENV RECORDSD_LISTEN=0.0.0.0:7878 RECORDSD_MIGRATIONS=/srv/recordsd/migrations RECORDSD_ADMIN_LISTEN=127.0.0.1:9187
EXPOSE 7878
HEALTHCHECK --interval=5s --timeout=4s --start-period=10s --retries=12 CMD ["recordsd", "health"]
CMD ["recordsd", "serve"]
