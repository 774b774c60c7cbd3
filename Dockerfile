# recordsd in containers: compiled in the official Swift image, run on a slim Debian.
#   docker build -t recordsd .                       the runtime image (recordsd and records)
#   docker build --target test -t recordsd-test .    the stack's integration suite (docker-compose.yml)
# Where no image registry can be reached, scripts/compose-images builds the same two images
# from binaries compiled on the host: targets runtime-prebuilt and test-prebuilt, with PREBUILT
# naming an image that holds them under /out, and DEBIAN_IMAGE a Debian made by debootstrap.
ARG SWIFT_IMAGE=swift:6.3-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim
ARG PREBUILT=scratch

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
 && swift build -c release --static-swift-stdlib -Xlinker -s --product records \
 && mkdir -p /out/bin && cp .build/release/recordsd .build/release/records /out/bin/

# The test bundle, with the Swift runtime libraries it links (the runtime image has none).
FROM build AS test-build
COPY Tests Tests
RUN rm -f Tests/*/Placeholder.swift \
 && swift build --build-tests \
 && mkdir -p /out/test/lib \
 && cp .build/debug/recordsdPackageTests.xctest /out/test/ \
 && cp -P /usr/lib/swift/linux/*.so /out/test/lib/

# Binaries compiled elsewhere (scripts/compose-images): /out/bin and /out/test as above.
FROM ${PREBUILT} AS prebuilt

FROM ${DEBIAN_IMAGE} AS runtime-base
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libpq5 libedit2 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 7878 --home-dir /srv/recordsd --create-home recordsd
COPY --chown=recordsd migrations /srv/recordsd/migrations
WORKDIR /srv/recordsd
USER recordsd
# The admin listener on loopback: the health check asks /ready (PostgreSQL reachable, not
# stopping) at whatever port RECORDSD_ADMIN_LISTEN names.
ENV RECORDSD_LISTEN=0.0.0.0:7878 RECORDSD_MIGRATIONS=/srv/recordsd/migrations RECORDSD_ADMIN_LISTEN=127.0.0.1:9187
EXPOSE 7878
HEALTHCHECK --interval=5s --timeout=4s --start-period=10s --retries=12 CMD ["recordsd", "health"]
CMD ["recordsd", "serve"]

# The stack's integration suite (`docker compose run --rm integration`): the stack tests and
# the fault round, run against the services named by RECORDS_URL, RECORDS_SECOND_URL and
# RECORDS_BALANCER_URL. No Swift toolchain: the bundle runs with the libraries beside it.
FROM runtime-base AS test-base
ENV LD_LIBRARY_PATH=/opt/recordsd-tests/lib RECORDS_TEST_ROOT=/srv/recordsd RECORDS_IN_COMPOSE=1
HEALTHCHECK NONE
ENTRYPOINT ["/opt/recordsd-tests/recordsdPackageTests.xctest", "--testing-library", "swift-testing"]
CMD ["--filter", "StackTests"]

FROM test-base AS test-prebuilt
COPY --from=prebuilt /out/test /opt/recordsd-tests

FROM test-base AS test
COPY --from=test-build /out/test /opt/recordsd-tests

FROM runtime-base AS runtime-prebuilt
COPY --from=prebuilt /out/bin/ /usr/local/bin/

# The default target, last: the runtime image compiled from these sources.
FROM runtime-base AS runtime
COPY --from=build /out/bin/ /usr/local/bin/
