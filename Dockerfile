# TouchSync's image: the touchsync binary on a slim Debian with libzmq only.
#   docker build -t touchsync .        (compose.yaml builds it too)
# Build stage: the official Swift image, a release build with the Swift
# standard library linked in, so the run stage needs no Swift runtime.
FROM swift:6.3-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libzmq3-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first: a source change does not fetch them again.
COPY Package.swift ./
RUN swift package resolve
COPY Sources ./Sources
COPY proto ./proto
RUN swift build -c release --static-swift-stdlib --product touchsync \
 && install -m 0755 "$(swift build -c release --show-bin-path)/touchsync" /usr/local/bin/touchsync \
 && cp -R "$(swift build -c release --show-bin-path)/TouchSync_TouchSyncWeb.resources" /usr/local/bin/

# Run stage: libzmq5 (built with libsodium: CURVE works), a non-root user,
# the journal on a volume.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libzmq5 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin touchsync \
 && mkdir -p /data && chown touchsync /data
COPY --from=build /usr/local/bin/touchsync /usr/local/bin/touchsync
# The whiteboard page (touchsync web) ships beside the binary.
COPY --from=build /usr/local/bin/TouchSync_TouchSyncWeb.resources /usr/local/bin/TouchSync_TouchSyncWeb.resources
USER touchsync
WORKDIR /data
VOLUME /data
# agents, subscribers, snapshots, history, metrics (HTTP), the web gateway (HTTP)
EXPOSE 5570 5571 5572 5573 9570 8080
# Asks the hub's own loop for an answer (touchsync health). An authenticated
# hub is asked with the health key when one is mounted as a secret.
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 CMD \
  if [ -r /run/secrets/health_key ]; then \
    touchsync health --snapshot tcp://127.0.0.1:5572 --key /run/secrets/health_key --hub-key /run/secrets/hub_pub; \
  else touchsync health --snapshot tcp://127.0.0.1:5572; fi
ENTRYPOINT ["touchsync"]
# A hub open to the network must authenticate: mount its key and access list as secrets.
CMD ["hub", "--ingest", "tcp://*:5570", "--publish", "tcp://*:5571", "--snapshot", "tcp://*:5572", "--history", "tcp://*:5573", \
     "--data", "/data", "--key", "/run/secrets/hub_key", "--access", "/run/secrets/access_list", "--metrics", "0.0.0.0:9570", "--public-metrics"]
