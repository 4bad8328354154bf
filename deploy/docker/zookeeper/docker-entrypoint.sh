#!/bin/sh
# Writes zoo.cfg and myid from the environment that the official zookeeper image reads, then starts
# the server in the foreground (or runs the given command). The variables, with their defaults:
#   ZOO_MY_ID (1), ZOO_SERVERS (server.1=localhost:2888:3888;2181, entries separated by spaces),
#   ZOO_TICK_TIME (2000), ZOO_INIT_LIMIT (5), ZOO_SYNC_LIMIT (2), ZOO_MAX_CLIENT_CNXNS (60),
#   ZOO_STANDALONE_ENABLED (true), ZOO_ADMINSERVER_ENABLED (true), ZOO_AUTOPURGE_PURGEINTERVAL (0),
#   ZOO_AUTOPURGE_SNAPRETAINCOUNT (3), ZOO_4LW_COMMANDS_WHITELIST (ZooKeeper's own default),
#   ZOO_CFG_EXTRA (key=value entries separated by spaces, appended), JVMFLAGS (java options).
# As in the official image, a zoo.cfg already present in ZOO_CONF_DIR (a bind mount) is left alone.
set -euf  # -f: the space-separated lists below are split, never globbed

conf="$ZOO_CONF_DIR/zoo.cfg"
if [ ! -f "$conf" ]; then
    {
        echo "dataDir=$ZOO_DATA_DIR"
        echo "dataLogDir=$ZOO_DATA_LOG_DIR"
        echo "tickTime=${ZOO_TICK_TIME:-2000}"
        echo "initLimit=${ZOO_INIT_LIMIT:-5}"
        echo "syncLimit=${ZOO_SYNC_LIMIT:-2}"
        echo "autopurge.snapRetainCount=${ZOO_AUTOPURGE_SNAPRETAINCOUNT:-3}"
        echo "autopurge.purgeInterval=${ZOO_AUTOPURGE_PURGEINTERVAL:-0}"
        echo "maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-60}"
        echo "standaloneEnabled=${ZOO_STANDALONE_ENABLED:-true}"
        echo "admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-true}"
        for server in ${ZOO_SERVERS:-server.1=localhost:2888:3888;2181}; do
            echo "$server"
        done
        if [ -n "${ZOO_4LW_COMMANDS_WHITELIST:-}" ]; then
            echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST"
        fi
        for entry in ${ZOO_CFG_EXTRA:-}; do
            echo "$entry"
        done
    } > "$conf"
fi

if [ ! -f "$ZOO_DATA_DIR/myid" ]; then
    echo "${ZOO_MY_ID:-1}" > "$ZOO_DATA_DIR/myid"
fi

if [ "$#" -gt 0 ]; then
    exec "$@"
fi
# shellcheck disable=SC2086  # JVMFLAGS holds several options
exec java ${JVMFLAGS:--Xmx512m -XX:+UseSerialGC} \
    -Dlog4j2.configurationFile="$ZOO_HOME/conf/log4j2.properties" \
    -Dlogback.configurationFile="$ZOO_HOME/conf/logback.xml" \
    -Dzookeeper.log.dir="$ZOO_LOG_DIR" \
    -Dzookeeper.jmx.log4j.disable=true \
    -cp "$ZOO_HOME/lib/*" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$conf"
