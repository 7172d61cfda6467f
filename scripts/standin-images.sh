# Sourced by scripts/test-container: stand-ins for the official images
# deploy/compose.yaml runs (redis, postgres, haproxy, prom/prometheus), which
# cannot be pulled on the test machines. Each is bookworm's minbase plus
# Debian's package (mmdebstrap, then `podman import`), tagged with the very
# name compose.yaml uses, so the same file runs here and where images can be
# pulled. Each keeps what compose.yaml relies on from the official image:
#
#   redis:7          `redis-server --appendonly yes` in /data, redis-cli,
#                    reachable from the other containers (no protected mode
#                    without a config file, as the official entrypoint does)
#   postgres:16      POSTGRES_USER/_DB/_PASSWORD initialise an empty
#                    /var/lib/postgresql/data on first start (password auth
#                    from the network, trust on the socket), pg_isready
#   haproxy:2.9      the config at /usr/local/etc/haproxy/haproxy.cfg, bash
#                    for the health check, user haproxy, SIGUSR1 to stop
#   prom/prometheus  the config at /etc/prometheus/prometheus.yml, data in
#                    /prometheus (user nobody), wget for the health check
#
# The versions are Debian bookworm's (Redis 7.0, PostgreSQL 15, HAProxy 2.6,
# Prometheus 2.42), not the tags' (no newer ones are packaged for bookworm);
# compose.yaml uses nothing they lack. Built once and kept, like the bases.
# Needs debootstrap_into, import_dir and say from scripts/test-container.

standin_redis=docker.io/library/redis:7
standin_postgres=docker.io/library/postgres:16
standin_haproxy=docker.io/library/haproxy:2.9
standin_prometheus=docker.io/prom/prometheus:v2.53.0

# The image names compose.yaml uses must be these; a changed tag there
# would otherwise go looking for a registry.
check_standin_names() {
  local name
  for name in redis:7 postgres:16 haproxy:2.9 prom/prometheus:v2.53.0; do
    grep -q "image: $name\$" deploy/compose.yaml \
      || fail "deploy/compose.yaml no longer uses $name: update the stand-ins in scripts/standin-images.sh"
  done
}

# Builds stand-in $1 from package list $2 (comma-separated) when missing:
# $3 is a function that finishes the root file system in the directory it
# is given, the rest are `podman import --change` instructions.
build_standin() {
  local image="$1" packages="$2" finish="$3"
  shift 3
  podman image exists "$image" && return
  say "stand-in image $image: bookworm minbase and $packages (once)"
  local started=$SECONDS dir="$root/standin-rootfs"
  debootstrap_into "$dir" "$packages"
  "$finish" "$dir"
  import_dir "$dir" "$image" "$@"
  echo "stand-in image $image built in $((SECONDS - started)) s"
}

finish_redis() {
  install -d -o "$(chroot "$1" id -u redis)" -g "$(chroot "$1" id -g redis)" "$1/data"
  cat >"$1/usr/local/bin/docker-entrypoint.sh" <<'SH'
#!/bin/bash
# As the official image: redis-server without a config file listens to
# every container of the network (protected mode off), as user redis.
set -euo pipefail
if [ "${1:-}" = redis-server ] && [[ "${2:-}" != *.conf ]]; then
  set -- "$@" --protected-mode no
fi
if [ "$(id -u)" = 0 ]; then
  chown -R redis:redis /data
  exec setpriv --reuid=redis --regid=redis --init-groups "$@"
fi
exec "$@"
SH
  chmod 0755 "$1/usr/local/bin/docker-entrypoint.sh"
}

finish_postgres() {
  cat >"$1/usr/local/bin/docker-entrypoint.sh" <<'SH'
#!/bin/bash
# As the official image: an empty $PGDATA is initialised from POSTGRES_USER
# (the superuser), POSTGRES_PASSWORD and POSTGRES_DB on first start; then
# postgres listens on every address, passwords asked from the network.
set -euo pipefail
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD: the stand-in, like the official image, needs one}"
  user="${POSTGRES_USER:-postgres}"
  initdb --username="$user" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
    --encoding=UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 -D "$PGDATA" >/dev/null
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.auto.conf"
  db="${POSTGRES_DB:-$user}"
  if [ "$db" != postgres ]; then
    postgres --single -D "$PGDATA" -c listen_addresses='' postgres \
      <<<"CREATE DATABASE \"$db\" OWNER \"$user\";" >/dev/null
  fi
  echo "docker-entrypoint.sh: initialised $PGDATA (user $user, database $db)"
fi
exec "$@"
SH
  chmod 0755 "$1/usr/local/bin/docker-entrypoint.sh"
}

finish_haproxy() {
  mkdir -p "$1/usr/local/etc/haproxy"
  install -d -o "$(chroot "$1" id -u haproxy)" -g "$(chroot "$1" id -g haproxy)" "$1/var/lib/haproxy"
}

finish_prometheus() {
  install -d -o 65534 -g 65534 "$1/prometheus"
  # The official image's console paths.
  mkdir -p "$1/usr/share/prometheus"
  ln -s /etc/prometheus/consoles "$1/usr/share/prometheus/consoles"
  ln -s /etc/prometheus/console_libraries "$1/usr/share/prometheus/console_libraries"
}

build_standin_images() {
  check_standin_names
  build_standin "$standin_redis" redis-server finish_redis \
    'WORKDIR /data' 'VOLUME /data' 'EXPOSE 6379' \
    'ENTRYPOINT ["docker-entrypoint.sh"]' 'CMD ["redis-server"]'
  build_standin "$standin_postgres" postgresql-15 finish_postgres \
    'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    'ENV PGDATA=/var/lib/postgresql/data' 'ENV LANG=C.UTF-8' 'VOLUME /var/lib/postgresql/data' \
    'EXPOSE 5432' 'STOPSIGNAL SIGINT' \
    'ENTRYPOINT ["docker-entrypoint.sh"]' 'CMD ["postgres"]'
  build_standin "$standin_haproxy" haproxy finish_haproxy \
    'USER haproxy' 'WORKDIR /var/lib/haproxy' 'EXPOSE 8080' 'STOPSIGNAL SIGUSR1' \
    'CMD ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]'
  build_standin "$standin_prometheus" prometheus,wget finish_prometheus \
    'USER nobody' 'WORKDIR /prometheus' 'VOLUME /prometheus' 'EXPOSE 9090' \
    'ENTRYPOINT ["/usr/bin/prometheus"]' \
    'CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", "--web.console.libraries=/usr/share/prometheus/console_libraries", "--web.console.templates=/usr/share/prometheus/consoles"]'
}
