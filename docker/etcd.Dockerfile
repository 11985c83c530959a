# etcd for the gateway group lab (docker/compose.gateway.yaml): Debian bookworm's etcd-server package (etcd 3.4), on
# the lab's base image (node:24-slim is Debian bookworm; its node runs the health check, as in docker/Dockerfile).
# Build context docker/ (compose.gateway.yaml builds it; test/containers/images.sh builds it, cached by hash):
#   docker build -f docker/etcd.Dockerfile -t nvme-tcp-ts-etcd:latest docker
# apt fetches over plain HTTP from deb.debian.org and checks the archive signatures, so no CA bundle is needed.
FROM node:24-slim
# No service starts during the build (policy-rc.d 101: the package's postinst would try invoke-rc.d etcd start).
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends etcd-server >/dev/null \
 && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d \
 && etcd --version
# The package's system user; the data directory is the container's own (the lab's etcd keeps nothing worth keeping:
# the gateways rewrite the group's record when they join).
USER etcd
WORKDIR /var/lib/etcd
EXPOSE 2379
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:2379/health').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# One member, clients on 2379 from any container on its network (the compose file publishes nothing).
ENTRYPOINT ["etcd", "--name", "lab", "--data-dir", "/var/lib/etcd/lab", \
  "--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", "http://etcd:2379", \
  "--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380", \
  "--initial-cluster", "lab=http://127.0.0.1:2380"]
