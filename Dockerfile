# Multi-stage build on Debian: a build stage with the toolchain, a small
# runtime stage with only the shared libraries, run as a non-root user.
FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential meson ninja-build pkg-config \
      default-libmysqlclient-dev librabbitmq-dev libjansson-dev uuid-dev libmicrohttpd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY meson.build meson_options.txt ./
COPY include include
COPY sidecar sidecar
COPY handlers handlers
COPY examples examples
COPY tests tests
RUN meson setup /build --buildtype=release -Dfault_points=false -Dtests=false --prefix=/opt/sidecar -Dlibdir=lib \
 && ninja -C /build install

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libmariadb3 librabbitmq4 libjansson4 libuuid1 \
      libmicrohttpd12 curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin sidecar
COPY --from=build /opt/sidecar/bin/ /opt/sidecar/bin/
# The sample handler; /opt/sidecar/handlers is a volume: drop more .so files in.
COPY --from=build /opt/sidecar/lib/sidecar/handlers/ /opt/sidecar/handlers/
COPY sql /opt/sidecar/sql
ENV PATH=/opt/sidecar/bin:$PATH
USER sidecar
EXPOSE 9464
HEALTHCHECK --interval=10s --timeout=3s --retries=3 CMD curl -fsS http://127.0.0.1:9464/readyz || exit 1
ENTRYPOINT ["sidecar"]
CMD ["consume", "-c", "/etc/sidecar/sidecar.json"]
