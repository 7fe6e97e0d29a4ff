#!/usr/bin/env bash
# Makes sure the services the tests need are up on 127.0.0.1, starting any
# that is down with the commands of the development and CI machines (as root).
# Usage: scripts/services.sh [postgres nats mariadb redis rabbitmq mosquitto pubsub]
# With no arguments it checks every service the tests use. pubsub is Google's
# Pub/Sub emulator, which no machine runs until started: it runs detached in
# its own process group (gcloud leaves its java child behind when stopped
# alone), logging to /tmp/outbox-pubsub-emulator.log. It exits non-zero,
# naming the service, if one is still down after its start command and a
# wait.
set -uo pipefail

port_of() {
  case "$1" in
    postgres) echo 5432 ;; nats) echo 4222 ;; mariadb) echo 3306 ;;
    redis) echo 6379 ;; rabbitmq) echo 5672 ;; mosquitto) echo 1883 ;;
    pubsub) echo 8085 ;;
    *) echo "services.sh: unknown service $1" >&2; return 1 ;;
  esac
}

start() {
  case "$1" in
    postgres) pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start ;;
    nats) start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
            -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log ;;
    mariadb) start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd ;;
    redis) redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" \
             --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log ;;
    rabbitmq) rabbitmq-server -detached ;;
    mosquitto) mosquitto -d -c /etc/mosquitto/mosquitto.conf ;;
    pubsub) setsid gcloud beta emulators pubsub start --host-port=127.0.0.1:8085 \
              </dev/null >/tmp/outbox-pubsub-emulator.log 2>&1 & ;;
  esac
}

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

services=("$@")
[ ${#services[@]} -eq 0 ] && services=(postgres nats mariadb redis rabbitmq mosquitto pubsub)
status=0
for s in "${services[@]}"; do
  port=$(port_of "$s") || { status=1; continue; }
  if up "$port"; then
    echo "services: $s is up on 127.0.0.1:$port"
    continue
  fi
  echo "services: $s is down on 127.0.0.1:$port; starting it"
  start "$s" || echo "services: the start command for $s failed" >&2
  for _ in $(seq 1 120); do   # up to 60s: RabbitMQ takes a while
    up "$port" && break
    sleep 0.5
  done
  if up "$port"; then
    echo "services: $s is up on 127.0.0.1:$port"
  else
    echo "services: $s is still down on 127.0.0.1:$port" >&2
    status=1
  fi
done
exit $status
