# Multi-stage build on Debian:
#   build        the toolchain; builds and installs the sidecar into /opt/sidecar
#   handler-sdk  (docker build --target handler-sdk) builds a handler .so against
#                the installed header and exactly the client library of the
#                runtime stage (same Debian release, same apt run)
#   runtime      the default target: only the shared libraries, non-root user
FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential meson ninja-build pkg-config \
      default-libmysqlclient-dev librabbitmq-dev libjansson-dev uuid-dev libmicrohttpd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY meson.build meson_options.txt ./
COPY include include
COPY sidecar sidecar
COPY producer producer
COPY handlers handlers
COPY examples examples
COPY tests tests
COPY deploy deploy
COPY sql sql
RUN meson setup /build --buildtype=release -Dfault_points=false -Dtests=false -Dinstall_examples=true --prefix=/opt/sidecar -Dlibdir=lib \
 && ninja -C /build install

# docker run --rm -v "$PWD/my_handler:/src:ro" -v "$PWD/out:/out" sidecar-handler-sdk
# configures /src (a copy of handlers/template) out of tree and leaves the .so in /out.
FROM build AS handler-sdk
ENV PKG_CONFIG_PATH=/opt/sidecar/lib/pkgconfig
WORKDIR /src
CMD ["sh", "-ec", "meson setup --buildtype=release /tmp/build /src && ninja -C /tmp/build && cp /tmp/build/*.so /out/ && ls -l /out"]

FROM debian:bookworm-slim AS runtime
# uid and gid 10001, given explicitly (no --system: that range is 100-999).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libmariadb3 librabbitmq4 libjansson4 libuuid1 \
      libmicrohttpd12 curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 sidecar \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin sidecar \
 && mkdir -p /opt/sidecar/handlers.d
COPY --from=build /opt/sidecar/bin/ /opt/sidecar/bin/
# Handlers that come with the image (root-owned, part of the image: a rebuilt
# image brings its own). Drop-in handlers go to /opt/sidecar/handlers.d, a
# read-only bind mount (see docs/deploy.md), or into a derived image.
COPY --from=build /opt/sidecar/lib/sidecar/handlers/ /opt/sidecar/handlers/
COPY sql /opt/sidecar/sql
# Where `sidecar migrate` looks without --schema (the build's datadir).
COPY sql/schema /opt/sidecar/share/sidecar/sql/schema
ENV PATH=/opt/sidecar/bin:$PATH
USER sidecar
# http.listen defaults: consume 9464, relay 9466 (compose sets 0.0.0.0:9464 for both).
EXPOSE 9464 9466
HEALTHCHECK --interval=10s --timeout=3s --retries=3 CMD curl -fsS http://127.0.0.1:9464/readyz || curl -fsS http://127.0.0.1:9466/readyz || exit 1
ENTRYPOINT ["sidecar"]
CMD ["consume", "-c", "/etc/sidecar/sidecar.json"]
